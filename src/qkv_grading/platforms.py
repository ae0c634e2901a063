"""The file names of the learning platforms whose downloads :mod:`qkv_grading.collect` reads.

A platform's download of an assignment is one zip with every hand-in, each file named
after the student: their name as the platform writes it, and the platform's own id of
them. The id is the student (two students with one name are two students); the name is
kept beside it, and is what the student typed as ``STUDENT_ID`` (so their numbers are
those of the name). One :class:`Platform` per platform; a new one is one more entry of
:data:`PLATFORMS`:

- Canvas: ``<name>_[late_]<user id>_<submission id>_<notebook>[-<n>].ipynb``, with ``-1``,
  ``-2``, ... for a student's second, third ... upload (:data:`PLATFORM_NAME`);
- Moodle: ``<full name>_<participant id>_assignsubmission_file_<notebook>.ipynb``, or the
  notebook inside a folder ``<full name>_<participant id>_assignsubmission_file/``
  ("download submissions in folders"). Moodle's participant id is its own for each
  assignment.

The name part may itself hold ``_``: every name is read from its right end.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

PLATFORM_NAME = (r"(?P<student>.+?)_(?:(?P<late>(?i:late))_)?(?P<user>\d+)_(?P<submission>\d+)_(?P<file>{files})"
                 r"(?:-(?P<attempt>\d+))?\.ipynb")
MOODLE_NAME = r"(?P<student>.+?)_(?P<user>\d+)_assignsubmission_file[_/](?P<file>{files})\.ipynb"


@dataclass(frozen=True)
class Upload:
    """What a platform's file name says: whose hand-in of which problem set it is."""

    name: str  # the student's name, as the platform writes it
    user: str  # the platform's id of the student
    problem_set: str
    attempt: int = 0  # 0 for the first upload, n for the platform's -n
    late: bool = False
    platform: str = ""


@dataclass(frozen=True)
class Platform:
    """One platform's file names: a pattern with the named groups of :data:`PLATFORM_NAME`."""

    name: str
    pattern: str  # with ``{files}`` where the notebook's name goes
    folders: bool = False  # the name may be a folder's, with the notebook inside it

    def read(self, path: str, problem_sets) -> Upload | None:
        parts = path.replace("\\", "/").split("/")
        tails = ["/".join(parts[-2:]), parts[-1]] if self.folders and len(parts) > 1 else [parts[-1]]
        pattern = compiled(self.pattern, tuple(problem_sets))
        for tail in tails:
            match = pattern.fullmatch(tail)
            if match is not None:
                groups = match.groupdict()
                return Upload(groups["student"], groups["user"], groups["file"], int(groups.get("attempt") or 0),
                              bool(groups.get("late")), self.name)
        return None


@functools.lru_cache(maxsize=16)
def compiled(pattern: str, notebooks: tuple[str, ...]) -> re.Pattern:
    """``pattern`` for these notebook names: the name part is what is left of the file name."""
    files = "|".join(re.escape(n) for n in sorted(notebooks, key=len, reverse=True))
    return re.compile(pattern.format(files=files), re.DOTALL)


PLATFORMS = (
    Platform("Canvas", PLATFORM_NAME),
    Platform("Moodle", MOODLE_NAME, folders=True),
)
PATTERNS_SHOWN = ("<name>_[late_]<user id>_<submission id>_<problem set>[-<n>].ipynb (Canvas) or "
                  "<name>_<participant id>_assignsubmission_file_<problem set>.ipynb (Moodle)")


def read_upload(path: str, problem_sets) -> Upload | None:
    """Whose upload the file at ``path`` (inside the download) is, by the first platform whose names fit."""
    for platform in PLATFORMS:
        upload = platform.read(path, problem_sets)
        if upload is not None:
            return upload
    return None
