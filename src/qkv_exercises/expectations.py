"""What each hand-computed answer is checked against: expectations built from qkv, with their slips.

Each builder computes the expected value with qkv from the student's own givens, and
the values the typical slips of :mod:`qkv_exercises.slips` would give, and returns an
:class:`~qkv_exercises.checking.Expectation` for :func:`~qkv_exercises.checking.judge_value`.
The choice builders return a :class:`~qkv_exercises.checks.Choice`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qkv.attention import linear, scaled_dot_product_attention, softmax
from qkv.multihead import Head
from qkv.vision import patchify, to_patch_grid

from . import slips
from .checking import HAND_TOLERANCE, Expectation, Labels, describe_input, rows_sum_to_one
from .checks import Choice

# --------------------------------------------------------------------------- steps of attention

_STEP_FORMULAS = {
    "Q": "X W_Q + b_Q", "K": "X W_K + b_K", "V": "X W_V + b_V",
    "B_Q": "the bias row b_Q repeated on every row", "B_K": "the bias row b_K repeated on every row",
    "B_V": "the bias row b_V repeated on every row", "K_T": "K transposed",
    "S_raw": "Q K^T", "S": "Q K^T / sqrt(d_k)", "A": "softmax(S) by rows", "O": "A V",
    "O_concat": "Concat(head 1, head 2, ...)", "Y": "O_concat W_O + b_O",
}


def step_meaning(step: str, expected: np.ndarray) -> str:
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


def _step_expectation(step, name, steps, slip_steps, queries, keys, tol=HAND_TOLERANCE) -> Expectation:
    if step not in steps:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(steps)}")
    expected = steps[step]
    return Expectation(
        expected, tol,
        formula=_STEP_FORMULAS.get(step, ""),
        shape_help=step_meaning(step, expected),
        labels=_step_labels(step, queries, keys),
        slip_values=[(slip, values.get(step)) for slip, values in slip_steps],
        hints=[rows_sum_to_one(name, tol)] if step == "A" else (),
        what=("your answer, a list of rows of numbers" if expected.ndim == 2 and expected.shape[0] > 1
              else "your answer, a list of numbers"),
    )


def expect_head_step(step: str, X, head, *, name: str, tokens=None) -> Expectation:
    """One step of a single head on ``X`` (``"Q"``, ``"B_K"``, ``"S_raw"``, ``"A"``, ``"O"``, ...).

    The expected value is that step of :func:`qkv.trace_head` on ``X`` with ``head``'s
    parameters; every slip of :data:`qkv_exercises.slips.HEAD_SLIPS` is a candidate.
    ``tokens`` label the rows (and, for scores and weights, the columns).
    """
    head = head if isinstance(head, Head) else Head(*head)
    slip_steps = [(slip, slips.head_steps(X, head, slip)) for slip in slips.HEAD_SLIPS]
    return _step_expectation(step, name, slips.head_steps(X, head), slip_steps, tokens, tokens)


def expect_attention_step(step: str, Q, K, V, *, name: str, queries=None, keys=None) -> Expectation:
    """One step (``"S_raw"``, ``"S"``, ``"A"``, ``"O"``, ``"K_T"``) of attention of ``Q`` over ``K``, ``V``.

    ``A`` and ``O`` are what :func:`qkv.scaled_dot_product_attention` returns;
    ``queries`` and ``keys`` label the rows and columns.
    """
    slip_steps = [(slip, slips.attention_steps(Q, K, V, slip)) for slip in slips.ATTENTION_SLIPS]
    return _step_expectation(step, name, slips.attention_steps(Q, K, V), slip_steps, queries, keys)


def expect_multi_head_step(step: str, X, heads, W_O, b_O=None, *, name: str, tokens=None) -> Expectation:
    """``"O_concat"`` or ``"Y"`` of :func:`qkv.multi_head_attention` on ``X``."""
    slip_steps = [(slip, slips.multi_head_steps(X, heads, W_O, b_O, slip)) for slip in slips.MULTI_HEAD_SLIPS]
    return _step_expectation(step, name, slips.multi_head_steps(X, heads, W_O, b_O), slip_steps, tokens, tokens)


def expect_softmax(scores, *, name: str) -> Expectation:
    """The softmax of one row of ``scores``, computed by hand; expected: :func:`qkv.softmax`."""
    scores = np.asarray(scores, dtype=float)
    return Expectation(
        softmax(scores), HAND_TOLERANCE, formula=f"softmax({describe_input(scores)})",
        shape_help="one weight per score", slip_values=slips.softmax_slip_values(scores),
        hints=[rows_sum_to_one(name)], what="your answer, a list of weights",
    )


def expect_weighted_sum(weights, V, *, name: str, tokens=None) -> Expectation:
    """``A V`` for given attention weights ``A`` ``(n, n)`` and values ``V`` ``(n, d_v)``."""
    expected = linear(weights, V)  # (n, d_v) = A V
    return Expectation(
        expected, HAND_TOLERANCE, formula="A V", shape_help=step_meaning("O", expected), labels=(tokens, None),
        slip_values=[(slips.WEIGHTS_READ_BY_COLUMNS, linear(np.asarray(weights).T, V))],
        hints=[lambda value, labels: "Row i of A V is the weighted sum of the value rows: "
                                     "A[i, 0] V[0] + A[i, 1] V[1] + ..."],
        what="your answer, a list of rows of numbers",
    )


# --------------------------------------------------------------------------- why sqrt(d_k)


def dot_product_variance(d_k: int, variance: float = 1.0) -> float:
    """Var(q . k) for q, k with ``d_k`` independent zero-mean components, each of variance ``variance``.

    Each product q_i k_i has variance ``variance**2`` (the variances of independent
    factors multiply), and the variances of the d_k independent terms add up.
    """
    if isinstance(d_k, bool) or not isinstance(d_k, (int, np.integer)) or d_k < 1:
        raise ValueError(f"d_k must be a positive integer, got {d_k!r}")
    return float(d_k * variance * variance)


def expect_dot_product_variance(d_k: int, variance: float, *, scaled: bool = False) -> Expectation:
    """Var(q . k), or with ``scaled`` Var(q . k / sqrt(d_k)), for components of variance ``variance``."""
    raw = dot_product_variance(d_k, variance)
    if scaled:
        return Expectation(
            np.array(raw / d_k), formula=f"Var(q.k / sqrt(d_k)) for d_k = {d_k}",
            slip_values=[(slips.SCALING_NOT_APPLIED, np.array(raw)),
                         (slips.SCALED_BY_SQRT_ONCE, np.array(raw / np.sqrt(d_k))),
                         (slips.VARIANCE_NOT_SQUARED, np.array(variance))],
            what="your answer, one number")
    return Expectation(
        np.array(raw), formula=f"Var(q.k) for d_k = {d_k}",
        slip_values=[(slips.STANDARD_DEVIATION_GIVEN, np.array(np.sqrt(raw))),
                     (slips.VARIANCE_NOT_SQUARED, np.array(d_k * variance))],
        what="your answer, one number")


def expect_typical_size(d_k: int, variance: float) -> Expectation:
    """The standard deviation of q . k (its typical size) for components of variance ``variance``."""
    raw = dot_product_variance(d_k, variance)
    return Expectation(
        np.array(np.sqrt(raw)), formula=f"sqrt(Var(q.k)) for d_k = {d_k}",
        slip_values=[(slips.VARIANCE_GIVEN, np.array(raw)),
                     (slips.VARIANCE_NOT_SQUARED, np.array(np.sqrt(d_k * variance)))],
        what="your answer, one number")


# --------------------------------------------------------------------------- attention over image patches


def patch_weights(image, patch_size: int, query_patch: int) -> np.ndarray:
    """One patch's self-attention weights ``(N,)`` over the image's patches, each patch's pixels its Q, K and V."""
    tokens = patchify(image, patch_size)  # (N, P*P)
    _, weights = scaled_dot_product_attention(tokens[query_patch:query_patch + 1], tokens, tokens)  # (1, N)
    return weights[0]


