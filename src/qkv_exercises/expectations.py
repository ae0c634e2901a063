"""What each hand-computed answer is checked against: expectations built from qkv, with their slips.

Each builder computes the expected value with qkv from the student's own givens, and
the values the typical slips of :mod:`qkv_exercises.slips` would give, and returns an
:class:`~qkv_exercises.checking.Expectation` for :func:`~qkv_exercises.checking.judge_value`.
The choice builders return a :class:`~qkv_exercises.checks.Choice`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qkv.attention import cross_attention, linear, scaled_dot_product_attention, softmax
from qkv.examples import BYTES_PER_NUMBER
from qkv.multihead import Head, fused_multi_head_attention
from qkv.position import position_angles, sinusoidal_position_encoding
from qkv.vision import patchify, to_patch_grid

from . import slips
from .checking import CODE_TOLERANCE, HAND_TOLERANCE, Expectation, Labels, describe_input, rows_sum_to_one
from .checks import Choice, ChoiceCheck
from .language import N_, _
from .problem_sets.ps3_sqrt_dk_slips import (
    SCALED_BY_SQRT_ONCE,
    SCALING_NOT_APPLIED,
    VARIANCE_GIVEN,
    VARIANCE_NOT_SQUARED,
)
from .problem_sets.ps4_single_head_slips import WEIGHTS_READ_BY_COLUMNS
from .problem_sets.ps5_multi_head_slips import MULTI_HEAD_SLIPS, multi_head_steps
from .problem_sets.ps6_maps_slips import (
    GRID_FILLED_BY_COLUMNS,
    ONE_BASED_POSITION,
    PATCH_NUMBER_GIVEN,
    ROW_AND_COLUMN_SWAPPED,
    patch_grid_with_slip,
)
from .problem_sets.ps7_masks_slips import (
    CROSS_SOURCES_SWAPPED,
    DECODER_KEYS,
    MASK_SLIPS,
    cross_attention_steps,
    masked_softmax_steps,
)
from .problem_sets.ps8_position_slips import (
    DEGREES_NOT_RADIANS,
    EXPONENT_I_NOT_2I,
    EXPONENT_SIGN,
    FIRST_PAIR_ONLY,
    NOT_REORDERED,
    POSITIONS_FROM_ONE,
    REORDERED_BY_INVERSE,
    SINES_THEN_COSINES,
    SINE_OF_OFFSET,
    SIN_COS_SWAPPED,
    encoding_with_slip,
    reordered,
)
from .problem_sets.ps9_block_slips import BLOCK_ROW_SLIPS, block_row_steps
from .problem_sets.ps10_online_softmax_slips import (
    BITS_NOT_BYTES,
    BLOCK_MAX_AS_RUNNING_MAX,
    BYTES_FORGOTTEN,
    EVERY_HEAD_COUNTED,
    GB_NOT_GIB,
    GROWTH_LINEAR,
    HEADS_FORGOTTEN,
    MIB_NOT_GIB,
    N_NOT_SQUARED,
    ONLINE_SLIPS,
    RESCALE_EXPONENT_FLIPPED,
    RESCALE_FORGOTTEN,
    RESCALE_NOT_EXPONENTIATED,
    WRONG_BYTES_PER_NUMBER,
    online_steps,
)
from .problem_sets.ps11_soft_lookup_slips import KERNEL_SLIPS, kernel_steps
from .problem_sets.ps12_trained_model_slips import (
    HEAD_COUNTED_FROM_0,
    LAYER_ATTENTION_SLIPS,
    layer_attention_with_slip,
)
from .variants import VariantDraw

# --------------------------------------------------------------------------- steps of attention

_STEP_FORMULAS = {
    "Q": "X W_Q + b_Q", "K": "X W_K + b_K", "V": "X W_V + b_V",
    "B_Q": N_("the bias row b_Q repeated on every row"), "B_K": N_("the bias row b_K repeated on every row"),
    "B_V": N_("the bias row b_V repeated on every row"), "K_T": N_("K transposed"),
    "S_raw": "Q K^T", "S": "Q K^T / sqrt(d_k)", "A": N_("softmax(S) by rows"), "O": "A V",
    "O_concat": "Concat(head 1, head 2, ...)", "Y": "O_concat W_O + b_O",
}


def step_meaning(step: str, expected: np.ndarray) -> str:
    """What the rows and columns of a step are, for the shape message."""
    rows, cols = (1, expected.shape[0]) if expected.ndim == 1 else expected.shape[-2:]
    meanings = {
        "Q": N_("one row per token ({rows}), one column per query dimension (d_k = {cols})"),
        "K": N_("one row per token ({rows}), one column per key dimension (d_k = {cols})"),
        "V": N_("one row per token ({rows}), one column per value dimension (d_v = {cols})"),
        "K_T": N_("one row per key dimension (d_k = {rows}), one column per token ({cols})"),
        "S_raw": N_("one row per query ({rows}), one column per key ({cols})"),
        "A": N_("one row per query ({rows}), one column per key ({cols})"),
        "O": N_("one row per query ({rows}), one column per value dimension (d_v = {cols})"),
        "O_concat": N_("one row per token ({rows}), the heads' {cols} output columns side by side"),
        "Y": N_("one row per token ({rows}), one column per output dimension ({cols})"),
    }
    meanings["S"] = meanings["S_raw"]
    for role in "QKV":
        meanings[f"B_{role}"] = N_("the bias row repeated on every row: {rows} rows of {cols}")
    return _(meanings[step]).format(rows=rows, cols=cols) if step in meanings else ""


def _step_labels(step: str, queries, keys) -> Labels | None:
    if step in ("S_raw", "S", "A"):
        return (queries, keys)
    if step == "K_T":
        return (None, keys)
    if step in ("K", "V", "B_K", "B_V"):
        return (keys, None)
    return (queries, None)


def _step_expectation(step, name, steps, slip_steps, queries, keys, tol=HAND_TOLERANCE) -> Expectation:
    """``steps[step]``, explained by ``slip_steps()``: ``(slip, steps with that slip)`` pairs, computed only
    for a wrong answer."""
    if step not in steps:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(steps)}")
    expected = steps[step]
    return Expectation(
        expected, tol,
        formula=_STEP_FORMULAS.get(step, ""),
        shape_help=step_meaning(step, expected),
        labels=_step_labels(step, queries, keys),
        slip_values=slips.each_part(slip_steps, step),
        hints=[rows_sum_to_one(name, tol)] if step == "A" else (),
        what=(N_("your answer, a list of rows of numbers") if expected.ndim == 2 and expected.shape[0] > 1
              else N_("your answer, a list of numbers")),
    )


def expect_head_step(step: str, X, head, *, name: str, tokens=None) -> Expectation:
    """One step of a single head on ``X`` (``"Q"``, ``"B_K"``, ``"S_raw"``, ``"A"``, ``"O"``, ...).

    The expected value is that step of :func:`qkv.trace_head` on ``X`` with ``head``'s
    parameters; every slip of :data:`qkv_exercises.slips.HEAD_SLIPS` is a candidate.
    ``tokens`` label the rows (and, for scores and weights, the columns).
    """
    head = head if isinstance(head, Head) else Head(*head)
    return _step_expectation(step, name, slips.head_steps(X, head),
                             lambda: [(slip, slips.head_steps(X, head, slip)) for slip in slips.HEAD_SLIPS],
                             tokens, tokens)


def expect_attention_step(step: str, Q, K, V, *, name: str, queries=None, keys=None) -> Expectation:
    """One step (``"S_raw"``, ``"S"``, ``"A"``, ``"O"``, ``"K_T"``) of attention of ``Q`` over ``K``, ``V``.

    ``A`` and ``O`` are what :func:`qkv.scaled_dot_product_attention` returns;
    ``queries`` and ``keys`` label the rows and columns.
    """
    return _step_expectation(step, name, slips.attention_steps(Q, K, V),
                             lambda: [(slip, slips.attention_steps(Q, K, V, slip)) for slip in slips.ATTENTION_SLIPS],
                             queries, keys)


def expect_multi_head_step(step: str, X, heads, W_O, b_O=None, *, name: str, tokens=None) -> Expectation:
    """``"O_concat"`` or ``"Y"`` of :func:`qkv.multi_head_attention` on ``X``."""
    return _step_expectation(step, name, multi_head_steps(X, heads, W_O, b_O),
                             lambda: [(slip, multi_head_steps(X, heads, W_O, b_O, slip)) for slip in MULTI_HEAD_SLIPS],
                             tokens, tokens)


def expect_softmax(scores, *, name: str) -> Expectation:
    """The softmax of one row of ``scores``, computed by hand; expected: :func:`qkv.softmax`."""
    scores = np.asarray(scores, dtype=float)
    return Expectation(
        softmax(scores), HAND_TOLERANCE, formula=f"softmax({describe_input(scores)})",
        shape_help=N_("one weight per score"), slip_values=slips.softmax_slip_values(scores),
        hints=[rows_sum_to_one(name)], what=N_("your answer, a list of weights"),
    )


def expect_weighted_sum(weights, V, *, name: str, tokens=None) -> Expectation:
    """``A V`` for given attention weights ``A`` ``(n, n)`` and values ``V`` ``(n, d_v)``."""
    expected = linear(weights, V)  # (n, d_v) = A V
    return Expectation(
        expected, HAND_TOLERANCE, formula="A V", shape_help=step_meaning("O", expected), labels=(tokens, None),
        slip_values=[(WEIGHTS_READ_BY_COLUMNS, linear(np.asarray(weights).T, V))],
        hints=[lambda value, labels: _("Row i of A V is the weighted sum of the value rows: "
                                       "A[i, 0] V[0] + A[i, 1] V[1] + ...")],
        what=N_("your answer, a list of rows of numbers"),
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
            np.array(raw / d_k), formula=_("Var(q.k / sqrt(d_k)) for d_k = {d_k}").format(d_k=d_k),
            slip_values=[(SCALING_NOT_APPLIED, np.array(raw)),
                         (SCALED_BY_SQRT_ONCE, np.array(raw / np.sqrt(d_k))),
                         (VARIANCE_NOT_SQUARED, np.array(variance))],
            what=N_("your answer, one number"))
    return Expectation(
        np.array(raw), formula=_("Var(q.k) for d_k = {d_k}").format(d_k=d_k),
        slip_values=[(slips.STANDARD_DEVIATION_GIVEN, np.array(np.sqrt(raw))),
                     (VARIANCE_NOT_SQUARED, np.array(d_k * variance))],
        what=N_("your answer, one number"))


def expect_typical_size(d_k: int, variance: float) -> Expectation:
    """The standard deviation of q . k (its typical size) for components of variance ``variance``."""
    raw = dot_product_variance(d_k, variance)
    return Expectation(
        np.array(np.sqrt(raw)), formula=_("sqrt(Var(q.k)) for d_k = {d_k}").format(d_k=d_k),
        slip_values=[(VARIANCE_GIVEN, np.array(raw)),
                     (VARIANCE_NOT_SQUARED, np.array(np.sqrt(d_k * variance)))],
        what=N_("your answer, one number"))


# --------------------------------------------------------------------------- attention over image patches


def patch_weights(image, patch_size: int, query_patch: int) -> np.ndarray:
    """One patch's self-attention weights ``(N,)`` over the image's patches, each patch's pixels its Q, K and V."""
    tokens = patchify(image, patch_size)  # (N, P*P)
    _output, weights = scaled_dot_product_attention(tokens[query_patch:query_patch + 1], tokens, tokens)  # (1, N)
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
        raw / np.sqrt(d),
        formula=_("patch {patch}'s scores q.k_j / sqrt({d}), j = 0 .. {last}").format(
            patch=query_patch, d=d, last=len(raw) - 1),
        shape_help=_("one score per patch ({count})").format(count=len(raw)),
        labels=([_("patch {j}").format(j=j) for j in range(len(raw))],),
        slip_values=[(slips.NO_SQRT_DK, raw), (slips.DIVIDED_BY_D_K, raw / d)],
        what=_("your answer, a list of {count} numbers").format(count=len(raw)))


