"""The results journal: what the sandbox handed back for each job, so that a killed run resumes where it stopped.

One JSON line per graded submission in ``.grading/journal/<problem set>.jsonl`` of the
course folder, written only by the grading process, after the grade is in the
gradebook. A line is keyed by a hash of the job (the submission's cells, the source
notebook's cells, the givens and the hidden inputs: everything the sandbox was given),
of what runs in the sandbox and of the limits: the same key means the same run, so its
result can stand in for running it again. Points are always judged anew from it. A line
cut short by a killed run is not read; ``grade --fresh`` ignores the journal.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def result_key(job: dict, runtime_digest: str, limits: dict) -> str:
    text = json.dumps({"job": job, "runtime": runtime_digest, "limits": limits}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Journal:
    def __init__(self, course_root: Path, problem_set: str):
        self.path = Path(course_root) / ".grading" / "journal" / f"{problem_set}.jsonl"

    def load(self) -> dict[str, dict]:
        found = {}
        if not self.path.is_file():
            return found
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    found[entry["key"]] = entry["result"]
                except (ValueError, KeyError, TypeError):
                    continue  # the last line of a killed run
        return found

    def append(self, key: str, student: str, result: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "student": student, "result": result}, ensure_ascii=False) + "\n")
            f.flush()

    def keep_only(self, students: set[str], keys: set[str]) -> None:
        """Drop the entries of ``students`` other than ``keys`` (their earlier hand-ins), keeping the file small."""
        if not self.path.is_file():
            return
        kept = []
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    if entry["key"] in keys or entry["student"] not in students:
                        kept.append(line if line.endswith("\n") else line + "\n")
                except (ValueError, KeyError, TypeError):
                    continue
        partial = self.path.with_suffix(".partial")
        partial.write_text("".join(kept), encoding="utf-8")
        partial.replace(self.path)
