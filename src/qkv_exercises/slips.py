"""What the typical slips in computing attention produce: qkv run with one slip.

When a student's answer is wrong, :mod:`qkv_exercises.checking` compares it with the value
each slip would give; if one matches, the message names that slip. Every function here
returns the steps of a computation as a dict (step name -> array), the same steps the
correct computation has, so that an answer for any step can be compared with every slip.
A slip that leaves a step unchanged, or that cannot produce it (the shapes do not fit),
leaves that step out.

This module holds :class:`Slip` and the slips that several problem sets share: those of
attention itself (sqrt(d_k), the softmax, K^T, the biases, the heads' reshapes). A slip that
only one problem set's checks recognise lives beside that set, in
``qkv_exercises/problem_sets/<name>_slips.py`` (for example
:mod:`qkv_exercises.problem_sets.ps7_masks_slips`). Imported by
:mod:`qkv_exercises.checking`, :mod:`qkv_exercises.expectations`, :mod:`qkv_exercises.functions`
and those files; imports only qkv.

Step names follow seed 000 and :meth:`qkv.HeadTrace.steps`: ``Q``, ``K``, ``V``,
``B_Q``, ``B_K``, ``B_V``, ``K_T``, ``S_raw``, ``S``, ``A``, ``O``, and for
several heads ``O_concat`` and ``Y``.
"""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qkv.attention import scaled_dot_product_attention, softmax
from qkv.multihead import Head
from qkv.trace import trace_head

from .language import _


@dataclass(frozen=True)
class Slip:
    """One typical mistake: a short ``key`` and, in English, the advice a student reads when it is found.

    ``make translations`` extracts the advice of every ``Slip(...)`` as a message; :attr:`advice` gives
    it in the current language (:mod:`qkv_exercises.language`).
    """

    key: str
    english: str

    @property
    def advice(self) -> str:
        """The advice in the current language."""
        return _(self.english)


# Units of memory, shared by the problem sets that count bytes (10: the weights; 13: the cache).
BITS_NOT_BYTES = Slip(
    "bits_not_bytes",
    "that counts bits: a float32 takes 32 bits, which is 4 bytes (8 bits to a byte).",
)
GB_NOT_GIB = Slip(
    "gb_not_gib",
    "a GiB is 2^30 = 1,073,741,824 bytes, not 10^9.",
)
MIB_NOT_GIB = Slip(
    "mib_not_gib",
    "that is in MiB (2^20 bytes); a GiB is 2^30 bytes, 1024 MiB.",
)

NO_SQRT_DK = Slip(
    "no_sqrt_dk",
    "did you divide the scores by sqrt(d_k)? Your answer matches the computation without the scaling "
    "(S = Q K^T / sqrt(d_k), then softmax).",
)

DIVIDED_BY_D_K = Slip(
    "divided_by_d_k",
    "did you divide the scores by d_k instead of sqrt(d_k)? The scale is the square root of d_k.",
)

SOFTMAX_OVER_COLUMNS = Slip(
    "softmax_over_columns",
    "did you take the softmax over the columns? It runs along each ROW: one row per query, "
    "and each row of weights sums to 1.",
)

BIAS_DROPPED = Slip(
    "bias_dropped",
    "did you forget the bias? Add the bias row b to every row of X W (that is the matrix B).",
)

BIAS_NOT_BROADCAST = Slip(
    "bias_not_broadcast",
    "you wrote the bias row once; B repeats it on every row, one copy per token.",
)

K_NOT_TRANSPOSED = Slip(
    "k_not_transposed",
    "did you use K instead of K^T? The scores are Q K^T: entry [i, j] is query i dotted with key j.",
)

SCORES_TRANSPOSED = Slip(
    "scores_transposed",
    "your rows and columns are swapped (K Q^T instead of Q K^T): row i must hold query i's scores "
    "against every key.",
)

WEIGHTS_APPLIED_TO_K = Slip(
    "weights_applied_to_k",
    "did you apply the weights to K instead of V? The output is A V: the weights mix the values.",
)

W_O_TRANSPOSED = Slip(
    "w_o_transposed",
    "did you multiply by W_O^T instead of W_O? Y = O_concat W_O + b_O.",
)

NO_EXPONENTIAL = Slip(
    "no_exponential",
    "did you forget the exponential? Softmax divides e^(s_j) by the sum of e^(s_m), not s_j by the sum of s_m.",
)

