"""Run a problem-set notebook's cells in this process, for any variant, and grade its answers.

:func:`answers_of` executes every code cell of a notebook except the test cells, with
``start`` replaced by :class:`GivenSession`, which hands out the givens of the chosen
variant and displays nothing (as the grading sandbox does). :func:`grade` then judges
each answer with the problem set's checks, revealing, as the grader does: each
function the student wrote is called on the visible calls and on hidden calls drawn
for this student. Running thousands of variants this way takes seconds.
"""

from __future__ import annotations

import contextlib
import functools
import io
from dataclasses import dataclass

import numpy as np

import qkv_exercises
from qkv_exercises.answers import Rng, call_student_function
from qkv_exercises.checking import Verdict, qkv_switched_off
from qkv_exercises.checks import FunctionCheck, Raised, Returned, seed_for
from qkv_exercises.identity import student_variant
from qkv_exercises.notebook import Session, _fresh
from qkv_exercises.problem_sets import get_problem_set

from .exercise_support import cell_source, nbgrader_meta


STUDENTS = 1000  # students per problem set in the tests over many variants
PRACTICE = range(1, 51)  # and these practice variants


@functools.cache
def student_variants(problem_set: str) -> tuple[int, ...]:
    """The variants of :data:`STUDENTS` students of ``problem_set`` (ids student-0, student-1, ...), then
    the practice variants."""
    return tuple(student_variant(problem_set, f"student-{i}") for i in range(STUDENTS)) + tuple(PRACTICE)


@functools.cache
def givens_of(problem_set: str) -> tuple[tuple[int, dict], ...]:
    """``(variant, givens)`` of every variant of :func:`student_variants`, drawn once per test session."""
    ps = get_problem_set(problem_set)
    return tuple((variant, ps.givens(variant)) for variant in student_variants(problem_set))


class GivenSession:
    """What ``start()`` returns in these runs: the givens as attributes; display, check and summary do nothing."""

    def __init__(self, givens: dict):
        self.__dict__.update(givens)

    def check(self, grade_id, answer):
        pass

    def summary(self):
        pass


for _method in Session.DISPLAY_METHODS:
    setattr(GivenSession, _method, lambda self, *args, **kwargs: None)


@dataclass
class CompiledNotebook:
    """A notebook's code cells, compiled once: the cells to run, and each test cell's points."""

    problem_set: str
    cells: list
    points: dict[str, float]


def compile_notebook(nb: dict, problem_set: str) -> CompiledNotebook:
    cells, points = [], {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = nbgrader_meta(cell)
        if meta.get("grade") and not meta.get("solution"):
            points[meta["grade_id"]] = float(meta["points"])
            continue
        cells.append(compile(cell_source(cell), f"<{problem_set}:{meta.get('grade_id', cell.get('id'))}>", "exec"))
    return CompiledNotebook(problem_set, cells, points)


def answers_of(compiled: CompiledNotebook, givens: dict) -> dict:
    """The namespace after running every cell but the tests, with ``givens`` as the variant's givens."""
    namespace: dict = {}
    saved = qkv_exercises.__dict__.get("start")
    qkv_exercises.start = lambda *args, **kwargs: GivenSession(givens)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            for code in compiled.cells:
                exec(code, namespace)
    finally:
        if saved is None:
            del qkv_exercises.start
        else:
            qkv_exercises.start = saved
    return namespace


def outcomes_of(func, calls, remembered: dict | None = None) -> list:
    """Call a student's function on each call, as the checks do (output swallowed; :func:`verdicts`
    switches qkv off around them).

    With ``remembered`` (a dict kept across runs), a call already made by a function of the
    same code returns the outcome it had then: for deterministic functions only.
    """
    outcomes = []
    for call in calls:
        key = (getattr(func, "__code__", None), _content_key((call.args, tuple(sorted(call.kwargs.items())))))
        if remembered is not None and key in remembered:
            outcomes.append(remembered[key])
            continue
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = call_student_function(func, _fresh(call.args), _fresh(dict(call.kwargs)))
        outcome = Returned(result[1]) if result[0] == "returned" else Raised(result[1], result[2])
        if remembered is not None:
            remembered[key] = outcome
        outcomes.append(outcome)
    return outcomes


def _content_key(value):
    if isinstance(value, np.ndarray):
        return (value.shape, value.tobytes())
    if isinstance(value, (tuple, list)):
        return tuple(_content_key(v) for v in value)
    if isinstance(value, Rng):
        return ("rng", value.seed)
    return value


def verdicts(problem_set: str, namespace: dict, givens: dict, *, student: str, reveal: bool = True,
             hidden: bool = True, remembered: dict | None = None) -> dict[str, Verdict]:
    """Each check's verdict on the answers in ``namespace`` (hidden checks too, unless ``hidden`` is False).

    ``remembered``: see :func:`outcomes_of`.
    """
    ps = get_problem_set(problem_set)
    found = {}
    with np.errstate(all="ignore"), qkv_switched_off():
        for check in ps.checks:
            if check.hidden and not hidden:
                continue
            answer = namespace.get(check.answer)
            if isinstance(check, FunctionCheck):
                if check.hidden:
                    calls = check.calls(givens, np.random.default_rng(seed_for(problem_set, check.grade_id, student)))
                else:
                    calls = ps.visible_calls(check, givens)
                if not callable(answer):
                    found[check.grade_id] = Verdict(False, f"{check.answer} is not a function")
                    continue
                found[check.grade_id] = check.judge(outcomes_of(answer, calls, remembered), calls, reveal=reveal)
            else:
                found[check.grade_id] = check.judge(answer, givens, reveal=reveal)
    return found


def score(compiled: CompiledNotebook, found: dict[str, Verdict]) -> float:
    return sum(compiled.points[grade_id] for grade_id, verdict in found.items() if verdict.passed)
