"""What the typical slips in computing attention produce: qkv run with one slip.

When a student's answer is wrong, :mod:`qkv_exercises.checking` compares it with the value
each slip below would give; if one matches, the message names that slip. Every
function here returns the steps of a computation as a dict (step name -> array),
the same steps the correct computation has, so that an answer for any step can
be compared with every slip. A slip that leaves a step unchanged, or that cannot
produce it (the shapes do not fit), leaves that step out.

Step names follow seed 000 and :meth:`qkv.HeadTrace.steps`: ``Q``, ``K``, ``V``,
``B_Q``, ``B_K``, ``B_V``, ``K_T``, ``S_raw``, ``S``, ``A``, ``O``, and for
several heads ``O_concat`` and ``Y``.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from qkv.attention import linear, scaled_dot_product_attention, softmax
from qkv.block import layer_norm
from qkv.blockwise import online_softmax
from qkv.lookup import gaussian_as_dot_product, gaussian_kernel_weights, squared_distances
from qkv.multihead import Head, merge_heads, split_heads
from qkv.trace import trace_head


@dataclass(frozen=True)
class Slip:
    """One typical mistake: a short ``key`` and the ``advice`` a student reads when it is found."""

    key: str
    advice: str


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
WEIGHTS_READ_BY_COLUMNS = Slip(
    "weights_read_by_columns",
    "did you use the columns of A? Row i of the output mixes the value rows with the weights in ROW i of A: "
    "A[i, 0] V[0] + A[i, 1] V[1] + ...",
)
WEIGHTS_APPLIED_TO_K = Slip(
    "weights_applied_to_k",
    "did you apply the weights to K instead of V? The output is A V: the weights mix the values.",
)
HEADS_IN_WRONG_ORDER = Slip(
    "heads_in_wrong_order",
    "did you concatenate the heads in the wrong order? Head 1's output comes first (the left columns), "
    "then head 2's.",
)
HEADS_STACKED_AS_ROWS = Slip(
    "heads_stacked_as_rows",
    "did you put the heads' outputs one below the other? Concat places them side by side: "
    "one row per token, the heads' columns next to each other.",
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
ONE_BASED_POSITION = Slip(
    "one_based_position",
    "you counted from 1; positions count from 0 (the top row is row 0, the left column is column 0).",
)
VARIANCE_NOT_SQUARED = Slip(
    "variance_not_squared",
    "each product q_i k_i has variance Var(q_i) Var(k_i) = sigma^2 * sigma^2 (the variances multiply), "
    "and the d_k products add up.",
)
GRID_FILLED_BY_COLUMNS = Slip(
    "grid_filled_by_columns",
    "did you fill the grid column by column? Patches are numbered row by row: left to right, "
    "then top to bottom.",
)
STANDARD_DEVIATION_GIVEN = Slip(
    "standard_deviation_given",
    "that is the standard deviation (the typical size), sqrt of the variance; the question asks for "
    "the variance.",
)
SCALING_NOT_APPLIED = Slip(
    "scaling_not_applied",
    "dividing q.k by sqrt(d_k) divides its variance by (sqrt(d_k))^2 = d_k.",
)
SCALED_BY_SQRT_ONCE = Slip(
    "variance_divided_by_sqrt_dk",
    "dividing q.k by c divides its variance by c^2: here by (sqrt(d_k))^2 = d_k, not by sqrt(d_k).",
)
VARIANCE_GIVEN = Slip(
    "variance_given",
    "that is the variance; the typical size is the standard deviation, its square root.",
)
WRONG_AXIS = Slip(
    "wrong_axis",
    "did you normalise along the wrong axis? Use the axis argument you are given.",
)
ROW_AND_COLUMN_SWAPPED = Slip(
    "row_and_column_swapped",
    "you gave (column, row); a grid position is written (row, column), row first, counting from 0.",
)
PATCH_NUMBER_GIVEN = Slip(
    "patch_number_given",
    "that is the patch's number; give its position on the grid as (row, column), counting from 0.",
)
READ_COLUMN_NOT_ROW = Slip(
    "read_column_not_row",
    "you read the token's column (how much every token attends TO it); what a token attends to is its ROW.",
)
READ_ROW_NOT_COLUMN = Slip(
    "read_row_not_column",
    "you read the token's row (what it attends to); how much each token attends TO it is its COLUMN.",
)
MOST_NOT_LEAST = Slip(
    "most_not_least",
    "that is the token with the largest weight; the question asks for the smallest.",
)
LEAST_NOT_MOST = Slip(
    "least_not_most",
    "that is the token with the smallest weight; the question asks for the largest.",
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
MULTI_HEAD_SLIPS = (HEADS_IN_WRONG_ORDER, HEADS_STACKED_AS_ROWS, W_O_TRANSPOSED) + HEAD_SLIPS
SOFTMAX_SLIPS = (NO_EXPONENTIAL, NOT_NORMALISED, SOFTMAX_OVER_COLUMNS, MISSING_KEEPDIMS)


def _content_key(value):
    """A hashable key for arrays, heads and the other inputs of the functions below, by their content."""
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, value.tobytes())
    if isinstance(value, Head):
        return tuple(_content_key(v) for v in value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, *(_content_key(v) for v in value))
    if isinstance(value, (int, float, str, type(None), Slip)):
        return value
    return _content_key(np.asarray(value, dtype=float))


def _remembered(function):
    """Remember the last results of ``function`` by the content of its arguments: a check computes the
    same steps (with every slip) for several answers of the same head. Callers must not change them."""
    cache: OrderedDict = OrderedDict()

    @functools.wraps(function)
    def remembered(*args, **kwargs):
        key = _content_key((args, tuple(sorted(kwargs.items()))))
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        result = cache[key] = function(*args, **kwargs)
        if len(cache) > 256:
            cache.popitem(last=False)
        return result

    return remembered


def _matmul_if_fits(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b``, or None when the inner sizes differ."""
    return a @ b if a.shape[-1] == b.shape[-2] else None