NOT_NORMALISED = Slip(
    "not_normalised",
    "did you forget to divide by the sum? Softmax divides each e^(s_j) by the sum of all of them, "
    "so the weights add up to 1.",
)

RESHAPED_WITHOUT_TRANSPOSE = Slip(
    "reshaped_without_transpose",
    "did you reshape straight to the new shape? Reshape (n, d_model) to (n, h, d_k) first, then swap "
    "the first two axes, so that head i gets columns i*d_k to (i+1)*d_k - 1 of every token.",
)

MERGED_WITHOUT_TRANSPOSE = Slip(
    "merged_without_transpose",
    "did you reshape (h, n, d_k) straight to (n, h * d_k)? That mixes the tokens up. Swap the first two "
    "axes first, to (n, h, d_k), then reshape, so that row i holds token i's row of head 1, then of "
    "head 2, ... side by side.",
)

MISSING_KEEPDIMS = Slip(
    "missing_keepdims",
    "did you leave out keepdims=True? Without it, e.sum(axis=-1) has one entry per row, and dividing by "
    "it divides column j by row j's sum. Write e.sum(axis=axis, keepdims=True) (the same for the max).",
)

OUTPUT_AND_WEIGHTS_SWAPPED = Slip(
    "output_and_weights_swapped",
    "you returned (weights, output); the function returns the output first: return output, weights.",
)

STANDARD_DEVIATION_GIVEN = Slip(
    "standard_deviation_given",
    "that is the standard deviation (the typical size), sqrt of the variance; the question asks for "
    "the variance.",
)

READ_COLUMN_NOT_ROW = Slip(
    "read_column_not_row",
    "you read the token's column (how much every token attends TO it); what a token attends to is its ROW.",
)

READ_ROW_NOT_COLUMN = Slip(
    "read_row_not_column",
    "you read the token's row (what it attends to); how much each token attends TO it is its COLUMN.",
)

ATTENTION_SLIPS = (
    NO_SQRT_DK,
    DIVIDED_BY_D_K,
    SOFTMAX_OVER_COLUMNS,
    NO_EXPONENTIAL,
    MISSING_KEEPDIMS,
    K_NOT_TRANSPOSED,
    SCORES_TRANSPOSED,
    WEIGHTS_APPLIED_TO_K,
)

HEAD_SLIPS = (BIAS_DROPPED, BIAS_NOT_BROADCAST) + ATTENTION_SLIPS

SOFTMAX_SLIPS = (NO_EXPONENTIAL, NOT_NORMALISED, SOFTMAX_OVER_COLUMNS, MISSING_KEEPDIMS)


_HEAD_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a head's arrays are read-only


def _content_key(value):
    """A hashable key for arrays, heads and the other inputs of the functions below, by their content."""
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, value.tobytes())
    if isinstance(value, Head):  # keyed once: the checks ask for the same heads' steps thousands of times
        key = _HEAD_KEYS.get(value)
        if key is None:
            key = _HEAD_KEYS[value] = tuple(map(_content_key, value))
        return key
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, *map(_content_key, value))
    if isinstance(value, (int, float, str, type(None), Slip)):
        return value
    return _content_key(np.asarray(value, dtype=float))


def remembered(function):
    """Remember the last results of ``function`` by the content of its arguments: a check computes the
    same steps (with every slip) for several answers of the same head. Callers must not change them."""
    cache: OrderedDict = OrderedDict()

    @functools.wraps(function)
    def remembering(*args, **kwargs):
        key = _content_key((args, tuple(sorted(kwargs.items()))))
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        result = cache[key] = function(*args, **kwargs)
        if len(cache) > 256:
            cache.popitem(last=False)
        return result

    return remembering


