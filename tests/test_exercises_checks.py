"""The checks: right answers pass, each typical slip is named, and nothing a student meets misleads them.

The right answers come from the seeds' printed tables (seed 000, seed 002); every wrong answer
is computed here with plain numpy the way a student who made that slip would, never with the
checks' own code. Messages are judged as a student reads them while solving (``reveal=False``),
and as the feedback shows them after grading (``reveal=True``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import qkv
from qkv_book.language import speaking
from qkv_exercises import slips
from qkv_exercises.checking import AnswerMismatch, judge_value, qkv_switched_off
from qkv_exercises.checks import FunctionCheck, Raised
from qkv_exercises.expectations import (
    dot_product_variance,
    expect_attention_step,
    expect_brightest_patch,
    expect_dot_product_variance,
    expect_head_step,
    expect_kernel_step,
    expect_memory_growth,
    expect_multi_head_step,
    expect_online_state,
    expect_online_weights,
    expect_patch_grid,
    expect_rescale,
    expect_scores_per_head,
    expect_softmax,
    expect_typical_size,
    expect_weights_bytes,
    expect_weights_gib,
)
from qkv_exercises.functions import (
    attention_call,
    explain_attention_error,
    explain_fold_error,
    explain_kernel_error,
    explain_softmax_error,
    fold_call,
    fold_calls_after,
    judge_attention,
    judge_fold_block,
    judge_kernel_weights,
    judge_online_softmax,
    kernel_call,
    online_call,
    judge_merge_heads,
    judge_softmax,
    judge_samples_shape,
    judge_split_heads,
    judge_uses_its_rng,
    merge_call,
    rng_calls,
    sample_call,
    simulated_variance_judge,
    softmax_call,
    split_call,
)
from qkv_exercises.problem_sets.ps3_sqrt_dk_slips import SCALED_BY_SQRT_ONCE, SCALING_NOT_APPLIED
from qkv_exercises.problem_sets.ps3_sqrt_dk_slips import VARIANCE_GIVEN, VARIANCE_NOT_SQUARED
from qkv_exercises.problem_sets.ps4_single_head_slips import WRONG_AXIS
from qkv_exercises.problem_sets.ps5_multi_head_slips import HEADS_IN_WRONG_ORDER
from qkv_exercises.problem_sets.ps5_multi_head_slips import HEADS_STACKED_AS_ROWS
from qkv_exercises.problem_sets.ps6_maps_slips import GRID_FILLED_BY_COLUMNS, ONE_BASED_POSITION
from qkv_exercises.problem_sets.ps6_maps_slips import ROW_AND_COLUMN_SWAPPED
from qkv_exercises.problem_sets.ps10_online_softmax_slips import BITS_NOT_BYTES
from qkv_exercises.problem_sets.ps10_online_softmax_slips import BLOCK_MAX_AS_RUNNING_MAX
from qkv_exercises.problem_sets.ps10_online_softmax_slips import BYTES_FORGOTTEN, EVERY_HEAD_COUNTED
from qkv_exercises.problem_sets.ps10_online_softmax_slips import GB_NOT_GIB, GROWTH_LINEAR
from qkv_exercises.problem_sets.ps10_online_softmax_slips import HEADS_FORGOTTEN, MAX_NOT_SUBTRACTED
from qkv_exercises.problem_sets.ps10_online_softmax_slips import MIB_NOT_GIB, N_NOT_SQUARED
from qkv_exercises.problem_sets.ps10_online_softmax_slips import RESCALE_EXPONENT_FLIPPED
from qkv_exercises.problem_sets.ps10_online_softmax_slips import RESCALE_FORGOTTEN
from qkv_exercises.problem_sets.ps10_online_softmax_slips import TERMS_FROM_BLOCK_MAX
from qkv_exercises.problem_sets.ps10_online_softmax_slips import WEIGHTS_NOT_FINAL_SUM
from qkv_exercises.problem_sets.ps10_online_softmax_slips import WEIGHTS_WITH_STALE_MAX
from qkv_exercises.problem_sets.ps10_online_softmax_slips import WRONG_BYTES_PER_NUMBER
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import DISTANCE_NOT_SQUARED
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import DOT_PRODUCT_WEIGHTS
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import EXPONENTS_NOT_EXTENDED, HALF_FORGOTTEN
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import KEY_HALF_FORGOTTEN
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import KEY_TERM_SIGN, MINUS_SIGN_FORGOTTEN
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import NO_SIGMA_SCALE, PLAIN_MEAN
from qkv_exercises.problem_sets.ps11_soft_lookup_slips import SIGMA_NOT_SQUARED

from .notebook_support import outcomes_of
from .seeds import SEED_000, SEED_000_O_CONCAT, SEED_002_Q1_OUTPUT, SEED_002_Q1_WEIGHTS, SEED_002_SOFTMAX_MODERATE

# ---------------------------------------------------------------- seed 000, as printed
EXAMPLE = qkv.examples.delivery_example()
X, TOKENS = EXAMPLE.X, EXAMPLE.tokens
HEAD_1, HEAD_2 = EXAMPLE.heads
K1_RAW, K1, Q1, V1 = (np.array(SEED_000[1][step]) for step in ("K_raw", "K", "Q", "V"))
S_RAW1, S1, A1, O1 = (np.array(SEED_000[1][step]) for step in ("S_raw", "S", "A", "O"))
O2 = np.array(SEED_000[2]["O"])
O_CONCAT = np.array(SEED_000_O_CONCAT)
W_O_MIXING = np.array([[0.5, 0, 1, 0], [0, 0.5, 0, 1], [0.5, 0, 0, 0], [0, 0.5, 0, 0]])
Q1_EXAMPLE = qkv.examples.q1_example()  # seed 002


def row_softmax(S, axis=-1):
    """Softmax written out for the tests: exp, then divide by the sum along ``axis``."""
    e = np.exp(np.asarray(S, dtype=float))
    return e / e.sum(axis=axis, keepdims=True)


def passes(expectation, answer, name="answer") -> str:
    verdict = judge_value(answer, name, expectation, reveal=False)
    assert verdict.passed, verdict.message
    return verdict.message


def fails(expectation, answer, name="answer", *, reveal=False) -> str:
    verdict = judge_value(answer, name, expectation, reveal=reveal)
    assert not verdict.passed, f"{answer!r} passed: {verdict.message}"
    return verdict.message


def head_1(step, name="answer"):
    return expect_head_step(step, X, HEAD_1, name=name, tokens=TOKENS)


# ---------------------------------------------------------------- right answers pass


@pytest.mark.parametrize("step, table", [("K", K1), ("Q", Q1), ("V", V1), ("S_raw", S_RAW1), ("S", S1),
                                         ("A", A1), ("O", O1)])
def test_seed_tables_rounded_to_two_decimals_pass(step, table):
    passes(head_1(step), np.round(table, 2).tolist())


def test_seed_002_hand_example_passes():
    args = (Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V)
    passes(expect_attention_step("S_raw", *args, name="scores"), [1, 0, 1])
    passes(expect_attention_step("S", *args, name="scaled"), [0.707, 0, 0.707])
    passes(expect_attention_step("A", *args, name="weights"), SEED_002_Q1_WEIGHTS)
    passes(expect_attention_step("O", *args, name="output"), SEED_002_Q1_OUTPUT)
    passes(expect_attention_step("O", *args, name="output"), [SEED_002_Q1_OUTPUT])  # as a 1 x 2 matrix too


def test_seed_002_softmax_passes_and_the_concatenation_of_seed_000_too():
    passes(expect_softmax([2, 1, 0], name="s"), SEED_002_SOFTMAX_MODERATE)
    passes(expect_multi_head_step("O_concat", X, EXAMPLE.heads, EXAMPLE.W_O, name="O_concat"), O_CONCAT)
    passes(expect_multi_head_step("Y", X, EXAMPLE.heads, W_O_MIXING, name="Y"), O_CONCAT @ W_O_MIXING)


def test_numpy_arrays_and_integers_are_accepted():
    passes(head_1("Q"), np.array([[1, 0], [0, 1], [1, 1]], dtype=np.int64))


def test_hand_answers_are_accepted_within_one_hundredth_and_feedback_shows_the_expected_value():
    near = A1.copy()
    near[2, 1] += 0.0099
    passes(head_1("A", "A1"), near)
    off = A1.copy()
    off[2, 1] += 0.011
    assert fails(head_1("A", "A1"), off, "A1").startswith(
        "A1[2, 1] (row 補償, column 晚到) is 0.676241: too large (an answer within 0.01 of the exact value "
        "counts); 1 of 9 entries is off.")
    assert fails(head_1("A", "A1"), off, "A1", reveal=True).startswith(
        "A1[2, 1] (row 補償, column 晚到) is 0.676241, expected 0.665241 (within 0.01); 1 of 9 entries is off.")


# ---------------------------------------------------------------- each slip is recognised


HEAD_SLIPS = [
    ("S", S_RAW1, slips.NO_SQRT_DK),
    ("A", row_softmax(S_RAW1), slips.NO_SQRT_DK),
    ("O", row_softmax(S_RAW1) @ V1, slips.NO_SQRT_DK),
    ("S", S_RAW1 / 2, slips.DIVIDED_BY_D_K),
    ("A", row_softmax(S1, axis=0), slips.SOFTMAX_OVER_COLUMNS),
    ("O", row_softmax(S1, axis=0) @ V1, slips.SOFTMAX_OVER_COLUMNS),
    ("A", S1 / S1.sum(axis=1, keepdims=True), slips.NO_EXPONENTIAL),
    ("A", np.exp(S1) / np.exp(S1).sum(axis=1), slips.MISSING_KEEPDIMS),  # column j divided by row j's sum
    ("K", K1_RAW, slips.BIAS_DROPPED),
    ("S_raw", K1 @ Q1.T, slips.SCORES_TRANSPOSED),
    ("O", A1 @ K1, slips.WEIGHTS_APPLIED_TO_K),
]


@pytest.mark.parametrize("step, slipped, slip", HEAD_SLIPS)
def test_head_slip_is_named(step, slipped, slip):
    message = fails(head_1(step), np.round(slipped, 2))
    assert message.endswith(f"Likely slip: {slip.advice}"), message


@pytest.mark.parametrize("step, slipped, slip", HEAD_SLIPS[:3] + HEAD_SLIPS[-3:])
def test_in_chinese_the_same_slip_is_named_in_chinese(step, slipped, slip):
    """A notebook in 繁體中文 gets the same verdict, every word of it from the checks' catalogue."""
    english = fails(head_1(step), np.round(slipped, 2))
    with speaking("zh-TW"):
        message = fails(head_1(step), np.round(slipped, 2))
        advice = slip.advice
    assert advice != slip.english and re.search(r"[\u4e00-\u9fff]", advice), advice
    assert message.endswith(f"可能的疏失：{advice}"), message
    assert message.splitlines()[0].split(" ")[0] == english.splitlines()[0].split(" ")[0]  # the same entry
    assert "Likely slip" not in message and " is " not in message, message


