"""Collect a class's hand-ins into ``submitted/<student>/<problem set>/<notebook>.ipynb``.

Two forms are read:

- a folder in nbgrader's layout, ``<student>/<problem set>/<notebook>.ipynb``, or a course
  folder (one with ``nbgrader_config.py``), whose ``submitted/`` is read. Only a course
  folder is looked into: a student whose id is ``submitted`` (or any other of the course's
  folder names) is a student like any other and never changes where the course looks;
- the zip a learning platform downloads with every hand-in of an assignment, its files
  named as :mod:`qkv_grading.platforms` reads them. The student is the platform's user id,
  never the name part: two students of one name are two students. The name is kept
  (:data:`PLATFORM_NAMES`, and the gradebook's ``last_name``): it is what the student typed
  as ``STUDENT_ID``, so their numbers are the name's.

Only the notebook of each hand-in is taken (as a regular file, never through a link),
and nothing is ever unpacked from a student's upload: an archive inside a hand-in or
inside the platform's zip is listed as not collected. Every student id must be safe to
use as a folder name, in a CSV file and on formgrader's pages (:func:`id_problem`), and
no two ids may differ only by case or Unicode form (:func:`id_key`: on a case-insensitive
disk they would be one folder): such ids are refused with a line naming them, never merged,
and the others are graded. Of several uploads by one student, the latest is graded and the
line says so. Each hand-in keeps the time it was handed in (``timestamp.txt`` as nbgrader
writes it, else the time the platform or the file system gives it).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import stat
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .jobs import MAX_NOTEBOOK_BYTES
from .notes import Note
from .platforms import PATTERNS_SHOWN, PLATFORM_NAME, read_upload

Printer = Callable[[str], None]
PLATFORM_NAMES = Path(".grading") / "platform_names.json"  # {user id: name} of the students collected from zips

__all__ = ["PLATFORM_NAME", "Submission", "collect_folder", "collect_zip", "id_key", "id_problem"]

ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
MAX_ID_LENGTH = 100
FORMULA_START = ("=", "+", "-", "@")  # a spreadsheet reads a cell that starts so as a formula
# nbgrader's formgrader puts ids unescaped into some of its own pages (a student's page, in HTML
# and in a script's string): with one of these, an id would be markup there.
MARKUP_CHARACTERS = ("<", ">", '"')


@dataclass
class Submission:
    """One student's hand-in of one problem set, and what became of it."""

    student: str
    problem_set: str
    notebook: Path | None = None
    timestamp: str | None = None
    score: float | None = None
    max_score: float | None = None
    gradable: bool = True
    notes: list[str] = field(default_factory=list)
    platform_name: str | None = None  # the student's name on the learning platform, when collected from one
    trusted_seconds: float = 0.0  # CPU time the grading process spent on it (reading its channel, when the
    # sandbox runs here, decoding, judging, writing)

    @property
    def key(self) -> tuple[str, str]:
        return (self.student, self.problem_set)

    @property
    def numbers_of(self) -> str:
        """The id whose variant (numbers) the submission is graded with: its platform name, else its id."""
        return self.platform_name or self.student


def shown_name(name: str) -> str:
    """A file name as text that can be printed: quoted, with bytes that are not UTF-8 as escapes."""
    try:
        name.encode("utf-8")
        return repr(name)
    except UnicodeEncodeError:
        return repr(name.encode("utf-8", "surrogateescape"))


def id_key(name: str) -> str:
    """What two ids that must not both exist share: the id without case, in Unicode's compatibility form."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def id_problem(name: str) -> str | None:
    """Why ``name`` cannot be a student id, or None when it can."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "it holds bytes that are not UTF-8 text"
    if not name.strip():
        return "it is empty"
    if name in (".", "..") or "/" in name or "\\" in name:
        return "it is a path ('..' or a separator), not a name"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for ch in name):
        return "it holds control or invisible characters"
    if name != name.strip():
        return "it has spaces around it"
    if name.startswith("."):
        return "it starts with '.'"
    if name.startswith(FORMULA_START):
        return f"it starts with {name[0]!r}, which a spreadsheet would run as a formula"
    if len(name) > MAX_ID_LENGTH:
        return f"it is longer than {MAX_ID_LENGTH} characters"
    if any(ch in name for ch in MARKUP_CHARACTERS):
        return "it holds < > or \", which formgrader's pages would read as markup"
    return None


def _store(course_root: Path, student: str, problem_set: str, data: bytes, timestamp: str | None) -> Path:
    """Write a hand-in to ``submitted/<student>/<problem set>/`` (replacing an earlier one); return the notebook's path."""
    folder = Path(course_root) / "submitted" / student / problem_set
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    target = folder / f"{problem_set}.ipynb"
    target.write_bytes(data)
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp, encoding="utf-8")
    return target


