"""Check a student's answers against qkv, and name the likely slip when one is wrong.

The exercises import this module (``from qkv_exercises import checking as check``). Every
check computes the expected value with qkv from the exercise's own inputs at the
moment it runs; no expected number is typed into a notebook. A check prints a
pass mark, or raises :class:`AnswerMismatch` with a message that names the entry,
the value written, the value expected and, when the answer matches what one of
the slips in :mod:`qkv_exercises.slips` would give, that slip.

Tolerances: answers computed by hand are checked within :data:`HAND_TOLERANCE`
(0.01, answers written to 2 decimals); functions a student writes are checked
within :data:`CODE_TOLERANCE` (1e-6).
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from qkv import attention, multihead, trace, vision

from . import slips
from qkv.validate import shape_str
from qkv.attention import linear, scaled_dot_product_attention, self_attention, softmax
from qkv.multihead import Head, merge_heads, split_heads
from .slips import Slip
from qkv.vision import patchify, to_patch_grid

HAND_TOLERANCE = 0.01
CODE_TOLERANCE = 1e-6
SIMULATION_TOLERANCE = 0.10  # a simulated variance passes within 10% of the exact one
SIMULATION_SAMPLES = 20_000

Labels = Sequence[Sequence[str] | None]


class AnswerMismatch(AssertionError):
    """An answer differs from the expected value; the message says where, by how much, and why."""

    def _render_traceback_(self) -> list[str]:
        """What Jupyter shows for this error: the message alone, after the student's own traceback
        when their code raised (IPython calls this instead of printing the checks' frames)."""
        lines = []
        if self.__cause__ is not None:
            lines += traceback.format_exception(self.__cause__)
            lines.append("")
        lines.append(f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}")
        return lines


def _fail(message: str, cause: BaseException | None = None):
    __tracebackhide__ = True  # pytest and IPython skip this frame in tracebacks
    raise AnswerMismatch(message) from cause


def _passed(message: str) -> None:
    print(f"\u2713 {message}")


@dataclass(frozen=True)
class Verdict:
    """What a check concluded: passed or not, and the message the student reads."""

    passed: bool
    message: str


@dataclass(frozen=True)
class Expectation:
    """What a value answer is checked against, and everything needed to explain a mismatch.

    ``expected`` is computed by qkv; ``slip_values`` pairs each typical slip with the
    value it gives; ``hints`` are functions of the answer that return a hint or None.
    See :func:`judge_value` for the other fields.
    """

    expected: np.ndarray
    tol: float = HAND_TOLERANCE
    formula: str = ""
    shape_help: str = ""
    labels: Labels | None = None
    slip_values: Sequence[tuple[Slip, np.ndarray | None]] = ()
    hints: Sequence[Callable[[np.ndarray], str | None]] = ()
    what: str = "your answer"
    nonfinite_hint: str = ""


# --------------------------------------------------------------------------- formatting


def format_number(x) -> str:
    """A number as a student would write it: ``0.5``, ``1``, ``0.665241``, ``nan``."""
    x = float(x)
    if not np.isfinite(x):
        return str(x)
    text = np.format_float_positional(x, precision=6, unique=True, trim="-")
    return "0" if text in ("-0", "0.") else text


def _short(x) -> str:
    """A short description of an input, for naming a call: ``[2, 1, 0]`` or ``an array of shape (3, 4)``."""
    a = np.asarray(x)
    if a.size <= 4 and a.ndim <= 1:
        return "[" + ", ".join(format_number(v) for v in a.ravel()) + "]"
    return f"an array of shape {shape_str(a.shape)}"


def _entry(name: str, index: tuple[int, ...], labels: Labels | None) -> str:
    """``A1[2, 1] (row 補償, column 晚到)``: the entry, with the axes' labels when known."""
    text = f"{name}[{', '.join(str(i) for i in index)}]"
    if not labels:
        return text
    words = ("row", "column") if len(index) == 2 else ("",) * len(index)
    parts = []
    for axis, i in enumerate(index):
        axis_labels = labels[axis] if axis < len(labels) else None
        if axis_labels is not None and i < len(axis_labels):
            parts.append(f"{words[axis]} {axis_labels[i]}".strip())
    return f"{text} ({', '.join(parts)})" if parts else text


# --------------------------------------------------------------------------- answers as numbers


def as_numbers(answer, name: str, *, what: str = "your answer", nonfinite_hint: str = "") -> np.ndarray:
    """Return ``answer`` (a number, a list of lists, an array) as a float array, or fail saying why not.

    Fails when the answer is None or ``...`` (not filled in), text, ragged (rows of
    different lengths), holds something that is not a real number, or holds NaN or
    infinity (``nonfinite_hint`` is added to that message).
    """
    __tracebackhide__ = True
    if answer is None:
        _fail(f"{name} is None: replace None with {what}.")
    if answer is Ellipsis:
        _fail(f"{name} is still ... : replace it with {what}.")
    if isinstance(answer, str):
        _fail(f"{name} is the text {answer!r}: write numbers without quotes ({what}).")
    if isinstance(answer, dict):
        _fail(f"{name} is a dict: write {what} instead.")
    try:
        raw = np.asarray(answer)
    except ValueError:
        _fail(f"{name} is not rectangular: {_ragged_detail(answer)}. Every row needs the same number of entries.")
    if raw.dtype == object and raw.ndim >= 1 and any(isinstance(v, (list, tuple, np.ndarray)) for v in raw.flat):
        _fail(f"{name} is not rectangular: {_ragged_detail(answer)}. Every row needs the same number of entries.")
    if raw.dtype.kind == "b":
        _fail(f"{name} holds True/False values: write numbers ({what}).")
    if raw.dtype.kind not in "iuf":
        index, value = _first_non_number(np.asarray(answer, dtype=object))
        where = f"{name}[{', '.join(map(str, index))}]" if index else name
        _fail(f"{where} is {value!r} ({type(value).__name__}), not a number: {name} must hold numbers only "
              "(no quotes, no None).")
    values = raw.astype(float)
    bad = ~np.isfinite(values)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f"{name}[{', '.join(map(str, index))}]" if index else name
        _fail(f"{where} is {values[index]}, not a finite number. {nonfinite_hint}".strip())
    return values


def _ragged_detail(answer) -> str:
    try:
        lengths = [len(row) for row in answer]
    except TypeError:
        return "its rows have different lengths"
    return "its rows have " + ", ".join(str(n) for n in lengths) + " entries"


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
        return _judge_value(answer, name, expectation, reveal)
    except AnswerMismatch as mismatch:
        return Verdict(False, str(mismatch))


def _judge_value(answer, name: str, e: Expectation, reveal: bool) -> Verdict:
    __tracebackhide__ = True
    expected = np.asarray(e.expected, dtype=float)
    tol = e.tol
    value = as_numbers(answer, name, what=e.what, nonfinite_hint=e.nonfinite_hint)
    candidates = [(slip, np.asarray(v, dtype=float)) for slip, v in e.slip_values if v is not None]
    candidates = [(s, v) for s, v in candidates if v.shape != expected.shape or not _close(v, expected, tol).all()]
    value, expected, candidates, labels = _fit_shape(value, name, expected, candidates, tol, e.shape_help, e.labels)
    close = _close(value, expected, tol)
    if close.all():
        entries = "" if expected.size == 1 else f"{expected.size} entries, each "
        return Verdict(True, f"{name} is correct{': ' + e.formula if e.formula else ''} ({entries}within {tol:g}).")
    index = tuple(int(i) for i in np.argwhere(~close)[0])
    wrong = int((~close).sum())
    where = name if expected.ndim == 0 else _entry(name, index, labels)
    written, exact = value[index], expected[index]
    if reveal:
        line = f"{where} is {format_number(written)}, expected {format_number(exact)} (within {tol:g})"
    else:
        line = (f"{where} is {format_number(written)}: too {'large' if written > exact else 'small'} "
                f"(an answer within {tol:g} of the exact value counts)")
    lines = [line + ("." if expected.ndim == 0 else
                     f"; {wrong} of {expected.size} entries {'is' if wrong == 1 else 'are'} off.")]
    slip = _matching_slip(value, candidates, tol)
    if slip is not None:
        lines.append(f"Likely slip: {slip.advice}")
    else:
        lines.extend(h for h in (hint(value) for hint in e.hints) if h)
    return Verdict(False, "\n".join(lines))


def compare(
    answer,
    name: str,
    expected,
    *,
    tol: float,
    formula: str = "",
    shape_help: str = "",
    labels: Labels | None = None,
    slip_values: Sequence[tuple[Slip, np.ndarray | None]] = (),
    hints: Sequence[Callable[[np.ndarray], str | None]] = (),
    what: str = "your answer",
    nonfinite_hint: str = "",
) -> None:
    """Compare ``answer`` with ``expected`` (:func:`judge_value`, revealing); print a pass mark or raise.

    Returns None: a test cell then shows no value (nbgrader would read a number as a score).

    Raises:
        AnswerMismatch: with :func:`judge_value`'s message.
    """
    __tracebackhide__ = True
    expectation = Expectation(np.asarray(expected, dtype=float), tol, formula, shape_help, labels, slip_values,
                              hints, what, nonfinite_hint)
    verdict = judge_value(answer, name, expectation, reveal=True)
    if not verdict.passed:
        _fail(verdict.message)
    _passed(verdict.message)


def _close(value: np.ndarray, expected: np.ndarray, tol: float) -> np.ndarray:
    return np.abs(value - expected) <= tol * (1 + 1e-9)


def _matching_slip(value: np.ndarray, candidates, tol: float) -> Slip | None:
    for slip, slipped in candidates:
        if slipped.shape == value.shape and _close(value, slipped, tol).all():
            return slip
    return None


def _fit_shape(value, name, expected, candidates, tol, shape_help, labels):
    """Return ``(value, expected, candidates, labels)`` with matching shapes, or fail explaining the shape.

    Axes of length 1 may be left out (``[1, 0, 1]`` for a ``(1, 3)`` row of scores); the
    comparison then runs in the student's shape, so that entries are named as written.
    """
    __tracebackhide__ = True
    if value.shape == expected.shape:
        return value, expected, candidates, labels
    if value.size == expected.size and np.squeeze(value).shape == np.squeeze(expected).shape:
        kept = [axis for axis, size in enumerate(expected.shape) if size != 1]
        if labels is not None:
            labels = [labels[axis] if axis < len(labels) else None for axis in kept]
        candidates = [(s, v.reshape(value.shape)) for s, v in candidates if v.size == value.size]
        return value, expected.reshape(value.shape), candidates, labels
    message = f"{name} has shape {shape_str(value.shape)} but should have shape {shape_str(expected.shape)}"
    if np.squeeze(expected).shape != expected.shape:
        message += f" (or {shape_str(np.squeeze(expected).shape)})"
    message += f": {shape_help}." if shape_help else "."
    same_shape = [(s, v) for s, v in candidates if v.shape == value.shape]
    slip = _matching_slip(value, same_shape, tol) or (same_shape[0][0] if same_shape else None)
    if slip is not None:
        message += f"\nLikely slip: {slip.advice}"
    elif value.ndim == 2 and value.shape == expected.shape[::-1]:
        message += "\nDid you transpose it? Rows and columns are swapped."
    _fail(message)


# --------------------------------------------------------------------------- hints that need no slip


def _rows_sum_to_one(name: str) -> Callable[[np.ndarray], str | None]:
    def hint(value: np.ndarray) -> str | None:
        if value.ndim == 0:
            return None
        sums = value.sum(axis=-1)
        off = np.argwhere(np.abs(sums - 1) > HAND_TOLERANCE)
        if len(off):
            i = tuple(int(k) for k in off[0])
            row = f"row {i[0]} " if value.ndim == 2 else ""
            return f"The {row}weights of {name} add up to {format_number(sums[i])}; softmax weights add up to 1."
        return None

    return hint


def _weighted_sum_hint(value: np.ndarray) -> str:
    return "Row i of A V is the weighted sum of the value rows: A[i, 0] V[0] + A[i, 1] V[1] + ..."


# --------------------------------------------------------------------------- steps of attention (hand answers)

_STEP_FORMULAS = {
    "Q": "X W_Q + b_Q", "K": "X W_K + b_K", "V": "X W_V + b_V",
    "B_Q": "the bias row b_Q repeated on every row", "B_K": "the bias row b_K repeated on every row",
    "B_V": "the bias row b_V repeated on every row", "K_T": "K transposed",
    "S_raw": "Q K^T", "S": "Q K^T / sqrt(d_k)", "A": "softmax(S) by rows", "O": "A V",
    "O_concat": "Concat(head 1, head 2, ...)", "Y": "O_concat W_O + b_O",
}


def _step_meaning(step: str, expected: np.ndarray) -> str:
    """What the rows and columns of a step are, for the shape message."""
    rows, cols = (1, expected.shape[0]) if expected.ndim == 1 else expected.shape[-2:]
    meanings = {
        "Q": f"one row per token ({rows}), one column per query dimension (d_k = {cols})",
        "K": f"one row per token ({rows}), one column per key dimension (d_k = {cols})",
        "V": f"one row per token ({rows}), one column per value dimension (d_v = {cols})",
        "K_T": f"one row per key dimension (d_k = {rows}), one column per token ({cols})",
        "S_raw": f"one row per query ({rows}), one column per key ({cols})",
        "A": f"one row per query ({rows}), one column per key ({cols})",
        "O": f"one row per query ({rows}), one column per value dimension (d_v = {cols})",
        "O_concat": f"one row per token ({rows}), the heads' {cols} output columns side by side",
        "Y": f"one row per token ({rows}), one column per output dimension ({cols})",
    }
    meanings["S"] = meanings["S_raw"]
    for role in "QKV":
        meanings[f"B_{role}"] = f"the bias row repeated on every row: {rows} rows of {cols}"
    return meanings.get(step, "")


def _step_labels(step: str, queries, keys) -> Labels | None:
    if step in ("S_raw", "S", "A"):
        return (queries, keys)
    if step == "K_T":
        return (None, keys)
    if step in ("K", "V", "B_K", "B_V"):
        return (keys, None)
    return (queries, None)


def _step_expectation(step, name, steps, slip_steps, tol, queries, keys) -> Expectation:
    if step not in steps:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(steps)}")
    expected = steps[step]
    return Expectation(
        expected, tol,
        formula=_STEP_FORMULAS.get(step, ""),
        shape_help=_step_meaning(step, expected),
        labels=_step_labels(step, queries, keys),
        slip_values=[(slip, values.get(step)) for slip, values in slip_steps],
        hints=[_rows_sum_to_one(name or step)] if step == "A" else (),
        what=("your answer, a list of rows of numbers" if expected.ndim == 2 and expected.shape[0] > 1
              else "your answer, a list of numbers"),
    )