def test_k_instead_of_k_transposed_is_named_from_the_shape():
    message = fails(head_1("S_raw", "S_raw1"), np.round(Q1.T @ K1, 2), "S_raw1")
    assert message.startswith("S_raw1 has shape (2, 2) but should have shape (3, 3): one row per query (3), "
                              "one column per key (3).")
    assert message.endswith(f"Likely slip: {slips.K_NOT_TRANSPOSED.advice}")


@pytest.mark.parametrize("written", [[[0.71, 0.71]], [0.71, 0.71]], ids=["one row", "a flat list"])
def test_bias_written_once_is_named_from_the_shape(written):
    """A student met: the bias written as a flat list got no hint."""
    assert fails(head_1("B_K"), written).endswith(f"Likely slip: {slips.BIAS_NOT_BROADCAST.advice}")


def test_heads_in_the_wrong_order_stacked_or_w_o_transposed_are_named():
    heads, W_O = EXAMPLE.heads, EXAMPLE.W_O
    swapped = np.hstack([O2, O1])
    concat = expect_multi_head_step("O_concat", X, heads, W_O, name="O_concat")
    assert fails(concat, swapped).endswith(HEADS_IN_WRONG_ORDER.advice)
    assert fails(concat, np.vstack([O1, O2])).endswith(HEADS_STACKED_AS_ROWS.advice)
    mixing = expect_multi_head_step("Y", X, heads, W_O_MIXING, name="Y")
    assert fails(mixing, swapped @ W_O_MIXING).endswith(HEADS_IN_WRONG_ORDER.advice)
    assert fails(mixing, O_CONCAT @ W_O_MIXING.T).endswith(slips.W_O_TRANSPOSED.advice)


