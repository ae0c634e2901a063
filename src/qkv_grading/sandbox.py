"""The grading sandbox: run one submission's cells in bubblewrap, with nothing of the course in view.

:func:`run_job` is the pure step of grading: a function of plain data (the job that
:mod:`qkv_grading.jobs` builds, and the :class:`Limits`) that returns plain bytes (the
run record, :mod:`qkv_grading.run_record`), so that it runs the same in a thread, in
another process or on a Dask worker. It starts ``bwrap`` (Debian's ``bubblewrap``) with:

- the base Python (``sys.base_prefix``) and ``/usr`` read-only, the base Python's own
  ``site-packages`` hidden;
- read-only at ``/sandbox/site``: numpy, IPython and what they require (computed from
  the installed packages' metadata, :func:`allowed_distributions`), never qkv, the
  course's packages or torch;
- read-only at ``/sandbox/lib``: the runner (:mod:`qkv_grading.sandbox_runner`) and a
  stub ``qkv_exercises`` (:mod:`qkv_grading.sandbox_stub` and ``answers.py``), handed to
  bwrap through descriptors (nothing is written to a shared folder for them);
- writable, and bounded in size, only: ``/job``, its working folder (``workspace``), and
  ``/dev/shm`` (``shared_memory``), two empty tmpfs of its own. Everything else (``/``,
  ``/dev``, ``/sandbox``) is read-only, as root and without root alike; the job comes in
  on standard input one cell at a time, the answers go out on standard output
  (:mod:`qkv_grading.channel`);
- no network (a network namespace of its own), its own process, IPC and host-name
  namespaces, a new session (no terminal to write into);
- a seccomp filter (:mod:`qkv_grading.syscall_filter`): no user namespace of its own (where
  it could mount a tmpfs past every limit), no kernel keys (which outlive a sandbox); without
  root, bwrap's ``--disable-userns`` as well;
- limits: wall time per notebook (the process is killed, and with it every process it
  started, since they all live in its process namespace), memory and processes of the
  sandbox as a whole in a control group of its own (:mod:`qkv_grading.cgroups`, where the
  machine gives one), and per process: address space, processes, file size, CPU time, open
  files; and the bytes it may send back.

As root, the job runs as an unprivileged user of its own (:mod:`qkv_grading.identities`:
a uid that no other sandbox on the machine holds meanwhile, whichever grader started it).
Without root (an instructor's laptop, a Dask worker's user) bwrap makes an unprivileged
user namespace and the job runs as the grader's own uid: the process limit counts the
sandbox's own processes where the kernel counts it per user namespace (Linux 5.14 on,
:func:`processes_counted_per_sandbox`), else all of that user's processes; files readable
by that user under ``/usr`` and the Python prefix stay readable, and memory is bounded per process only unless the machine delegates a
cgroup (:func:`weaker_without_root`).

Nothing of one sandbox outlives it: its files are in its tmpfs, its IPC in its namespace,
its processes in its process namespace and control group (both emptied when it ends), and
it could make no kernel key. :func:`run_job` returns only once the first process of that
namespace has ended, which the kernel lets happen only after every other process in it
(one that forked twice or made a session of its own included) has ended, with or without
root and a control group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import cgroups, identities, syscall_filter

SITE = "/sandbox/site"
LIB = "/sandbox/lib"
JOB = "/job"
APT_LINE = "sudo apt-get install bubblewrap"

# What the runner needs besides the standard library; everything they require comes along.
ALLOWED_ROOTS = ("numpy", "ipython")
# Never in the sandbox, whatever requires them: the course's own packages (one distribution,
# "qkv") and the reference a student function could call instead of computing.
DENIED = {"qkv", "torch"}
# The environment variables passed in (OpenBLAS may need these on some processors).
PASSED_ON = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Sizes in bytes, times in seconds."""

    notebook_seconds: float = 60
    cell_seconds: float = 20
    memory: int = 1 << 30  # address space of each process
    sandbox_memory: int = 2 << 30  # the sandbox as a whole: processes and files (a cgroup, where there is one)
    processes: int = 8
    file_size: int = 16 << 20
    workspace: int = 64 << 20  # /job, its working folder
    shared_memory: int = 16 << 20  # /dev/shm
    answer_bytes: int = 64 << 20
    output_chars_per_cell: int = 20_000

    def as_dict(self) -> dict:
        return asdict(self)