def expect_patch_grid(image, patch_size: int, query_patch: int, *, name: str) -> Expectation:
    """Patch ``query_patch``'s weights laid on the grid of patches (:func:`qkv.to_patch_grid`)."""
    weights = patch_weights(image, patch_size, query_patch)  # (N,)
    rows, cols = _grid_shape(image, patch_size)
    tokens = patchify(image, patch_size)
    unscaled = softmax(tokens @ tokens[query_patch])  # (N,), the scores not divided by sqrt(d)
    return Expectation(
        to_patch_grid(weights, (rows, cols)),
        formula=_("patch {patch}'s weights on the {rows}x{cols} grid").format(patch=query_patch, rows=rows, cols=cols),
        shape_help=_("one row per row of patches ({rows}), one column per column of patches ({cols})").format(
            rows=rows, cols=cols),
        slip_values=[(GRID_FILLED_BY_COLUMNS, patch_grid_with_slip(weights, (rows, cols),
                                                                             GRID_FILLED_BY_COLUMNS)),
                     (slips.NO_SQRT_DK, to_patch_grid(unscaled, (rows, cols)))],
        hints=[_grid_sums_to_one(name)],
        what=_("your answer, a list of {rows} rows of {cols} weights").format(rows=rows, cols=cols))


def _grid_sums_to_one(name: str):
    def hint(value: np.ndarray, labels) -> str | None:
        total = float(value.sum())
        if abs(total - 1) > value.size * HAND_TOLERANCE / 2 + 1e-9:
            return _("All the weights of {name} add up to {total}; one query's weights add up to 1.").format(
                name=name, total=f"{total:.2f}")
        return None

    return hint