@pytest.mark.parametrize("answer, slip", [
    ([2 / 3, 1 / 3, 0], slips.NO_EXPONENTIAL),
    (np.exp([2.0, 1.0, 0.0]), slips.NOT_NORMALISED),
])
def test_softmax_slips_are_named(answer, slip):
    assert fails(expect_softmax([2, 1, 0], name="s"), answer).endswith(f"Likely slip: {slip.advice}")


def test_variance_slips_are_named():
    assert fails(expect_dot_product_variance(64, 1.0), 8).endswith(slips.STANDARD_DEVIATION_GIVEN.advice)
    assert fails(expect_dot_product_variance(64, 1.0, scaled=True), 64).endswith(SCALING_NOT_APPLIED.advice)
    assert fails(expect_dot_product_variance(64, 1.0, scaled=True), 8).endswith(SCALED_BY_SQRT_ONCE.advice)
    assert fails(expect_typical_size(64, 1.0), 64).endswith(VARIANCE_GIVEN.advice)
    # components of variance 2: each product has variance 2 * 2, not 2
    assert fails(expect_dot_product_variance(36, 2.0), 72).endswith(VARIANCE_NOT_SQUARED.advice)
    passes(expect_dot_product_variance(36, 2.0), 144)
    passes(expect_typical_size(36, 2.0), 12)
    passes(expect_dot_product_variance(36, 2.0, scaled=True), 4)


def test_dot_product_variance_agrees_with_a_simulation():
    rng = np.random.default_rng(0)
    for d_k, variance in [(4, 1.0), (64, 1.0), (16, 2.0), (25, 0.5)]:
        q = rng.normal(scale=np.sqrt(variance), size=(100_000, d_k))
        k = rng.normal(scale=np.sqrt(variance), size=(100_000, d_k))
        assert np.var((q * k).sum(axis=1)) == pytest.approx(dot_product_variance(d_k, variance), rel=0.03)


SEED_IMAGE = np.array([[0, 0, 1, 1, 0, 0], [0, 0, 1, 1, 0, 0], [0, 1, 1, 0, 2, 2], [0, 1, 1, 0, 2, 2]], float)


def test_patch_grid_slips_are_named():
    patches = np.stack([SEED_IMAGE[r:r + 2, c:c + 2].ravel() for r in (0, 2) for c in (0, 2, 4)])  # row by row
    weights = row_softmax(patches @ patches.T / 2)[4]  # d = 4
    grid = expect_patch_grid(SEED_IMAGE, 2, 4, name="grid")
    passes(grid, weights.reshape(2, 3))
    assert fails(grid, weights.reshape(3, 2).T).endswith(GRID_FILLED_BY_COLUMNS.advice)
    best = divmod(int(np.argmax(weights)), 3)
    cell = expect_brightest_patch(SEED_IMAGE, 2, 4)
    passes(cell, best)
    assert fails(cell, best[::-1]).endswith(ROW_AND_COLUMN_SWAPPED.advice)


def test_a_position_counted_from_one_is_named():
    """A student met: 1-based positions got no hint."""
    patches = np.stack([SEED_IMAGE[r:r + 2, c:c + 2].ravel() for r in (0, 2) for c in (0, 2, 4)])
    row, column = divmod(int(np.argmax(row_softmax(patches @ patches[4] / 2))), 3)
    message = fails(expect_brightest_patch(SEED_IMAGE, 2, 4), (row + 1, column + 1))
    assert message.endswith(f"Likely slip: {ONE_BASED_POSITION.advice}")


def test_a_slip_that_changes_nothing_is_not_named():
    # Head 1's query bias is zero: a Q without it is right, and must pass rather than be called a slip.
    passes(head_1("Q"), Q1)


# ---------------------------------------------------------------- hints without a slip


def test_the_row_sum_hint_names_the_row_whose_sum_is_off():
    """A student met: the hint named a row whose (rounded) weights add up to 0.99 instead of the wrong one."""
    answer = np.round(A1, 2)
    answer[0] = [0.33, 0.33, 0.33]  # adds up to 0.99: rounding, not a wrong row (and its entries are off)
    answer[2] = [0.50, 0.50, 0.20]  # adds up to 1.2
    message = fails(head_1("A", "A1"), answer, "A1")
    assert "The weights in row 補償 (row 2, counting from 0) of A1 add up to 1.2" in message
    assert "row 外送" not in message.splitlines()[-1]


def test_answers_rounded_to_one_decimal_get_a_hint():
    """A student met: answers rounded to 1 decimal got no hint."""
    message = fails(head_1("A", "A1"), np.round(A1, 1), "A1")
    assert message.endswith("Your entries are rounded to 1 decimal, which is too coarse: write 2 decimals "
                            "(an entry counts within 0.01).")


def test_a_transposed_square_answer_gets_a_hint():
    message = fails(head_1("A", "A1"), np.round(A1.T, 2), "A1")
    assert "Did you transpose it?" in message


# ---------------------------------------------------------------- answers that are not answers


@pytest.mark.parametrize("answer, start", [
    (None, "Q1 is None: replace None with your answer, a list of rows of numbers."),
    (..., "Q1 is still ... : replace it with your answer"),
    ("[[1, 0], [0, 1], [1, 1]]", "Q1 is the text '[[1, 0], [0, 1], [1, 1]]': write numbers without quotes"),
    ([[1, 0], [0, 1], [1, "1"]], "Q1[2, 1] is '1' (str), not a number"),
    ([[1, 0], [0, 1], [1, None]], "Q1[2, 1] is None (NoneType), not a number"),
    ([[1, 0], [0, 1], [1]], "Q1 is not rectangular: its rows have 2, 2, 1 entries."),
    ([[1, 0], [0, 1], [1, np.nan]], "Q1[2, 1] is nan, not a finite number."),
    ([[True, False]] * 3, "Q1 holds True/False values"),
    ({"Q": 1}, "Q1 is a dict"),
    ([[1, 0, 1], [0, 1, 1]], "Q1 has shape (2, 3) but should have shape (3, 2): one row per token (3), "
                             "one column per query dimension (d_k = 2).\nDid you transpose it?"),
    ([1, 0, 0, 1, 1, 1], "Q1 has shape (6,) but should have shape (3, 2)"),
])
def test_unusable_answers_get_a_clear_message(answer, start):
    assert fails(head_1("Q", "Q1"), answer, "Q1").startswith(start)


