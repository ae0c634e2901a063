"""The comparison every check makes, the same while a student solves and at grading.

:func:`judge_value` compares an answer with an :class:`Expectation` (the expected value
computed by qkv, the values the typical slips give, hints) and returns a
:class:`Verdict`: passed or not, and the message the student reads. It never raises,
whatever the answer is. The message names the first entry that is off, whether it is
too large or too small, how many entries are off and the likely slip; only with
``reveal=True`` (feedback after grading) does it state the expected value.

The expectations of the problem sets are built in :mod:`qkv_exercises.expectations`,
the judges of the functions students write in :mod:`qkv_exercises.functions`.

Tolerances: answers computed by hand are checked within :data:`HAND_TOLERANCE`
(0.01, answers written to 2 decimals); functions a student writes are checked
within :data:`CODE_TOLERANCE` (1e-6).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from qkv import attention, block, blockwise, decoding, grouped, linearised, lookup, masks, multihead, patterns, position
from qkv import relative_position, trace, vision
from qkv.validate import shape_str

from .language import _, ngettext
from .slips import Slip

HAND_TOLERANCE = 0.01
CODE_TOLERANCE = 1e-6

Labels = Sequence[Sequence[str] | None]
Hint = Callable[[np.ndarray, "Labels | None"], "str | None"]


class AnswerMismatch(AssertionError):
    """A failed check, raised only under nbgrader (``nbgrader validate``) so that it counts the cell as failed."""

    def _render_traceback_(self) -> list[str]:
        """What Jupyter shows for this error: the message alone (IPython calls this instead of
        printing the checks' frames)."""
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]


@dataclass(frozen=True)
class Verdict:
    """What a check concluded: passed or not, and the message the student reads."""

    passed: bool
    message: str


@dataclass(frozen=True)
class Expectation:
    """What a value answer is checked against, and everything needed to explain a mismatch.

    ``expected`` is computed by qkv; ``slip_values`` pairs each typical slip with the
    value it gives (a slip may appear more than once, with the values of different
    ways of making it), or is a function of no argument that returns those pairs: it is
    called only for an answer that is wrong, the slips being needed only to explain it;
    ``hints`` are functions of the answer (and the labels of its axes) that return a hint
    or None. ``labels`` name the rows (and columns) in
    messages, ``shape_help`` says what the rows and columns are.
    """

    expected: np.ndarray
    tol: float = HAND_TOLERANCE
    formula: str = ""
    shape_help: str = ""
    labels: Labels | None = None
    slip_values: Sequence[tuple[Slip, np.ndarray | None]] | Callable[[], Sequence] = ()
    hints: Sequence[Hint] = ()
    what: str = "your answer"
    nonfinite_hint: str = ""

    def slips(self) -> Sequence[tuple[Slip, np.ndarray | None]]:
        """The ``(slip, value)`` pairs (computed now, when ``slip_values`` is a function)."""
        return self.slip_values() if callable(self.slip_values) else self.slip_values


class _Unusable(Exception):
    """An answer that cannot be compared (None, text, ragged ...): the message says why."""


# --------------------------------------------------------------------------- formatting


def format_number(x) -> str:
    """A number as a student would write it: ``0.5``, ``1``, ``0.665241``, ``nan``."""
    x = float(x)
    if not np.isfinite(x):
        return str(x)
    text = np.format_float_positional(x, precision=6, unique=True, trim="-")
    return "0" if text in ("-0", "0.") else text


def describe_input(x) -> str:
    """A short description of an input, for naming a call: ``[2, 1, 0]`` or ``an array of shape (3, 4)``."""
    a = np.asarray(x)
    if a.size <= 4 and a.ndim <= 1:
        return "[" + ", ".join(format_number(v) for v in a.ravel()) + "]"
    return _("an array of shape {shape}").format(shape=shape_str(a.shape))


def _entry(name: str, index: tuple[int, ...], labels: Labels | None) -> str:
    """``A1[2, 1] (row 補償, column 晚到)``: the entry, with the axes' labels when known."""
    text = f"{name}[{', '.join(str(i) for i in index)}]"
    if not labels:
        return text
    words = (_("row {label}"), _("column {label}")) if len(index) == 2 else ("{label}",) * len(index)
    parts = []
    for axis, i in enumerate(index):
        axis_labels = labels[axis] if axis < len(labels) else None
        if axis_labels is not None and i < len(axis_labels):
            parts.append(words[axis].format(label=axis_labels[i]).strip())
    return f"{text} ({_(', ').join(parts)})" if parts else text