def _matmul_if_fits(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b``, or None when the inner sizes differ."""
    return a @ b if a.shape[-1] == b.shape[-2] else None


@remembered
def attention_steps(Q, K, V, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``K_T``, ``S_raw``, ``S``, ``A`` and ``O`` of scaled dot-product attention, with ``slip`` made.

    ``Q`` ``(n_q, d_k)``, ``K`` ``(n_k, d_k)``, ``V`` ``(n_k, d_v)``. Without a slip,
    ``A`` and ``O`` are exactly what :func:`qkv.scaled_dot_product_attention` returns.
    """
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    root = float(np.sqrt(Q.shape[-1]))
    K_T = K.T  # (d_k, n_k)
    S_raw = Q @ K_T  # (n_q, n_k)
    if slip is None:
        O, A = scaled_dot_product_attention(Q, K, V)
        return {"K_T": K_T, "S_raw": S_raw, "S": S_raw / root, "A": A, "O": O}
    if slip == NO_SQRT_DK:
        O, A = scaled_dot_product_attention(Q * root, K, V)  # (Q sqrt(d_k)) K^T / sqrt(d_k) = Q K^T
        return {"S": S_raw, "A": A, "O": O}
    if slip == DIVIDED_BY_D_K:
        O, A = scaled_dot_product_attention(Q / root, K, V)  # (Q / sqrt(d_k)) K^T / sqrt(d_k) = Q K^T / d_k
        return {"S": S_raw / root**2, "A": A, "O": O}
    if slip == SOFTMAX_OVER_COLUMNS:
        A = softmax(S_raw / root, axis=-2)  # (n_q, n_k), columns sum to 1
        return {"A": A, "O": A @ V}
    if slip == K_NOT_TRANSPOSED:
        S_raw_slip = _matmul_if_fits(Q, K)  # Q K when d_k == n_k
        if S_raw_slip is None:
            S_raw_slip = _matmul_if_fits(Q.T, K)  # (d_k, d_k): Q transposed to make the shapes fit
        if S_raw_slip is None:
            return {"K_T": K}
        steps = {"K_T": K, "S_raw": S_raw_slip, "S": S_raw_slip / root, "A": softmax(S_raw_slip / root)}
        O = _matmul_if_fits(steps["A"], V)
        return steps if O is None else {**steps, "O": O}
    if slip == SCORES_TRANSPOSED:
        S_raw_slip = K @ Q.T  # (n_k, n_q)
        steps = {"S_raw": S_raw_slip, "S": S_raw_slip / root, "A": softmax(S_raw_slip / root)}
        O = _matmul_if_fits(steps["A"], V)
        return steps if O is None else {**steps, "O": O}
    if slip == WEIGHTS_APPLIED_TO_K:
        O, _ = scaled_dot_product_attention(Q, K, K)  # A K
        return {"O": O}
    if slip in (NO_EXPONENTIAL, MISSING_KEEPDIMS):
        A = softmax_with_slip(S_raw / root, slip)  # S divided by its row sums, or e^S by the wrong sums
        return {} if A is None else {"A": A, "O": A @ V}
    return {}


def head_steps(X, head: Head, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """Every step of one head on ``X`` ``(n, d_model)``, with ``slip`` made (see :func:`qkv.trace_head`)."""
    head = head if isinstance(head, Head) else Head(*head)
    return _head_steps(np.asarray(X, dtype=float), head, slip)


@remembered
def _head_steps(X, head: Head, slip: Slip | None) -> dict[str, np.ndarray]:
    if slip == BIAS_DROPPED:
        trace = trace_head(X, head.W_Q, head.W_K, head.W_V)  # every bias left out
        return dict(trace.steps())
    trace = _trace(X, head)
    if slip is None:
        return dict(trace.steps())
    if slip == BIAS_NOT_BROADCAST:
        return {f"B_{role}": getattr(trace, role).B[:1] for role in "QKV"}  # (1, d): one copy only
    return attention_steps(trace.Q.Z, trace.K.Z, trace.V.Z, slip)


@remembered
def _trace(X, head: Head):
    return trace_head(X, *head)


def softmax_with_slip(scores, slip: Slip, axis: int = -1) -> np.ndarray | None:
    """The softmax of ``scores`` along ``axis`` computed with ``slip``, or None if it does not apply."""
    s = np.asarray(scores, dtype=float)
    if slip == NO_EXPONENTIAL:
        total = s.sum(axis=axis, keepdims=True)
        return None if np.any(total == 0) else s / total
    if slip == NOT_NORMALISED:
        with np.errstate(over="ignore"):
            return np.exp(s)
    if slip == SOFTMAX_OVER_COLUMNS:
        return softmax(s, axis=-2) if s.ndim >= 2 else None
    if slip == MISSING_KEEPDIMS:
        return without_keepdims(s, axis, subtract_max=False)
    return None


def softmax_slip_values(scores, axis: int = -1) -> list[tuple[Slip, np.ndarray]]:
    """Every slip of :data:`SOFTMAX_SLIPS` with the values it gives for ``scores`` along ``axis``.

    A missing ``keepdims`` gives one value with the maximum subtracted first (also
    without keepdims) and one without subtracting it.
    """
    found = [(slip, softmax_with_slip(scores, slip, axis)) for slip in SOFTMAX_SLIPS]
    found.append((MISSING_KEEPDIMS, without_keepdims(scores, axis, subtract_max=True)))
    return [(slip, value) for slip, value in found if value is not None]


def without_keepdims(scores, axis: int, *, subtract_max: bool) -> np.ndarray | None:
    """Softmax written as ``e / e.sum(axis)`` (and ``e = exp(s - s.max(axis))`` with ``subtract_max``),
    without keepdims.

    numpy then lines the sums up with the LAST axis: for axis 0 of a matrix that is
    right, for the rows of a square matrix it divides column j by row j's sum, and
    otherwise the shapes do not broadcast (the student's code raises; None here).
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim < 2:
        return None
    with np.errstate(all="ignore"):
        try:
            e = np.exp(s - s.max(axis=axis)) if subtract_max else np.exp(s)
            result = e / e.sum(axis=axis)
        except ValueError:
            return None
    return result if result.shape == s.shape and np.all(np.isfinite(result)) else None


def split_heads_with_slip(Z, num_heads: int, slip: Slip) -> np.ndarray | None:
    """``split_heads`` done with ``slip``: :data:`RESHAPED_WITHOUT_TRANSPOSE` reshapes (n, d_model) to (h, n, d_k)."""
    Z = np.asarray(Z, dtype=float)
    if slip == RESHAPED_WITHOUT_TRANSPOSE:
        n, d_model = Z.shape
        return Z.reshape(num_heads, n, d_model // num_heads)
    return None


def merge_heads_with_slip(Z, slip: Slip) -> np.ndarray | None:
    """``merge_heads`` done with ``slip``: :data:`MERGED_WITHOUT_TRANSPOSE` reshapes (h, n, d_k) to (n, h * d_k)."""
    Z = np.asarray(Z, dtype=float)
    if slip == MERGED_WITHOUT_TRANSPOSE:
        h, n, d_k = Z.shape
        return Z.reshape(n, h * d_k)
    return None


def merged(slip_values) -> Callable[[], list[tuple[Slip, np.ndarray | None]]]:
    """``(slip, value)`` pairs with slips that give the same value made into one, whose advice names each
    (with sigma = 2, leaving out the 1/2 and not squaring sigma both divide by 4).

    ``slip_values`` is the pairs, or a function of no argument that returns them. The result is a
    function of no argument, as :class:`~qkv_exercises.checking.Expectation` takes its slips: the pairs
    are computed and merged only when it is called (a check calls it only for a wrong answer).
    """
    return lambda: _merge(slip_values() if callable(slip_values) else slip_values)


def each_part(slipped: Callable[[], list], part) -> Callable[[], list[tuple[Slip, np.ndarray | None]]]:
    """A function of no argument giving ``(slip, one part of its value)`` for each ``(slip, value)`` of
    ``slipped()``: ``value.get(part)`` of a dict of steps, ``value[part]`` of a tuple of results, None
    when the slip gives no value. ``slipped`` is called only when the pairs are asked for; a judge that
    compares several parts of one result shares it between them with ``functools.cache``."""

    def pairs():
        return [(slip, None if value is None else value.get(part) if isinstance(value, dict) else value[part])
                for slip, value in slipped()]

    return pairs


def _merge(slip_values) -> list[tuple[Slip, np.ndarray | None]]:
    groups: list[tuple[list[Slip], np.ndarray | None]] = []
    for slip, value in slip_values:
        for slips_, other in groups:
            if value is not None and other is not None and _same(value, other):
                slips_.append(slip)
                break
        else:
            groups.append(([slip], value))
    return [(group[0] if len(group) == 1 else Slip("+".join(s.key for s in group),
                                                    " Or: ".join(s.advice for s in group)), value)
            for group, value in groups]


def _same(a, b) -> bool:
    """Whether two slips' values are one value: the same shape, every entry within 1e-9 (equal infinities
    too; NaN is never the same)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all((a == b) | (np.abs(a - b) <= 1e-9)))