def _check_step(answer, step, name, steps, slip_steps, tol, queries, keys):
    __tracebackhide__ = True
    e = _step_expectation(step, name, steps, slip_steps, tol, queries, keys)
    compare(answer, name or step, e.expected, tol=e.tol, formula=e.formula, shape_help=e.shape_help,
            labels=e.labels, slip_values=e.slip_values, hints=e.hints, what=e.what)


def expect_head_step(step: str, X, head, *, name: str, tokens=None, tol: float = HAND_TOLERANCE) -> Expectation:
    """One step of a single head on ``X`` (``"Q"``, ``"B_K"``, ``"S_raw"``, ``"A"``, ``"O"``, ...).

    The expected value is that step of :func:`qkv.trace_head` on ``X`` with ``head``'s
    parameters; every slip of :data:`qkv_exercises.slips.HEAD_SLIPS` is a candidate.
    ``tokens`` label the rows (and, for scores and weights, the columns).
    """
    head = head if isinstance(head, Head) else Head(*head)
    slip_steps = [(slip, slips.head_steps(X, head, slip)) for slip in slips.HEAD_SLIPS]
    return _step_expectation(step, name, slips.head_steps(X, head), slip_steps, tol, tokens, tokens)


def expect_attention_step(step: str, Q, K, V, *, name: str, queries=None, keys=None,
                          tol: float = HAND_TOLERANCE) -> Expectation:
    """One step (``"S_raw"``, ``"S"``, ``"A"``, ``"O"``, ``"K_T"``) of attention of ``Q`` over ``K``, ``V``.

    ``A`` and ``O`` are what :func:`qkv.scaled_dot_product_attention` returns;
    ``queries`` and ``keys`` label the rows and columns.
    """
    slip_steps = [(slip, slips.attention_steps(Q, K, V, slip)) for slip in slips.ATTENTION_SLIPS]
    return _step_expectation(step, name, slips.attention_steps(Q, K, V), slip_steps, tol, queries, keys)


