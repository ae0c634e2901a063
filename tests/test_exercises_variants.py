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
from .notebook_support import STUDENTS, answers_of, compile_notebook, givens_of, score, verdicts

pytestmark = pytest.mark.slow

HIDDEN_FOR = 100  # students whose hidden checks are judged too


def students(problem_set):
    """``(student id, variant, givens)`` of the 1000 students, then the practice variants (as ``practice-N``)."""
    for i, (variant, givens) in enumerate(givens_of(problem_set)):
        yield (f"student-{i}" if i < STUDENTS else f"practice-{variant}"), variant, givens


@pytest.mark.parametrize("problem_set", PROBLEM_SETS)
def test_the_solution_earns_full_marks_on_every_variant(problem_set):
    compiled = compile_notebook(source_notebook(problem_set), problem_set)
    assert set(compiled.points) == {c.grade_id for c in get_problem_set(problem_set).checks}
    remembered: dict = {}  # the solution's functions are deterministic: a call made before is not made again
    for index, (student, variant, givens) in enumerate(students(problem_set)):
        found = verdicts(problem_set, answers_of(compiled, givens), givens, student=student,
                         hidden=index < HIDDEN_FOR, remembered=remembered)
        failed = {grade_id: v.message for grade_id, v in found.items() if not v.passed}
        assert not failed, f"{problem_set}, {student} (variant {variant}): the solution fails {failed}"


@pytest.fixture(scope="module")
def released(released_course) -> dict:
    """The student version of every problem set, as ``nbgrader generate_assignment`` releases it."""
    return {ps: read_notebook(released_course / "release" / ps / f"{ps}.ipynb") for ps in PROBLEM_SETS}


@pytest.mark.parametrize("problem_set", PROBLEM_SETS)
def test_the_release_earns_nothing_on_any_variant(released, problem_set):
    compiled = compile_notebook(released[problem_set], problem_set)
    for index, (student, variant, givens) in enumerate(students(problem_set)):
        found = verdicts(problem_set, answers_of(compiled, givens), givens, student=student,
                         hidden=index < HIDDEN_FOR)
        passed = [grade_id for grade_id, v in found.items() if v.passed]
        assert not passed, f"{problem_set}, {student}: the untouched release passes {passed}"
        for grade_id, verdict in found.items():
            assert "None" in verdict.message, f"{problem_set}/{grade_id}: {verdict.message}"


@pytest.mark.parametrize("problem_set", PROBLEM_SETS)
def test_the_books_answers_earn_nothing_on_other_variants(problem_set):
    ps = get_problem_set(problem_set)
    compiled = compile_notebook(source_notebook(problem_set), problem_set)
    books_answers = answers_of(compiled, ps.givens(0))
    hand = [c for c in ps.checks if c.kind in ("value", "choice")]
    assert hand, "every problem set has hand-computed parts"
    assert score(compiled, {c.grade_id: c.judge(books_answers[c.answer], ps.givens(0), reveal=True)
                            for c in hand}) == sum(compiled.points[c.grade_id] for c in hand)
    for student, variant, givens in students(problem_set):
        earned = {c.grade_id: c.judge(books_answers[c.answer], givens, reveal=True) for c in hand}
        passed = [grade_id for grade_id, verdict in earned.items() if verdict.passed]
        assert not passed, f"{problem_set}, {student} (variant {variant}): the book's answers pass {passed}"