def _read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result] | None:
    """The bytes of ``path`` if it is a regular file (not a link) of at most ``limit`` bytes, and its status."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        return f.read(limit + 1), status


def nbgrader_time(moment: datetime.datetime) -> str:
    """A time as nbgrader writes ``timestamp.txt``: ``2024-05-01 14:03:00.000000 UTC``."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _timestamp(data: bytes | None) -> str | None:
    """The time in a ``timestamp.txt``, if it holds one nbgrader can read."""
    if not data:
        return None
    try:
        from nbgrader.utils import parse_utc

        text = data.decode("utf-8").strip()
        parse_utc(text)
        return text
    except Exception:
        return None


def platform_names(course_root: Path) -> dict[str, str]:
    """The names of the students collected from platforms, by user id (:data:`PLATFORM_NAMES`)."""
    path = Path(course_root) / PLATFORM_NAMES
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(names, dict):
        return {}
    return {k: v for k, v in names.items() if isinstance(k, str) and isinstance(v, str) and id_problem(v) is None}


def _keep_platform_names(course_root: Path, found: dict[str, str]) -> None:
    if not found:
        return
    names = {**platform_names(course_root), **found}
    path = Path(course_root) / PLATFORM_NAMES
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(names, ensure_ascii=False, indent=1, sort_keys=True), encoding="utf-8")
    partial.replace(path)


def _pairs(names: list[str], existing: list[str]) -> dict[str, list[str]]:
    """The folder names (as they are on disk) that share an :func:`id_key` with another of ``names``, or with
    a student of ``existing`` other than their own composed form; with those others."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(id_key(name), []).append(name)
    known: dict[str, list[str]] = {}
    for name in existing:
        known.setdefault(id_key(name), []).append(name)
    found = {}
    for name in names:
        others = [o for o in groups[id_key(name)] if o != name]
        others += [o for o in known.get(id_key(name), []) if o != unicodedata.normalize("NFC", name)]
        if others:
            found[name] = others
    return found


def _told_apart(name: str) -> str:
    """A name as :func:`shown_name` shows it, and its code points when it is not ASCII (two such names may
    look the same)."""
    return shown_name(name) if name.isascii() else f"{shown_name(name)} ({ascii(name)})"


def _course_students(course_root: Path) -> list[str]:
    folder = Path(course_root) / "submitted"
    if not folder.is_dir():
        return []
    return [unicodedata.normalize("NFC", e.name) for e in os.scandir(folder)
            if e.is_dir(follow_symlinks=False) and id_problem(e.name) is None]


def collect_folder(course_root: Path, folder: Path, problem_sets: list[str], wanted: str | None,
                   out: Printer) -> list[Submission]:
    folder = Path(folder)
    if (folder / "nbgrader_config.py").is_file() and (folder / "submitted").is_dir():
        folder = folder / "submitted"  # a course folder: its hand-ins
    in_place = folder.resolve() == (Path(course_root) / "submitted").resolve()
    found: dict[tuple[str, str], Submission] = {}
    entries = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir(follow_symlinks=False):
            if entry.name.endswith(".ipynb"):
                out(f"  NOT COLLECTED: {shown_name(entry.name)} (expected <student>/<problem set>/<notebook>.ipynb)")
            continue
        problem = id_problem(entry.name)
        if problem is not None:
            out(f"  REFUSED: the folder {shown_name(entry.name)}: {problem}; not graded")
            continue
        entries.append((unicodedata.normalize("NFC", entry.name), entry))
    students = {student for student, _ in entries}
    pairs = _pairs([entry.name for _, entry in entries],
                   [] if in_place else [s for s in _course_students(course_root) if s not in students])
    names = platform_names(course_root)
    for student, entry in entries:
        if entry.name in pairs:
            others = ", ".join(_told_apart(o) for o in pairs[entry.name])
            out(f"  REFUSED: the folder {_told_apart(entry.name)}: it is the same id as {others} but for case or "
                "Unicode form, and the two would be one folder on some disks; rename one; neither is graded")
            continue
        for ps_entry in sorted(os.scandir(entry.path), key=lambda e: e.name):
            if ps_entry.name.startswith(".") or not ps_entry.is_dir(follow_symlinks=False):
                if ps_entry.name.endswith(".ipynb"):
                    out(f"  NOT COLLECTED: {shown_name(entry.name)}/{shown_name(ps_entry.name)} "
                        "(expected <student>/<problem set>/<notebook>.ipynb)")
                continue
            if ps_entry.name not in problem_sets:
                out(f"  skipped {shown_name(entry.name)}/{shown_name(ps_entry.name)}: not a problem set of this course")
                continue
            if wanted is not None and ps_entry.name != wanted:
                continue
            sub = _from_folder(course_root, student, Path(ps_entry.path), ps_entry.name, in_place)
            sub.platform_name = names.get(student)
            found[(student, ps_entry.name)] = sub
    return [found[k] for k in sorted(found)]


def _from_folder(course_root: Path, student: str, folder: Path, problem_set: str, in_place: bool) -> Submission:
    sub = Submission(student, problem_set)
    name = f"{problem_set}.ipynb"
    others = sorted(p.name for p in folder.iterdir() if p.name != name and p.name != "timestamp.txt")
    read = _read_regular(folder / name, MAX_NOTEBOOK_BYTES)
    if read is None:
        sub.gradable = False
        found = ", ".join(shown_name(o) for o in others[:5]) or "nothing"
        sub.notes.append(f"no {name} (found: {found})")
        return sub
    data, status = read
    if len(data) > MAX_NOTEBOOK_BYTES:
        sub.gradable = False
        sub.notes.append(f"{name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
        return sub
    if others:
        sub.notes.append(Note("other files handed in were not used: {files}",
                              files=", ".join(shown_name(o) for o in others[:5]) + (" ..." if len(others) > 5 else "")))
    stamp = _read_regular(folder / "timestamp.txt", 100)
    sub.timestamp = _timestamp(stamp[0] if stamp else None) or nbgrader_time(
        datetime.datetime.fromtimestamp(status.st_mtime, datetime.timezone.utc))
    if in_place and (folder / name).resolve() == (Path(course_root) / "submitted" / student / problem_set / name).resolve():
        sub.notebook = folder / name
        if stamp is None:
            (folder / "timestamp.txt").write_text(sub.timestamp, encoding="utf-8")
    else:
        sub.notebook = _store(course_root, student, problem_set, data, sub.timestamp)
    return sub


def _zip_name(info: zipfile.ZipInfo) -> str | None:
    """The member's name as UTF-8 text, or None when its bytes are not UTF-8."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