def _grid_shape(image, patch_size: int) -> tuple[int, int]:
    image = np.asarray(image)
    return image.shape[0] // patch_size, image.shape[1] // patch_size


def expect_patch_scores(image, patch_size: int, query_patch: int, *, name: str) -> Expectation:
    """The scaled scores q . k_j / sqrt(d) of patch ``query_patch`` against every patch, in patch order."""
    tokens = patchify(image, patch_size)  # (N, d)
    raw = tokens @ tokens[query_patch]  # (N,)
    d = tokens.shape[1]
    return Expectation(
        raw / np.sqrt(d), formula=f"patch {query_patch}'s scores q.k_j / sqrt({d}), j = 0 .. {len(raw) - 1}",
        shape_help=f"one score per patch ({len(raw)})", labels=([f"patch {j}" for j in range(len(raw))],),
        slip_values=[(slips.NO_SQRT_DK, raw), (slips.DIVIDED_BY_D_K, raw / d)],
        what=f"your answer, a list of {len(raw)} numbers")


def expect_patch_grid(image, patch_size: int, query_patch: int, *, name: str) -> Expectation:
    """Patch ``query_patch``'s weights laid on the grid of patches (:func:`qkv.to_patch_grid`)."""
    weights = patch_weights(image, patch_size, query_patch)  # (N,)
    rows, cols = _grid_shape(image, patch_size)
    tokens = patchify(image, patch_size)
    unscaled = softmax(tokens @ tokens[query_patch])  # (N,), the scores not divided by sqrt(d)
    return Expectation(
        to_patch_grid(weights, (rows, cols)), formula=f"patch {query_patch}'s weights on the {rows}x{cols} grid",
        shape_help=f"one row per row of patches ({rows}), one column per column of patches ({cols})",
        slip_values=[(slips.GRID_FILLED_BY_COLUMNS, slips.patch_grid_with_slip(weights, (rows, cols),
                                                                             slips.GRID_FILLED_BY_COLUMNS)),
                     (slips.NO_SQRT_DK, to_patch_grid(unscaled, (rows, cols)))],
        hints=[_grid_sums_to_one(name)],
        what=f"your answer, a list of {rows} rows of {cols} weights")