def expect_brightest_patch(image, patch_size: int, query_patch: int) -> Expectation:
    """The grid position ``(row, column)`` of the patch that ``query_patch`` attends to most."""
    weights = patch_weights(image, patch_size, query_patch)
    rows, cols = _grid_shape(image, patch_size)
    best = int(np.argmax(weights))
    expected = np.array(divmod(best, cols), dtype=float)  # (row, column)
    return Expectation(
        expected, formula=_("(row, column) of the largest of patch {patch}'s weights").format(patch=query_patch),
        shape_help=N_("two numbers: (row, column)"),
        slip_values=[(ROW_AND_COLUMN_SWAPPED, expected[::-1]),
                     (PATCH_NUMBER_GIVEN, np.array(float(best))),
                     (ONE_BASED_POSITION, expected + 1)],
        what=N_("your answer, the position (row, column) counting from 0"))


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
                  reveal_text=_("The right option is ({letter}): {option}").format(letter=by_text[right_text],
                                                                                      option=_(right_text)))


def option_check(grade_id: str, answer: str, options: dict[str, str], right: str, given: str,
                 description: str) -> ChoiceCheck:
    """A question answered by a letter: ``options`` maps each option to what choosing it means ("" for the
    ``right`` one); the givens hold them, in the variant's order, as ``given``."""
    return ChoiceCheck(grade_id, answer,
                       lambda g: choose_option(g[given], right, explain_right=right,
                                               explain_wrong={text: advice for text, advice in options.items()
                                                              if advice}),
                       description)