class Hostile:
    """An answer whose conversion to an array raises."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("no")

    def __len__(self):
        raise RuntimeError("no")


@pytest.mark.parametrize("answer", [Hostile(), [Hostile()], object(), [1j, 2], 10**400, [[1e308, -1e308]] * 3])
def test_judging_never_raises(answer):
    verdict = judge_value(answer, "Q1", head_1("Q", "Q1"), reveal=False)
    assert not verdict.passed and verdict.message.startswith("Q1")


# ---------------------------------------------------------------- functions students write


def loop_softmax(x, axis=-1):
    """An independent softmax: loops over every slice along ``axis``."""
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    out = np.empty_like(x)
    for index in np.ndindex(x.shape[:-1]):
        row = x[index]
        e = [np.exp(v - max(row)) for v in row]
        out[index] = [v / sum(e) for v in e]
    return np.moveaxis(out, -1, axis)


def loop_attention(Q, K, V):
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    weights = loop_softmax(np.array([[sum(q * k) / np.sqrt(len(q)) for k in K] for q in Q]))
    output = np.array([[sum(w * V[j, c] for j, w in enumerate(row)) for c in range(V.shape[1])] for row in weights])
    return output, weights


def function_check(judge, explain=None, together=None) -> FunctionCheck:
    return FunctionCheck("f", "f", calls=lambda g, rng: [], judge_result=judge, description="",
                         explain_raised=explain, judge_together=together)


def verdict_of(judge, func, calls, explain=None, together=None):
    with qkv_switched_off():
        return function_check(judge, explain, together).judge(outcomes_of(func, calls), calls, reveal=False)


SOFTMAX_CALLS = [softmax_call([2.0, 1.0, 0.0], None, what="[2, 1, 0]", behaviour="1-D"),
                 softmax_call(S1, -1, what="S1", behaviour="rows"),
                 softmax_call(np.arange(12.0).reshape(3, 4) / 3, -1, what="a 3 x 4 array", behaviour="rows"),
                 softmax_call(np.arange(15.0).reshape(5, 3) / 4, 0, what="a 5 x 3 array", behaviour="axis 0"),
                 softmax_call(np.arange(24.0).reshape(2, 3, 4) / 5, 1, what="a 3-D array", behaviour="3-D"),
                 softmax_call([1000.0, 999.0, 998.0], None, what="[1000, 999, 998]", behaviour="large")]


def test_independent_functions_pass():
    assert verdict_of(judge_softmax, loop_softmax, SOFTMAX_CALLS).passed
    rng = np.random.default_rng(2)
    calls = [attention_call(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V, behaviour="one query"),
             attention_call(rng.normal(size=(2, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 4)),
                            behaviour="cross")]
    assert verdict_of(judge_attention, loop_attention, calls).passed


def test_code_answers_are_checked_to_one_millionth():
    def nearly(x, axis=-1):
        return loop_softmax(x, axis=axis) + 2e-6

    message = verdict_of(judge_softmax, nearly, SOFTMAX_CALLS[:1]).message
    assert "(an answer within 1e-06 of the exact value counts); 3 of 3 entries are off" in message


def test_softmax_without_the_max_overflows_with_a_hint():
    def naive(x, axis=-1):
        e = np.exp(np.asarray(x, dtype=float))
        return e / e.sum(axis=axis, keepdims=True)

    message = verdict_of(judge_softmax, naive, SOFTMAX_CALLS[-1:]).message
    assert message.startswith("softmax([1000, 999, 998])[0] is nan, not a finite number.")
    assert "subtract the maximum along the axis" in message


def test_softmax_along_the_wrong_axis_is_named():
    def last_axis_always(x, axis=-1):
        return loop_softmax(x, axis=-1)

    def columns(x, axis=-1):
        return loop_softmax(x, axis=0)

    assert verdict_of(judge_softmax, last_axis_always, SOFTMAX_CALLS[3:4]).message.endswith(WRONG_AXIS.advice)
    assert verdict_of(judge_softmax, columns, SOFTMAX_CALLS[1:2]).message.endswith(
        slips.SOFTMAX_OVER_COLUMNS.advice)


def test_missing_keepdims_is_named_whether_it_gives_wrong_numbers_or_an_error():
    """A student met: a softmax without keepdims got no hint."""

    def without_keepdims(x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis))
        return e / np.sum(e, axis=axis)

    square = verdict_of(judge_softmax, without_keepdims, SOFTMAX_CALLS[1:2], explain_softmax_error)
    assert square.message.endswith(f"Likely slip: {slips.MISSING_KEEPDIMS.advice}"), square.message
    raised = verdict_of(judge_softmax, without_keepdims, SOFTMAX_CALLS[2:3], explain_softmax_error)
    assert "raised ValueError: operands could not be broadcast" in raised.message
    assert raised.message.endswith(f"Likely slip: {slips.MISSING_KEEPDIMS.advice}")


def test_attention_with_k_instead_of_k_transposed_gets_the_hint_not_only_numpys_error():
    """A student met: numpy's gufunc error, and nothing about K^T."""

    def with_K(Q, K, V):
        weights = loop_softmax(Q @ K / np.sqrt(Q.shape[1]))
        return weights @ V, weights

    calls = [attention_call(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V, what="q1, K, V", behaviour="one query")]
    message = verdict_of(judge_attention, with_K, calls, explain_attention_error).message
    assert message.startswith("scaled_dot_product_attention(q1, K, V) raised ValueError: matmul")
    assert f"Likely slip: {slips.K_NOT_TRANSPOSED.advice}" in message
    assert message.endswith("Q is (1, 2) and K is (3, 2): Q K does not fit, Q K^T is (1, 3).")


