"""Collect a class's hand-ins into ``submitted/<student>/<problem set>/<notebook>.ipynb``.

Two forms are read:

- a folder in nbgrader's layout, ``<student>/<problem set>/<notebook>.ipynb`` (or a
  folder holding ``submitted/``);
- the zip a learning platform downloads with every hand-in of an assignment. Each file
  is named as Canvas names them, ``<student>_[late_]<user id>_<submission id>_<file>``,
  where ``<file>`` is the notebook's own name, with ``-1``, ``-2``, ... added by the
  platform for a student's second, third ... upload (:data:`PLATFORM_NAME`). The
  student part may itself hold ``_``: the name is read from its right end.

Only the notebook of each hand-in is taken (as a regular file, never through a link),
and nothing is ever unpacked from a student's upload: an archive inside a hand-in or
inside the platform's zip is listed as not collected. Every student id must be safe to
use as a folder name and in a CSV file (:func:`id_problem`); an id that is not is
refused with a line saying why, and the others are graded. Of several uploads by one
student, the latest is graded and the line says so.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .jobs import MAX_NOTEBOOK_BYTES

Printer = Callable[[str], None]

PLATFORM_NAME = (r"(?P<student>.+?)_(?:(?P<late>(?i:late))_)?(?P<user>\d+)_(?P<submission>\d+)_(?P<file>{files})"
                 r"(?:-(?P<attempt>\d+))?\.ipynb")


def platform_name(notebooks) -> re.Pattern:
    """:data:`PLATFORM_NAME` for these notebook names: the student part is what is left of the name."""
    files = "|".join(re.escape(n) for n in sorted(notebooks, key=len, reverse=True))
    return re.compile(PLATFORM_NAME.format(files=files), re.DOTALL)


ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
MAX_ID_LENGTH = 100
FORMULA_START = ("=", "+", "-", "@")  # a spreadsheet reads a cell that starts so as a formula


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
    variant_id: str | None = None  # the id whose numbers it is graded with, when not ``student``
    trusted_seconds: float = 0.0  # CPU time the grading process spent on it (decoding, judging, writing)

    @property
    def key(self) -> tuple[str, str]:
        return (self.student, self.problem_set)

    @property
    def numbers_of(self) -> str:
        """The id whose variant (numbers) the submission is graded with."""
        return self.variant_id or self.student


def shown_name(name: str) -> str:
    """A file name as text that can be printed: quoted, with bytes that are not UTF-8 as escapes."""
    try:
        name.encode("utf-8")
        return repr(name)
    except UnicodeEncodeError:
        return repr(name.encode("utf-8", "surrogateescape"))


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
    return None


def _store(course_root: Path, student: str, problem_set: str, data: bytes, timestamp: bytes | None) -> Path:
    """Write a hand-in to ``submitted/<student>/<problem set>/`` (replacing an earlier one); return the notebook's path."""
    folder = Path(course_root) / "submitted" / student / problem_set
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    target = folder / f"{problem_set}.ipynb"
    target.write_bytes(data)
    if timestamp is not None:
        (folder / "timestamp.txt").write_bytes(timestamp)
    return target


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a link) of at most ``limit`` bytes; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(limit + 1)


def collect_folder(course_root: Path, folder: Path, problem_sets: list[str], wanted: str | None,
                   out: Printer) -> list[Submission]:
    folder = Path(folder)
    if (folder / "submitted").is_dir():
        folder = folder / "submitted"
    in_place = folder.resolve() == (Path(course_root) / "submitted").resolve()
    found: dict[tuple[str, str], Submission] = {}
    names: dict[str, str] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir(follow_symlinks=False):
            if entry.name.endswith(".ipynb"):
                out(f"  NOT COLLECTED: {shown_name(entry.name)} (expected <student>/<problem set>/<notebook>.ipynb)")
            continue
        problem = id_problem(entry.name)
        student = unicodedata.normalize("NFC", entry.name) if problem is None else entry.name
        if problem is None and student in names:
            problem = f"it is the same id as the folder {shown_name(names[student])} (in another Unicode form)"
        if problem is not None:
            out(f"  REFUSED: the folder {shown_name(entry.name)}: {problem}; not graded")
            continue
        names[student] = entry.name
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
            found[(student, ps_entry.name)] = _from_folder(course_root, student, Path(ps_entry.path), ps_entry.name,
                                                           in_place)
    return [found[k] for k in sorted(found)]


