"""Folders and files the grader keeps outside the course folder: fresh, private, checked, never through a link.

The grader's own state outside a course (the registry of sandbox identities, a cluster's
certificates) may sit where another local user can write too. Whoever makes a name there
first decides what it is: a folder of theirs, or a link to a file of the grader's that an
``open(..., "w")`` would truncate. So nothing here trusts a name:

- a folder is made with ``mkdir(0o700)`` (or :func:`tempfile.mkdtemp`), which fails when the
  name exists, and a folder that did exist is used only when :func:`open_folder` finds a real
  folder (``O_NOFOLLOW``, no link), owned by this user, that no one else may enter;
- a file is opened relative to its folder's descriptor with ``O_NOFOLLOW``, made with
  ``O_CREAT | O_EXCL`` when it is written afresh, never truncated, and checked after it is
  open (``fstat``): a regular file of this user's, private, with one name.

Anything else raises :class:`UnsafeLocation`, which names the path, what was found there and
the rule. Callers: :mod:`qkv_grading.identities` (the registry) and :mod:`qkv_grading.cluster`
(the certificates). Files inside the course folder are the course's and are not made here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeLocation(RuntimeError):
    """A folder or file of the grader's is not what the grader made: the message says what was found."""


def _describe(info: os.stat_result) -> str:
    kind = ("a link" if stat.S_ISLNK(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode)
            else "a file" if stat.S_ISREG(info.st_mode) else "something else")
    return f"{kind} of uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):04o}"


def check_private(info: os.stat_result, path: Path | str, *, folder: bool) -> None:
    """Raise :class:`UnsafeLocation` unless ``info`` is a folder (or a regular file with one name)
    owned by this user, with no permission for anyone else."""
    right_kind = stat.S_ISDIR(info.st_mode) if folder else (stat.S_ISREG(info.st_mode) and info.st_nlink == 1)
    if not right_kind or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        wanted = "a folder" if folder else "a regular file with one name"
        raise UnsafeLocation(f"{path} is {_describe(info)}; the grader uses only {wanted} of its own user "
                             f"(uid {os.geteuid()}) that no one else may read or write: remove it, or check who "
                             "made it")


def check_parent(path: Path) -> None:
    """Raise :class:`UnsafeLocation` when another user could replace ``path``: its parent must be
    owned by root or by this user and not writable by others (unless it is sticky, as /tmp is)."""
    parent = Path(path).parent
    info = os.stat(parent)
    writable_by_others = info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX
    if info.st_uid not in (0, os.geteuid()) or writable_by_others:
        raise UnsafeLocation(f"{parent} is {_describe(info)}: another user could replace {path} in it")


def make_folder(path: Path | str) -> Path:
    """Make the folder ``path`` afresh (0700); raise :class:`UnsafeLocation` if the name exists."""
    path = Path(path)
    check_parent(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise UnsafeLocation(f"{path} exists already; the grader makes it afresh: move it away first") from None
    fd = open_folder(path, create=False)
    os.close(fd)
    return path


def open_folder(path: Path | str, *, create: bool = True) -> int:
    """A descriptor of the private folder ``path`` (made 0700 if missing and ``create``), checked
    after it is open: never a link, owned by this user, closed to others."""
    path = Path(path)
    check_parent(path)
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(path, FOLDER_FLAGS)
    except OSError as err:  # ELOOP: a link; ENOTDIR: a file
        info = os.lstat(path) if os.path.lexists(path) else None
        found = _describe(info) if info else "missing"
        raise UnsafeLocation(f"{path} is {found}, not a folder the grader can use ({err.strerror})") from None
    return _checked(fd, path, folder=True)


def open_file(folder_fd: int, name: str, *, create: bool = True, label: str | None = None) -> int:
    """A read-write descriptor of the file ``name`` in the folder ``folder_fd`` (made 0600 if
    missing and ``create``), never through a link and never truncated, checked once open."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    where = label or name
    try:
        fd = os.open(name, flags, 0o600, dir_fd=folder_fd)
    except OSError as err:
        raise UnsafeLocation(f"{where} cannot be opened as a file of the grader's ({err.strerror})") from None
    return _checked(fd, where, folder=False)


def _checked(fd: int, path: Path | str, *, folder: bool) -> int:
    """``fd``, once :func:`check_private` passes on what it is open on (else it is closed, and the error raised)."""
    try:
        check_private(os.fstat(fd), path, folder=folder)
    except UnsafeLocation:
        os.close(fd)
        raise
    return fd


def write_new_file(folder: Path | str, name: str, data: bytes) -> Path:
    """Write ``data`` to the new file ``folder/name`` (0600, ``O_EXCL``: it must not exist)."""
    folder_fd = open_folder(folder, create=False)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=folder_fd)
    except FileExistsError:
        raise UnsafeLocation(f"{Path(folder) / name} exists already; the grader writes it afresh") from None
    finally:
        os.close(folder_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(folder) / name