def expect_multi_head_step(step: str, X, heads, W_O, b_O=None, *, name: str, tokens=None,
                           tol: float = HAND_TOLERANCE) -> Expectation:
    """``"O_concat"`` or ``"Y"`` of :func:`qkv.multi_head_attention` on ``X``."""
    slip_steps = [(slip, slips.multi_head_steps(X, heads, W_O, b_O, slip)) for slip in slips.MULTI_HEAD_SLIPS]
    return _step_expectation(step, name, slips.multi_head_steps(X, heads, W_O, b_O), slip_steps, tol, tokens, tokens)


def head_step(answer, step: str, X, head, *, name: str | None = None, tokens=None, tol: float = HAND_TOLERANCE):
    """Check one step of a single head on ``X`` (``"Q"``, ``"B_K"``, ``"S_raw"``, ``"A"``, ``"O"``, ...).

    The expected value is that step of :func:`qkv.trace_head` on ``X`` with ``head``'s
    parameters. ``tokens`` label the rows (and, for scores and weights, the columns).
    """
    __tracebackhide__ = True
    head = head if isinstance(head, Head) else Head(*head)
    steps = slips.head_steps(X, head)
    slip_steps = [(slip, slips.head_steps(X, head, slip)) for slip in slips.HEAD_SLIPS]
    _check_step(answer, step, name, steps, slip_steps, tol, tokens, tokens)


