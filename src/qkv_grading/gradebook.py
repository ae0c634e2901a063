"""The gradebook: nbgrader's ``gradebook.db``, written by the one trusted grading process.

Grades go in through nbgrader's own :class:`nbgrader.api.Gradebook`, as ``nbgrader
autograde`` writes them (a student, a submission, one grade per test cell with its
``auto_score``), so that ``nbgrader export``, formgrader and manual grading keep
working. A score an instructor entered by hand in formgrader (``manual_score``) is kept
by a regrade, as nbgrader keeps it, and the submission is marked for a look.

:class:`CsvExport` writes ``grades.csv`` in the layout of nbgrader's own CSV export,
through :mod:`csv`, so that any student id (a comma, a quote) gives a valid file, its rows
ordered by student, then problem set, and with one column more: ``previous_score``, the
score a row had in the ``grades.csv`` it replaces when a regrade (or a score entered by
hand) changed it. The course's ``nbgrader_config.py`` makes ``nbgrader export`` use it too.
"""

from __future__ import annotations

import csv
import os
import sys
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import ExportPlugin

from .judging import Graded
from .safe_text import stored

COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email", "raw_score",
           "late_submission_penalty", "score", "max_score", "previous_score")


def ensure_alembic_on_path() -> None:
    """nbgrader runs ``alembic`` by name to make a new gradebook: put the one beside this Python on PATH."""
    folder = os.path.dirname(sys.executable)
    if folder not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")


class Writer:
    """The course's gradebook, open for one grading run (a context manager)."""

    def __init__(self, db_url: str, course_id: str):
        ensure_alembic_on_path()
        self.gb = Gradebook(db_url, course_id)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc) -> None:
        self.gb.close()

    def cells_of(self, problem_set: str, notebook: str) -> dict[str, float] | None:
        """``{grade_id: points}`` of the graded cells the gradebook knows for the notebook, None if it knows none."""
        try:
            nb = self.gb.find_notebook(notebook, problem_set)
        except MissingEntry:
            return None
        return {cell.name: float(cell.max_score) for cell in nb.grade_cells}

    def record(self, graded: Graded, notebook: str, timestamp: str | None = None,
               platform_name: str | None = None) -> list[str]:
        """Enter ``graded``'s points (and the student's name on the learning platform, as their
        ``last_name``); return notes on manual scores kept."""
        submission = self._submission(graded.student, graded.problem_set, timestamp, platform_name)
        kept = []
        for nb in submission.notebooks:
            if nb.name != notebook:
                continue
            for grade in nb.grades:
                check = graded.checks.get(grade.name)
                grade.auto_score = (check.points if check is not None else None) if graded.gradable else 0.0
                grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
                if grade.manual_score is not None:
                    kept.append(grade.name)
            for comment in nb.comments:
                comment.auto_comment = None
        self.gb.db.commit()
        if kept:
            return [f"kept the scores entered by hand in formgrader for {', '.join(sorted(kept))}"]
        return []

    def score_of(self, student: str, problem_set: str) -> float | None:
        """The score the gradebook holds for ``student``'s ``problem_set``; None when it holds none."""
        try:
            submission = self.gb.find_submission(problem_set, student)
        except MissingEntry:
            return None
        grades = [g for nb in submission.notebooks for g in nb.grades]
        if not grades or all(g.auto_score is None and g.manual_score is None for g in grades):
            return None
        return float(submission.score)

    def _submission(self, student: str, problem_set: str, timestamp: str | None, platform_name: str | None):
        if platform_name:
            self.gb.update_or_create_student(student, last_name=platform_name, lms_user_id=student)
        else:
            self.gb.update_or_create_student(student)
        with warnings.catch_warnings():  # nbgrader's own query warns about its autoflush here
            warnings.simplefilter("ignore")
            if timestamp:
                return self.gb.update_or_create_submission(problem_set, student, timestamp=timestamp)
            return self.gb.update_or_create_submission(problem_set, student)

    def graded_problem_sets(self) -> list[str]:
        return sorted(a.name for a in self.gb.assignments if a.num_submissions > 0)


def rows(gradebook: Gradebook, assignments=(), students=()) -> list[list[str]]:
    """The rows of nbgrader's CSV export (without ``previous_score``): every student (or ``students``) for
    every assignment (or ``assignments``), ordered by student, then problem set."""
    from qkv_exercises.problem_sets import order

    wanted_students = {str(s) for s in students}
    out = []
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        submissions = {s.student_id: s for s in assignment.submissions}
        for student in gradebook.students:
            if wanted_students and student.id not in wanted_students:
                continue
            submission = submissions.get(student.id)
            if submission is None:
                timestamp, raw, penalty, score = "", 0.0, 0.0, 0.0
            else:
                timestamp, raw = submission.timestamp, submission.score
                penalty = submission.late_submission_penalty
                score = max(0.0, raw - penalty)
            row = [assignment.name, assignment.duedate, timestamp, student.id, student.last_name, student.first_name,
                   student.email, raw, penalty, score, assignment.max_score]
            out.append(["" if value is None else stored(value) for value in row])
    out.sort(key=lambda row: (row[3], order(row[0]), row[0]))
    return out


def _scores_in(path: Path) -> dict[tuple[str, str], str]:
    """``{(student, assignment): score}`` of an earlier ``grades.csv``; empty when there is none to read."""
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            return {(row["student_id"], row["assignment"]): row["score"] for row in reader
                    if row.get("student_id") is not None and row.get("score") is not None}
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError):
        return {}


def write_csv(path: Path, table: list[list[str]]) -> None:
    """Write ``table`` under :data:`COLUMNS`, with ``previous_score`` where a score differs from the one in
    the file it replaces; written to a new file and moved in place, so a reader never sees half."""
    path = Path(path)
    before = _scores_in(path)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in table:
            previous = before.get((row[3], row[0]), "")
            writer.writerow([*row[:len(COLUMNS) - 1], previous if previous and _differ(previous, row[9]) else ""])
    partial.replace(path)


def _differ(previous: str, score: str) -> bool:
    try:
        return abs(float(previous) - float(score)) > 1e-9
    except ValueError:
        return previous != score


class CsvExport(ExportPlugin):
    """nbgrader's CSV export, quoted as CSV must be (``c.ExportApp.plugin_class`` in ``nbgrader_config.py``)."""

    def export(self, gradebook: Gradebook) -> None:
        target = Path(self.to or "grades.csv")
        self.log.info("Exporting grades to %s", target)
        write_csv(target, rows(gradebook, [str(a) for a in self.assignment], [str(s) for s in self.student]))
