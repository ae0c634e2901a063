"""What a hand-in sends back costs that hand-in alone, and reaches every page, file and terminal safely.

The adversarial class (tests/adversarial_class.py, with the hand-ins of tests/hostile_data.py)
is graded three times with the real command. The tests show, for every run:

- each kind of hostile channel data (lone surrogates, terminal escapes, bidirectional
  overrides, a flood, a record too full, too many values, too deep, too long a string, numbers
  no answer holds, a forged end of the run) costs its own submission only, with the reason,
  and never the batch: every student has a grade and grades.csv is written;
- a forged end of the run still gets the note that the process ended;
- the instructor's terminal receives no control character from a student, so no summary line
  can be rewritten or erased;
- every feedback page, autograded notebook, grades.csv and the gradebook hold the text as
  visible escapes, in valid UTF-8;
- the grading process stays under 1 GB, every record it keeps is within its bound of bytes,
  and the run that takes every record from the journal gives the same grades.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from qkv_grading.run_record import Bounds

from .adversarial_class import HONEST
from .grading_support import PS2, student_lines
from .hostile_data import data_attacks

pytestmark = pytest.mark.slow

# Characters that a terminal, a reader or a UTF-8 file would act on: C0 controls but tab and newline,
# DEL and C1, bidirectional controls, line and paragraph separators, lone surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def test_hostile_data_costs_its_own_submission_only_with_the_reason(adversarial_class):
    graded = adversarial_class
    hostile = data_attacks(graded["course"])
    for run in graded["runs"]:
        assert run["result"].returncode == 0, run["result"].stdout[-3000:] + run["result"].stderr[-3000:]
        for student in hostile:
            ps, _, _, expected, words = graded["cases"][student]
            notes = "\n".join(student_lines(run["result"].stdout, student))
            assert run["grades"][(student, ps)] == expected, notes
            for word in words:
                assert word in notes, f"{student}: no {word!r} in\n{notes}"
        for key, score in HONEST.items():
            assert run["grades"][key] == score


def test_a_forged_end_of_the_run_is_a_process_that_ended(adversarial_class):
    for run in adversarial_class["runs"]:
        notes = "\n".join(student_lines(run["result"].stdout, "forged_end"))
        assert "the notebook's process ended (exit code 0) in code cell" in notes, notes
        assert "checks after it were not reached" in notes
        assert "lines sent back by the notebook that are not the runner's records" in notes


def test_refused_records_are_refused_before_they_are_parsed_or_judged(adversarial_class):
    """Too many values is seen from the bytes alone; the others while the record is read, before judging."""
    notes = "\n".join(student_lines(adversarial_class["runs"][0]["result"].stdout, "many_values"))
    assert "it may hold up to" in notes, notes


def test_the_terminal_receives_no_control_character_from_a_student(adversarial_class):
    for run in adversarial_class["runs"]:
        for stream in (run["result"].stdout, run["result"].stderr):
            raw = sorted({hex(ord(ch)) for ch in RAW.findall(stream)})
            assert not raw, f"control characters reached the terminal: {raw}"
        line = student_lines(run["result"].stdout, "escapes")[0]
        assert line.split()[-3:] == ["0", "/", str(int(HONEST[("honest_a", PS2)]))], line
        assert "\\x1b[2K" in "\n".join(student_lines(run["result"].stdout, "escapes")), "the escape is shown"


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


def test_pages_notebooks_grades_csv_and_gradebook_hold_the_text_safely(adversarial_class):
    import nbformat

    course = adversarial_class["course"]
    for student in ("unsafe_text", "escapes"):
        page = (course / "feedback" / student / PS2 / f"{PS2}.html").read_bytes().decode("utf-8")
        assert not RAW.search(page), f"{student}'s feedback page: {sorted(set(RAW.findall(page)))}"
        assert "\\x1b[2K" in page and "\\u202e" in page, "what was there is shown as an escape"
        path = course / "autograded" / student / PS2 / f"{PS2}.ipynb"
        nb = json.loads(path.read_bytes().decode("utf-8"))
        nbformat.validate(nbformat.reads(json.dumps(nb), as_version=4))
        raw = [s for s in _strings(nb) if RAW.search(s)]
        assert not raw, f"{student}'s autograded notebook: {raw[:3]}"
    csv_text = (course / "grades.csv").read_bytes().decode("utf-8")
    assert not RAW.search(csv_text.replace("\r\n", "\n"))
    with sqlite3.connect(course / "gradebook.db") as db:
        texts = [v for row in db.execute("SELECT id, first_name, last_name, email FROM student") for v in row if v]
        texts += [v for (v,) in db.execute("SELECT auto_comment FROM comment WHERE auto_comment IS NOT NULL")]
    assert not [t for t in texts if RAW.search(t)]


def test_students_named_like_the_course_folders_are_graded_where_students_are(adversarial_class):
    course = adversarial_class["course"]
    for student in ("submitted", "autograded"):
        assert (course / "feedback" / student / PS2 / f"{PS2}.html").is_file()
        assert (course / "submitted" / student / PS2 / f"{PS2}.ipynb").is_file()
    assert (course / "autograded" / "honest_a" / PS2 / f"{PS2}.ipynb").is_file()


def test_the_grading_process_stays_under_1_gb_and_keeps_every_record_within_its_bound(adversarial_class):
    for number, run in enumerate(adversarial_class["runs"]):
        assert run["usage"], "the grading process did not report what it used"
        assert run["usage"]["max_rss_bytes"] < 1 << 30, (number, run["usage"])
    bound = Bounds().record_bytes
    journal = adversarial_class["course"] / ".grading" / "journal"
    for path in journal.glob("*.jsonl"):
        with path.open("rb") as f:
            for line in f:
                record = json.loads(line)["record"]
                assert len(record) <= bound, (json.loads(line)["student"], len(record))


def test_a_run_from_the_journal_gives_the_same_grades(adversarial_class):
    _, fresh, resumed = adversarial_class["runs"]
    assert resumed["grades"] == fresh["grades"], "the journal holds the records of the run before"
    printed = resumed["result"].stdout
    from_journal = sum("(from the journal)" in line for line in printed.splitlines())
    refused = [s for s, case in adversarial_class["cases"].items() if "refused" in case[4]]
    assert from_journal >= len(adversarial_class["cases"]) - len(refused), printed[-3000:]