def attention_step(
    answer, step: str, Q, K, V, *, name: str | None = None, queries=None, keys=None, tol: float = HAND_TOLERANCE
):
    """Check one step (``"S_raw"``, ``"S"``, ``"A"``, ``"O"``, ``"K_T"``) of attention of ``Q`` over ``K``, ``V``.

    ``A`` and ``O`` are what :func:`qkv.scaled_dot_product_attention` returns.
    ``queries`` and ``keys`` label the rows and columns.
    """
    __tracebackhide__ = True
    steps = slips.attention_steps(Q, K, V)
    slip_steps = [(slip, slips.attention_steps(Q, K, V, slip)) for slip in slips.ATTENTION_SLIPS]
    _check_step(answer, step, name, steps, slip_steps, tol, queries, keys)


def multi_head_step(
    answer, step: str, X, heads, W_O, b_O=None, *, name: str | None = None, tokens=None, tol: float = HAND_TOLERANCE
):
    """Check ``"O_concat"`` or ``"Y"`` of :func:`qkv.multi_head_attention` on ``X``."""
    __tracebackhide__ = True
    steps = slips.multi_head_steps(X, heads, W_O, b_O)
    slip_steps = [(slip, slips.multi_head_steps(X, heads, W_O, b_O, slip)) for slip in slips.MULTI_HEAD_SLIPS]
    _check_step(answer, step, name, steps, slip_steps, tol, tokens, tokens)


def softmax_values(answer, scores, *, name: str, tol: float = HAND_TOLERANCE):
    """Check the softmax of one row of ``scores``, computed by hand; expected: :func:`qkv.softmax`."""
    __tracebackhide__ = True
    expected = softmax(scores)
    compare(
        answer, name, expected, tol=tol, formula=f"softmax({_short(scores)})",
        shape_help="one weight per score",
        slip_values=[(slip, slips.softmax_with_slip(scores, slip)) for slip in slips.SOFTMAX_SLIPS],
        hints=[_rows_sum_to_one(name)], what="your answer, a list of weights",
    )


def weighted_sum(answer, weights, V, *, name: str, tokens=None, tol: float = HAND_TOLERANCE):
    """Check ``A V`` for given attention weights ``A`` ``(n, n)`` and values ``V`` ``(n, d_v)``.

    The expected value is :func:`qkv.linear` of the weights with ``V``: each row of the
    output is a weighted sum of the value rows.
    """
    __tracebackhide__ = True
    expected = linear(weights, V)  # (n, d_v) = A V
    compare(
        answer, name, expected, tol=tol, formula="A V",
        shape_help=_step_meaning("O", expected), labels=(tokens, None),
        hints=[_weighted_sum_hint], what="your answer, a list of rows of numbers",
    )


# --------------------------------------------------------------------------- why sqrt(d_k)