def ordered_options(options: Sequence[str], right: str, draw_name: str, variant: int, *,
                    seed_place: int | None = None) -> tuple[str, ...]:
    """``options`` in the variant's order (drawn as ``draw_name``); the right one never at the letter it has
    in variant 0 (``seed_place``, by default its place in ``options``), so that the book's letter is never
    the answer. Variant 0 keeps the given order."""
    texts = tuple(options)
    if variant == 0:
        return texts
    seed_place = texts.index(right) if seed_place is None else seed_place
    order = VariantDraw(draw_name, variant).until(
        lambda d: d.permutation(len(texts)), lambda o: [texts[i] for i in o].index(right) != seed_place, "order")
    return tuple(texts[i] for i in order)


# --------------------------------------------------------------------------- online softmax, what attention costs

_STATE_HELP = N_("two numbers, [m, l]: the running maximum m and the running sum l")


def expect_online_state(blocks, t: int) -> Expectation:
    """``[m_t, l_t]``: the running maximum and sum of the online softmax after block ``t`` (from 1)."""
    steps = online_steps(blocks)

    def candidates():
        found = [(slip, online_steps(blocks, slip)["running"][t - 1]) for slip in ONLINE_SLIPS[:6]]
        if t > 1:  # the block's maximum taken as the running maximum, and nothing rescaled
            block, l_before = np.asarray(blocks[t - 1], dtype=float), steps["running"][t - 2][1]
            found.append((BLOCK_MAX_AS_RUNNING_MAX,
                          np.array([block.max(), l_before + np.exp(block - block.max()).sum()])))
        return found

    return Expectation(steps["running"][t - 1], formula=_("[m_{t}, l_{t}] after block {t}").format(t=t),
                       shape_help=_STATE_HELP, labels=(("m", "l"),), slip_values=slips.merged(candidates),
                       what=N_("your answer, the pair [m, l]"))


