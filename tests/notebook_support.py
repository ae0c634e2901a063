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
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import qkv_exercises
from qkv_exercises.answers import Rng, call_student_function
from qkv_exercises.checking import Verdict, qkv_switched_off
from qkv_exercises.checks import FunctionCheck, Raised, Returned, ValueCheck, seed_for
from qkv_exercises.identity import student_variant
from qkv_exercises.notebook import Session, _fresh
from qkv_exercises.problem_sets import get_problem_set

from .exercise_support import cell_source, nbgrader_meta
from .workers import once_per_run


STUDENTS = 1000  # students per problem set in the tests over many variants
PRACTICE = range(1, 51)  # and these practice variants


@functools.cache
def student_variants(problem_set: str) -> tuple[int, ...]:
    """The variants of :data:`STUDENTS` students of ``problem_set`` (ids student-0, student-1, ...), then
    the practice variants."""
    return tuple(student_variant(problem_set, f"student-{i}") for i in range(STUDENTS)) + tuple(PRACTICE)


_shared = None  # pytest's config (set by conftest): its tmp_path_factory is where workers share drawn givens


def share_givens_through(config) -> None:
    """Let :func:`givens_of` draw each problem set's givens once for all the run's workers."""
    global _shared
    _shared = config


@functools.cache
def givens_of(problem_set: str) -> tuple[tuple[int, dict], ...]:
    """``(variant, givens)`` of every variant of :func:`student_variants`, drawn once per test run.

    Drawing them takes seconds per problem set (up to 5 s), and three test modules on both workers
    ask for them: the first worker to ask draws them and pickles them in the run's folder
    (:func:`tests.workers.once_per_run`); every other reads them there.
    """
    ps = get_problem_set(problem_set)
    if _shared is None:
        return tuple((variant, ps.givens(variant)) for variant in student_variants(problem_set))

    def draw(folder: Path) -> None:
        drawn = tuple((variant, ps.givens(variant)) for variant in student_variants(problem_set))
        (folder / "givens.pickle").write_bytes(pickle.dumps(drawn, protocol=pickle.HIGHEST_PROTOCOL))

    folder = once_per_run(_shared._tmp_path_factory, f"givens-{problem_set}", draw)
    return pickle.loads((folder / "givens.pickle").read_bytes())


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


@dataclass(frozen=True)
class Prepared:
    """What the checks of one student's variant compare with, whatever the answers: each value check's
    expectation and each function check's calls (the hidden ones drawn for that student), made once
    to judge several notebooks' answers on the same student."""

    expectations: dict
    calls: dict


def prepare(problem_set: str, givens: dict, *, student: str, hidden: bool = True) -> Prepared:
    """The :class:`Prepared` of ``student`` (hidden checks too, unless ``hidden`` is False), as
    :func:`verdicts` makes them."""
    ps = get_problem_set(problem_set)
    expectations, calls = {}, {}
    with np.errstate(all="ignore"), qkv_switched_off():
        for check in ps.checks:
            if check.hidden and not hidden:
                continue
            if isinstance(check, FunctionCheck):
                if check.hidden:
                    calls[check.grade_id] = check.calls(
                        givens, np.random.default_rng(seed_for(problem_set, check.grade_id, student)))
                else:
                    calls[check.grade_id] = ps.visible_calls(check, givens)
            elif isinstance(check, ValueCheck):
                expectations[check.grade_id] = check.expect(givens)
    return Prepared(expectations, calls)


def verdicts(problem_set: str, namespace: dict, givens: dict, *, student: str, reveal: bool = True,
             hidden: bool = True, remembered: dict | None = None, prepared: Prepared | None = None
             ) -> dict[str, Verdict]:
    """Each check's verdict on the answers in ``namespace`` (hidden checks too, unless ``hidden`` is False).

    ``remembered``: see :func:`outcomes_of`. ``prepared``: ``prepare(problem_set, givens, student=student,
    hidden=hidden)``, when the caller judges more than one notebook's answers on this student.
    """
    ps = get_problem_set(problem_set)
    if prepared is None:
        prepared = prepare(problem_set, givens, student=student, hidden=hidden)
    found = {}
    with np.errstate(all="ignore"), qkv_switched_off():
        for check in ps.checks:
            if check.hidden and not hidden:
                continue
            answer = namespace.get(check.answer)
            if isinstance(check, FunctionCheck):
                calls = prepared.calls[check.grade_id]
                if not callable(answer):
                    found[check.grade_id] = Verdict(False, f"{check.answer} is not a function")
                    continue
                found[check.grade_id] = check.judge(outcomes_of(answer, calls, remembered), calls, reveal=reveal)
            elif isinstance(check, ValueCheck):
                found[check.grade_id] = check.judge(answer, givens, reveal=reveal,
                                                    expectation=prepared.expectations[check.grade_id])
            else:
                found[check.grade_id] = check.judge(answer, givens, reveal=reveal)
    return found


def score(compiled: CompiledNotebook, found: dict[str, Verdict]) -> float:
    return sum(compiled.points[grade_id] for grade_id, verdict in found.items() if verdict.passed)