def expected_dot_product_variance(d_k: int, var_q: float = 1.0, var_k: float = 1.0) -> float:
    """Var(q . k) for q, k with ``d_k`` independent zero-mean components of variances ``var_q``, ``var_k``.

    Each product q_i k_i has variance var_q var_k, and the variances of independent
    terms add up: Var(q . k) = d_k var_q var_k.
    """
    if isinstance(d_k, bool) or not isinstance(d_k, (int, np.integer)) or d_k < 1:
        raise ValueError(f"d_k must be a positive integer, got {d_k!r}")
    return float(d_k * var_q * var_k)


def dot_product_variance(answer, d_k: int, *, name: str, scaled: bool = False, tol: float = HAND_TOLERANCE):
    """Check Var(q . k) (or, with ``scaled``, Var(q . k / sqrt(d_k))) for unit-variance components."""
    __tracebackhide__ = True
    raw = expected_dot_product_variance(d_k)
    if scaled:
        expected = raw / d_k  # dividing by sqrt(d_k) divides the variance by d_k
        slip_values = [(slips.SCALING_NOT_APPLIED, raw), (slips.SCALED_BY_SQRT_ONCE, raw / np.sqrt(d_k))]
        formula = f"Var(q.k / sqrt(d_k)) for d_k = {d_k}"
    else:
        expected = raw
        slip_values = [(slips.STANDARD_DEVIATION_GIVEN, np.sqrt(raw))]
        formula = f"Var(q.k) for d_k = {d_k}"
    compare(answer, name, expected, tol=tol, formula=formula, slip_values=slip_values, what="your answer, one number")


def dot_product_typical_size(answer, d_k: int, *, name: str, tol: float = HAND_TOLERANCE):
    """Check the standard deviation of q . k (its typical size) for unit-variance components."""
    __tracebackhide__ = True
    variance = expected_dot_product_variance(d_k)
    compare(answer, name, np.sqrt(variance), tol=tol, formula=f"sqrt(Var(q.k)) for d_k = {d_k}",
            slip_values=[(slips.VARIANCE_GIVEN, variance)], what="your answer, one number")


def _call(func: Callable, call: str, *args, **kwargs):
    """Run a student's function; a crash becomes a message naming the call."""
    __tracebackhide__ = True
    if not callable(func):
        _fail(f"{call.split('(')[0]} is {type(func).__name__}, not a function: run the cell that defines it.")
    try:
        result = func(*args, **kwargs)
    except (AnswerMismatch, QkvNotAvailable):
        raise
    except NotImplementedError as err:
        _fail(f"{call} raised NotImplementedError: write the body of the function "
              "(replace the line raise NotImplementedError()).", cause=err)
    except Exception as err:  # the student's code failed: say where, keep their traceback
        detail = f": {err}" if str(err) else ""
        _fail(f"{call} raised {type(err).__name__}{detail}", cause=err)
    if result is None:
        _fail(f"{call} returned None: write the body of the function and return its result.")
    return result


def simulated_variance(func, d_k: int, *, scaled: bool = False, seed: int = 0,
                       n_samples: int = SIMULATION_SAMPLES, name: str = "sample_dot_products"):
    """Check a simulation of q . k by the variance of its samples, graded by range.

    ``func(d_k, n_samples, rng)`` must return ``n_samples`` dot products of vectors with
    ``d_k`` independent standard normal components. The variance of the samples (of
    the samples divided by sqrt(d_k) with ``scaled``) must lie within
    :data:`SIMULATION_TOLERANCE` of :func:`expected_dot_product_variance` (divided by d_k).
    """
    __tracebackhide__ = True
    call = f"{name}({d_k}, {n_samples}, rng)"
    samples = _call(func, call, d_k, n_samples, np.random.default_rng(seed))
    samples = as_numbers(samples, call, what="an array of sample dot products")
    if samples.shape != (n_samples,):
        _fail(f"{call} has shape {shape_str(samples.shape)} but should have shape ({n_samples},): "
              "one dot product q.k per sample.")
    exact = expected_dot_product_variance(d_k)
    if scaled:
        samples, exact, what = samples / np.sqrt(d_k), exact / d_k, f"Var(q.k / sqrt(d_k)) for d_k = {d_k}"
    else:
        what = f"Var(q.k) for d_k = {d_k}"
    variance = float(np.var(samples))
    low, high = exact * (1 - SIMULATION_TOLERANCE), exact * (1 + SIMULATION_TOLERANCE)
    if low <= variance <= high:
        _passed(f"the simulated {what} is {variance:.3f}, within {SIMULATION_TOLERANCE:.0%} of {format_number(exact)}.")
        return
    message = (f"the simulated {what} is {variance:.4g}, expected between {format_number(low)} and "
               f"{format_number(high)} ({format_number(exact)} within {SIMULATION_TOLERANCE:.0%}).")
    if abs(variance - np.sqrt(exact)) <= SIMULATION_TOLERANCE * np.sqrt(exact):
        message += "\nThat is near the square root of the expected variance: is each component's variance 1?"
    elif not scaled and abs(variance - 1) <= SIMULATION_TOLERANCE:
        message += "\nThat is the variance after dividing by sqrt(d_k): return the raw dot products q.k."
    elif abs(variance) < 1e-12:
        message += "\nAll your samples are equal: draw new random q and k for every sample."
    _fail(message)