def expect_rescale(blocks, t: int) -> Expectation:
    """The factor ``e^(m_(t-1) - m_t)`` by which the running sum is multiplied when block ``t`` is read."""
    steps = online_steps(blocks)
    return Expectation(
        np.array(steps["rescale"][t - 1]), formula=f"e^(m_{t - 1} - m_{t})",
        slip_values=lambda: [(slip, np.array(online_steps(blocks, slip)["rescale"][t - 1]))
                             for slip in (RESCALE_EXPONENT_FLIPPED, RESCALE_NOT_EXPONENTIATED,
                                          RESCALE_FORGOTTEN)],
        what=N_("your answer, one number"))


def expect_online_weights(blocks, *, name: str) -> Expectation:
    """The softmax of the whole row that ``blocks`` cut, from the final running maximum and sum."""
    scores = np.concatenate([np.asarray(b, dtype=float) for b in blocks])
    return Expectation(online_steps(blocks)["weights"], formula=N_("e^(s_j - m) / l with the final m and l"),
                       shape_help=_("one weight per score ({count})").format(count=len(scores)),
                       slip_values=slips.merged(lambda: [(slip, online_steps(blocks, slip).get("weights"))
                                                         for slip in ONLINE_SLIPS]
                                                + list(slips.softmax_slip_values(scores))),
                       hints=[rows_sum_to_one(name)],
                       what=N_("your answer, a list of weights"))


WHOLE_NUMBER = 0.5  # a count is right when it is the exact whole number


def expect_scores_per_head(n: int, heads: int) -> Expectation:
    """How many scores one head computes for ``n`` tokens: ``n^2``."""
    return Expectation(np.array(float(n * n)), WHOLE_NUMBER, formula=f"n^2 for n = {n}",
                       slip_values=[(N_NOT_SQUARED, np.array(float(n))),
                                    (EVERY_HEAD_COUNTED, np.array(float(heads * n * n)))],
                       what=N_("your answer, a whole number"))


def _weights_bytes(n: int, heads: int, dtype: str) -> float:
    return float(heads * n * n * BYTES_PER_NUMBER[dtype])


def expect_weights_bytes(n: int, heads: int, dtype: str) -> Expectation:
    """The bytes that the ``n x n`` weights of ``heads`` heads take, stored as ``dtype``."""
    others = [(WRONG_BYTES_PER_NUMBER, np.array(_weights_bytes(n, heads, other)))
              for other in BYTES_PER_NUMBER if other != dtype]
    return Expectation(
        np.array(_weights_bytes(n, heads, dtype)), WHOLE_NUMBER,
        formula=_("h n^2 x (bytes per {dtype})").format(dtype=dtype),
        slip_values=[(HEADS_FORGOTTEN, np.array(_weights_bytes(n, 1, dtype))),
                     (BYTES_FORGOTTEN, np.array(float(heads * n * n))),
                     (BITS_NOT_BYTES, np.array(8 * _weights_bytes(n, heads, dtype))),
                     (N_NOT_SQUARED, np.array(float(heads * n * BYTES_PER_NUMBER[dtype]))), *others],
        what=N_("your answer, a whole number of bytes"))


def expect_weights_gib(n: int, heads: int, dtype: str) -> Expectation:
    """The GiB (2^30 bytes) that the ``n x n`` weights of ``heads`` heads take, stored as ``dtype``."""
    size = _weights_bytes(n, heads, dtype)
    others = [(WRONG_BYTES_PER_NUMBER, np.array(_weights_bytes(n, heads, other) / 2**30))
              for other in BYTES_PER_NUMBER if other != dtype]
    return Expectation(
        np.array(size / 2**30), formula=_("h n^2 x (bytes per {dtype}) / 2^30").format(dtype=dtype),
        slip_values=[(GB_NOT_GIB, np.array(size / 1e9)), (MIB_NOT_GIB, np.array(size / 2**20)),
                     (HEADS_FORGOTTEN, np.array(size / heads / 2**30)),
                     (BYTES_FORGOTTEN, np.array(size / BYTES_PER_NUMBER[dtype] / 2**30)),
                     (BITS_NOT_BYTES, np.array(8 * size / 2**30)), *others],
        what=N_("your answer, a number of GiB"))