# --------------------------------------------------------------------------- answers as numbers


def as_numbers(answer, name: str, *, what: str | None = None, nonfinite_hint: str = "") -> np.ndarray:
    """Return ``answer`` (a number, a list of lists, an array) as a float array.

    Raises:
        _Unusable: when the answer is None or ``...`` (not filled in), text, ragged
            (rows of different lengths), holds something that is not a real number, or
            holds NaN or infinity (``nonfinite_hint`` is added to that message).
    """
    what = what or _("your answer")
    if answer is None:
        raise _Unusable(_("{name} is None: replace None with {what}.").format(name=name, what=what))
    if answer is Ellipsis:
        raise _Unusable(_("{name} is still ... : replace it with {what}.").format(name=name, what=what))
    if isinstance(answer, str):
        raise _Unusable(_("{name} is the text {text}: write numbers without quotes ({what}).").format(
            name=name, text=repr(answer[:40]), what=what))
    if isinstance(answer, dict):
        raise _Unusable(_("{name} is a dict: write {what} instead.").format(name=name, what=what))
    ragged = _("{name} is not rectangular: {detail}. Every row needs the same number of entries.")
    try:
        raw = np.asarray(answer)
    except (ValueError, TypeError):
        raise _Unusable(ragged.format(name=name, detail=_ragged_detail(answer))) from None
    except Exception as err:  # an object of the student's own whose conversion fails
        raise _Unusable(_("{name} is a {type} that cannot be read as numbers ({error}): write {what}.").format(
            name=name, type=type(answer).__name__, error=type(err).__name__, what=what)) from None
    if raw.dtype == object and raw.ndim >= 1 and any(isinstance(v, (list, tuple, np.ndarray)) for v in raw.flat):
        raise _Unusable(ragged.format(name=name, detail=_ragged_detail(answer)))
    if raw.dtype.kind == "b":
        raise _Unusable(_("{name} holds True/False values: write numbers ({what}).").format(name=name, what=what))
    if raw.dtype.kind not in "iuf":
        index, value = _first_non_number(np.asarray(answer, dtype=object))
        where = f"{name}[{', '.join(map(str, index))}]" if index else name
        raise _Unusable(_("{where} is {value} ({type}), not a number: {name} must hold numbers only (no quotes, "
                          "no None).").format(where=where, value=_short_repr(value), type=type(value).__name__,
                                             name=name))
    values = raw.astype(float)
    bad = ~np.isfinite(values)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f"{name}[{', '.join(map(str, index))}]" if index else name
        message = _("{where} is {value}, not a finite number.").format(where=where, value=values[index])
        raise _Unusable(f"{message} {_(nonfinite_hint) if nonfinite_hint else ''}".strip())
    return values


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _ragged_detail(answer) -> str:
    try:
        lengths = [len(row) for row in answer]
    except Exception:
        return _("its rows have different lengths")
    return _("its rows have {counts} entries").format(counts=", ".join(str(n) for n in lengths))


def _first_non_number(entries: np.ndarray):
    """The index and value of the first entry that is not a real number (``entries`` has dtype object)."""
    for index in np.ndindex(entries.shape):
        value = entries[index]
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return index, value
    return (), entries.item() if entries.ndim == 0 else entries


# --------------------------------------------------------------------------- the comparison


def judge_value(answer, name: str, expectation: Expectation, *, reveal: bool) -> Verdict:
    """Compare ``answer`` with ``expectation.expected`` entry by entry; never raises.

    The message of a mismatch names the first wrong entry (with its row and column
    labels), the value written, whether it is too large or too small, how many entries
    are off, and the likely slip (an answer that matches a slip's value) or a hint.
    Only with ``reveal`` (feedback after grading) does it state the expected value;
    while a student is solving, no message contains it.

    Axes of length 1 may be left out (``[1, 0, 1]`` for a ``(1, 3)`` row of scores).
    """
    try:
        with np.errstate(all="ignore"):
            return _judge_value(answer, name, expectation, reveal)
    except _Unusable as unusable:
        return Verdict(False, str(unusable))