def simulation_draws_samples(func, *, seed: int = 0, name: str = "sample_dot_products"):
    """Check that a simulation's samples really are random: other rngs give other samples, mean near 0."""
    __tracebackhide__ = True
    first = as_numbers(_call(func, f"{name}(16, 200, rng)", 16, 200, np.random.default_rng(seed)), name)
    second = as_numbers(_call(func, f"{name}(16, 200, rng)", 16, 200, np.random.default_rng(seed + 1)), name)
    if first.shape != (200,) or second.shape != (200,):
        _fail(f"{name}(16, 200, rng) should return 200 samples, got shape {shape_str(first.shape)}.")
    if np.allclose(first, second):
        _fail(f"{name} returns the same samples for two different rngs: draw q and k with the rng it is given.")
    big = as_numbers(_call(func, f"{name}(16, 20000, rng)", 16, 20_000, np.random.default_rng(seed + 2)), name)
    if abs(big.mean()) > 0.25:  # the mean of 20000 samples of variance 16 has standard deviation ~0.03
        _fail(f"the mean of {name}(16, 20000, rng) is {big.mean():.3f}, expected near 0: q and k have mean 0.")
    _passed(f"{name} draws new random samples from the rng it is given.")


# --------------------------------------------------------------------------- reading attention maps


def most_attended_token(answer, X, heads, *, head: int, query: str, tokens, name: str):
    """Check which token ``query`` attends to most in head number ``head`` (1-based).

    The expected token is the largest weight in ``query``'s row of the weights that
    :func:`qkv.self_attention` returns for that head.
    """
    __tracebackhide__ = True
    tokens = list(tokens)
    heads = [h if isinstance(h, Head) else Head(*h) for h in heads]
    _, weights = self_attention(X, *heads[head - 1])  # (n, n)
    row = tokens.index(query)
    expected = tokens[int(np.argmax(weights[row]))]
    choices = ", ".join(tokens)
    if answer is None or answer is Ellipsis:
        _fail(f"{name} is {answer!r}: replace it with one of the tokens {choices}, in quotes.")
    if not isinstance(answer, str):
        _fail(f"{name} is {answer!r} ({type(answer).__name__}): write the token itself in quotes, one of {choices}.")
    if answer.strip() not in tokens:
        _fail(f"{name} is {answer!r}, which is not one of the tokens {choices}.")
    answer = answer.strip()
    if answer == expected:
        _passed(f"{name} is correct: in head {head}, {query} attends most to {expected} "
                f"(weight {weights[row].max():.2f}).")
        return
    message = (f"{name} is {answer}, expected {expected}: in head {head}, the largest weight in {query}'s row "
               f"is on {expected} ({weights[row].max():.2f}); on {answer} it is "
               f"{weights[row, tokens.index(answer)]:.2f}.")
    if answer == tokens[int(np.argmax(weights[:, row]))]:
        message += f"\nLikely slip: {slips.READ_COLUMN_NOT_ROW.advice}"
    elif answer == tokens[int(np.argmin(weights[row]))]:
        message += f"\nLikely slip: {slips.LEAST_NOT_MOST.advice}"
    _fail(message)


def patch_attention(image, patch_size: int) -> np.ndarray:
    """Self-attention weights ``(N, N)`` of an image's patches, with each patch's pixels as Q, K and V."""
    tokens = patchify(image, patch_size)  # (N, P*P*C)
    _, weights = scaled_dot_product_attention(tokens, tokens, tokens)  # (N, N)
    return weights