def _zip_time(info: zipfile.ZipInfo) -> str | None:
    """The member's time (a zip keeps the local time of the machine that made it), as nbgrader writes it."""
    try:
        return nbgrader_time(datetime.datetime(*info.date_time).astimezone())
    except (ValueError, OverflowError):
        return None


def collect_zip(course_root: Path, archive: Path, problem_sets: list[str], wanted: str | None,
                out: Printer) -> list[Submission]:
    candidates: dict[tuple[str, str], list[tuple[int, str, zipfile.ZipInfo, object]]] = {}
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            name = _zip_name(info)
            if name is None:
                raw = info.filename.encode("cp437", "replace")
                out(f"  REFUSED: {raw!r}: its name holds bytes that are not UTF-8 text; not graded")
                continue
            path = name.replace("\\", "/")
            base = path.rsplit("/", 1)[-1]
            if base.lower().endswith(ARCHIVES):
                out(f"  NOT COLLECTED: {shown_name(base)} (an archive: archives inside the download are never unpacked)")
                continue
            if not base.endswith(".ipynb"):
                out(f"  NOT COLLECTED: {shown_name(base)} (not a notebook)")
                continue
            upload = read_upload(path, problem_sets)
            if upload is None:
                out(f"  NOT COLLECTED: {shown_name(base)} (its name does not match {PATTERNS_SHOWN})")
                continue
            if wanted is not None and upload.problem_set != wanted:
                continue
            problem = id_problem(upload.name)
            if problem is not None:
                out(f"  REFUSED: {shown_name(base)}: the student name {shown_name(upload.name)} cannot be used: "
                    f"{problem}; not graded")
                continue
            candidates.setdefault((upload.user, upload.problem_set), []).append(
                (upload.attempt, base, info, upload))
        found, names = [], {}
        for (user, problem_set), uploads in sorted(candidates.items()):
            uploads.sort(key=lambda u: (u[0], u[1]))
            _, base, info, upload = uploads[-1]
            name = unicodedata.normalize("NFC", upload.name)
            sub = Submission(user, problem_set, platform_name=name, timestamp=_zip_time(info))
            names[user] = name
            if len(uploads) > 1:
                sub.notes.append(Note("{count} uploads in the download ({files}); graded the latest, {latest}",
                                      count=len(uploads), files=", ".join(u[1] for u in uploads[:6]), latest=base))
                out(f"  {user} ({name}): {sub.notes[-1]}")
            others = sorted({unicodedata.normalize("NFC", u[3].name) for u in uploads} - {name})
            if others:
                sub.notes.append(f"the platform names user {user} also {', '.join(map(repr, others))}; "
                                 f"graded with the numbers of {name!r}, the name of the latest upload")
            if upload.late:
                sub.notes.append(Note("the platform marked it late"))
            if info.file_size > MAX_NOTEBOOK_BYTES:
                sub.gradable = False
                sub.notes.append(f"{base} is larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
            else:
                with z.open(info) as f:
                    data = f.read(MAX_NOTEBOOK_BYTES + 1)
                if len(data) > MAX_NOTEBOOK_BYTES:
                    sub.gradable = False
                    sub.notes.append(f"{base} is larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
                else:
                    sub.notebook = _store(course_root, user, problem_set, data, sub.timestamp)
            found.append(sub)
    _keep_platform_names(course_root, names)
    return found
