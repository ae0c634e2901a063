"""Every problem set, on 1000 students' variants: the solution earns full marks, the release nothing,
and the book's own answers nothing either.

The notebooks run in this process (see ``tests/notebook_support.py``): every cell but the
tests, with the variant's givens, then every check judges the answers as the grader does
(``reveal=True``, hidden checks included). The release is the one ``nbgrader
generate_assignment`` makes. The book's answers are the solution's answers on variant 0
(the seeds' numbers), judged against each student's variant: copied into the hand-computed
parts, they must earn nothing.

Hidden checks call a student's functions on inputs drawn for that student, whatever the
variant; they are judged for the first 100 students of each problem set.
"""

from __future__ import annotations

import pytest

from qkv_exercises.problem_sets import get_problem_set

from .exercise_support import PROBLEM_SETS, read_notebook, source_notebook
from .notebook_support import STUDENTS, answers_of, compile_notebook, givens_of, prepare, score, verdicts

pytestmark = pytest.mark.slow

HIDDEN_FOR = 100  # students whose hidden checks are judged too


@pytest.fixture(scope="module", params=PROBLEM_SETS)
def students(request) -> tuple[str, list]:
    """A problem set and its students: ``(student id, variant, givens, prepared)`` of the 1000 students,
    then of the practice variants (as ``practice-N``). ``prepared`` is what the checks compare with
    (:func:`notebook_support.prepare`): made once for the three tests of the problem set, which run
    one after the other in one process (the fixture's instance groups them, ``tests/workers.py``)."""
    problem_set = request.param
    found = []
    for i, (variant, givens) in enumerate(givens_of(problem_set)):
        student = f"student-{i}" if i < STUDENTS else f"practice-{variant}"
        found.append((student, variant, givens, prepare(problem_set, givens, student=student, hidden=i < HIDDEN_FOR)))
    return problem_set, found


def test_the_solution_earns_full_marks_on_every_variant(students):
    problem_set, everyone = students
    compiled = compile_notebook(source_notebook(problem_set), problem_set)
    assert set(compiled.points) == {c.grade_id for c in get_problem_set(problem_set).checks}
    remembered: dict = {}  # the solution's functions are deterministic: a call made before is not made again
    for index, (student, variant, givens, prepared) in enumerate(everyone):
        found = verdicts(problem_set, answers_of(compiled, givens), givens, student=student,
                         hidden=index < HIDDEN_FOR, remembered=remembered, prepared=prepared)
        failed = {grade_id: v.message for grade_id, v in found.items() if not v.passed}
        assert not failed, f"{problem_set}, {student} (variant {variant}): the solution fails {failed}"


def test_the_release_earns_nothing_on_any_variant(released_course, students):
    """The student version of the problem set, as ``nbgrader generate_assignment`` releases it."""
    problem_set, everyone = students
    compiled = compile_notebook(read_notebook(released_course / "release" / problem_set / f"{problem_set}.ipynb"),
                                problem_set)
    for index, (student, variant, givens, prepared) in enumerate(everyone):
        found = verdicts(problem_set, answers_of(compiled, givens), givens, student=student,
                         hidden=index < HIDDEN_FOR, prepared=prepared)
        passed = [grade_id for grade_id, v in found.items() if v.passed]
        assert not passed, f"{problem_set}, {student}: the untouched release passes {passed}"
        for grade_id, verdict in found.items():
            assert "None" in verdict.message, f"{problem_set}/{grade_id}: {verdict.message}"


def test_the_books_answers_earn_nothing_on_other_variants(students):
    problem_set, everyone = students
    ps = get_problem_set(problem_set)
    compiled = compile_notebook(source_notebook(problem_set), problem_set)
    books_answers = answers_of(compiled, ps.givens(0))
    hand = [c for c in ps.checks if c.kind in ("value", "choice")]
    assert hand, "every problem set has hand-computed parts"
    assert score(compiled, {c.grade_id: c.judge(books_answers[c.answer], ps.givens(0), reveal=True)
                            for c in hand}) == sum(compiled.points[c.grade_id] for c in hand)

    def judged(check, givens, prepared):
        if check.kind == "value":
            return check.judge(books_answers[check.answer], givens, reveal=True,
                               expectation=prepared.expectations[check.grade_id])
        return check.judge(books_answers[check.answer], givens, reveal=True)

    for student, variant, givens, prepared in everyone:
        earned = {c.grade_id: judged(c, givens, prepared) for c in hand}
        passed = [grade_id for grade_id, verdict in earned.items() if verdict.passed]
        assert not passed, f"{problem_set}, {student} (variant {variant}): the book's answers pass {passed}"