def expect_memory_growth(growth: int) -> Expectation:
    """By what factor the memory of the weights grows when the context grows ``growth``-fold."""
    return Expectation(np.array(float(growth**2)), formula=f"({growth} n)^2 / n^2",
                       slip_values=[(GROWTH_LINEAR, np.array(float(growth)))], what=N_("your answer, one number"))


# --------------------------------------------------------------------------- attention as soft lookup

_KERNEL_FORMULAS = {
    "distances": N_("|q - k_j|^2 for each key"), "exponents": N_("-|q - k_j|^2 / (2 sigma^2) for each key"),
    "weights": N_("the softmax of the exponents"), "prediction": N_("sum over j of A_j v_j"),
    "extended_scores": N_("(q . k_j - |k_j|^2 / 2) / sigma^2 for each key"),
}


def expect_kernel_step(step: str, q, K, V, sigma: float, *, name: str, keys=None) -> Expectation:
    """One step (``"distances"``, ``"exponents"``, ``"weights"``, ``"prediction"``, ``"extended_scores"``)
    of a Gaussian kernel of width ``sigma`` for the one query ``q`` ``(1, d)`` over ``K``, with values ``V``."""
    if step not in _KERNEL_FORMULAS:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(_KERNEL_FORMULAS)}")
    expected = kernel_steps(q, K, V, sigma)[step][0]
    per_key = step != "prediction"

    def slip_values():
        found = []
        for slip in KERNEL_SLIPS:
            value = kernel_steps(q, K, V, sigma, slip).get(step)
            found.append((slip, None if value is None else value[0]))
        return found

    return Expectation(
        expected, formula=_KERNEL_FORMULAS[step],
        shape_help=(_("one number per key ({count})") if per_key else _("one number per value column ({count})")
                    ).format(count=len(expected)),
        labels=(keys,) if per_key and keys is not None else None, slip_values=slips.merged(slip_values),
        hints=[rows_sum_to_one(name)] if step == "weights" else (), what=N_("your answer, a list of numbers"))
# --------------------------------------------------------------------------- masks and cross-attention (problem set 7)

_MASKED_FORMULAS = {"E": N_("e^S, with e^(-inf) = 0 for the blocked keys"),
                    "A": N_("softmax of the masked scores, by rows")}


def expect_masked_step(step: str, scores, mask, *, name: str, queries=None, keys=None,
                       row: int | None = None) -> Expectation:
    """``"E"`` (the exponentials of the masked scores) or ``"A"`` (the weights) of ``scores``
    ``(n_q, n_k)`` under the boolean ``mask`` (True = may attend); with ``row``, that query's row only.

    The expected weights are :func:`qkv.softmax` of the scores with the blocked ones at
    -inf; the slips of :data:`qkv_exercises.slips.MASK_SLIPS` are the candidates.
    """
    if step not in _MASKED_FORMULAS:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(_MASKED_FORMULAS)}")
    pick = (lambda M: M) if row is None else (lambda M: M[row])
    expected = pick(masked_softmax_steps(scores, mask)[step])

    def slip_values():
        found = []
        for slip in MASK_SLIPS:
            value = masked_softmax_steps(scores, mask, slip).get(step)
            found.append((slip, None if value is None else pick(value)))
        return found

    if row is None:
        shape_help = _("one row per query ({rows}), one column per key ({cols})").format(
            rows=expected.shape[0], cols=expected.shape[1])
        labels, what = (queries, keys), N_("your answer, a list of rows of numbers")
    else:
        shape_help = _("one entry per key ({count})").format(count=expected.shape[0])
        labels, what = (keys,), N_("your answer, a list of numbers")
    return Expectation(expected, HAND_TOLERANCE, formula=_MASKED_FORMULAS[step], shape_help=shape_help, labels=labels,
                       slip_values=slip_values, hints=[rows_sum_to_one(name)] if step == "A" else (), what=what,
                       nonfinite_hint=_("Write every entry as a number: e^(-inf) is 0."))


