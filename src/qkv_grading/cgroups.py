"""One control group per sandbox: its memory and its number of processes bounded as a whole.

:func:`SandboxGroup.make` gives each sandbox a control group of its own before the sandbox
starts, with:

- a memory limit for everything the sandbox holds at once: every process, and the files in its
  tmpfs folders (the kernel charges tmpfs pages to the group that wrote them); past it the
  kernel ends a process of that sandbox only (``oom_kill``, which :meth:`memory_exceeded` reads);
- a limit on its processes, so that a fork bomb stops in its own sandbox whatever user runs it.

:meth:`SandboxGroup.enter` is the prefix of the sandbox's command that moves it into the group
before ``bwrap`` starts (``sh -c 'echo 0 > .../cgroup.procs; exec bwrap ...'``), so nothing
of the notebook ever runs outside it; :meth:`SandboxGroup.close` ends whatever is left in the
group and removes it.

Which kind is used, in order (:func:`kind`):

1. cgroup v2: a sibling of the grader's own group, when its parent hands the ``memory`` and
   ``pids`` controllers down (``memory.max``, ``pids.max``, ``cgroup.kill``);
2. cgroup v1 (a machine that mounts the v1 ``memory`` and ``pids`` hierarchies, as many
   container hosts still do): a child of the grader's group in each
   (``memory.limit_in_bytes``, ``pids.max``);
3. none (not root, or a machine that gives no such group): the limits per process that bwrap's
   command sets anyway (``prlimit``: address space per process, processes per user) are then
   all there is, and :func:`kind` says why, for the grading command to report.

Needs root to make a group (or a group delegated to the grader's user, with cgroup v2).
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from . import identities

CONTROLLERS = ("memory", "pids")
# bwrap's own processes in the group: its parent outside the sandbox and its reaper inside.
BWRAP_PROCESSES = 2


@dataclass(frozen=True)
class Hierarchy:
    """Where the sandboxes' groups are made: ``version`` 1 or 2, and one parent folder per controller."""

    version: int
    parents: tuple[Path, ...]


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, file system type, super options)`` of every cgroup file system."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return found


def _own_groups() -> dict[str, str]:
    """The grader's own group in each hierarchy: ``{"": v2 path, "memory": v1 path, ...}``."""
    groups = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            groups[name] = path
    return groups


def _writable(folder: Path, files: tuple[str, ...]) -> bool:
    return folder.is_dir() and all(os.access(folder / name, os.W_OK) for name in files)


def _v2(mounts: list | None = None, own_groups: dict | None = None) -> Hierarchy | str:
    mount = next((point for point, fs, _ in (_mounts() if mounts is None else mounts) if fs == "cgroup2"), None)
    own = (_own_groups() if own_groups is None else own_groups).get("")
    if mount is None or own is None:
        return "this machine mounts no cgroup v2"
    group = Path(mount) / own.lstrip("/")
    # The grader's own group holds processes (the grader), so it may not hand controllers down
    # (cgroup v2 has no processes in inner groups): the sandboxes' groups go beside it.
    parent = group.parent if group != Path(mount) else group
    handed_down = set((parent / "cgroup.subtree_control").read_text().split()) if parent.is_dir() else set()
    if not set(CONTROLLERS) <= handed_down:
        return f"cgroup v2 at {mount} does not hand the memory and pids controllers down to {parent}"
    if not os.access(parent, os.W_OK):
        return f"{parent} (cgroup v2) is not writable by this user"
    return Hierarchy(2, (parent,))


def _v1(mounts: list | None = None, own_groups: dict | None = None) -> Hierarchy | str:
    own = _own_groups() if own_groups is None else own_groups
    mounts = _mounts() if mounts is None else mounts
    parents = []
    for controller in CONTROLLERS:
        mount = next((point for point, fs, options in mounts if fs == "cgroup" and controller in options), None)
        if mount is None or controller not in own:
            return f"this machine mounts no cgroup v1 {controller} hierarchy"
        parent = Path(mount) / own[controller].lstrip("/")
        if not _writable(parent, ("cgroup.procs",)) or not os.access(parent, os.W_OK):
            return f"{parent} (cgroup v1 {controller}) is not writable by this user"
        parents.append(parent)
    return Hierarchy(1, tuple(parents))