def _query_patch_weights(image, patch_size: int, query_patch: int):
    """One query patch's weights ``(N,)`` over the image's patches, and the patch grid's ``(rows, cols)``."""
    image = np.asarray(image)
    grid_shape = (image.shape[0] // patch_size, image.shape[1] // patch_size)
    return patch_attention(image, patch_size)[query_patch], grid_shape


def patch_grid(answer, image, patch_size: int, query_patch: int, *, name: str, tol: float = HAND_TOLERANCE):
    """Check one patch's attention weights laid out on the patch grid (:func:`qkv.to_patch_grid`)."""
    __tracebackhide__ = True
    weights, grid_shape = _query_patch_weights(image, patch_size, query_patch)  # (N,), (rows, cols)
    expected = to_patch_grid(weights, grid_shape)  # (rows, cols)
    rows, cols = grid_shape
    by_columns = slips.patch_grid_with_slip(weights, grid_shape, slips.GRID_FILLED_BY_COLUMNS)
    compare(
        answer, name, expected, tol=tol, formula=f"patch {query_patch}'s weights on the {rows}x{cols} grid",
        shape_help=f"one row per row of patches ({rows}), one column per column of patches ({cols})",
        slip_values=[(slips.GRID_FILLED_BY_COLUMNS, by_columns)],
        what=f"your answer, a list of {rows} rows of {cols} weights",
    )


def most_attended_patch(answer, image, patch_size: int, query_patch: int, *, name: str):
    """Check the grid position ``(row, column)`` of the patch that ``query_patch`` attends to most."""
    __tracebackhide__ = True
    weights, grid_shape = _query_patch_weights(image, patch_size, query_patch)  # (N,), (rows, cols)
    best = int(np.argmax(weights))
    expected = np.array(divmod(best, grid_shape[1]), dtype=float)  # (row, column)
    slip_values = [(slips.ROW_AND_COLUMN_SWAPPED, expected[::-1]),
                   (slips.PATCH_NUMBER_GIVEN, np.array(float(best)))]
    compare(answer, name, expected, tol=HAND_TOLERANCE,
            formula=f"(row, column) of the largest of patch {query_patch}'s weights",
            shape_help="two numbers: (row, column)", slip_values=slip_values,
            what="your answer, the position (row, column) counting from 0")


# --------------------------------------------------------------------------- functions students write


def _check_output(result, call, expected, tol, slip_values=(), nonfinite_hint="", shape_help=""):
    __tracebackhide__ = True
    compare(result, call, expected, tol=tol, slip_values=slip_values, nonfinite_hint=nonfinite_hint,
            shape_help=shape_help, what="an array")


_OVERFLOW_HINT = ("Large scores overflow e^s: subtract each row's maximum from the scores before taking "
                  "the exponential (the softmax does not change).")


def softmax_function(func, scores, axis: int = -1, *, tol: float = CODE_TOLERANCE, name: str = "softmax"):
    """Check a student's ``softmax(x, axis)`` on ``scores`` against :func:`qkv.softmax`."""
    __tracebackhide__ = True
    scores = np.asarray(scores, dtype=float)
    call = f"{name}({_short(scores)}, axis={axis})"
    expected = softmax(scores, axis=axis)
    result = _call(func, call, scores.copy(), axis=axis)
    slip_values = [(slip, slips.softmax_with_slip(scores, slip, axis)) for slip in slips.SOFTMAX_SLIPS]
    if scores.ndim >= 2:
        other_axis = -2 if axis in (-1, scores.ndim - 1) else -1
        slip_values.append((slips.SOFTMAX_OVER_COLUMNS if other_axis == -2 else slips.WRONG_AXIS,
                            softmax(scores, axis=other_axis)))
    _check_output(result, call, expected, tol, slip_values, _OVERFLOW_HINT, "the shape of the scores")


def softmax_function_on_random_inputs(func, *, seed: int, tol: float = CODE_TOLERANCE, name: str = "softmax"):
    """Check ``softmax`` on random scores of several shapes, along several axes."""
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    cases = [((7,), -1), ((4, 5), -1), ((4, 5), 0), ((3, 4, 6), 1), ((2, 3, 5), -1)]
    for shape, axis in cases:
        scores = rng.normal(scale=4.0, size=shape)
        softmax_function(func, scores, axis, tol=tol, name=name)


def attention_function(func, Q, K, V, *, tol: float = CODE_TOLERANCE, name: str = "scaled_dot_product_attention"):
    """Check a student's ``scaled_dot_product_attention(Q, K, V)`` -> ``(output, weights)`` against qkv."""
    __tracebackhide__ = True
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    call = f"{name}(Q {shape_str(Q.shape)}, K {shape_str(K.shape)}, V {shape_str(V.shape)})"
    result = _call(func, call, Q.copy(), K.copy(), V.copy())
    if not isinstance(result, tuple) or len(result) != 2:
        kind = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        _fail(f"{call} returned {kind}; it must return a pair (output, weights): return output, weights")
    output, weights = result
    steps = slips.attention_steps(Q, K, V)
    slip_steps = [(slip, slips.attention_steps(Q, K, V, slip)) for slip in slips.ATTENTION_SLIPS]
    _check_output(weights, f"the weights of {call}", steps["A"], tol,
                  [(s, v.get("A")) for s, v in slip_steps], _OVERFLOW_HINT, _step_meaning("A", steps["A"]))
    _check_output(output, f"the output of {call}", steps["O"], tol,
                  [(s, v.get("O")) for s, v in slip_steps], _OVERFLOW_HINT, _step_meaning("O", steps["O"]))


def attention_function_on_random_inputs(func, *, seed: int, tol: float = CODE_TOLERANCE,
                                        name: str = "scaled_dot_product_attention"):
    """Check attention on random Q, K, V, including n_q != n_k (cross-attention) and d_v != d_k."""
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    for n_q, n_k, d_k, d_v in [(3, 3, 4, 4), (2, 5, 3, 6), (6, 4, 8, 2), (1, 7, 16, 3)]:
        Q, K, V = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k)), rng.normal(size=(n_k, d_v))
        attention_function(func, Q, K, V, tol=tol, name=name)


def split_heads_function(func, Z, num_heads: int, *, tol: float = CODE_TOLERANCE, name: str = "split_heads"):
    """Check a student's ``split_heads(Z, num_heads)`` ``(n, d_model) -> (h, n, d_k)`` against qkv."""
    __tracebackhide__ = True
    Z = np.asarray(Z, dtype=float)
    call = f"{name}(Z {shape_str(Z.shape)}, {num_heads})"
    result = _call(func, call, Z.copy(), num_heads)
    expected = split_heads(Z, num_heads)
    slip = slips.RESHAPED_WITHOUT_TRANSPOSE
    _check_output(result, call, expected, tol, [(slip, slips.split_heads_with_slip(Z, num_heads, slip))],
                  shape_help="(h, n, d_k): one block per head, one row per token in each")