def _grid_sums_to_one(name: str):
    def hint(value: np.ndarray, labels) -> str | None:
        total = float(value.sum())
        if abs(total - 1) > value.size * HAND_TOLERANCE / 2 + 1e-9:
            return f"All the weights of {name} add up to {total:.2f}; one query's weights add up to 1."
        return None

    return hint


def expect_brightest_patch(image, patch_size: int, query_patch: int) -> Expectation:
    """The grid position ``(row, column)`` of the patch that ``query_patch`` attends to most."""
    weights = patch_weights(image, patch_size, query_patch)
    rows, cols = _grid_shape(image, patch_size)
    best = int(np.argmax(weights))
    expected = np.array(divmod(best, cols), dtype=float)  # (row, column)
    return Expectation(
        expected, formula=f"(row, column) of the largest of patch {query_patch}'s weights",
        shape_help="two numbers: (row, column)",
        slip_values=[(slips.ROW_AND_COLUMN_SWAPPED, expected[::-1]),
                     (slips.PATCH_NUMBER_GIVEN, np.array(float(best))),
                     (slips.ONE_BASED_POSITION, expected + 1)],
        what="your answer, the position (row, column) counting from 0")


# --------------------------------------------------------------------------- choices


def choose_token(tokens: Sequence[str], right: int, *, explain_right: str, reveal: str,
                 wrong: dict[int, str] | None = None) -> Choice:
    """The token ``tokens[right]`` among ``tokens``; ``wrong`` maps a token's index to what choosing it means."""
    explain_wrong = {tokens[i]: advice for i, advice in (wrong or {}).items() if i != right}
    return Choice(right=tokens[right], choices=tuple(tokens), explain_right=explain_right,
                  explain_wrong=explain_wrong, reveal_text=reveal)


def choose_option(options: Sequence[str], right_text: str, *, explain_right: str,
                  explain_wrong: dict[str, str] | None = None) -> Choice:
    """The option ``right_text`` among ``options`` (in the variant's order), answered by its letter a, b, c, ..."""
    letters = tuple("abcdefgh"[:len(options)])
    by_text = dict(zip(options, letters))
    return Choice(right=by_text[right_text], choices=letters, explain_right=explain_right,
                  explain_wrong={by_text[text]: advice for text, advice in (explain_wrong or {}).items()},
                  reveal_text=f"The right option is ({by_text[right_text]}): {right_text}")
