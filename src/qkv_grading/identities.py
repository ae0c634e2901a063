"""Sandbox identities: the user each sandbox runs as when grading runs as root, never shared by two sandboxes.

A sandbox of a grader running as root runs as a user of its own, one of the uids
``FIRST_UID + 1`` ... ``FIRST_UID + COUNT`` (no account exists for them, and Debian gives out
neither ordinary users nor subordinate ids in that range). :class:`Identity` holds one of
them while its sandbox runs, with a lock in the machine's registry, ``/run/qkv-grading/``: a
folder of root's in a folder only root may write, so every grader on the machine (two
courses graded at once, whatever their temp folders) takes its identities from the same
registry and no two sandboxes anywhere on the machine hold the same uid at once.

Before a sandbox starts under an identity, whatever still runs under that uid is ended (there
should be nothing: a sandbox's processes end with it); :func:`leftover_processes` lists the
processes under identities that no grader holds, which a test or an instructor can check
while other graders run. What else the kernel keeps per user (a keyring) a sandbox cannot
make (:mod:`qkv_grading.syscall_filter`), and its files, IPC and processes live in
namespaces of its own that end with it.

Graders that share a kernel but not ``/run`` (two containers without user-namespace
remapping) share this range too: give them different ``FIRST_UID`` then. Without root no
identity is needed (the sandbox runs as the grader's user, in a user namespace), and none is
taken.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

from . import private_files

FIRST_UID = int(os.environ.get("QKV_GRADING_FIRST_UID", "70000"))
COUNT = 1024
REGISTRY = Path("/run/qkv-grading")


def uids() -> range:
    return range(FIRST_UID + 1, FIRST_UID + COUNT + 1)


def _lock_name(uid: int) -> str:
    return f"uid-{uid}.lock"


def _alive(entry: Path) -> bool:
    """Whether the process of ``/proc/<pid>`` still runs (a zombie has ended; only its parent's wait is left)."""
    try:
        return (entry / "stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def processes_of(uid: int) -> list[int]:
    """The live processes on this machine whose uid is ``uid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and _alive(entry):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def end_processes(find: Callable[[], list[int]], seconds: float = 5) -> None:
    """End (SIGKILL) every process that ``find()`` lists, again and again until it lists none (or
    ``seconds`` pass): a process may start another before it is ended."""
    deadline = time.monotonic() + seconds
    while (left := find()) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def end_processes_of(uid: int, seconds: float = 5) -> None:
    """End every process of ``uid``, and wait until they are gone."""
    end_processes(lambda: processes_of(uid), seconds)


class Identity:
    """A uid of :func:`uids` held (locked in the registry) until :meth:`release`."""

    def __init__(self, registry: Path = REGISTRY):
        self.uid, self._fd = None, None
        folder = private_files.open_folder(registry)
        try:
            candidates = list(uids())
            random.shuffle(candidates)
            for uid in candidates:
                fd = private_files.open_file(folder, _lock_name(uid), label=f"{registry}/{_lock_name(uid)}")
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self.uid, self._fd = uid, fd
                break
            else:  # every identity busy: wait for one
                uid = candidates[0]
                fd = private_files.open_file(folder, _lock_name(uid), label=f"{registry}/{_lock_name(uid)}")
                fcntl.flock(fd, fcntl.LOCK_EX)
                self.uid, self._fd = uid, fd
        finally:
            os.close(folder)
        end_processes_of(self.uid)

    def release(self) -> None:
        if self._fd is not None:
            end_processes_of(self.uid)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> int:
        return self.uid

    def __exit__(self, *exc) -> None:
        self.release()


def leftover_processes(registry: Path = REGISTRY) -> dict[int, list[int]]:
    """``{uid: [pid, ...]}`` of processes under a sandbox identity that no grader holds (there
    should be none). Each such uid is locked while it is looked at, so a grader starting a
    sandbox under it meanwhile waits, and what is found is left over for sure."""
    running: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except OSError:
                continue
            if uid in uids() and _alive(entry):
                running.setdefault(uid, []).append(int(entry.name))
    if not running:
        return {}
    if not registry.exists():
        return running  # no grader ever took an identity here: whatever runs under one is not a sandbox's
    left = {}
    folder = private_files.open_folder(registry, create=False)
    try:
        for uid in running:
            fd = private_files.open_file(folder, _lock_name(uid))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # a grader holds it: its sandbox is running
            try:
                if processes_of(uid):
                    left[uid] = processes_of(uid)
            finally:
                os.close(fd)
    finally:
        os.close(folder)
    return left
