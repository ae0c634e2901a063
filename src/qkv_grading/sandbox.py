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
  stub ``qkv_exercises`` (:mod:`qkv_grading.sandbox_stub` and ``answers.py``);
- at ``/job``, its working folder: an empty tmpfs of its own, bounded in size; the job
  comes in on standard input one cell at a time, the answers go out on standard output
  (:mod:`qkv_grading.channel`);
- no network (a network namespace of its own), its own process, IPC and host-name
  namespaces, a new session (no terminal to write into);
- limits: wall time per notebook (the process is killed, and with it every process it
  started, since they all live in its process namespace), address space (memory),
  processes, file size, CPU time, open files, and the bytes it may send back.

As root, the job runs as an unprivileged user of its own slot (uid 60000 + slot, one
slot per sandbox running at a time on the machine), so that one sandbox's processes
never count against another's limit. Without root (an instructor's laptop) bwrap makes
an unprivileged user namespace and the job runs as the instructor's own uid: the process
limit then counts all of the instructor's processes, and files readable by the
instructor under ``/usr`` and the Python prefix stay readable (:func:`weaker_without_root`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

SITE = "/sandbox/site"
LIB = "/sandbox/lib"
JOB = "/job"
FIRST_UID = 60000
SLOTS = 64
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
    memory: int = 1 << 30  # per process: a sandbox holds at most processes * memory
    processes: int = 8
    file_size: int = 16 << 20
    workspace: int = 64 << 20
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
    return ("not running as root: each submission runs as your own user in an unprivileged user namespace, so "
            "the process limit counts all your processes and the sandboxes share it; run `make grade` as root "
            "(for example in a container) for one unprivileged user per sandbox")


def check_available() -> None:
    """Raise :class:`SandboxUnavailable` when bwrap is missing or cannot run."""
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(f"grading runs each submission in a bubblewrap sandbox, and bwrap is not installed: "
                                 f"{APT_LINE}")
    probe = subprocess.run(["bwrap", "--ro-bind", "/usr", "/usr", *_lib_links(), "--unshare-net", "--unshare-pid", "--die-with-parent",
                            "--", "/usr/bin/true"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise SandboxUnavailable(f"bwrap cannot make a sandbox here: {probe.stderr.strip()[:300]}")


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


@functools.cache
def runtime_folder() -> str:
    """A folder with the runner and the stub ``qkv_exercises``, made once per process, read-only to the sandbox."""
    from qkv_exercises import answers

    here = Path(__file__).parent
    files = {
        "qkv_runner.py": (here / "sandbox_runner.py").read_bytes(),
        "qkv_exercises/__init__.py": (here / "sandbox_stub.py").read_bytes(),
        "qkv_exercises/answers.py": Path(answers.__file__).read_bytes(),
    }
    digest = hashlib.sha256(b"".join(name.encode() + data for name, data in sorted(files.items()))).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"qkv-grading-runtime-{os.geteuid()}-{digest}"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix="qkv-grading-runtime-"))
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o644)
            path.parent.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def runtime_digest() -> str:
    """A hash of what runs in the sandbox (the runner, the stub, answers.py): part of every result's key."""
    return Path(runtime_folder()).name.rsplit("-", 1)[-1]


def _parents(path: Path) -> list[Path]:
    """The folders above ``path`` that the sandbox needs made (outside /usr), top first."""
    return [p for p in reversed(path.parents) if str(p) not in ("/", "/usr") and not str(p).startswith("/usr/")]


def bwrap_command(slot: int, limits: Limits) -> list[str]:
    """The command that runs the runner in a sandbox of slot ``slot`` (see the module docstring)."""
    prefix = Path(sys.base_prefix).resolve()
    python = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["stdlib"])
    command = ["bwrap", "--ro-bind", "/usr", "/usr", *_lib_links()]
    if not str(prefix).startswith("/usr/"):
        for parent in _parents(prefix):
            command += ["--perms", "0755", "--dir", str(parent)]
        command += ["--ro-bind", str(prefix), str(prefix)]
    site_packages = stdlib / "site-packages"
    if site_packages.is_dir():
        command += ["--tmpfs", str(site_packages), "--remount-ro", str(site_packages)]
    command += ["--perms", "0755", "--dir", "/sandbox", "--perms", "0755", "--dir", SITE]
    for source, target in allowed_paths():
        command += ["--ro-bind", source, target]
    command += ["--ro-bind", runtime_folder(), LIB]
    command += ["--perms", "01777", "--size", str(int(limits.workspace)), "--tmpfs", JOB, "--chdir", JOB]
    command += ["--proc", "/proc", "--dev", "/dev"]
    command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    env = {"HOME": JOB, "TMPDIR": JOB, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "IPYTHONDIR": f"{JOB}/.ipython", "MPLBACKEND": "Agg"}
    env.update({k: os.environ[k] for k in PASSED_ON if k in os.environ})
    for name, value in env.items():
        command += ["--setenv", name, value]
    processes = int(limits.processes)
    if privileged():
        uid = FIRST_UID + slot
        command += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--", "/usr/bin/setpriv", f"--reuid={uid}",
                    f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    else:
        processes += _processes_of(os.getuid())
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


# --------------------------------------------------------------------------- slots


class Slot:
    """One of :data:`SLOTS` sandbox slots on this machine, held with a file lock while a job runs."""

    def __init__(self):
        folder = Path(tempfile.gettempdir()) / f"qkv-grading-slots-{os.geteuid()}"
        folder.mkdir(mode=0o700, exist_ok=True)
        self.number, self._file = None, None
        for number in range(1, SLOTS + 1):
            handle = open(folder / f"{number}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.number, self._file = number, handle
            return
        handle = open(folder / "1.lock", "w")  # all busy: wait for the first
        fcntl.flock(handle, fcntl.LOCK_EX)
        self.number, self._file = 1, handle

    def __enter__(self) -> int:
        return self.number

    def __exit__(self, *exc) -> None:
        self._file.close()


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
    with Slot() as slot:
        try:
            process = subprocess.Popen(bwrap_command(slot, limits), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True)
        except OSError as err:
            return run_record.failed(f"could not start bwrap: {err}")
        return channel.drive(process, job, limits, SITE, STOP, started)