def expect_cross_step(step: str, X_q, X_kv, head, *, name: str, queries=None, keys=None) -> Expectation:
    """One step (``"S"``, ``"A"``, ``"O"``, ...) of cross-attention: queries from ``X_q``, keys and values from
    ``X_kv``; expected: :func:`qkv.cross_attention` (and its scores)."""
    head = head if isinstance(head, Head) else Head(*head)
    steps = cross_attention_steps(X_q, X_kv, head)
    output, weights = cross_attention(X_q, X_kv, *head)
    steps = {**steps, "A": weights, "O": output}
    return _step_expectation(step, name, steps,
                             lambda: [(slip, cross_attention_steps(X_q, X_kv, head, slip))
                                      for slip in (CROSS_SOURCES_SWAPPED, DECODER_KEYS, *slips.ATTENTION_SLIPS)],
                             queries, keys)


# --------------------------------------------------------------------------- order and position (problem set 8)


def expect_reordered(values, order, *, name: str, tokens=None) -> Expectation:
    """The outputs ``P O`` of a sentence after its tokens are reordered (token ``order[i]`` at place ``i``);
    ``tokens``: the reordered tokens. With ``values`` the identity, the permutation matrix ``P`` itself."""
    values = np.asarray(values, dtype=float)
    expected = reordered(values, order)
    rows, cols = expected.shape
    is_P = np.array_equal(values, np.eye(rows))
    return Expectation(
        expected, HAND_TOLERANCE, formula="P = I[order]" if is_P else "P O",
        shape_help=(_("one row per place of the reordered sentence ({rows}), one column per token of the first "
                      "({cols})") if is_P else _("one row per token ({rows}), one column per value dimension ({cols})")
                    ).format(rows=rows, cols=cols),
        labels=(tokens, None),
        slip_values=[(slip, reordered(values, order, slip))
                     for slip in (NOT_REORDERED, REORDERED_BY_INVERSE)],
        what=N_("your answer, a list of rows of numbers"))


_ENCODING_SLIPS = (SIN_COS_SWAPPED, SINES_THEN_COSINES, EXPONENT_I_NOT_2I, EXPONENT_SIGN,
                   DEGREES_NOT_RADIANS, POSITIONS_FROM_ONE)