def _judge_value(answer, name: str, e: Expectation, reveal: bool) -> Verdict:
    expected = np.asarray(e.expected, dtype=float)
    tol = e.tol
    value = as_numbers(answer, name, what=_(e.what), nonfinite_hint=e.nonfinite_hint)
    if value.shape == expected.shape and _close(value, expected, tol).all():
        return _correct(name, e, expected.size)  # right as written: no slip to look for
    candidates = [(slip, np.asarray(v, dtype=float)) for slip, v in e.slips() if v is not None]
    candidates = [(s, v) for s, v in candidates if v.shape != expected.shape or not _close(v, expected, tol).all()]
    value, expected, candidates, labels = _fit_shape(value, name, expected, candidates, tol, e.shape_help, e.labels)
    close = _close(value, expected, tol)
    if close.all():
        return _correct(name, e, expected.size)
    index = tuple(int(i) for i in np.argwhere(~close)[0])
    wrong = int((~close).sum())
    where = name if expected.ndim == 0 else _entry(name, index, labels)
    written, exact = value[index], expected[index]
    fields = {"where": where, "value": format_number(written), "expected": format_number(exact), "tol": f"{tol:g}"}
    if reveal:
        line = _("{where} is {value}, expected {expected} (within {tol})").format(**fields)
    elif written > exact:
        line = _("{where} is {value}: too large (an answer within {tol} of the exact value counts)").format(**fields)
    else:
        line = _("{where} is {value}: too small (an answer within {tol} of the exact value counts)").format(**fields)
    if expected.ndim == 0:
        lines = [line + _(".")]
    else:
        lines = [line + ngettext("; {wrong} of {size} entries is off.", "; {wrong} of {size} entries are off.",
                                 wrong).format(wrong=wrong, size=expected.size)]
    slip = _matching_slip(value, candidates, tol)
    if slip is not None:
        lines.append(likely_slip(slip.advice))
    else:
        hints = [hint(value, labels) for hint in e.hints] + [_general_hint(value, expected, tol)]
        lines.extend(h for h in hints if h)
    return Verdict(False, "\n".join(lines))


def _correct(name: str, e: Expectation, size: int) -> Verdict:
    within = (_("within {tol}") if size == 1 else _("{count} entries, each within {tol}")).format(
        count=size, tol=f"{e.tol:g}")
    if e.formula:
        return Verdict(True, _("{name} is correct: {formula} ({within}).").format(
            name=name, formula=_(e.formula), within=within))
    return Verdict(True, _("{name} is correct ({within}).").format(name=name, within=within))


def likely_slip(advice: str) -> str:
    """The line of a message that names a slip: ``Likely slip: <advice>``, in the current language."""
    return _("Likely slip: {advice}").format(advice=advice)


def _close(value: np.ndarray, expected: np.ndarray, tol: float) -> np.ndarray:
    return np.abs(value - expected) <= tol * (1 + 1e-9)


def _matching_slip(value: np.ndarray, candidates, tol: float) -> Slip | None:
    """The first slip whose value is ``value`` (axes of length 1 aside)."""
    for slip, slipped in candidates:
        if np.squeeze(slipped).shape == np.squeeze(value).shape:
            if _close(np.squeeze(value), np.squeeze(slipped), tol).all():
                return slip
    return None


def _fit_shape(value, name, expected, candidates, tol, shape_help, labels):
    """Return ``(value, expected, candidates, labels)`` with matching shapes, or fail explaining the shape.

    Axes of length 1 may be left out (``[1, 0, 1]`` for a ``(1, 3)`` row of scores); the
    comparison then runs in the student's shape, so that entries are named as written.
    """
    if value.shape == expected.shape:
        return value, expected, candidates, labels
    if value.size == expected.size and np.squeeze(value).shape == np.squeeze(expected).shape:
        kept = [axis for axis, size in enumerate(expected.shape) if size != 1]
        if labels is not None:
            labels = [labels[axis] if axis < len(labels) else None for axis in kept]
        candidates = [(s, v.reshape(value.shape)) for s, v in candidates if v.size == value.size]
        return value, expected.reshape(value.shape), candidates, labels
    shapes = {"name": name, "shape": shape_str(value.shape), "expected": shape_str(expected.shape),
              "squeezed": shape_str(np.squeeze(expected).shape)}
    if np.squeeze(expected).shape != expected.shape:
        message = _("{name} has shape {shape} but should have shape {expected} (or {squeezed})").format(**shapes)
    else:
        message = _("{name} has shape {shape} but should have shape {expected}").format(**shapes)
    message += _(": {meaning}.").format(meaning=_(shape_help)) if shape_help else _(".")
    slip = _matching_slip(value, candidates, tol)
    if slip is None and value.ndim == 2 and value.shape == expected.shape[::-1]:
        message += "\n" + _("Did you transpose it? Rows and columns are swapped.")
    else:
        same_shape = [s for s, v in candidates if np.squeeze(v).shape == np.squeeze(value).shape]
        slip = slip or (same_shape[0] if same_shape else None)
        if slip is not None:
            message += "\n" + likely_slip(slip.advice)
    raise _Unusable(message)