def test_attention_returning_weights_and_output_swapped_is_named():
    """A student met: (weights, output) swapped got only a shape message."""

    def swapped(Q, K, V):
        output, weights = loop_attention(Q, K, V)
        return weights, output

    rng = np.random.default_rng(3)
    for Q, K, V in [(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V),  # weights (1, 3), output (1, 2)
                    (rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 3)))]:  # both (3, 3)
        message = verdict_of(judge_attention, swapped, [attention_call(Q, K, V, behaviour="")]).message
        assert message.endswith(f"Likely slip: {slips.OUTPUT_AND_WEIGHTS_SWAPPED.advice}"), message


def test_attention_slips_and_return_values():
    def unscaled(Q, K, V):
        weights = loop_softmax(np.asarray(Q) @ np.asarray(K).T)
        return weights @ V, weights

    calls = [attention_call(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V, behaviour="")]
    assert verdict_of(judge_attention, unscaled, calls).message.endswith(f"Likely slip: {slips.NO_SQRT_DK.advice}")
    message = verdict_of(judge_attention, lambda Q, K, V: loop_attention(Q, K, V)[0], calls).message
    assert "returned one ndarray; it must return a pair: return output, weights" in message


def test_a_function_that_raises_or_returns_none_is_explained():
    def crashes(x, axis=-1):
        return x.nonexistent

    def unfinished(x, axis=-1):
        """Only the docstring, as released."""

    def stub(x, axis=-1):
        raise NotImplementedError()

    call = SOFTMAX_CALLS[:1]
    assert verdict_of(judge_softmax, crashes, call).message.startswith("softmax([2, 1, 0]) raised AttributeError:")
    assert "returned None: write the body" in verdict_of(judge_softmax, unfinished, call).message
    assert "raised NotImplementedError: write the body" in verdict_of(judge_softmax, stub, call).message