def expect_position_angles(position: int, d_model: int) -> Expectation:
    """The angles ``p w_i`` of position ``position``, ``i = 0 .. d_model/2 - 1``: :func:`qkv.position_angles`.

    A position counted from 1 is named even though its slow pairs' angles, ``(p + 1) w_i``, may fall
    within the tolerance of the right ones: the fast pairs are off by ``w_i`` itself.
    """
    expected = position_angles([position], d_model)[0]  # (d_model/2,)
    i = np.arange(d_model // 2)
    return Expectation(
        expected, HAND_TOLERANCE, formula=f"p w_i = {position} x 10000^(-2i/{d_model})",
        shape_help=_("one angle per pair of dimensions (d_model / 2 = {pairs})").format(pairs=d_model // 2),
        labels=([f"i = {k}" for k in i],),
        slip_values=[(EXPONENT_I_NOT_2I, position * 10000.0 ** (-i / d_model)),
                     (EXPONENT_SIGN, position * 10000.0 ** (2 * i / d_model)),
                     (POSITIONS_FROM_ONE, position_angles([position + 1], d_model)[0])],
        what=_("your answer, a list of {count} angles").format(count=d_model // 2))


def expect_position_encoding(position: int, d_model: int) -> Expectation:
    """The sinusoidal encoding of position ``position``: that row of :func:`qkv.sinusoidal_position_encoding`."""
    expected = sinusoidal_position_encoding(position + 1, d_model)[position]  # (d_model,)
    return Expectation(
        expected, HAND_TOLERANCE, formula=f"PE_{position} = [sin(p w_0), cos(p w_0), sin(p w_1), ...]",
        shape_help=_("one entry per dimension (d_model = {d_model})").format(d_model=d_model),
        labels=([_("dimension {j}").format(j=j) for j in range(d_model)],),
        slip_values=lambda: [(slip, encoding_with_slip([position], d_model, slip)[0]) for slip in _ENCODING_SLIPS],
        what=_("your answer, a list of {count} numbers").format(count=d_model))


def expect_offset_dot_product(pair: tuple[int, int], d_model: int) -> Expectation:
    """``PE_p . PE_q`` for ``pair = (p, q)``: the dot product of two rows of
    :func:`qkv.sinusoidal_position_encoding`."""
    p, q = pair
    table = sinusoidal_position_encoding(max(p, q) + 1, d_model)
    expected = np.array(table[p] @ table[q])
    offsets = (q - p) * 10000.0 ** (-np.arange(0, d_model, 2) / d_model)  # (q - p) w_i
    return Expectation(
        expected, HAND_TOLERANCE, formula=f"PE_{p} . PE_{q} = sum_i cos(({q} - {p}) w_i)",
        slip_values=[(FIRST_PAIR_ONLY, np.array(np.cos(offsets[0]))),
                     (SINE_OF_OFFSET, np.array(np.sin(offsets).sum())),
                     (DEGREES_NOT_RADIANS, np.array(np.cos(np.radians(offsets)).sum())),
                     (EXPONENT_I_NOT_2I,
                      np.array(np.cos((q - p) * 10000.0 ** (-np.arange(d_model // 2) / d_model)).sum()))],
        what=N_("your answer, one number"))


# --------------------------------------------------------------------------- the block around attention (ps9)

_BLOCK_ROW_STEPS = {
    "r": ("x + a", N_("one number per feature (4)")),
    "mean": (N_("the mean of the 4 entries of r"), ""),
    "variance": (N_("the mean of (r_c - mean)^2 over the 4 entries"), ""),
    "normalised": ("(r - mean) / sqrt(variance + eps)", N_("one number per feature (4)")),
    "scaled": (N_("gamma * normalised + beta, feature by feature"), N_("one number per feature (4)")),
}


def expect_block_row_step(step: str, x, attended, gamma, beta, eps, *, name: str) -> Expectation:
    """One step of a token's row through the residual sum and the layer norm (see
    :func:`qkv_exercises.slips.block_row_steps`); every slip of :data:`~qkv_exercises.slips.BLOCK_ROW_SLIPS`
    is a candidate."""
    steps = block_row_steps(x, attended, gamma, beta, eps)
    if step not in steps:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(steps)}")
    formula, shape_help = _BLOCK_ROW_STEPS[step]
    return Expectation(
        steps[step], HAND_TOLERANCE, formula=formula, shape_help=shape_help,
        slip_values=lambda: [(slip, block_row_steps(x, attended, gamma, beta, eps, slip).get(step))
                             for slip in BLOCK_ROW_SLIPS],
        what=N_("your answer, one number") if steps[step].ndim == 0 else N_("your answer, a list of 4 numbers"))


# --------------------------------------------------------------------------- a layer of a trained model (ps12)

LAYER_ARRAYS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")


def layer_weights(X, arrays, num_heads: int, slip=None) -> np.ndarray | None:
    """Every head's map ``(h, n, n)`` of a layer given by its fused ``arrays`` (named as
    :data:`LAYER_ARRAYS`) on ``X``: :func:`qkv.fused_multi_head_attention`'s, or with ``slip`` made."""
    W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O = (arrays[name] for name in LAYER_ARRAYS)
    if slip is None:
        return fused_multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, b_Q, b_K, b_V, b_O)[1]
    slipped = layer_attention_with_slip(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads, slip)
    return None if slipped is None else slipped[1]


def expect_head_map(X, arrays, num_heads: int, head: int, *, name: str, tokens) -> Expectation:
    """Head ``head``'s map (counting from 1) of the layer given by its fused ``arrays`` on ``X``: the
    forward pass's weights, checked to the tolerance of code (1e-6)."""
    weights = layer_weights(X, arrays, num_heads)  # (h, n, n)

    def slip_values():
        found = [(slip, None if (w := layer_weights(X, arrays, num_heads, slip)) is None else w[head - 1])
                 for slip in LAYER_ATTENTION_SLIPS if slip != slips.W_O_TRANSPOSED]
        if head < num_heads:
            found.insert(0, (HEAD_COUNTED_FROM_0, weights[head]))
        return found

    return Expectation(
        weights[head - 1], CODE_TOLERANCE,
        formula=_("head {head}'s weights softmax(Q K^T / sqrt(d_k))").format(head=head),
        shape_help=_("one row per query token ({count}), one column per key token ({count})").format(count=len(tokens)),
        labels=(tokens, tokens), slip_values=slip_values, hints=[rows_sum_to_one(name, CODE_TOLERANCE)],
        what=N_("your answer, an array of weights"))