def _from_folder(course_root: Path, student: str, folder: Path, problem_set: str, in_place: bool) -> Submission:
    sub = Submission(student, problem_set)
    name = f"{problem_set}.ipynb"
    others = sorted(p.name for p in folder.iterdir() if p.name != name and p.name != "timestamp.txt")
    data = _read_regular(folder / name, MAX_NOTEBOOK_BYTES)
    if data is None:
        sub.gradable = False
        found = ", ".join(shown_name(o) for o in others[:5]) or "nothing"
        sub.notes.append(f"no {name} (found: {found})")
        return sub
    if len(data) > MAX_NOTEBOOK_BYTES:
        sub.gradable = False
        sub.notes.append(f"{name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
        return sub
    if others:
        sub.notes.append(f"other files handed in were not used: {', '.join(shown_name(o) for o in others[:5])}"
                         + (" ..." if len(others) > 5 else ""))
    timestamp = _read_regular(folder / "timestamp.txt", 100)
    sub.timestamp = _timestamp(timestamp)
    if in_place and (folder / name).resolve() == (Path(course_root) / "submitted" / student / problem_set / name).resolve():
        sub.notebook = folder / name
    else:
        sub.notebook = _store(course_root, student, problem_set, data, timestamp if sub.timestamp else None)
    return sub


def _timestamp(data: bytes | None) -> str | None:
    if not data:
        return None
    try:
        from nbgrader.utils import parse_utc

        text = data.decode("utf-8").strip()
        parse_utc(text)
        return text
    except Exception:
        return None


def _zip_name(info: zipfile.ZipInfo) -> str | None:
    """The member's name as UTF-8 text, or None when its bytes are not UTF-8."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


def collect_zip(course_root: Path, archive: Path, problem_sets: list[str], wanted: str | None,
                out: Printer) -> list[Submission]:
    candidates: dict[tuple[str, str], list[tuple[int, str, zipfile.ZipInfo, bool]]] = {}
    pattern = platform_name(problem_sets)
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            name = _zip_name(info)
            if name is None:
                raw = info.filename.encode("cp437", "replace")
                out(f"  REFUSED: {raw!r}: its name holds bytes that are not UTF-8 text; not graded")
                continue
            base = name.replace("\\", "/").rsplit("/", 1)[-1]
            if base.lower().endswith(ARCHIVES):
                out(f"  NOT COLLECTED: {shown_name(base)} (an archive: archives inside the download are never unpacked)")
                continue
            if not base.endswith(".ipynb"):
                out(f"  NOT COLLECTED: {shown_name(base)} (not a notebook)")
                continue
            match = pattern.fullmatch(base)
            if match is None:
                out(f"  NOT COLLECTED: {shown_name(base)} (its name does not match "
                    "<student>_[late_]<user id>_<submission id>_<problem set>[-<n>].ipynb)")
                continue
            if wanted is not None and match["file"] != wanted:
                continue
            problem = id_problem(match["student"])
            if problem is not None:
                out(f"  REFUSED: {shown_name(base)}: the student id {shown_name(match['student'])} cannot be used: "
                    f"{problem}; not graded")
                continue
            student = unicodedata.normalize("NFC", match["student"])
            attempt = int(match["attempt"] or 0)
            candidates.setdefault((student, match["file"]), []).append((attempt, base, info, bool(match["late"])))
        found = []
        for (student, problem_set), uploads in sorted(candidates.items()):
            uploads.sort(key=lambda u: (u[0], u[1]))
            attempt, base, info, late = uploads[-1]
            sub = Submission(student, problem_set)
            if len(uploads) > 1:
                sub.notes.append(f"{len(uploads)} uploads in the download ({', '.join(u[1] for u in uploads[:6])}); "
                                 f"graded the latest, {base}")
                out(f"  {student}: {sub.notes[-1]}")
            if late:
                sub.notes.append("the platform marked it late")
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
                    sub.notebook = _store(course_root, student, problem_set, data, None)
            found.append(sub)
    return found