def test_split_and_merge_without_the_transpose_are_named_each_with_its_own_advice():
    """A student met: merge_heads' slip advice described split_heads' reshape."""

    def split_by_reshape(Z, h):
        n, d = np.shape(Z)
        return np.reshape(Z, (h, n, d // h))

    def merge_by_reshape(Z):
        h, n, d_k = np.shape(Z)
        return np.reshape(Z, (n, h * d_k))

    split = verdict_of(judge_split_heads, split_by_reshape, [split_call(np.arange(12.0).reshape(3, 4), 2,
                                                                         behaviour="")]).message
    assert split.endswith(f"Likely slip: {slips.RESHAPED_WITHOUT_TRANSPOSE.advice}")
    merge = verdict_of(judge_merge_heads, merge_by_reshape, [merge_call(np.arange(12.0).reshape(2, 3, 2),
                                                                         behaviour="")]).message
    assert merge.endswith(f"Likely slip: {slips.MERGED_WITHOUT_TRANSPOSE.advice}")
    assert "(h, n, d_k) straight to (n, h * d_k)" in slips.MERGED_WITHOUT_TRANSPOSE.advice


def test_loops_written_by_hand_split_and_merge_correctly():
    def split_by_loops(Z, h):
        n, d = np.shape(Z)
        return np.array([[[Z[t][i * (d // h) + c] for c in range(d // h)] for t in range(n)] for i in range(h)])

    def merge_by_loops(Z):
        return np.array([[v for head in Z for v in head[t]] for t in range(len(Z[0]))])

    rng = np.random.default_rng(4)
    for n, h, d_k in [(5, 2, 3), (1, 8, 4), (7, 3, 5)]:
        Z = rng.normal(size=(n, h * d_k))
        assert verdict_of(judge_split_heads, split_by_loops, [split_call(Z, h, behaviour="")]).passed
        assert verdict_of(judge_merge_heads, merge_by_loops, [merge_call(split_by_loops(Z, h), behaviour="")]).passed


# ---------------------------------------------------------------- the student's own code


def uses_qkv(x, axis=-1):
    return qkv.softmax(x, axis)


def imports_inside(x, axis=-1):
    import importlib

    return importlib.import_module("qkv").softmax(x, axis)


@pytest.mark.parametrize("func", [uses_qkv, imports_inside])
def test_calling_qkv_fails_while_the_checks_still_use_it(func):
    original = qkv.softmax
    message = verdict_of(judge_softmax, func, SOFTMAX_CALLS[:1]).message
    assert message.startswith("softmax([2, 1, 0]) calls qkv.softmax: write the computation yourself"), message
    assert qkv.softmax is original and qkv.attention.softmax is original, "qkv must be restored after the check"


# ---------------------------------------------------------------- simulations


def sample_dot_products(d_k, n_samples, rng):
    return np.einsum("ij,ij->i", rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k)))


def test_a_correct_simulation_passes_by_range():
    for d_k in (4, 64):
        calls = [sample_call(d_k, 20_000, d_k, behaviour="")]
        assert verdict_of(simulated_variance_judge(scaled=False), sample_dot_products, calls).passed
        assert verdict_of(simulated_variance_judge(scaled=True), sample_dot_products, calls).passed
    calls = rng_calls(np.random.default_rng(5), behaviour="")
    assert verdict_of(judge_samples_shape, sample_dot_products, calls, together=judge_uses_its_rng).passed


def test_wrong_simulations_fail_with_a_reason():
    calls = [sample_call(64, 20_000, 1, behaviour="")]
    raw = simulated_variance_judge(scaled=False)
    scaled = lambda d_k, n, rng: sample_dot_products(d_k, n, rng) / np.sqrt(d_k)  # noqa: E731
    assert "return the raw dot products" in verdict_of(raw, scaled, calls).message
    constant = lambda d_k, n, rng: np.full(n, float(d_k))  # noqa: E731
    assert "All your samples are equal" in verdict_of(raw, constant, calls).message
    short = lambda d_k, n, rng: sample_dot_products(d_k, 10, rng)  # noqa: E731
    assert "should have shape (20000,)" in verdict_of(raw, short, calls).message
    own_generator = lambda d_k, n, rng: sample_dot_products(d_k, n, np.random.default_rng())  # noqa: E731
    message = verdict_of(judge_samples_shape, own_generator, rng_calls(np.random.default_rng(6), behaviour=""),
                         together=judge_uses_its_rng).message
    assert "different samples for two generators made with the same seed" in message


# ---------------------------------------------------------------- how Jupyter shows a failed check


def test_jupyter_shows_only_the_message():
    lines = AnswerMismatch("Q1 is None: replace None with your answer.")._render_traceback_()
    assert lines == ["\x1b[0;31mAnswerMismatch\x1b[0m: Q1 is None: replace None with your answer."]


def test_a_raised_outcome_keeps_the_students_message():
    check = function_check(judge_softmax)
    verdict = check.judge([Raised("ZeroDivisionError", "in the student's code")], SOFTMAX_CALLS[:1], reveal=False)
    assert verdict.message == "softmax([2, 1, 0]) raised ZeroDivisionError: in the student's code"


# ---------------------------------------------------------------- problem set 10: the online softmax, and costs
# Seed 002's scores [2, 1, 0] in the blocks [2, 1] and [0], by hand: m_1 = 2, l_1 = 1 + e^-1; then the
# maximum stays and l_2 = l_1 + e^-2. Read backwards, [0, 1] then [2]: m_1 = 1, l_1 = e^-1 + 1, the
# sum is rescaled by e^(1 - 2) and l_2 = l_1 e^-1 + 1, the same sum.
E1, E2 = 0.367879, 0.135335
FORWARDS, BACKWARDS = [np.array([2.0, 1.0]), np.array([0.0])], [np.array([0.0, 1.0]), np.array([2.0])]


def test_the_online_softmax_by_hand_passes():
    passes(expect_online_state(FORWARDS, 1), [2, 1 + E1])
    passes(expect_online_state(FORWARDS, 2), [2, 1 + E1 + E2])
    passes(expect_online_weights(FORWARDS, name="weights"), SEED_002_SOFTMAX_MODERATE)
    passes(expect_online_state(BACKWARDS, 1), [1, E1 + 1])
    passes(expect_rescale(BACKWARDS, 2), E1)
    passes(expect_online_state(BACKWARDS, 2), [2, (E1 + 1) * E1 + 1])


@pytest.mark.parametrize("blocks, t, answer, slip", [
    (BACKWARDS, 2, [2, E1 + 1 + 1], RESCALE_FORGOTTEN),
    (BACKWARDS, 2, [2, (E1 + 1) * np.e + 1], RESCALE_EXPONENT_FLIPPED),
    (FORWARDS, 2, [2, 1 + E1 + 1], TERMS_FROM_BLOCK_MAX),
    (FORWARDS, 2, [0, 1 + E1 + 1], BLOCK_MAX_AS_RUNNING_MAX),
    (FORWARDS, 1, [2, np.exp(2) + np.exp(1)], MAX_NOT_SUBTRACTED),
])
def test_each_online_slip_is_named(blocks, t, answer, slip):
    message = fails(expect_online_state(blocks, t), np.round(answer, 2), "state")
    assert f"Likely slip: {slip.advice}" in message, message
    assert "state[1] (l)" in message or "state[0] (m)" in message, "the entry is named by what it is"


def test_a_rescale_the_wrong_way_round_is_named():
    message = fails(expect_rescale(BACKWARDS, 2), round(np.e, 2), "rescale")
    assert RESCALE_EXPONENT_FLIPPED.advice in message and "too large" in message


def test_weights_divided_by_the_first_blocks_sum_are_named():
    message = fails(expect_online_weights(BACKWARDS, name="w"), np.round(np.exp([-2, -1, 0]) / (E1 + 1), 2), "w")
    assert WEIGHTS_NOT_FINAL_SUM.advice in message


@pytest.mark.parametrize("answer, slip", [
    (197, N_NOT_SQUARED), (12 * 197**2, EVERY_HEAD_COUNTED),
])
def test_counting_the_scores_of_vit_base(answer, slip):
    passes(expect_scores_per_head(197, 12), 38809)
    assert slip.advice in fails(expect_scores_per_head(197, 12), answer)


@pytest.mark.parametrize("answer, slip", [
    (197**2 * 4, HEADS_FORGOTTEN), (12 * 197**2, BYTES_FORGOTTEN),
    (12 * 197**2 * 32, BITS_NOT_BYTES), (12 * 197**2 * 8, WRONG_BYTES_PER_NUMBER),
    (12 * 197 * 4, N_NOT_SQUARED),
])
def test_counting_the_bytes_of_vit_bases_weights(answer, slip):
    passes(expect_weights_bytes(197, 12, "float32"), 1_862_832)
    assert slip.advice in fails(expect_weights_bytes(197, 12, "float32"), answer)
    assert "within 0.5" in fails(expect_weights_bytes(197, 12, "float32"), 1_862_833), "a count is exact"


def test_the_chapters_long_context_takes_64_gib():
    passes(expect_weights_gib(32_768, 32, "float16"), 64)
    assert GB_NOT_GIB.advice in fails(expect_weights_gib(32_768, 32, "float16"), 68.72)
    assert MIB_NOT_GIB.advice in fails(expect_weights_gib(32_768, 32, "float16"), 65536)
    passes(expect_memory_growth(2), 4)
    assert GROWTH_LINEAR.advice in fails(expect_memory_growth(3), 3)


def fold_by_hand(m, l, block):
    m_new = max([m, *block])
    return m_new, l * np.exp(m - m_new) + sum(np.exp(s - m_new) for s in block)


def online_by_hand(blocks):
    m, l, running = -np.inf, 0.0, []
    for block in blocks:
        m, l = fold_by_hand(m, l, block)
        running.append([m, l])
    return np.exp(np.concatenate(blocks) - m) / l, running


FOLD_CALLS = fold_calls_after(FORWARDS[0], FORWARDS[1], behaviour="") + fold_calls_after(
    BACKWARDS[0], BACKWARDS[1], behaviour="")[1:] + [fold_call(1000.0, 1.0, [1003.0, 999.0], behaviour="")]
ONLINE_CALLS = [online_call(FORWARDS, behaviour=""), online_call(BACKWARDS, behaviour=""),
                online_call([[1.0], [3.0, -1.0], [0.5], [2.5, 4.0]], behaviour=""),
                online_call([[1000.0, 998.0], [1001.5]], behaviour="")]


def test_online_functions_written_with_loops_pass():
    assert verdict_of(judge_fold_block, fold_by_hand, FOLD_CALLS).passed
    assert verdict_of(judge_online_softmax, online_by_hand, ONLINE_CALLS).passed


def test_wrong_online_functions_are_named():
    def not_rescaled(m, l, block):
        m_new = max([m, *block])
        return m_new, l + sum(np.exp(s - m_new) for s in block)

    message = verdict_of(judge_fold_block, not_rescaled, FOLD_CALLS).message
    assert message.startswith("fold_block(1, 1.367879, [2]) is (") or "Likely slip" in message, message
    assert RESCALE_FORGOTTEN.advice in message
    message = verdict_of(judge_fold_block, lambda m, l, b: max(m, b), FOLD_CALLS, explain_fold_error).message
    assert "max(m, block.max())" in message
    unsubtracted = lambda m, l, b: (max([m, *b]), l + np.exp(b).sum())  # noqa: E731
    message = verdict_of(judge_fold_block, unsubtracted, FOLD_CALLS[-1:]).message  # scores near 1000
    assert "not a finite number" in message and "e^(s - m)" in message

    def stale(blocks):
        weights, running = online_by_hand(blocks)
        return np.concatenate([np.exp(np.asarray(b) - m) for b, (m, _) in zip(blocks, running)]) / running[-1][1], \
            running

    message = verdict_of(judge_online_softmax, stale, ONLINE_CALLS).message
    assert message.startswith("the weights of online_softmax([[0, 1], [2]])") and \
        WEIGHTS_WITH_STALE_MAX.advice in message, message
    message = verdict_of(judge_online_softmax, lambda blocks: online_by_hand(blocks)[::-1], ONLINE_CALLS).message
    assert "returned second" in message


def test_online_functions_calling_qkv_fail():
    uses_qkv = lambda blocks: qkv.blockwise.online_softmax(blocks)  # noqa: E731
    message = verdict_of(judge_online_softmax, uses_qkv, ONLINE_CALLS).message
    assert "calls qkv.online_softmax: write the computation yourself" in message
    assert qkv.blockwise.online_softmax is qkv.online_softmax, "qkv must be restored after the check"


# ---------------------------------------------------------------- problem set 11: soft lookup
# Seed 002's q1 = [1, 0] over k1 = [1, 0], k2 = [0, 1], k3 = [1, 1] with sigma = 1, by hand: the squared
# distances 0, 2, 1; the exponents 0, -1, -0.5; the weights e^0, e^-1, e^-0.5 over their sum.
SIGMA_1 = np.array([1.0, E1, 0.606531])
KERNEL_WEIGHTS = SIGMA_1 / SIGMA_1.sum()


def kernel(step, sigma=1.0):
    return expect_kernel_step(step, Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V, sigma, name="answer",
                              keys=("k1", "k2", "k3"))


def test_the_chapters_gaussian_kernel_by_hand_passes():
    passes(kernel("distances"), [0, 2, 1])
    passes(kernel("exponents"), [0, -1, -0.5])
    passes(kernel("weights"), np.round(KERNEL_WEIGHTS, 2))
    passes(kernel("prediction"), np.round(KERNEL_WEIGHTS @ Q1_EXAMPLE.V, 2))
    passes(kernel("extended_scores"), [0.5, -0.5, 0])  # q.k - |k|^2 / 2: 1 - 1/2, 0 - 1/2, 1 - 1


@pytest.mark.parametrize("step, sigma, answer, slip", [
    ("exponents", 1.0, [0, 1, 0.5], MINUS_SIGN_FORGOTTEN),
    ("exponents", 1.0, [0, -2, -1], HALF_FORGOTTEN),
    ("exponents", 0.5, [0, -2, -1], SIGMA_NOT_SQUARED),  # -d / (2 x 0.5), not -d / (2 x 0.25)
    ("distances", 1.0, [0, 1.41, 1], DISTANCE_NOT_SQUARED),
    ("weights", 1.0, SEED_002_Q1_WEIGHTS, DOT_PRODUCT_WEIGHTS),
    ("prediction", 1.0, [0.67, 0.67], PLAIN_MEAN),
    ("prediction", 1.0, SEED_002_Q1_OUTPUT, DOT_PRODUCT_WEIGHTS),
    ("extended_scores", 1.0, [1.5, 0.5, 2], KEY_TERM_SIGN),
    ("extended_scores", 1.0, [0, -1, -0.5], EXPONENTS_NOT_EXTENDED),
    ("extended_scores", 1.0, [0, -1, -1], KEY_HALF_FORGOTTEN),  # q.k - |k|^2: 1 - 1, 0 - 1, 1 - 2
    ("extended_scores", 2.0, [0.5, -0.5, 0], NO_SIGMA_SCALE),
])
def test_each_kernel_slip_is_named(step, sigma, answer, slip):
    message = fails(kernel(step, sigma), answer)
    assert f"Likely slip: {slip.advice}" in message, message


def test_the_prediction_made_from_the_keys_is_named():
    """A student's variant whose values differ from its keys: the weights applied to K, not V."""
    from qkv_exercises import variants

    lookup = next(ex for ex in map(variants.kernel_lookup_example, range(1, 50)) if not np.allclose(ex.K, ex.V))
    expectation = expect_kernel_step("prediction", lookup.Q, lookup.K, lookup.V, lookup.sigma, name="prediction")
    from_keys = qkv.lookup.gaussian_kernel_weights(lookup.Q, lookup.K, lookup.sigma) @ lookup.K  # (1, d)
    message = fails(expectation, np.round(from_keys[0], 2))
    assert f"Likely slip: {slips.WEIGHTS_APPLIED_TO_K.advice}" in message, message


def test_with_sigma_2_no_half_and_sigma_not_squared_are_both_named():
    message = fails(kernel("exponents", 2.0), [0, -0.5, -0.25])  # -d / 4: -d / sigma^2 and -d / (2 sigma) alike
    assert HALF_FORGOTTEN.advice in message and SIGMA_NOT_SQUARED.advice in message, message


def kernel_by_loops(Q, K, sigma):
    rows = []
    for q in Q:
        exponents = [-sum((a - b) ** 2 for a, b in zip(q, k)) / (2 * sigma**2) for k in K]
        top = max(exponents)
        e = [np.exp(x - top) for x in exponents]
        rows.append([x / sum(e) for x in e])
    return np.array(rows)


KERNEL_CALLS = [kernel_call(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, 1.0, behaviour=""),
                kernel_call([[0.0, 0.5], [1.0, -1.0]], Q1_EXAMPLE.K, 0.5, behaviour=""),
                kernel_call([[0.5], [3.0]], [[0.0], [1.0], [2.0], [4.0]], 0.75, behaviour=""),
                kernel_call([[40.0, 41.0, 39.0]], [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]], 0.2, behaviour="")]


def test_a_kernel_written_with_loops_passes_and_slips_are_named():
    assert verdict_of(judge_kernel_weights, kernel_by_loops, KERNEL_CALLS).passed
    over_queries = lambda Q, K, sigma: kernel_by_loops(K, Q, sigma).T  # noqa: E731  each column sums to 1
    message = verdict_of(judge_kernel_weights, over_queries, KERNEL_CALLS).message
    assert slips.SOFTMAX_OVER_COLUMNS.advice in message, message
    unsubtracted = lambda Q, K, sigma: (lambda e: e / e.sum(axis=1, keepdims=True))(  # noqa: E731
        np.exp(-((np.asarray(Q)[:, None] - np.asarray(K)[None]) ** 2).sum(-1) / (2 * sigma**2)))
    message = verdict_of(judge_kernel_weights, unsubtracted, KERNEL_CALLS).message
    assert "nan, not a finite number" in message and "underflows to 0" in message
    row_by_row = lambda Q, K, sigma: np.exp(-((np.asarray(Q) - np.asarray(K)) ** 2).sum(-1))  # noqa: E731
    message = verdict_of(judge_kernel_weights, row_by_row, KERNEL_CALLS[1:2], explain_kernel_error).message
    assert "Q[:, None, :] - K[None, :, :]" in message
    message = verdict_of(judge_kernel_weights, lambda Q, K, s: qkv.lookup.gaussian_kernel_weights(Q, K, s),
                         KERNEL_CALLS).message
    assert "calls qkv.gaussian_kernel_weights" in message


# ---------------------------------------------------------------- problem set 12: a trained model's layer


def loop_head_map(g, scale_of):
    """Head ``g["head"]``'s map of problem set 12's layer, its columns cut by hand, with the scores divided
    by ``scale_of(d_k, d_model, num_heads)``."""
    X, h = g["X"], g["num_heads"]
    d_model, d_k = X.shape[1], g["W_Q"].shape[1] // h
    columns = slice((g["head"] - 1) * d_k, g["head"] * d_k)
    q, k = (X @ g["W_Q"] + g["b_Q"])[:, columns], (X @ g["W_K"] + g["b_K"])[:, columns]  # (n, d_k) each
    scores = q @ k.T / scale_of(d_k, d_model, h)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_problem_set_12_names_the_width_a_student_took_for_d_k():
    """Only some of the layer's heads are given (num_heads of them), so d_model / num_heads is not d_k:
    each wrong width is named for what it is, and the hint says where d_k comes from."""
    from qkv_exercises.problem_sets import get_problem_set
    from qkv_exercises.problem_sets.ps12_trained_model_slips import (
        D_K_FROM_D_MODEL,
        DIVIDED_BY_SQRT_D_MODEL,
        DIVIDED_BY_SQRT_OF_EVERY_HEAD,
    )

    ps12 = get_problem_set("ps12_trained_model")
    g = ps12.givens(0)
    assert g["X"].shape[1] != g["W_Q"].shape[1], "the set gives only some of the layer's heads"
    right = ps12.check("head_map").judge(loop_head_map(g, lambda d_k, d, h: np.sqrt(d_k)), g, reveal=False)
    assert right.passed, right.message
    for scale_of, slip in ((lambda d_k, d, h: np.sqrt(d / h), D_K_FROM_D_MODEL),
                           (lambda d_k, d, h: np.sqrt(d), DIVIDED_BY_SQRT_D_MODEL),
                           (lambda d_k, d, h: np.sqrt(h * d_k), DIVIDED_BY_SQRT_OF_EVERY_HEAD)):
        message = ps12.check("head_map").judge(loop_head_map(g, scale_of), g, reveal=False).message
        assert f"Likely slip: {slip.advice}" in message, message
        assert "columns of W_Q divided by num_heads" in message and "(d_model / num_heads)" not in message


# ---------------------------------------------------------------- hidden checks in the feedback


def hidden_function_checks():
    from qkv_exercises.problem_sets import get_problem_set, names

    return [(name, check) for name in names() for check in get_problem_set(name).checks
            if isinstance(check, FunctionCheck) and check.hidden]


@pytest.mark.parametrize("name, check", hidden_function_checks(), ids=lambda x: getattr(x, "grade_id", x))
def test_a_failed_hidden_check_names_the_inputs_it_called_the_function_on(name, check):
    """What the instructors' page promises of the feedback: a hidden function check that fails says on
    which inputs it called the student's function (their numbers, or their shapes), drawn for that student."""
    from qkv_exercises.checks import Returned
    from qkv_exercises.problem_sets import get_problem_set

    calls = check.calls(get_problem_set(name).givens(0), np.random.default_rng(1))
    assert calls, f"{name}/{check.grade_id} makes no call"
    wrong = [Returned(np.full((7, 7, 7), 0.5))] * len(calls)   # no answer of any set has this shape
    verdict = check.judge(wrong, calls, reveal=False)
    assert not verdict.passed
    label = calls[0].label
    named_with_inputs = re.fullmatch(rf"{check.answer}\((?!\.\.\.\)).+\)", label)  # not the bare "f(...)"
    assert named_with_inputs, f"{name}/{check.grade_id}: the call is named {label!r}"
    assert verdict.message.startswith(label), verdict.message