STOP = threading.Event()  # set when grading is stopped: every sandbox of this process is ended at once


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot make a sandbox on this machine: the message says what to do."""


def privileged() -> bool:
    return os.geteuid() == 0


def weaker_without_root() -> str:
    shared = "" if processes_counted_per_sandbox() else "the process limit counts all your processes and the sandboxes "\
                                                         "share it, and "
    return ("not running as root: each submission runs as your own user in an unprivileged user namespace, so "
            f"{shared}files your user may read under /usr and the Python installation are readable to submissions; "
            "run `make grade` as root (for example in a container) for one unprivileged user per sandbox")


@functools.cache
def processes_counted_per_sandbox() -> bool:
    """Whether, without root, the kernel counts a sandbox's process limit over the processes of its
    own user namespace only (Linux 5.14 on), rather than over every process of the grader's user.

    Told by a probe: a sandbox of three processes (bwrap's first one, a shell and what it starts)
    under a limit of three, which fails where the grader's own processes count too."""
    if privileged():
        return False  # as root each sandbox has a user of its own: the question does not arise
    probe = subprocess.run(["bwrap", "--ro-bind", "/usr", "/usr", *_lib_links(), "--unshare-pid",
                            *_user_namespace_flags(), "--die-with-parent", "--", "/usr/bin/prlimit", "--nproc=3",
                            "/bin/sh", "-c", "/usr/bin/true"], capture_output=True)
    return probe.returncode == 0


def isolation() -> str:
    """What bounds a sandbox on this machine, in one line for the grading command to print."""
    who = "each sandbox as a user of its own" if privileged() else "each sandbox as your user in a user namespace"
    return f"{who}; {cgroups.describe()}"


def check_available() -> None:
    """Raise :class:`SandboxUnavailable` when bwrap, the seccomp filter or a sandbox's
    registry cannot be had here, saying what to do."""
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(f"grading runs each submission in a bubblewrap sandbox, and bwrap is not installed: "
                                 f"{APT_LINE}")
    try:
        seccomp = syscall_filter.compiled()
    except syscall_filter.FilterUnavailable as err:
        raise SandboxUnavailable(str(err)) from None
    with _descriptor(seccomp) as fd:
        probe = subprocess.run(["bwrap", "--ro-bind", "/usr", "/usr", *_lib_links(), "--unshare-net", "--unshare-pid",
                                *_user_namespace_flags(), "--die-with-parent", "--seccomp", str(fd), "--",
                                "/usr/bin/true"], capture_output=True, text=True, pass_fds=(fd,))
    if probe.returncode != 0:
        raise SandboxUnavailable(f"bwrap cannot make a sandbox here: {probe.stderr.strip()[:300]}")
    if privileged():
        try:
            identities.Identity().release()
        except (OSError, identities.private_files.UnsafeLocation) as err:
            raise SandboxUnavailable(f"the registry of sandbox identities cannot be used: {err}") from None


def _user_namespace_flags() -> list[str]:
    """Without root, bwrap makes a user namespace for the sandbox, and none may be made inside it."""
    return [] if privileged() else ["--unshare-user", "--disable-userns", "--assert-userns-disabled"]


@contextlib.contextmanager
def _descriptor(data: bytes):
    """A descriptor to read ``data`` from (a memfd at offset 0), closed on leaving."""
    fd = os.memfd_create("qkv-sandbox")  # close-on-exec: only the command that names it in pass_fds gets it
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- what the sandbox sees


def _lib_links() -> list[str]:
    links = []
    for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        if Path("/usr", name).is_dir() and Path("/", name).is_symlink():
            links += ["--symlink", f"usr/{name}", f"/{name}"]
    return links


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    environment = {**default_environment(), "extra": ""}
    names = []
    for text in dist.requires or ():
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            names.append(requirement.name)
    return names


def _key(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@functools.cache
def allowed_distributions() -> tuple[importlib.metadata.Distribution, ...]:
    """numpy, IPython and every distribution they require (as installed here), except :data:`DENIED`."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(ALLOWED_ROOTS)
    while todo:
        name = todo.pop()
        if _key(name) in seen or _key(name) in DENIED:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen[_key(name)] = dist
        todo.extend(_requirement_names(dist))
    return tuple(seen[k] for k in sorted(seen))


@functools.cache
def allowed_paths() -> tuple[tuple[str, str], ...]:
    """``(path on this machine, path in the sandbox)`` of every top-level module of the allowed distributions."""
    binds = {}
    for dist in allowed_distributions():
        site = Path(dist.locate_file(""))
        for entry in dist.files or ():
            top = entry.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth") or "/" in top:
                continue
            source = site / top
            if source.exists():
                binds[str(source)] = f"{SITE}/{top}"
    return tuple(sorted(binds.items()))


def compile_allowed() -> bool:
    """Write the bytecode of every module a sandbox may import (:func:`allowed_paths`), in parallel.

    A sandbox sees them read-only, so it can never write their bytecode itself: without it, every
    sandbox would compile IPython and numpy from source again (about half of an honest hand-in's CPU
    time). ``make venv`` calls this once; modules already compiled are skipped. Whether all compiled.
    """
    import compileall

    compiled = True
    for path, _ in allowed_paths():
        if path.endswith(".py"):
            compiled &= bool(compileall.compile_file(path, quiet=2))
        elif os.path.isdir(path):
            compiled &= bool(compileall.compile_dir(path, quiet=2, workers=0))
    return compiled


@functools.cache
def runtime_files() -> tuple[tuple[str, bytes], ...]:
    """``(path in the sandbox, content)`` of the runner and the stub ``qkv_exercises``."""
    from qkv_exercises import answers

    here = Path(__file__).parent
    return ((f"{LIB}/qkv_runner.py", (here / "sandbox_runner.py").read_bytes()),
            (f"{LIB}/qkv_exercises/__init__.py", (here / "sandbox_stub.py").read_bytes()),
            (f"{LIB}/qkv_exercises/answers.py", Path(answers.__file__).read_bytes()))


def runtime_digest() -> str:
    """A hash of what runs in the sandbox (the runner, the stub, answers.py): part of every result's key."""
    digest = hashlib.sha256(b"".join(name.encode() + data for name, data in runtime_files()))
    return digest.hexdigest()[:16]


def _parents(path: Path) -> list[Path]:
    """The folders above ``path`` that the sandbox needs made (outside /usr), top first."""
    return [p for p in reversed(path.parents) if str(p) not in ("/", "/usr") and not str(p).startswith("/usr/")]


def bwrap_command(uid: int | None, limits: Limits, descriptors: dict[str, int]) -> list[str]:
    """The command that runs the runner in a sandbox (see the module docstring).

    ``uid`` is the sandbox's identity when running as root (None otherwise); ``descriptors``
    maps each path of :func:`runtime_files` and ``"seccomp"`` to a descriptor to read it from,
    and ``"status"`` (optional) to one that bwrap writes its JSON status lines to.
    """
    prefix = Path(sys.base_prefix).resolve()
    python = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["stdlib"])
    command = ["bwrap", *_user_namespace_flags(), "--ro-bind", "/usr", "/usr", *_lib_links()]
    if not str(prefix).startswith("/usr/"):
        for parent in _parents(prefix):
            command += ["--perms", "0755", "--dir", str(parent)]
        command += ["--ro-bind", str(prefix), str(prefix)]
    site_packages = stdlib / "site-packages"
    if site_packages.is_dir():
        command += ["--tmpfs", str(site_packages), "--remount-ro", str(site_packages)]
    for folder in ("/sandbox", SITE, LIB, f"{LIB}/qkv_exercises"):
        command += ["--perms", "0755", "--dir", folder]
    for source, target in allowed_paths():
        command += ["--ro-bind", source, target]
    for target, _ in runtime_files():
        command += ["--perms", "0444", "--ro-bind-data", str(descriptors[target]), target]
    command += ["--proc", "/proc", "--dev", "/dev",
                "--perms", "01777", "--size", str(int(limits.shared_memory)), "--tmpfs", "/dev/shm",
                "--remount-ro", "/dev",
                "--perms", "01777", "--size", str(int(limits.workspace)), "--tmpfs", JOB,
                "--remount-ro", "/", "--chdir", JOB]
    command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv",
                "--seccomp", str(descriptors["seccomp"])]
    if "status" in descriptors:  # bwrap writes the pid of the sandbox's first process there (_first_process)
        command += ["--json-status-fd", str(descriptors["status"])]
    env = {"HOME": JOB, "TMPDIR": JOB, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "IPYTHONDIR": f"{JOB}/.ipython", "MPLBACKEND": "Agg"}
    env.update({k: os.environ[k] for k in PASSED_ON if k in os.environ})
    for name, value in env.items():
        command += ["--setenv", name, value]
    processes = int(limits.processes)
    if uid is not None:
        command += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--", "/usr/bin/setpriv", f"--reuid={uid}",
                    f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    else:  # the sandbox runs as this user: bwrap's first process in it counts too
        processes += 1 if processes_counted_per_sandbox() else _processes_of(os.getuid())
        command += ["--"]
    command += ["/usr/bin/prlimit", f"--nproc={processes}", f"--as={int(limits.memory)}",
                f"--fsize={int(limits.file_size)}", f"--cpu={int(limits.notebook_seconds) + 5}",
                "--nofile=256", "--core=0",
                str(python), "-S", "-s", "-B", "-X", "utf8", f"{LIB}/qkv_runner.py"]
    return command


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count


