"""The instructors' commands (``python -m qkv_grading``) on a temporary copy of the course.

(e) A batch with a notebook that is not valid JSON, one that raises in its first cell, one
that loops forever and one whose kernel dies: each is graded (0 or partial) and reported,
every other student still gets a grade, and every student has a row in grades.csv.
Also: releasing prints every problem set, and a zip downloaded from a learning management
system is collected by the students' names.
"""

from __future__ import annotations

import json
import re
import zipfile

import pytest

from .exercise_support import (
    PROBLEM_SETS,
    copy_course,
    grading,
    points,
    read_grades,
    read_notebook,
    source_notebook,
    with_answer,
    with_first_cell,
    write_notebook,
)

pytestmark = pytest.mark.slow

PS = "ps1_qkv"  # the shortest problem set: 5 checks of 1 point
SLIP_K1 = "K1 = [[-0.71, -0.71], [0.71, 0.71], [0.00, 0.00]]  # X W_K without the bias (seed 000)"
Q1 = "Q1 = [[1, 0], [0, 1], [1, 1]]"
V1 = "V1 = [[1, 0], [0, 1], [1, 1]]"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course copy after ``python -m qkv_grading release``, with what the command printed."""
    course = copy_course(tmp_path_factory.mktemp("grading"))
    result = grading(course, "release")
    assert result.returncode == 0, result.stdout + result.stderr
    return course, result.stdout


def test_release_prints_every_problem_set_with_its_points(released):
    course, printed = released
    for ps in PROBLEM_SETS:
        line = next((line for line in printed.splitlines() if line.strip().startswith(ps)), None)
        assert line is not None, f"release did not mention {ps}:\n{printed}"
        assert f"{points(source_notebook(ps)):g} points" in line
        assert (course / "release" / ps / f"{ps}.ipynb").is_file()
    assert f"Released {len(PROBLEM_SETS)} problem sets" in printed


@pytest.fixture(scope="module")
def broken_batch(released, tmp_path_factory):
    """Grade a class in which four submissions are broken in different ways."""
    course, _ = released
    source = source_notebook(PS)
    release = read_notebook(course / "release" / PS / f"{PS}.ipynb")
    folder = tmp_path_factory.mktemp("hand-ins") / "submitted"
    batch = {
        "alice": source,
        "bob": with_answer(source, "answer_k_head1", SLIP_K1),
        "dave": with_answer(source, "answer_v_head1", "V1 = None\nwhile True:  # never ends\n    pass"),
        "erin": with_first_cell(with_answer(with_answer(release, "answer_q_head1", Q1), "answer_v_head1", V1),
                                "raise RuntimeError('still trying something out')"),
        "gina": with_answer(source, "answer_v_head1", "import os\nos._exit(1)  # ends the kernel"),
    }
    for student, nb in batch.items():
        write_notebook(folder / student / PS / f"{PS}.ipynb", nb)
    (folder / "carol" / PS).mkdir(parents=True)
    (folder / "carol" / PS / f"{PS}.ipynb").write_text('{"cells": [', encoding="utf-8")  # not JSON
    result = grading(course, "grade", str(folder), "--timeout", "5")
    return course, result


def test_broken_submissions_are_graded_and_reported(broken_batch):
    """(e) each broken notebook gets 0 or partial credit, the rest full grades, all in grades.csv."""
    course, result = broken_batch
    printed = result.stdout + result.stderr
    assert result.returncode == 0, printed
    grades = {student: score for (student, ps), score in read_grades(course / "grades.csv").items() if ps == PS}
    assert grades == {"alice": 5, "bob": 4, "carol": 0, "dave": 4, "erin": 2, "gina": 0}, printed


def test_grades_csv_lists_only_the_problem_sets_graded(broken_batch):
    course, _ = broken_batch
    assert {ps for _, ps in read_grades(course / "grades.csv")} == {PS}


@pytest.mark.parametrize("student, report", [
    ("carol", "is not a valid notebook"),
    ("dave", "cell answer_v_head1 ran past the time limit and was stopped"),
    ("erin", "the first code cell (added by the student) raised RuntimeError: still trying something out"),
    ("gina", "nbgrader could not grade it: "),
])
def test_each_broken_submission_is_reported_with_its_reason(broken_batch, student, report):
    _, result = broken_batch
    lines = result.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith(student + " "))
    assert report in lines[row + 1], f"no report {report!r} under {student}:\n{result.stdout}"


def test_progress_is_shown_for_every_submission(broken_batch):
    _, result = broken_batch
    for student in ("alice", "bob", "carol", "dave", "erin", "gina"):
        assert any(f"/6] {PS}  {student}" in line for line in result.stdout.splitlines()), result.stdout


def test_feedback_is_written_for_every_graded_notebook(broken_batch):
    course, _ = broken_batch
    for student in ("alice", "bob", "dave", "erin"):
        assert (course / "feedback" / student / PS / f"{PS}.html").is_file(), student
    for student in ("carol", "gina"):
        assert not (course / "feedback" / student / PS).exists(), student


def test_feedback_loads_nothing_from_another_host(broken_batch):
    """The feedback page's scripts are relative and resolve inside the feedback folder (MathJax
    included); nbgrader's own template would load MathJax from a CDN."""
    course, _ = broken_batch
    page = course / "feedback" / "alice" / PS / f"{PS}.html"
    sources = re.findall(r"<(?:script|link|img)\b[^>]*?(?:src|href)=[\"']([^\"']+)", page.read_text(encoding="utf-8"))
    remote = [s for s in sources if re.match(r"(?:[a-z]+:)?//", s)]
    assert not remote, f"the feedback page loads from another host: {remote}"
    scripts = [s for s in sources if s.endswith(".js")]
    assert any(s.endswith("tex-svg.js") for s in scripts), f"no MathJax script on the feedback page: {sources}"
    for script in scripts:
        assert (page.parent / script).resolve().is_file(), f"{script} does not exist next to the feedback"


