"""The ``qkv_exercises`` a notebook imports inside the grading sandbox: ``start()`` and nothing of the course.

The grader copies this file into the sandbox as ``qkv_exercises/__init__.py``, beside
``qkv_exercises/answers.py``. A problem set's set-up cell runs unchanged::

    from qkv_exercises import start
    ps = start("ps2_scaled_dot_product", STUDENT_ID, PRACTICE)
    X, head_1 = ps.X, ps.head_1

but ``ps`` only holds the givens the grader sent (the numbers of the id the submission
is filed under, records as named tuples), its display methods and ``check`` /
``summary`` do nothing, and no check, expected value or reference implementation is
anywhere in reach. The runner (:mod:`qkv_grading.sandbox_runner`) sets the givens
with :func:`_install` before the first cell and reads who the notebook said it was
solved for from :data:`_solved_for`.

Needs only the standard library.
"""

from __future__ import annotations

import copy

_GIVENS: dict = {}
_DISPLAY_METHODS: tuple = ()
# (problem set, STUDENT_ID, PRACTICE, LANGUAGE) of each start() call, as the notebook passed them
_solved_for: list = []


def _install(givens: dict, display_methods) -> None:
    global _GIVENS, _DISPLAY_METHODS
    _GIVENS = dict(givens)
    _DISPLAY_METHODS = tuple(display_methods)


def _noop(*args, **kwargs) -> None:
    return None


class Session:
    """A problem set being graded: the givens as attributes; showing and checking do nothing."""

    def __init__(self, problem_set: str):
        self._problem_set = problem_set

    def __getattr__(self, name):
        if name in _GIVENS:
            return copy.deepcopy(_GIVENS[name])
        if name in _DISPLAY_METHODS or name in ("check", "summary"):
            return _noop
        raise AttributeError(f"problem set {self._problem_set} gives no {name!r}; it gives "
                             f"{', '.join(sorted(_GIVENS))}")


def start(problem_set, student_id="", practice=1, language="") -> Session:
    """The problem set ``problem_set`` with the grader's givens; records whom the notebook named, and the
    language its first cell chose (the grader's feedback speaks it)."""
    _solved_for.append((str(problem_set)[:200], str(student_id)[:200], str(practice)[:50], str(language)[:50]))
    return Session(str(problem_set))
