"""The results journal: each job's run record, so that a killed run resumes where it stopped.

One JSON line per graded submission in ``.grading/journal/<problem set>.jsonl`` of the
course folder, written only by the grading process, after the grade is in the
gradebook::

    {"key": "<64 hex digits>", "student": "<id>", "record": "<the run record's bytes, as text>"}

The record is the canonical form of the decoded record (:func:`qkv_grading.run_record.encode`),
kept as one JSON string so that a reader takes it out whole without parsing it; it is
decoded again, with the same bounds, when it is used. A line is keyed by a hash of the
job (the submission's cells, the source notebook's cells, the givens and the hidden
inputs: everything the sandbox was given), of what runs in the sandbox and of the
limits: the same key means the same run, so its record can stand in for running it
again. Points are always judged anew from it.

The journal is never read whole: :meth:`Journal.index` reads it line by line and keeps
only where each key's line starts, :meth:`Journal.record` reads one line when its
submission comes up, and :meth:`Journal.keep_only` copies it line by line. A line cut
short by a killed run is not read; ``grade --fresh`` ignores the journal.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

_PREFIX = re.compile(rb'\{"key": "([0-9a-f]{64})", "student": ("(?:[^"\\\n]|\\.){0,2000}")')


def result_key(job: dict, runtime_digest: str, limits: dict) -> str:
    text = json.dumps({"job": job, "runtime": runtime_digest, "limits": limits}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _head(line: bytes) -> tuple[str, str] | None:
    """The key and student of a journal line, read from its start only; None for a line that is not whole."""
    match = _PREFIX.match(line)
    if match is None or not line.endswith(b"}\n"):
        return None
    try:
        return match[1].decode("ascii"), json.loads(match[2])
    except ValueError:
        return None


class Journal:
    def __init__(self, course_root: Path, problem_set: str):
        self.path = Path(course_root) / ".grading" / "journal" / f"{problem_set}.jsonl"

    def index(self) -> dict[str, int]:
        """Where the line of each key starts (the last line of a key wins), reading one line at a time."""
        found: dict[str, int] = {}
        if not self.path.is_file():
            return found
        with self.path.open("rb") as f:
            offset = 0
            for line in f:
                head = _head(line)
                if head is not None:
                    found[head[0]] = offset
                offset += len(line)
        return found

    def record(self, offset: int) -> bytes | None:
        """The run record's bytes in the line at ``offset``, or None if that line is not whole."""
        with self.path.open("rb") as f:
            f.seek(offset)
            line = f.readline()
        if _head(line) is None:
            return None
        try:
            record = json.loads(line)["record"]
            return record.encode("ascii") if isinstance(record, str) else None
        except (ValueError, KeyError, TypeError, UnicodeEncodeError):
            return None

    def append(self, key: str, student: str, record: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"key": key, "student": student, "record": record.decode("ascii")}, ensure_ascii=True)
        with self.path.open("ab+") as f:
            if f.seek(0, 2) and (f.seek(-1, 2), f.read(1))[1] != b"\n":
                f.write(b"\n")  # the last line of a killed run stays cut off, on a line of its own
            f.write(line.encode("ascii") + b"\n")
            f.flush()

    def keep_only(self, students: set[str], keys: set[str]) -> None:
        """Drop the entries of ``students`` other than ``keys`` (their earlier hand-ins), keeping the file small."""
        if not self.path.is_file():
            return
        last = self.index()  # a key graded twice (--fresh) keeps its last line only
        partial = self.path.with_suffix(".partial")
        with self.path.open("rb") as source, partial.open("wb") as target:
            offset = 0
            for line in source:
                head = _head(line)
                if head is not None and last.get(head[0]) == offset and (head[0] in keys or head[1] not in students):
                    target.write(line)
                offset += len(line)
        partial.replace(self.path)