# --------------------------------------------------------------------------- the pure step


def run_job(job: dict, limits: dict | Limits | None = None) -> bytes:
    """Run ``job`` in a sandbox and return its run record, as bytes; never raises for what the job does.

    The record is one JSON object of plain data (:mod:`qkv_grading.run_record`), with one
    ``status`` that :mod:`qkv_grading.channel` decides outside the sandbox; the trusted
    process reads it with :func:`qkv_grading.run_record.decode` and trusts none of it.
    """
    from . import channel, run_record

    limits = limits if isinstance(limits, Limits) else Limits(**(limits or {}))
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        try:
            uid = stack.enter_context(identities.Identity()) if privileged() else None
            descriptors = {target: stack.enter_context(_descriptor(content)) for target, content in runtime_files()}
            descriptors["seccomp"] = stack.enter_context(_descriptor(syscall_filter.compiled()))
        except (OSError, identities.private_files.UnsafeLocation, syscall_filter.FilterUnavailable) as err:
            return run_record.failed(f"could not prepare a sandbox: {err}")
        group = cgroups.SandboxGroup.make(limits.sandbox_memory, limits.processes)
        if group is not None:
            stack.callback(group.close)  # before the identity is released: nothing of this sandbox is left
        status, descriptors["status"] = os.pipe()  # close-on-exec, as the memfds
        stack.callback(os.close, status)
        command = (group.enter() if group else []) + bwrap_command(uid, limits, descriptors)
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       start_new_session=True, pass_fds=tuple(descriptors.values()))
        except OSError as err:
            return run_record.failed(f"could not start bwrap: {err}")
        finally:
            os.close(descriptors.pop("status"))  # bwrap's copy is then the only writer: its end is seen here
        first = _first_process(status, process)
        data = channel.drive(process, job, limits, SITE, STOP, started)
        if first is not None:
            _wait_for_end(first)
        if group is not None and group.memory_exceeded():
            data = _out_of_memory(data, limits)
        return data