@_remembered
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


@_remembered
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


@_remembered
def _trace(X, head: Head):
    return trace_head(X, *head)


@_remembered
def multi_head_steps(X, heads, W_O, b_O=None, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``O_concat`` and ``Y`` of multi-head attention on ``X``, with ``slip`` made.

    Without a slip they are what :func:`qkv.trace_multi_head` gives: each head's output
    (:func:`qkv.trace_head`), side by side, projected by ``W_O``. A slip within one head
    (for example :data:`NO_SQRT_DK`) is made in every head.
    """
    heads = tuple(h if isinstance(h, Head) else Head(*h) for h in heads)
    within_head = slip not in (None, HEADS_IN_WRONG_ORDER, HEADS_STACKED_AS_ROWS, W_O_TRANSPOSED)
    outputs = [head_steps(X, head, slip if within_head else None).get("O") for head in heads]  # each (n, d_v)
    if any(O is None for O in outputs):
        return {}
    if slip == HEADS_STACKED_AS_ROWS:
        return {"O_concat": np.concatenate(outputs, axis=0)}  # (h * n, d_v)
    O_concat = np.concatenate(outputs[::-1] if slip == HEADS_IN_WRONG_ORDER else outputs, axis=-1)  # (n, h * d_v)
    if slip == W_O_TRANSPOSED:
        W_O = np.asarray(W_O, dtype=float)
        return {"Y": linear(O_concat, W_O.T, b_O)} if W_O.shape[0] == W_O.shape[1] else {}
    return {"O_concat": O_concat, "Y": linear(O_concat, W_O, b_O)}


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


def patch_grid_with_slip(weights, grid_shape: tuple[int, int], slip: Slip) -> np.ndarray | None:
    """One query's weights over the patches laid on the grid with ``slip``."""
    rows, cols = grid_shape
    if slip == GRID_FILLED_BY_COLUMNS:
        return np.asarray(weights, dtype=float).reshape(cols, rows).T  # patch k at (k % rows, k // rows)
    return None


# --------------------------------------------------------------------------- online softmax, what attention costs

RESCALE_FORGOTTEN = Slip(
    "rescale_forgotten",
    "did you rescale the running sum? When a block brings a larger maximum, every term e^(s - m_old) already "
    "in the sum must become e^(s - m_new): multiply the sum so far by e^(m_old - m_new) before adding the "
    "block's terms.",
)
RESCALE_EXPONENT_FLIPPED = Slip(
    "rescale_exponent_flipped",
    "the rescaling factor is e^(m_old - m_new), at most 1 (the old terms shrink when the maximum grows); "
    "you used e^(m_new - m_old).",
)
RESCALE_NOT_EXPONENTIATED = Slip(
    "rescale_not_exponentiated",
    "the rescaling factor is e to the power m_old - m_new, not the difference itself.",
)
TERMS_FROM_BLOCK_MAX = Slip(
    "terms_from_block_max",
    "did you measure the block's exponentials from the block's own maximum? Every term of the running sum is "
    "e^(s_j - m), with m the RUNNING maximum: the largest score so far, which may lie in an earlier block.",
)
BLOCK_MAX_AS_RUNNING_MAX = Slip(
    "block_max_as_running_max",
    "the running maximum is the largest score so far, max(m_old, the block's maximum), not the block's "
    "maximum alone.",
)
MAX_NOT_SUBTRACTED = Slip(
    "max_not_subtracted",
    "did you add up e^(s_j) without subtracting the maximum? The running sum is the sum of e^(s_j - m), "
    "measured from the running maximum m.",
)
WEIGHTS_NOT_FINAL_SUM = Slip(
    "weights_not_final_sum",
    "divide by the running sum after the LAST block: only it holds the terms of every score.",
)
WEIGHTS_WITH_STALE_MAX = Slip(
    "weights_with_stale_max",
    "every weight is e^(s_j - m) / l with the FINAL m and l, after the last block; an earlier block's own "
    "running maximum is out of date once a later block brings a larger score.",
)
N_NOT_SQUARED = Slip(
    "n_not_squared",
    "each of the n queries has a score for each of the n keys: n x n = n^2 numbers per head.",
)
EVERY_HEAD_COUNTED = Slip(
    "every_head_counted",
    "that counts the scores of every head; the question asks for one head.",
)
HEADS_FORGOTTEN = Slip(
    "heads_forgotten",
    "each head has its own n x n weights: multiply by the number of heads h.",
)
BYTES_FORGOTTEN = Slip(
    "bytes_forgotten",
    "that is how many numbers there are; each takes 2 bytes in float16, 4 in float32 and 8 in float64.",
)
BITS_NOT_BYTES = Slip(
    "bits_not_bytes",
    "that counts bits: a float32 takes 32 bits, which is 4 bytes (8 bits to a byte).",
)
WRONG_BYTES_PER_NUMBER = Slip(
    "wrong_bytes_per_number",
    "check the bytes per number: float16 takes 2 bytes, float32 4 and float64 8.",
)
GB_NOT_GIB = Slip(
    "gb_not_gib",
    "a GiB is 2^30 = 1,073,741,824 bytes, not 10^9.",
)
MIB_NOT_GIB = Slip(
    "mib_not_gib",
    "that is in MiB (2^20 bytes); a GiB is 2^30 bytes, 1024 MiB.",
)
GROWTH_LINEAR = Slip(
    "growth_linear",
    "the weights are n x n: with r times the tokens there are r times as many rows AND r times as many "
    "columns.",
)


def fold_with_slip(m: float, l: float, block, slip: Slip | None = None) -> tuple[float, float, float]:
    """``(m', l', rescale)``: one block of scores folded into the running maximum ``m`` and sum ``l``,
    with ``slip`` made (without one, exactly :func:`qkv.online_softmax_update`)."""
    block = np.asarray(block, dtype=float)
    block_max = float(block.max())
    new_m = max(m, block_max)
    first = np.isneginf(m)  # nothing read yet: nothing to rescale
    with np.errstate(all="ignore"):
        factor = 0.0 if first else float(np.exp(m - new_m))
        terms_from = new_m
        if slip == RESCALE_FORGOTTEN:
            factor = 0.0 if first else 1.0
        elif slip == RESCALE_EXPONENT_FLIPPED:
            factor = 0.0 if first else float(np.exp(new_m - m))
        elif slip == RESCALE_NOT_EXPONENTIATED:
            factor = 0.0 if first else m - new_m
        elif slip == TERMS_FROM_BLOCK_MAX:
            terms_from = block_max
        elif slip == BLOCK_MAX_AS_RUNNING_MAX:
            new_m = terms_from = block_max
            factor = 0.0 if first else float(np.exp(m - block_max))
        elif slip == MAX_NOT_SUBTRACTED:
            factor, terms_from = (0.0 if first else 1.0), 0.0
        return new_m, l * factor + float(np.exp(block - terms_from).sum()), factor


ONLINE_SLIPS = (RESCALE_FORGOTTEN, RESCALE_EXPONENT_FLIPPED, RESCALE_NOT_EXPONENTIATED, TERMS_FROM_BLOCK_MAX,
                BLOCK_MAX_AS_RUNNING_MAX, MAX_NOT_SUBTRACTED, WEIGHTS_NOT_FINAL_SUM, WEIGHTS_WITH_STALE_MAX)


def online_steps(blocks, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """The online softmax of ``blocks`` with ``slip`` made: ``running`` ``(T, 2)``, the ``[m, l]`` after
    each block; ``rescale`` ``(T,)``, the factor the sum was multiplied by at each block; ``weights``.

    Without a slip every number is what :func:`qkv.online_softmax` computes.
    """
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    if slip is None:
        weights, steps = online_softmax(blocks)
        return {"running": np.array([[s.running_max, s.running_sum] for s in steps]),
                "rescale": np.array([s.rescale for s in steps]), "weights": weights}
    m, l, running, rescale, maxima = -np.inf, 0.0, [], [], []
    for block in blocks:
        m, l, factor = fold_with_slip(m, l, block, slip if slip in ONLINE_SLIPS[:6] else None)
        running.append([m, l])
        rescale.append(factor)
        maxima.append(np.full(len(block), m))
    scores = np.concatenate(blocks)
    with np.errstate(all="ignore"):
        if slip == WEIGHTS_NOT_FINAL_SUM:
            weights = np.exp(scores - m) / running[0][1] if len(blocks) > 1 else None
        elif slip == WEIGHTS_WITH_STALE_MAX:
            weights = np.exp(scores - np.concatenate(maxima)) / l
        elif slip == MAX_NOT_SUBTRACTED:
            weights = np.exp(scores) / l
        else:
            weights = np.exp(scores - m) / l
    found = {"running": np.array(running), "rescale": np.array(rescale)}
    return found if weights is None else {**found, "weights": weights}


# --------------------------------------------------------------------------- attention as soft lookup

MINUS_SIGN_FORGOTTEN = Slip(
    "minus_sign_forgotten",
    "did you forget the minus sign? The exponent is -|q - k|^2 / (2 sigma^2): the nearer the key, the larger "
    "its weight.",
)
HALF_FORGOTTEN = Slip(
    "half_forgotten",
    "did you forget the 1/2? The exponent is -|q - k|^2 / (2 sigma^2), with 2 sigma^2 below the line.",
)
SIGMA_NOT_SQUARED = Slip(
    "sigma_not_squared",
    "divide by 2 sigma^2 (sigma squared), not by 2 sigma.",
)
DISTANCE_NOT_SQUARED = Slip(
    "distance_not_squared",
    "the kernel uses the SQUARED distance |q - k|^2, the sum of the squared differences, with no square root.",
)
DIFFERENCES_NOT_SQUARED = Slip(
    "differences_not_squared",
    "square each coordinate's difference, then add them up: |q - k|^2 = (q_1 - k_1)^2 + (q_2 - k_2)^2.",
)
DOT_PRODUCT_WEIGHTS = Slip(
    "dot_product_weights",
    "those are the scaled dot-product weights, softmax(q . k / sqrt(d)); the Gaussian kernel scores each key "
    "by minus its squared distance from the query.",
)
PLAIN_MEAN = Slip(
    "plain_mean",
    "that is the plain mean of the values, every weight 1/3; the prediction weighs each value by its key's "
    "kernel weight.",
)
NO_SIGMA_SCALE = Slip(
    "no_sigma_scale",
    "did you divide by sigma^2? The extended score is (q . k - |k|^2 / 2) / sigma^2.",
)
KEY_TERM_SIGN = Slip(
    "key_term_sign",
    "the key's extra coordinate is -|k|^2 / 2, with a minus sign: the extended score is "
    "(q . k - |k|^2 / 2) / sigma^2.",
)
EXPONENTS_NOT_EXTENDED = Slip(
    "exponents_not_extended",
    "those are the kernel's exponents -|q - k|^2 / (2 sigma^2); the extended score leaves out the query's own "
    "term -|q|^2 / (2 sigma^2), the same for every key (so the softmax is the same).",
)

KERNEL_SLIPS = (MINUS_SIGN_FORGOTTEN, HALF_FORGOTTEN, SIGMA_NOT_SQUARED, DISTANCE_NOT_SQUARED,
                DIFFERENCES_NOT_SQUARED, DOT_PRODUCT_WEIGHTS, NOT_NORMALISED, SOFTMAX_OVER_COLUMNS, PLAIN_MEAN,
                NO_SIGMA_SCALE, KEY_TERM_SIGN, EXPONENTS_NOT_EXTENDED)


def merged(slip_values) -> list[tuple[Slip, np.ndarray | None]]:
    """``(slip, value)`` pairs with slips that give the same value made into one, whose advice names each
    (with sigma = 2, leaving out the 1/2 and not squaring sigma both divide by 4)."""
    groups: list[tuple[list[Slip], np.ndarray | None]] = []
    for slip, value in slip_values:
        for slips_, other in groups:
            if (value is not None and other is not None and np.shape(value) == np.shape(other)
                    and np.allclose(value, other, rtol=0, atol=1e-9)):
                slips_.append(slip)
                break
        else:
            groups.append(([slip], value))
    return [(group[0] if len(group) == 1 else Slip("+".join(s.key for s in group),
                                                    " Or: ".join(s.advice for s in group)), value)
            for group, value in groups]


@_remembered
def kernel_steps(Q, K, V, sigma: float, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``distances``, ``exponents``, ``weights``, ``prediction`` (``A V``) and ``extended_scores`` of a
    Gaussian kernel of width ``sigma`` over ``K`` ``(n_k, d)`` for ``Q`` ``(n_q, d)``, with ``slip`` made.

    Without a slip the weights are :func:`qkv.gaussian_kernel_weights`, the distances
    :func:`qkv.squared_distances`, and the extended scores the scaled dot products of
    :func:`qkv.gaussian_as_dot_product`'s queries and keys.
    """
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    sigma = float(sigma)
    if slip is None:
        weights = gaussian_kernel_weights(Q, K, sigma)  # (n_q, n_k)
        distances = squared_distances(Q, K)
        Q_tilde, K_tilde = gaussian_as_dot_product(Q, K, sigma)  # (n_q, d + 1), (n_k, d + 1)
        return {"distances": distances, "exponents": -distances / (2 * sigma**2), "weights": weights,
                "prediction": weights @ V, "extended_scores": Q_tilde @ K_tilde.T / np.sqrt(Q.shape[-1] + 1)}
    if slip == PLAIN_MEAN:
        return {"prediction": np.tile(V.mean(axis=0), (len(Q), 1))}
    differences = Q[:, None, :] - K[None, :, :]  # (n_q, n_k, d)
    distances = {DISTANCE_NOT_SQUARED: np.sqrt((differences**2).sum(axis=-1)),
                 DIFFERENCES_NOT_SQUARED: np.abs(differences).sum(axis=-1)}.get(slip, (differences**2).sum(axis=-1))
    scale = {HALF_FORGOTTEN: sigma**2, SIGMA_NOT_SQUARED: 2 * sigma}.get(slip, 2 * sigma**2)
    exponents = (distances if slip == MINUS_SIGN_FORGOTTEN else -distances) / scale  # (n_q, n_k)
    dot, half_square = Q @ K.T, 0.5 * (K**2).sum(axis=-1)  # (n_q, n_k), (n_k,)
    extended = {NO_SIGMA_SCALE: dot - half_square, KEY_TERM_SIGN: (dot + half_square) / sigma**2,
                HALF_FORGOTTEN: (dot - 2 * half_square) / sigma**2, EXPONENTS_NOT_EXTENDED: exponents}
    if slip in (NO_SIGMA_SCALE, KEY_TERM_SIGN, EXPONENTS_NOT_EXTENDED):
        return {"extended_scores": extended[slip]}
    with np.errstate(all="ignore"):
        if slip == DOT_PRODUCT_WEIGHTS:
            weights = softmax(dot / np.sqrt(Q.shape[-1]), axis=-1)
        elif slip == NOT_NORMALISED:
            weights = np.exp(exponents)
        elif slip == SOFTMAX_OVER_COLUMNS:
            weights = softmax(exponents, axis=-2)  # (with one query: every weight 1)
        else:
            weights = softmax(exponents, axis=-1)
    steps = {"distances": distances, "exponents": exponents, "weights": weights, "prediction": weights @ V}
    if slip in extended:
        steps["extended_scores"] = extended[slip]
    return steps
# --------------------------------------------------------------------------- masks and cross-attention (problem set 7)

MASK_ZERO_NOT_NEG_INF = Slip(
    "mask_zero_not_neg_inf",
    "did you set the blocked scores to 0? A blocked score becomes -inf: e^0 = 1 still hands the blocked key a "
    "share of the weight, e^(-inf) = 0 hands it none.",
)
MASK_AFTER_SOFTMAX = Slip(
    "mask_after_softmax",
    "did you mask after the softmax? Zeroing the blocked weights afterwards leaves the row adding up to less "
    "than 1. Mask the scores (blocked ones to -inf) before the softmax, so the allowed keys share all the weight.",
)
MASK_WRONG_TRIANGLE = Slip(
    "mask_wrong_triangle",
    "you masked the wrong triangle: the causal mask lets token i attend to tokens 0 .. i (on and below the "
    "diagonal) and blocks the later ones (above it).",
)
MASK_NOT_APPLIED = Slip(
    "mask_not_applied",
    "your answer is the unmasked one: under the mask, the blocked keys get weight 0 and the allowed keys share "
    "all of it.",
)
MASK_INVERTED = Slip(
    "mask_inverted",
    "True means MAY attend (the convention of qkv and of PyTorch's scaled_dot_product_attention); your mask is "
    "True where the key is blocked.",
)
DIAGONAL_BLOCKED = Slip(
    "diagonal_blocked",
    "a token may attend to itself: the causal mask keeps the diagonal (j <= i), and blocks only later tokens.",
)
PADDING_QUERY_AXIS_MISSING = Slip(
    "padding_query_axis_missing",
    "a padding mask has shape (batch, 1, n): the middle axis of size 1 stands for the queries, so that the "
    "mask broadcasts over the scores (batch, n, n) and blocks the same keys for every query.",
)
PADDING_OFF_BY_ONE = Slip(
    "padding_off_by_one",
    "a sentence of length l holds the real tokens 0 .. l - 1: key j is real when j < l, and [PAD] starts at key l.",
)
CROSS_SOURCES_SWAPPED = Slip(
    "cross_sources_swapped",
    "the queries come from the decoder (the English words) and the keys and values from the encoder "
    "(外送 晚到 補償): one row per English word, one column per Chinese token.",
)
DECODER_KEYS = Slip(
    "decoder_keys",
    "did you take the keys and values from the decoder too? That is the decoder's self-attention; "
    "cross-attention reads the encoder's tokens: one column per Chinese token.",
)

# --------------------------------------------------------------------------- order and position (problem set 8)

NOT_REORDERED = Slip(
    "not_reordered",
    "the outputs move with their tokens: row i of the reordered output is the output of the token that now "
    "stands at place i.",
)
REORDERED_BY_INVERSE = Slip(
    "reordered_by_inverse",
    "you sent row i to place order[i]; the reordered sentence has token order[i] at place i, so its row i is "
    "row order[i] of the original: P = I[order], and O' = P O.",
)
SIN_COS_SWAPPED = Slip(
    "sin_cos_swapped",
    "the even dimensions 2i take the sine and the odd dimensions 2i + 1 the cosine: PE = [sin, cos, sin, cos, ...].",
)
EXPONENT_I_NOT_2I = Slip(
    "exponent_i_not_2i",
    "the frequency of pair i is w_i = 10000^(-2i/d_model), with 2i (the pair's even dimension) in the exponent, "
    "not i.",
)
EXPONENT_SIGN = Slip(
    "exponent_sign",
    "the exponent is negative: w_i = 10000^(-2i/d_model) = 1 / 10000^(2i/d_model), so the frequencies get smaller.",
)
DEGREES_NOT_RADIANS = Slip(
    "degrees_not_radians",
    "your sines and cosines are of angles in degrees; the angles p w_i are in radians (set your calculator "
    "to radians; np.sin and np.cos use radians).",
)
SINES_THEN_COSINES = Slip(
    "sines_then_cosines",
    "sines and cosines alternate, pair by pair: [sin(p w_0), cos(p w_0), sin(p w_1), cos(p w_1), ...], not every "
    "sine first.",
)
POSITIONS_FROM_ONE = Slip(
    "positions_from_one",
    "positions count from 0: the first token is at position 0, whose encoding is [0, 1, 0, 1, ...].",
)
FIRST_PAIR_ONLY = Slip(
    "first_pair_only",
    "every pair of dimensions adds its own cos((q - p) w_i): sum over all d_model / 2 pairs, not only the first.",
)
SINE_OF_OFFSET = Slip(
    "sine_of_offset",
    "each pair gives sin(p w) sin(q w) + cos(p w) cos(q w) = cos((q - p) w): a cosine of the offset, not a sine.",
)

MASK_SLIPS = (MASK_ZERO_NOT_NEG_INF, MASK_AFTER_SOFTMAX, MASK_WRONG_TRIANGLE, MASK_NOT_APPLIED)


def masked_softmax_steps(scores, mask, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``E`` (the exponentials of the masked scores, 0 where blocked) and ``A`` (the weights) of
    ``scores`` ``(..., n_q, n_k)`` under the boolean ``mask`` (True = may attend), with ``slip`` made.

    Without a slip, ``A`` is :func:`qkv.softmax` of the scores with the blocked ones at -inf.
    :data:`MASK_WRONG_TRIANGLE` transposes a square mask; a slip that cannot give a step
    (a row left with no key, a mask that is not square) leaves it out.
    """
    S = np.asarray(scores, dtype=float)
    M = np.broadcast_to(np.asarray(mask, dtype=bool), S.shape)
    with np.errstate(over="ignore"):  # e^S of large scores: E is asked of hand-sized scores only
        return _masked_softmax_steps(S, M, slip)


def _masked_softmax_steps(S: np.ndarray, M: np.ndarray, slip: Slip | None) -> dict[str, np.ndarray]:
    if slip is None:
        return {"E": np.where(M, np.exp(S), 0.0), "A": softmax(np.where(M, S, -np.inf))}
    if slip == MASK_ZERO_NOT_NEG_INF:
        zeroed = np.where(M, S, 0.0)
        return {"E": np.exp(zeroed), "A": softmax(zeroed)}
    if slip == MASK_AFTER_SOFTMAX:
        return {"A": softmax(S) * M}
    if slip in (MASK_WRONG_TRIANGLE, MASK_INVERTED):
        other = M.swapaxes(-1, -2) if slip == MASK_WRONG_TRIANGLE else ~M
        if other.shape != S.shape or not other.any(axis=-1).all():
            return {}
        return {"E": np.where(other, np.exp(S), 0.0), "A": softmax(np.where(other, S, -np.inf))}
    if slip == MASK_NOT_APPLIED:
        return {"E": np.exp(S), "A": softmax(S)}
    return {}


def cross_attention_steps(X_q, X_kv, head: Head, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``Q``, ``S_raw``, ``S``, ``A`` and ``O`` of cross-attention (queries from ``X_q``, keys and
    values from ``X_kv``), with ``slip`` made: one of :data:`ATTENTION_SLIPS`, or
    :data:`CROSS_SOURCES_SWAPPED` (queries from ``X_kv``, keys and values from ``X_q``) or
    :data:`DECODER_KEYS` (keys and values from ``X_q`` too)."""
    head = head if isinstance(head, Head) else Head(*head)
    X_q, X_kv = np.asarray(X_q, dtype=float), np.asarray(X_kv, dtype=float)
    if slip == CROSS_SOURCES_SWAPPED:
        X_q, X_kv = X_kv, X_q
    elif slip == DECODER_KEYS:
        X_kv = X_q
    Q = linear(X_q, head.W_Q, head.b_Q)  # (n_q, d_k)
    K = linear(X_kv, head.W_K, head.b_K)  # (n_k, d_k)
    V = linear(X_kv, head.W_V, head.b_V)  # (n_k, d_v)
    within = slip if slip in ATTENTION_SLIPS else None
    steps = attention_steps(Q, K, V, within)
    return {"Q": Q, **steps} if slip is None or slip in (CROSS_SOURCES_SWAPPED, DECODER_KEYS) else steps


def reordered(values, order, slip: Slip | None = None) -> np.ndarray:
    """The rows of ``values`` moved with their tokens, ``P values`` (row i <- row order[i]), made with
    ``slip``. The permutation matrix itself is ``reordered(I, order)``."""
    values, order = np.asarray(values, dtype=float), np.asarray(order)
    if slip == NOT_REORDERED:
        return values
    if slip == REORDERED_BY_INVERSE:
        order = np.argsort(order)
    return values[order]


def encoding_with_slip(positions, d_model: int, slip: Slip | None = None) -> np.ndarray:
    """The sinusoidal encodings ``(n, d_model)`` of ``positions`` computed with ``slip`` (None: right)."""
    positions = np.asarray(positions, dtype=float)
    i = np.arange(d_model // 2)
    exponent = {EXPONENT_I_NOT_2I: i / d_model, EXPONENT_SIGN: -2 * i / d_model}.get(slip, 2 * i / d_model)
    omega = 10000.0 ** (-exponent)  # (d_model/2,)
    if slip == POSITIONS_FROM_ONE:
        positions = positions + 1
    angles = positions[:, None] * omega[None, :]  # (n, d_model/2)
    if slip == DEGREES_NOT_RADIANS:
        angles = np.radians(angles)
    first, second = np.sin(angles), np.cos(angles)
    if slip == SIN_COS_SWAPPED:
        first, second = second, first
    if slip == SINES_THEN_COSINES:
        return np.concatenate([first, second], axis=1)
    encoding = np.empty((len(positions), d_model))
    encoding[:, 0::2], encoding[:, 1::2] = first, second
    return encoding



# --------------------------------------------------------------------------- the block around attention (ps9)

RESIDUAL_NOT_ADDED = Slip(
    "residual_not_added",
    "the residual sum adds the token's own vector to what attention brings, entry by entry: r = x + a.",
)
SUM_NOT_MEAN = Slip(
    "sum_not_mean",
    "that is the sum of the entries; the mean divides it by their number, d = 4.",
)
VARIANCE_WITHOUT_MEAN = Slip(
    "variance_without_mean",
    "the variance is the mean of the squared DEVIATIONS (r_c - mean)^2: subtract the mean before squaring.",
)
VARIANCE_OVER_D_MINUS_1 = Slip(
    "variance_over_d_minus_1",
    "layer norm divides the sum of squared deviations by d, not by d - 1 (np.var(r) is right, "
    "np.var(r, ddof=1) is not).",
)
DIVIDED_BY_VARIANCE = Slip(
    "divided_by_variance",
    "divide the deviations by the standard deviation, sqrt(variance + eps), not by the variance itself.",
)
MEAN_NOT_SUBTRACTED = Slip(
    "mean_not_subtracted",
    "subtract the mean first: (r_c - mean) / sqrt(variance + eps).",
)
GAMMA_BETA_LEFT_OUT = Slip(
    "gamma_beta_left_out",
    "that is the normalised row itself; the layer norm then scales it by gamma and shifts it by beta, "
    "feature by feature: gamma_c * n_c + beta_c.",
)
GAMMA_BETA_SWAPPED = Slip(
    "gamma_beta_swapped",
    "gamma scales and beta shifts: gamma * n + beta, not beta * n + gamma.",
)
SHIFTED_BEFORE_SCALING = Slip(
    "shifted_before_scaling",
    "scale first, then shift: gamma * n + beta, not gamma * (n + beta).",
)
NORMALISED_OVER_TOKENS = Slip(
    "normalised_over_tokens",
    "did you normalise over the tokens (down each column, axis 0)? Layer norm takes the mean and variance "
    "of each token's own features: along the last axis, with keepdims=True.",
)
EPS_OUTSIDE_ROOT = Slip(
    "eps_outside_root",
    "eps goes under the square root: divide by sqrt(variance + eps), not by sqrt(variance) + eps.",
)
EPS_LEFT_OUT = Slip(
    "eps_left_out",
    "did you leave out eps? Divide by sqrt(variance + eps): a row of equal entries has variance 0, and "
    "eps keeps the division finite.",
)
EPS_NOT_PASSED = Slip(
    "eps_not_passed",
    "use the eps the function is given (its argument eps), not a number of your own.",
)
STATISTICS_WITHOUT_KEEPDIMS = Slip(
    "statistics_without_keepdims",
    "did you leave out keepdims=True? X.mean(axis=-1) has one entry per row; with keepdims=True it keeps "
    "its axis, shape (..., n, 1), and X - mean subtracts each row's own mean (the same for the variance).",
)
VARIANCE_FROM_SQUARES = Slip(
    "variance_from_squares",
    "mean(x**2) - mean(x)**2 loses every digit when the entries are large (two huge, nearly equal "
    "numbers are subtracted): compute the deviations x - mean first, then average their squares.",
)

BLOCK_ROW_SLIPS = (RESIDUAL_NOT_ADDED, SUM_NOT_MEAN, VARIANCE_WITHOUT_MEAN, VARIANCE_OVER_D_MINUS_1,
                   STANDARD_DEVIATION_GIVEN, DIVIDED_BY_VARIANCE, MEAN_NOT_SUBTRACTED, GAMMA_BETA_LEFT_OUT,
                   GAMMA_BETA_SWAPPED, SHIFTED_BEFORE_SCALING)
LAYER_NORM_SLIPS = (VARIANCE_OVER_D_MINUS_1, DIVIDED_BY_VARIANCE, MEAN_NOT_SUBTRACTED, GAMMA_BETA_LEFT_OUT,
                    GAMMA_BETA_SWAPPED, SHIFTED_BEFORE_SCALING, NORMALISED_OVER_TOKENS, EPS_OUTSIDE_ROOT,
                    EPS_LEFT_OUT, EPS_NOT_PASSED, VARIANCE_FROM_SQUARES)


def block_row_steps(x, attended, gamma, beta, eps, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``r`` (the residual sum), its ``mean`` and ``variance``, the ``normalised`` row and the ``scaled`` one
    (gamma and beta applied), with ``slip`` made; the steps after a slipped one follow from it.

    Without a slip, ``normalised`` and ``scaled`` are :func:`qkv.layer_norm` of the residual sum, with
    gamma = 1, beta = 0 and with the given gamma and beta.
    """
    x, attended, gamma, beta = (np.asarray(v, dtype=float) for v in (x, attended, gamma, beta))
    r = attended if slip == RESIDUAL_NOT_ADDED else x + attended  # (d_model,)
    steps = {"r": r}
    steps["mean"] = np.array(r.sum() if slip == SUM_NOT_MEAN else r.mean())
    deviations = r - steps["mean"]
    if slip == VARIANCE_WITHOUT_MEAN:
        variance = (r ** 2).mean()
    elif slip == VARIANCE_OVER_D_MINUS_1:
        variance = (deviations ** 2).sum() / (len(r) - 1)
    else:
        variance = (deviations ** 2).mean()
    steps["variance"] = np.array(np.sqrt(variance) if slip == STANDARD_DEVIATION_GIVEN else variance)
    if slip == STANDARD_DEVIATION_GIVEN:
        return {"variance": steps["variance"]}  # what follows is computed from the right variance
    if slip is None:
        steps["normalised"] = layer_norm(r[None, :], np.ones(len(r)), np.zeros(len(r)), eps)[0]
        steps["scaled"] = layer_norm(r[None, :], gamma, beta, eps)[0]
        return steps
    steps["normalised"] = _normalised_with_slip(r, deviations, variance, eps, slip)
    steps["scaled"] = _scaled_with_slip(steps["normalised"], gamma, beta, slip)
    slipped_from = {RESIDUAL_NOT_ADDED: "r", SUM_NOT_MEAN: "mean", VARIANCE_WITHOUT_MEAN: "variance",
                    VARIANCE_OVER_D_MINUS_1: "variance", DIVIDED_BY_VARIANCE: "normalised",
                    MEAN_NOT_SUBTRACTED: "normalised"}.get(slip, "scaled")
    names = list(steps)
    return {name: steps[name] for name in names[names.index(slipped_from):]}


def _normalised_with_slip(r, deviations, variance, eps, slip):
    if slip == DIVIDED_BY_VARIANCE:
        return deviations / (variance + eps)
    if slip == MEAN_NOT_SUBTRACTED:
        return r / np.sqrt(variance + eps)
    return deviations / np.sqrt(variance + eps)


def _scaled_with_slip(normalised, gamma, beta, slip):
    if slip == GAMMA_BETA_LEFT_OUT:
        return normalised
    if slip == GAMMA_BETA_SWAPPED:
        return beta * normalised + gamma
    if slip == SHIFTED_BEFORE_SCALING:
        return gamma * (normalised + beta)
    return gamma * normalised + beta


def layer_norm_with_slip(X, gamma, beta, eps, slip: Slip) -> np.ndarray | None:
    """:func:`qkv.layer_norm` of ``X`` ``(..., n, d_model)`` computed with ``slip``, or None if it does not apply."""
    X, gamma, beta = (np.asarray(v, dtype=float) for v in (X, gamma, beta))
    if slip == NORMALISED_OVER_TOKENS:
        if X.ndim < 2 or X.shape[-2] < 2:
            return None
        mean = X.mean(axis=-2, keepdims=True)  # (..., 1, d_model): over the tokens
        variance = ((X - mean) ** 2).mean(axis=-2, keepdims=True)
        return gamma * (X - mean) / np.sqrt(variance + eps) + beta
    mean = X.mean(axis=-1, keepdims=True)  # (..., n, 1)
    deviations = X - mean
    with np.errstate(all="ignore"):
        if slip == VARIANCE_FROM_SQUARES:
            variance = (X ** 2).mean(axis=-1, keepdims=True) - mean ** 2
        elif slip == VARIANCE_OVER_D_MINUS_1:
            variance = (deviations ** 2).sum(axis=-1, keepdims=True) / (X.shape[-1] - 1)
        else:
            variance = (deviations ** 2).mean(axis=-1, keepdims=True)
        if slip == EPS_OUTSIDE_ROOT:
            normalised = deviations / (np.sqrt(variance) + eps)
        elif slip == EPS_LEFT_OUT:
            normalised = deviations / np.sqrt(variance)
        elif slip == EPS_NOT_PASSED:
            if eps == 1e-5:
                return None  # the default: a fixed 1e-5 gives the right answer
            normalised = deviations / np.sqrt(variance + 1e-5)
        else:
            normalised = _normalised_with_slip(X, deviations, variance, eps, slip)
        return _scaled_with_slip(normalised, gamma, beta, slip)


# --------------------------------------------------------------------------- a layer of a trained model (ps12)

HEAD_COUNTED_FROM_0 = Slip(
    "head_counted_from_0",
    "heads are numbered from 1 in the question and Python counts from 0: head k is weights[k - 1].",
)
DIVIDED_BY_SQRT_D_MODEL = Slip(
    "divided_by_sqrt_d_model",
    "divide the scores by sqrt(d_k), the width of ONE head (d_model / num_heads), not by sqrt(d_model).",
)

LAYER_ATTENTION_SLIPS = (NO_SQRT_DK, DIVIDED_BY_SQRT_D_MODEL, SOFTMAX_OVER_COLUMNS, RESHAPED_WITHOUT_TRANSPOSE,
                         MERGED_WITHOUT_TRANSPOSE, BIAS_DROPPED, W_O_TRANSPOSED)


def layer_attention_with_slip(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads,
                              slip: Slip) -> tuple[np.ndarray, np.ndarray] | None:
    """A layer's multi-head attention from its fused matrices (:func:`qkv.fused_multi_head_attention`)
    computed with ``slip``: ``(output, weights)``, or None if the slip does not apply."""
    X, W_Q, W_K, W_V, W_O = (np.asarray(v, dtype=float) for v in (X, W_Q, W_K, W_V, W_O))
    if slip == BIAS_DROPPED:
        b_Q = b_K = b_V = b_O = None
    if slip == W_O_TRANSPOSED:
        if W_O.shape[0] != W_O.shape[1]:
            return None
        W_O = W_O.T
    Q, K, V = linear(X, W_Q, b_Q), linear(X, W_K, b_K), linear(X, W_V, b_V)  # (n, h * d_k)
    if slip == RESHAPED_WITHOUT_TRANSPOSE:
        Q, K, V = (split_heads_with_slip(M, num_heads, slip) for M in (Q, K, V))  # (h, n, d_k), mixed up
    else:
        Q, K, V = (split_heads(M, num_heads) for M in (Q, K, V))  # (h, n, d_k)
    d_k = Q.shape[-1]
    scale = {NO_SQRT_DK: 1.0, DIVIDED_BY_SQRT_D_MODEL: np.sqrt(d_k * num_heads)}.get(slip, np.sqrt(d_k))
    scores = Q @ K.swapaxes(-1, -2) / scale  # (h, n, n)
    weights = softmax(scores, axis=-2 if slip == SOFTMAX_OVER_COLUMNS else -1)
    heads = weights @ V  # (h, n, d_v)
    concat = merge_heads_with_slip(heads, slip) if slip == MERGED_WITHOUT_TRANSPOSE else merge_heads(heads)
    return linear(concat, W_O, b_O), weights