@functools.cache
def kind() -> Hierarchy | str:
    """The hierarchy the sandboxes' groups are made in, or why there is none (a sentence)."""
    reasons = []
    for find in (_v2, _v1):
        try:
            found = find()
        except OSError as err:
            found = f"{find.__name__[1:]}: {err}"
        if isinstance(found, Hierarchy):
            return found
        reasons.append(found)
    return "; ".join(reasons)


def describe() -> str:
    """How a sandbox's memory is bounded on this machine, for the grading command to print."""
    found = kind()
    if isinstance(found, Hierarchy):
        return f"memory and processes bounded per sandbox (cgroup v{found.version})"
    return f"memory bounded per process only, since no cgroup can be made for a sandbox ({found})"


def _remove_abandoned(hierarchy: Hierarchy) -> None:
    """Remove the empty groups of graders that were killed before they could remove them
    (``qkv-sandbox-<pid>-...`` of a pid that no longer runs)."""
    for parent in hierarchy.parents:
        try:
            names = [p for p in parent.iterdir() if p.name.startswith("qkv-sandbox-")]
        except OSError:
            continue
        for folder in names:
            pid = folder.name.split("-")[2]
            if pid.isdigit() and not Path("/proc", pid).exists():
                try:
                    folder.rmdir()  # fails while a process is left in it: then it stays
                except OSError:
                    pass


class SandboxGroup:
    """The control group of one sandbox (see the module docstring); ``None`` folders when there is none."""

    def __init__(self, hierarchy: Hierarchy, folders: tuple[Path, ...]):
        self.hierarchy, self.folders = hierarchy, folders

    @classmethod
    def make(cls, memory_bytes: int, processes: int) -> "SandboxGroup | None":
        """A new group with these limits, or ``None`` when this machine gives none (:func:`kind`)."""
        hierarchy = kind()
        if not isinstance(hierarchy, Hierarchy):
            return None
        _remove_abandoned(hierarchy)
        name = f"qkv-sandbox-{os.getpid()}-{secrets.token_hex(6)}"
        folders = []
        try:
            for parent in hierarchy.parents:
                folder = parent / name
                folder.mkdir(mode=0o755)  # fails if the name exists: a group is never shared
                folders.append(folder)
            group = cls(hierarchy, tuple(folders))
            group._limit(int(memory_bytes), int(processes) + BWRAP_PROCESSES)
        except OSError:
            cls(hierarchy, tuple(folders)).close()
            return None
        return group

    def _limit(self, memory_bytes: int, processes: int) -> None:
        if self.hierarchy.version == 2:
            folder = self.folders[0]
            (folder / "memory.max").write_text(str(memory_bytes))
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
            (folder / "pids.max").write_text(str(processes))
            return
        memory, pids = self.folders
        (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():  # memory and swap together
            (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (pids / "pids.max").write_text(str(processes))

    def enter(self) -> list[str]:
        """The prefix of a command that runs it inside this group (its first process moves itself in)."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        script = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *procs, "--"]

    def memory_exceeded(self) -> bool:
        """Whether the kernel ended a process of this sandbox for its memory limit."""
        name = "memory.events" if self.hierarchy.version == 2 else "memory.oom_control"
        try:
            for line in (self.folders[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value) > 0
        except (OSError, ValueError):
            pass
        return False

    def processes(self) -> list[int]:
        found = set()
        for folder in self.folders:
            try:
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(found)

    def close(self) -> None:
        """End every process left in the group, then remove it."""
        if self.hierarchy.version == 2 and self.folders and (self.folders[0] / "cgroup.kill").exists():
            try:
                (self.folders[0] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        identities.end_processes(self.processes, seconds=10)
        for folder in self.folders:
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # the last processes are still being reaped
                    time.sleep(0.02)