def merge_heads_function(func, Z, *, tol: float = CODE_TOLERANCE, name: str = "merge_heads"):
    """Check a student's ``merge_heads(Z)`` ``(h, n, d_k) -> (n, h * d_k)`` against qkv."""
    __tracebackhide__ = True
    Z = np.asarray(Z, dtype=float)
    call = f"{name}(Z {shape_str(Z.shape)})"
    result = _call(func, call, Z.copy())
    expected = merge_heads(Z)
    slip = slips.RESHAPED_WITHOUT_TRANSPOSE
    _check_output(result, call, expected, tol, [(slip, slips.merge_heads_with_slip(Z, slip))],
                  shape_help="(n, h * d_k): one row per token, the heads' columns side by side")


def split_heads_function_on_random_inputs(func, *, seed: int, tol: float = CODE_TOLERANCE, name: str = "split_heads"):
    """Check ``split_heads`` on random ``(n, d_model)`` inputs with 1 to 8 heads."""
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    for n, h, d_k in _RANDOM_HEAD_SHAPES:
        split_heads_function(func, rng.normal(size=(n, h * d_k)), h, tol=tol, name=name)


def merge_heads_function_on_random_inputs(func, split, *, seed: int, tol: float = CODE_TOLERANCE,
                                          name: str = "merge_heads"):
    """Check ``merge_heads`` on random ``(h, n, d_k)`` inputs, and that it undoes ``split``."""
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    for n, h, d_k in _RANDOM_HEAD_SHAPES:
        merge_heads_function(func, rng.normal(size=(h, n, d_k)), tol=tol, name=name)
        Z = rng.normal(size=(n, h * d_k))
        call = f"{name}(split_heads(Z {shape_str(Z.shape)}, {h}))"
        back = _call(func, call, split_heads(Z, h))
        compare(back, call, Z, tol=tol, shape_help=f"{name} must undo split_heads: (n, d_model)", what="an array")


_RANDOM_HEAD_SHAPES = [(5, 2, 3), (4, 4, 2), (7, 3, 5), (1, 8, 4)]  # (n, h, d_k)


# --------------------------------------------------------------------------- the student's own code


class QkvNotAvailable(RuntimeError):
    """Raised by qkv's functions while :func:`qkv_switched_off` is active."""


_REFERENCE_MODULES = (attention, multihead, trace, vision)


@contextlib.contextmanager
def qkv_switched_off():
    """While active, qkv's public functions refuse to run when called from outside qkv.

    qkv itself and these checks (which compute the expected values with it) still work;
    a call from the student's code raises, which :func:`own_code` reports.
    """
    import qkv

    saved = []
    for module in (qkv, *_REFERENCE_MODULES):
        for key, value in list(vars(module).items()):
            if not key.startswith("_") and inspect.isfunction(value) and value.__module__.startswith("qkv"):
                saved.append((module, key, value))
                setattr(module, key, _refusing_outside_qkv(value, f"qkv.{key}"))
    try:
        yield
    finally:
        for module, key, value in saved:
            setattr(module, key, value)


def _refusing_outside_qkv(function, qualified_name: str):
    def guarded(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.partition(".")[0] in ("qkv", "qkv_exercises"):
            return function(*args, **kwargs)
        raise QkvNotAvailable(f"calls {qualified_name}")

    return guarded


def _is_qkv(obj) -> bool:
    if isinstance(obj, types.ModuleType):
        return obj.__name__ == "qkv" or obj.__name__.startswith("qkv.")
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module == "qkv" or module.startswith("qkv."))


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def qkv_references(func) -> list[str]:
    """The names through which ``func`` (or a function of the student's that it calls) reaches qkv."""
    found: list[str] = []
    seen: set[int] = set()

    def visit(f):
        if id(f) in seen or not hasattr(f, "__code__"):
            return
        seen.add(id(f))
        namespace = getattr(f, "__globals__", {})
        cells = [c.cell_contents for c in (f.__closure__ or ()) if _cell_filled(c)]
        for code in _code_objects(f.__code__):
            for word in code.co_names:
                if word == "qkv" or word.startswith("qkv."):
                    found.append(word)
                    continue
                target = namespace.get(word, getattr(builtins, word, None))
                if _is_qkv(target):
                    found.append(word)
                elif inspect.isfunction(target) and target.__module__ == f.__module__:
                    visit(target)
        for value in cells:
            if _is_qkv(value):
                found.append(getattr(value, "__name__", repr(value)))
            elif inspect.isfunction(value):
                visit(value)

    visit(func)
    return sorted(set(found))


def _cell_filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def own_code(func, name: str, *args, **kwargs):
    """Check that ``func`` computes its result itself, without qkv.

    ``func`` must refer to nothing from qkv (directly or through another function of the
    student's), and ``func(*args, **kwargs)`` must run and return a result while qkv's
    functions are switched off. Whether the result is right is for the other checks.
    """
    __tracebackhide__ = True
    if not callable(func):
        _fail(f"{name} is {type(func).__name__}, not a function: run the cell that defines it.")
    used = qkv_references(func)
    if used:
        _fail(f"{name} uses qkv ({', '.join(used)}): write the computation yourself with numpy; "
              "qkv is the reference your function is checked against.")
    call = f"{name}({', '.join([_short(a) for a in args] + [f'{k}={v!r}' for k, v in kwargs.items()])})"
    try:
        with qkv_switched_off():
            _call(func, call, *args, **kwargs)
    except QkvNotAvailable as err:
        _fail(f"{name} {err.args[0]}: write the computation yourself with numpy; "
              "qkv is the reference your function is checked against.")
    _passed(f"{name} does its own computation (it runs with qkv switched off).")
