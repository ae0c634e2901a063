"""Real unprivileged local users, for the tests of grading without root and of a machine shared with others.

CI runs as root, so these tests make their users (``useradd``, system users without a home)
and run commands as them (``setpriv``). Such a user must reach the Python, the checkout and
the course it works on, and CI's checkout may sit under a folder only root may enter (a
0700 home folder, pytest's own 0700 temp folder): :func:`run_as` runs the command in a mount
namespace of its own in which every folder it needs is at the same path as outside, reachable
(a 0755 tmpfs is mounted over each folder above them that the user may not enter, and the
needed folders are bound back into it). Nothing is copied, and nothing outside that
namespace changes. Tests skip, saying why, only when the machine cannot do this (not root, no
``useradd``/``unshare``/``setpriv``).
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .exercise_support import ROOT

GRADER = "qkv-test-grader"  # grades without root; runs the Dask workers
NEIGHBOUR = "qkv-test-neighbour"  # another local user of the machine, who plants files


def local_user(name: str) -> pwd.struct_passwd:
    """The local system user ``name`` (made if missing); skips the test when this machine cannot."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a local user (CI runs as root)")
    missing = [tool for tool in ("useradd", "unshare", "setpriv", "mount") if shutil.which(tool) is None]
    if not os.path.isdir("/mnt"):
        missing.append("/mnt")
    if missing:
        pytest.skip(f"needs {', '.join(missing)} to run commands as another local user")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                           name], capture_output=True, text=True)
    try:
        return pwd.getpwnam(name)  # made, or made meanwhile by another test run
    except KeyError:
        pytest.skip(f"useradd {name} failed: {made.stderr.strip()}")


def give(path: Path, user: pwd.struct_passwd) -> None:
    """Make ``path`` (a folder, with everything in it) the user's own."""
    for folder, _, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            os.lchown(name, user.pw_uid, user.pw_gid)


def _enters(folder: Path, user: pwd.struct_passwd) -> bool:
    info = folder.stat()
    groups = {user.pw_gid} | {g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem}
    if info.st_uid == user.pw_uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid in groups:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def blocked_folders(paths: list[Path], user: pwd.struct_passwd) -> list[Path]:
    """The topmost folders above ``paths`` that ``user`` may not enter."""
    blocked = []
    for path in paths:
        for folder in [*reversed(Path(path).parents), Path(path)]:
            if not _enters(folder, user):
                if not any(folder == b or b in folder.parents for b in blocked):
                    blocked.append(folder)
                break
    return blocked


MOUNT_SCRIPT = r"""
set -eu
stash=/mnt  # a tmpfs of this namespace alone, where the folders to reach wait while their parents are covered
mount -t tmpfs -o mode=0700,size=1m qkv-stash "$stash"
n=0
for path in $REACHABLE; do n=$((n + 1)); mkdir "$stash/$n"; mount --bind "$path" "$stash/$n"; done
for folder in $BLOCKED; do mount -t tmpfs -o mode=0755,size=1m tmpfs "$folder"; done
n=0
for path in $REACHABLE; do n=$((n + 1)); mkdir -p "$path"; mount --bind "$stash/$n" "$path"; done
exec setpriv --reuid="$RUN_UID" --regid="$RUN_GID" --init-groups -- "$@"
"""


def run_as(user: pwd.struct_passwd, argv: list[str], *, reachable: list[Path], env: dict[str, str] | None = None,
           background: bool = False, **kwargs) -> subprocess.CompletedProcess | subprocess.Popen:
    """Run ``argv`` as ``user``, with the Python, the checkout and ``reachable`` folders reachable
    at their own paths (see the module docstring); ``background`` returns the Popen."""
    needed = sorted({Path(sys.base_prefix).resolve(), ROOT.resolve(), *(Path(p).resolve() for p in reachable)},
                    key=lambda p: len(p.parts))
    outermost = [p for p in needed if not any(q != p and q in p.parents for q in needed)]
    closed = [str(p) for p in outermost if p.is_dir() and not _enters(p, user)]
    assert not closed, f"{user.pw_name} may not enter {closed} itself: give it to them or open it"
    blocked = blocked_folders(outermost, user)
    rebound = [p for p in outermost if any(b == p or b in p.parents for b in blocked)]
    settings = {"REACHABLE": " ".join(map(str, rebound)), "BLOCKED": " ".join(map(str, blocked)),
                "RUN_UID": str(user.pw_uid), "RUN_GID": str(user.pw_gid)}
    spaced = [str(p) for p in [*rebound, *blocked] if any(c.isspace() for c in str(p))]
    if spaced:
        pytest.skip(f"a folder to reach has a space in its name: {spaced}")
    command = ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", MOUNT_SCRIPT, "sh", *argv]
    passed = {name: os.environ[name] for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if name in os.environ}
    environment = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "LANG": "C.UTF-8", **passed,
                   **(env or {}), **settings}
    if background:
        return subprocess.Popen(command, env=environment, **kwargs)
    return subprocess.run(command, env=environment, **kwargs)