def _general_hint(value: np.ndarray, expected: np.ndarray, tol: float) -> str | None:
    """A hint that needs no slip: an answer transposed, or rounded to 1 decimal."""
    if (value.ndim == 2 and value.shape[0] == value.shape[1] and not _close(expected, expected.T, tol).all()
            and _close(value, expected.T, tol).all()):
        return _("Did you transpose it? Rows and columns are swapped: row i is the i-th query (or token).")
    tenths = np.abs(value * 10 - np.round(value * 10)) < 1e-6
    if (tol <= HAND_TOLERANCE and tenths.all() and _close(value, expected, 0.05).all()
            and not (np.abs(expected * 10 - np.round(expected * 10)) < 1e-6).all()):
        return _("Your entries are rounded to 1 decimal, which is too coarse: write 2 decimals (an entry counts "
                 "within {tol}).").format(tol=f"{tol:g}")
    return None


def rows_sum_to_one(name: str, tol: float = HAND_TOLERANCE) -> Hint:
    """A hint naming the row of weights whose sum is furthest from 1, if it is further than rounding explains."""

    def hint(value: np.ndarray, labels: Labels | None) -> str | None:
        if value.ndim == 0:
            return None
        sums = value.sum(axis=-1)
        off = np.abs(sums - 1)
        if off.max() <= value.shape[-1] * tol / 2 + 1e-9:  # each entry rounded: the sum may be off by that much
            return None
        index = np.unravel_index(int(np.argmax(off)), off.shape)
        total = format_number(sums[index])
        if value.ndim == 1:
            return _("The weights in {name} add up to {total}; softmax weights add up to 1 in every row.").format(
                name=name, total=total)
        row = int(index[0])
        row_labels = labels[0] if labels and value.ndim == 2 else None
        if row_labels:
            return _("The weights in row {label} (row {row}, counting from 0) of {name} add up to {total}; softmax "
                     "weights add up to 1 in every row.").format(label=row_labels[row], row=row, name=name,
                                                                 total=total)
        return _("The weights in row {row} (counting from 0) of {name} add up to {total}; softmax weights add up "
                 "to 1 in every row.").format(row=row, name=name, total=total)

    return hint


# --------------------------------------------------------------------------- the student's own code


class QkvNotAvailable(RuntimeError):
    """Raised by qkv's functions while :func:`qkv_switched_off` is active."""


_REFERENCE_MODULES = (attention, multihead, trace, vision, blockwise, lookup, masks, position, block, decoding,
                      grouped, relative_position, patterns, linearised)


@contextlib.contextmanager
def qkv_switched_off():
    """While active, qkv's public functions refuse to run when called from outside qkv.

    qkv itself and the checks (which compute the expected values with it) still work;
    a call from the student's code raises :class:`QkvNotAvailable`, as ``import qkv``
    fails when the notebook is graded, where qkv is not installed.
    """
    saved = []
    for module, key in _public_functions():
        value = getattr(module, key)
        saved.append((module, key, value))
        setattr(module, key, _refusing_outside_qkv(value, f"qkv.{key}"))
    try:
        yield
    finally:
        for module, key, value in saved:
            setattr(module, key, value)


@functools.cache
def _public_functions() -> tuple[tuple[ModuleType, str], ...]:
    """``(module, name)`` of each public function of qkv's modules, found once (the checks switch qkv
    off thousands of times when a class is graded)."""
    import qkv

    return tuple((module, key) for module in (qkv, *_REFERENCE_MODULES) for key, value in vars(module).items()
                 if not key.startswith("_") and inspect.isfunction(value) and value.__module__.startswith("qkv"))


@functools.lru_cache(maxsize=1024)
def _refusing_outside_qkv(function, qualified_name: str):
    def guarded(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.partition(".")[0] in ("qkv", "qkv_exercises"):
            return function(*args, **kwargs)
        raise QkvNotAvailable(f"calls {qualified_name}")

    return guarded