def test_a_zip_from_a_learning_platform_is_collected_by_student_name(released, tmp_path):
    """Files named <student>_..._<notebook>.ipynb are graded; a file naming no student is reported."""
    course, _ = released
    source = source_notebook(PS)
    archive = tmp_path / "ps1_all_submissions.zip"
    write_notebook(tmp_path / "a.ipynb", source)
    write_notebook(tmp_path / "b.ipynb", with_answer(source, "answer_k_head1", SLIP_K1))
    with zipfile.ZipFile(archive, "w") as z:
        z.write(tmp_path / "a.ipynb", f"hana_4711_90210_{PS}.ipynb")
        z.write(tmp_path / "b.ipynb", f"ivan_late_4712_90210_{PS}-1.ipynb")
        z.write(tmp_path / "a.ipynb", f"{PS}.ipynb")
    result = grading(course, "grade", str(archive))
    assert result.returncode == 0, result.stdout + result.stderr
    grades = read_grades(course / "grades.csv")
    assert grades[("hana", PS)] == 5 and grades[("ivan", PS)] == 4, result.stdout
    assert f"NOT COLLECTED: {PS}.ipynb" in result.stdout
    assert "Collected 2 submissions from 2 students." in result.stdout


def test_a_notebook_that_stops_nbgrader_itself_costs_no_one_else_a_grade(released, tmp_path):
    """A submission with nbgrader metadata of an old format stops nbgrader's whole run; the students
    after it are then graded one at a time, and only that submission gets 0, with the reason."""
    course, _ = released
    source = source_notebook(PS)
    old_format = json.loads(json.dumps(source))
    for cell in old_format["cells"]:
        if "nbgrader" in cell["metadata"]:
            cell["metadata"]["nbgrader"]["schema_version"] = 1
    write_notebook(tmp_path / "submitted" / "abby" / PS / f"{PS}.ipynb", old_format)
    write_notebook(tmp_path / "submitted" / "zack" / PS / f"{PS}.ipynb", source)
    result = grading(course, "grade", str(tmp_path / "submitted"))
    assert result.returncode == 0, result.stdout + result.stderr
    grades = read_grades(course / "grades.csv")
    assert grades[("abby", PS)] == 0 and grades[("zack", PS)] == 5, result.stdout
    assert "old version of the nbgrader metadata format" in result.stdout
    assert f"{PS}  zack: graded on its own" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["grade", "no/such/folder"], "does not exist"),
    (["grade", ".", "--problem-set", "ps9_nothing"], "unknown problem set 'ps9_nothing'"),
])
def test_bad_arguments_get_a_clear_error(tmp_path, args, message):
    course = copy_course(tmp_path)
    result = grading(course, *args, cwd=tmp_path)
    assert result.returncode == 1
    assert message in result.stderr