def _first_process(status: int, process: subprocess.Popen) -> int | None:
    """A pidfd of the sandbox's first process (pid 1 of its process namespace), whose pid bwrap
    writes first on ``--json-status-fd``; None when bwrap ended (or took longer than a sandbox's
    start may, :func:`channel.startup_seconds`) before starting it.

    While bwrap runs, that process is its child, alive or not yet reaped, so its pid names no other."""
    from . import channel

    line = bytearray()
    deadline = time.monotonic() + channel.startup_seconds()
    while b"\n" not in line and time.monotonic() < deadline and not STOP.is_set():
        if select.select([status], [], [], 0.5)[0]:
            chunk = os.read(status, 4096)
            if not chunk:
                return None
            line += chunk
    try:
        pid = json.loads(line.partition(b"\n")[0])["child-pid"]
        pidfd = os.pidfd_open(int(pid))
    except (ValueError, KeyError, TypeError, OSError):
        return None
    if process.poll() is not None:  # bwrap ended already: the pid may since name another process
        os.close(pidfd)
        return None
    return pidfd


def _wait_for_end(pidfd: int, seconds: float = 10) -> None:
    """Return once the sandbox's first process has ended (``pidfd``), and so every process of its
    namespace: the kernel ends them all before it. It is killed if it outlasts ``seconds``.

    bwrap's first process is killed when bwrap ends (``--die-with-parent``), but the kernel does that
    after bwrap's own end is seen here; waiting for it means a sandbox has ended only when nothing
    of it runs, as root (where the identity's release would end what is left) and without root
    (where nothing else would: its processes run as the grader's own user)."""
    try:
        if not select.select([pidfd], [], [], seconds)[0]:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            select.select([pidfd], [], [], seconds)
    finally:
        os.close(pidfd)


def _out_of_memory(data: bytes, limits: Limits) -> bytes:
    """The record of a run whose process the kernel killed at the sandbox's memory limit, saying so."""
    from . import run_record

    try:
        record = run_record.decode(data)
    except run_record.RecordRefused:
        return data
    if record.status != "killed":
        return data  # another process of the sandbox was ended; the run itself went on
    size = limits.sandbox_memory
    shown = f"{size / (1 << 30):g} GiB" if size >= 1 << 30 else f"{size / (1 << 20):g} MiB"
    reason = f"the sandbox ran out of its {shown} of memory"
    return run_record.encode(dataclasses.replace(record, reason=reason))
