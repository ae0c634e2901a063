"""The checks of problem sets 7 (masks and cross-attention) and 8 (order and position).

Answers worked out here by hand (math.exp, math.sin, math.cos, loops) from what the chapters
state pass on the chapters' own numbers (variant 0); each typical slip of these topics is
named; functions written with loops pass, and slipped ones are told their slip; qkv's mask
and position functions are refused to a student's code while the checks still use them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkv
from qkv_exercises import slips
from qkv_exercises.checking import qkv_switched_off
from qkv_exercises.checks import FunctionCheck
from qkv_exercises.functions import (
    causal_mask_call,
    encoding_call,
    judge_causal_mask,
    judge_encoding,
    judge_masked_softmax,
    judge_padding_mask,
    masked_softmax_call,
    padding_mask_call,
    padding_mask_of,
)
from qkv_exercises.identity import student_variant
from qkv_exercises.problem_sets import get_problem_set
from qkv_exercises.problem_sets.ps7_masks_slips import DECODER_KEYS, DIAGONAL_BLOCKED
from qkv_exercises.problem_sets.ps7_masks_slips import MASK_AFTER_SOFTMAX, MASK_INVERTED
from qkv_exercises.problem_sets.ps7_masks_slips import MASK_NOT_APPLIED, MASK_WRONG_TRIANGLE
from qkv_exercises.problem_sets.ps7_masks_slips import MASK_ZERO_NOT_NEG_INF, PADDING_OFF_BY_ONE
from qkv_exercises.problem_sets.ps7_masks_slips import PADDING_QUERY_AXIS_MISSING
from qkv_exercises.problem_sets.ps8_position_slips import DEGREES_NOT_RADIANS, EXPONENT_I_NOT_2I
from qkv_exercises.problem_sets.ps8_position_slips import FIRST_PAIR_ONLY, NOT_REORDERED
from qkv_exercises.problem_sets.ps8_position_slips import POSITIONS_FROM_ONE, REORDERED_BY_INVERSE
from qkv_exercises.problem_sets.ps8_position_slips import SINES_THEN_COSINES, SIN_COS_SWAPPED

from .notebook_support import outcomes_of

PS7, PS8 = get_problem_set("ps7_masks"), get_problem_set("ps8_position")
SEED7, SEED8 = PS7.givens(0), PS8.givens(0)
E = math.e


def verdict(problem_set, grade_id, answer, givens):
    return problem_set.check(grade_id).judge(answer, givens, reveal=False)


def assert_slip(message: str, slip):
    assert f"Likely slip: {slip.advice}" in message, message


# ---------------------------------------------------------------- problem set 7, by hand


def test_the_chapters_masked_row_and_late_delivery_pass_on_the_seed():
    """The masks chapter: 晚到's allowed scores are 0 and 1, so e^0 = 1 and e^1 = e; "late" has the
    scaled scores [0, 2, 1] over 外送 晚到 補償 and "delivery" [2, 0, 1] (the keys are the token vectors)."""
    assert verdict(PS7, "exponentials_late", [1, round(E, 2), 0], SEED7).passed
    assert verdict(PS7, "weights_late", [round(1 / (1 + E), 2), round(E / (1 + E), 2), 0], SEED7).passed
    scores = [[0, 2, 1], [2, 0, 1]]
    weights = [[round(math.exp(s) / sum(math.exp(t) for t in row), 2) for s in row] for row in scores]
    assert verdict(PS7, "cross_scores", scores, SEED7).passed
    assert verdict(PS7, "cross_weights", weights, SEED7).passed
    X_kv = [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]  # 外送 晚到 補償, seed 000
    output = [[round(sum(w * x[c] for w, x in zip(row, X_kv)), 2) for c in range(4)] for row in weights]
    assert verdict(PS7, "cross_output", output, SEED7).passed


def causal_by_hand(S):
    n = len(S)
    exponentials = [[math.exp(S[i][j]) if j <= i else 0.0 for j in range(n)] for i in range(n)]
    return [[e / sum(row) for e in row] for row in exponentials]


@pytest.mark.parametrize("student", ["ab1234", "s0123456"])
def test_masked_slips_are_named(student):
    givens = PS7.givens(student_variant("ps7_masks", student))
    S = givens["S1"]
    zeroed = [math.exp(s) if j < 2 else 1.0 for j, s in enumerate(S[1])]  # the blocked score at 0: e^0 = 1
    assert_slip(verdict(PS7, "exponentials_late", zeroed, givens).message, MASK_ZERO_NOT_NEG_INF)
    unmasked = [math.exp(s) for s in S[1]]
    assert_slip(verdict(PS7, "exponentials_late", unmasked, givens).message, MASK_NOT_APPLIED)
    after = [math.exp(s) / sum(unmasked) if j < 2 else 0.0 for j, s in enumerate(S[1])]  # masked after the softmax
    assert_slip(verdict(PS7, "weights_late", after, givens).message, MASK_AFTER_SOFTMAX)
    assert_slip(verdict(PS7, "weights_causal", upper_triangle(S), givens).message, MASK_WRONG_TRIANGLE)
    assert verdict(PS7, "weights_causal", causal_by_hand(S), givens).passed


def upper_triangle(S):
    """Weights with the wrong triangle blocked: query i attends to keys i .. n - 1."""
    n = len(S)
    exponentials = [[math.exp(S[i][j]) if j >= i else 0.0 for j in range(n)] for i in range(n)]
    return [[e / sum(row) for e in row] for row in exponentials]


def test_cross_attention_slips_are_named():
    unscaled = [[0, 4, 2], [4, 0, 2]]  # Q K^T, not divided by sqrt(4)
    assert_slip(verdict(PS7, "cross_scores", unscaled, SEED7).message, slips.NO_SQRT_DK)
    swapped = verdict(PS7, "cross_weights", np.full((3, 2), 0.5), SEED7).message  # queries from 外送 晚到 補償
    assert "should have shape (2, 3)" in swapped
    X_q, W_Q = SEED7["X_q"], SEED7["W_Q"]
    Q = X_q @ W_Q
    self_scores = Q @ X_q.T / 2  # keys from the decoder's own words
    decoder = np.exp(self_scores) / np.exp(self_scores).sum(axis=1, keepdims=True)
    assert_slip(verdict(PS7, "cross_weights", decoder, SEED7).message, DECODER_KEYS)


def test_each_question_with_options_has_one_right_letter_and_explains_the_others():
    for grade_id, given in [("keys_of_late", "keys_options"), ("later_token_changes", "later_options"),
                            ("what_padding_hides", "padding_options"), ("cross_attention_sources", "cross_options")]:
        letters = "abcde"[:len(SEED7[given])]
        verdicts = [verdict(PS7, grade_id, letter, SEED7) for letter in letters]
        assert sum(v.passed for v in verdicts) == 1, grade_id
        assert all("Likely slip:" in v.message for v in verdicts if not v.passed), grade_id


# ---------------------------------------------------------------- problem set 7, functions


def loop_causal_mask(n):
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def loop_masked_softmax(scores, mask):
    scores = np.asarray(scores, dtype=float)
    mask = np.broadcast_to(mask, scores.shape)
    out = np.zeros_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        allowed = [s for s, m in zip(scores[index], mask[index]) if m]
        top = max(allowed)
        total = sum(math.exp(s - top) for s in allowed)
        out[index] = [math.exp(s - top) / total if m else 0.0 for s, m in zip(scores[index], mask[index])]
    return out


def judged(judge, func, calls):
    check = FunctionCheck("f", "f", calls=lambda g, rng: [], judge_result=judge, description="")
    with qkv_switched_off(), np.errstate(all="ignore"):
        return check.judge(outcomes_of(func, calls), calls, reveal=False)


MASK_CALLS = [causal_mask_call(n, behaviour="n tokens") for n in (1, 3, 6)]
rng = np.random.default_rng(7)
SOFTMAX_CALLS = [
    masked_softmax_call(SEED7["S1"], qkv.causal_mask(3), what="S1", behaviour="causal mask"),
    masked_softmax_call(rng.normal(size=(3, 4, 4)), padding_mask_of([4, 2, 1], 4), what="padded", behaviour="padding"),
    masked_softmax_call(rng.normal(size=(2, 5)), [[True, False, True, True, False], [False, False, True, False, True]],
                        what="cross", behaviour="n_q != n_k"),
    masked_softmax_call(900 + rng.normal(size=(4, 4)), qkv.causal_mask(4), what="large", behaviour="large scores"),
]


def test_functions_written_with_loops_pass():
    assert judged(judge_causal_mask, loop_causal_mask, MASK_CALLS).passed
    assert judged(judge_masked_softmax, loop_masked_softmax, SOFTMAX_CALLS).passed


def test_causal_mask_slips_are_named():
    upper = judged(judge_causal_mask, lambda n: loop_causal_mask(n).T, MASK_CALLS)
    assert_slip(upper.message, MASK_WRONG_TRIANGLE)
    inverted = judged(judge_causal_mask, lambda n: ~loop_causal_mask(n), MASK_CALLS[1:])
    assert_slip(inverted.message, MASK_INVERTED)
    strict = judged(judge_causal_mask, lambda n: np.tril(loop_causal_mask(n), -1), MASK_CALLS)
    assert_slip(strict.message, DIAGONAL_BLOCKED)
    numbers = judged(judge_causal_mask, lambda n: loop_causal_mask(n).astype(int), MASK_CALLS)
    assert not numbers.passed and "not True/False" in numbers.message
    shape = judged(judge_causal_mask, lambda n: loop_causal_mask(n + 1), MASK_CALLS)
    assert "should have shape (1, 1)" in shape.message


def softmax_by_hand(scores):
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_masked_softmax_slips_are_named():
    zero = judged(judge_masked_softmax, lambda s, m: softmax_by_hand(np.where(m, s, 0.0)), SOFTMAX_CALLS)
    assert_slip(zero.message, MASK_ZERO_NOT_NEG_INF)
    after = judged(judge_masked_softmax, lambda s, m: softmax_by_hand(s) * m, SOFTMAX_CALLS)
    assert_slip(after.message, MASK_AFTER_SOFTMAX)
    ignored = judged(judge_masked_softmax, lambda s, m: softmax_by_hand(s), SOFTMAX_CALLS)
    assert_slip(ignored.message, MASK_NOT_APPLIED)
    upper = judged(judge_masked_softmax, lambda s, m: loop_masked_softmax(s, np.swapaxes(m, -1, -2)), SOFTMAX_CALLS)
    assert_slip(upper.message, MASK_WRONG_TRIANGLE)
    multiplied = judged(judge_masked_softmax, lambda s, m: softmax_by_hand(m * s + (1 - m) * -np.inf), SOFTMAX_CALLS)
    assert "0 * (-inf) is NaN" in multiplied.message


def test_a_masked_softmax_that_chooses_with_np_where_but_overflows_is_told_of_the_overflow_first():
    """np.where used as it should be, but no maximum subtracted: the scores near 900 overflow e^s.
    The message leads with the overflow, not with np.where, which the student already uses."""
    def unsubtracted(s, m):
        e = np.exp(np.where(m, s, -np.inf))
        return e / e.sum(axis=-1, keepdims=True)

    message = judged(judge_masked_softmax, unsubtracted, SOFTMAX_CALLS).message
    assert "not a finite number" in message, message
    hint = message.split("not a finite number.", 1)[1].strip()
    assert hint.startswith("Large scores overflow e^s"), message


def loop_padding_mask(lengths, n):
    mask = np.zeros((len(lengths), 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        for j in range(length):
            mask[b, 0, j] = True
    return mask


PADDING_CALLS = [padding_mask_call([3, 2], 3, behaviour="padded"), padding_mask_call([4, 1, 2], 4, behaviour="padded")]


def test_a_padding_mask_written_with_loops_passes_and_slips_are_named():
    assert judged(judge_padding_mask, loop_padding_mask, PADDING_CALLS).passed
    flat = judged(judge_padding_mask, lambda lengths, n: loop_padding_mask(lengths, n)[:, 0, :], PADDING_CALLS)
    assert "should have shape (2, 1, 3)" in flat.message
    assert_slip(flat.message, PADDING_QUERY_AXIS_MISSING)
    inverted = judged(judge_padding_mask, lambda lengths, n: ~loop_padding_mask(lengths, n), PADDING_CALLS)
    assert_slip(inverted.message, MASK_INVERTED)
    one_more = judged(judge_padding_mask, lambda lengths, n: loop_padding_mask([min(v + 1, n) for v in lengths], n),
                      PADDING_CALLS)
    assert "padding_mask([3, 2], 3)[1, 0, 2] is True, which is wrong" in one_more.message
    assert_slip(one_more.message, PADDING_OFF_BY_ONE)
    square = judged(judge_padding_mask, lambda lengths, n: np.repeat(loop_padding_mask(lengths, n), n, axis=1),
                    PADDING_CALLS)
    assert not square.passed and "should have shape (2, 1, 3)" in square.message


# ---------------------------------------------------------------- problem set 8, by hand


def test_the_chapters_encoding_of_position_1_and_the_offset_3_pass_on_the_seed():
    """The position chapter: PE_1 = [sin 1, cos 1, sin 0.01, cos 0.01] for d_model = 4, and positions 0 and 3
    are as similar as 100 and 103."""
    assert verdict(PS8, "position_angles", [1, 0.01], SEED8).passed
    encoding = [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]
    assert verdict(PS8, "position_encoding", [round(x, 2) for x in encoding], SEED8).passed
    assert verdict(PS8, "offset_dot_product", round(math.cos(3) + math.cos(0.03), 2), SEED8).passed
    letter = "abcd"[SEED8["pair_options"].index("positions 100 and 103")]
    assert verdict(PS8, "same_dot_product", letter, SEED8).passed


def test_the_chapters_swap_of_the_place_names_passes_on_the_seed():
    """Swapping 中和 and 永和路 (order 3, 1, 2, 0): P swaps the first and last rows of I, and the outputs
    of the swapped sentence are the chapter's O with those rows swapped."""
    P = [[0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]]
    assert verdict(PS8, "permutation_matrix", P, SEED8).passed
    ex = qkv.examples.zhonghe_vectors_example()
    O_swapped, _ = qkv.self_attention(np.asarray(P, dtype=float) @ ex.X, *ex.head)  # attention on P X, again
    assert verdict(PS8, "outputs_reordered", np.round(O_swapped, 2), SEED8).passed


@pytest.mark.parametrize("student", ["ab1234", "zoë.chen", "s0123456"])
def test_reordering_and_encoding_slips_are_named(student):
    givens = PS8.givens(student_variant("ps8_position", student))
    order, O = givens["order"], givens["O"]
    inverse = np.argsort(order)
    if not np.array_equal(inverse, order):  # an order that is its own inverse cannot tell the two apart
        assert_slip(verdict(PS8, "permutation_matrix", np.eye(4)[inverse], givens).message,
                    REORDERED_BY_INVERSE)
        assert_slip(verdict(PS8, "outputs_reordered", O[inverse], givens).message, REORDERED_BY_INVERSE)
    assert_slip(verdict(PS8, "outputs_reordered", O, givens).message, NOT_REORDERED)
    d, p = givens["d_model"], givens["position"]
    angles = [p / 10000 ** (2 * i / d) for i in range(d // 2)]
    assert_slip(verdict(PS8, "position_angles", [p / 10000 ** (i / d) for i in range(d // 2)], givens).message,
                EXPONENT_I_NOT_2I)
    from_one = [(p + 1) / 10000 ** (2 * i / d) for i in range(d // 2)]  # the slow pairs' angles barely move
    assert_slip(verdict(PS8, "position_angles", [round(a, 2) for a in from_one], givens).message, POSITIONS_FROM_ONE)
    assert_slip(verdict(PS8, "position_encoding", [round(f(a), 2) for a in from_one for f in (math.sin, math.cos)],
                        givens).message, POSITIONS_FROM_ONE)
    swapped = [f(a) for a in angles for f in (math.cos, math.sin)]
    assert_slip(verdict(PS8, "position_encoding", swapped, givens).message, SIN_COS_SWAPPED)
    degrees = [f(math.radians(a)) for a in angles for f in (math.sin, math.cos)]
    assert_slip(verdict(PS8, "position_encoding", degrees, givens).message, DEGREES_NOT_RADIANS)
    sines_first = [math.sin(a) for a in angles] + [math.cos(a) for a in angles]
    assert_slip(verdict(PS8, "position_encoding", sines_first, givens).message, SINES_THEN_COSINES)
    first, second = (int(v) for v in givens["pair"])
    assert_slip(verdict(PS8, "offset_dot_product", math.cos(second - first), givens).message, FIRST_PAIR_ONLY)


# ---------------------------------------------------------------- problem set 8, the function


def loop_encoding(n, d_model):
    return np.array([[math.sin(p / 10000 ** (j / d_model)) if j % 2 == 0 else math.cos(p / 10000 ** ((j - 1) / d_model))
                      for j in range(d_model)] for p in range(n)])


ENCODING_CALLS = [encoding_call(4, 4, behaviour="d_model = 4"), encoding_call(10, 16, behaviour="wider"),
                  encoding_call(1, 6, behaviour="one position")]


def test_an_encoding_written_with_loops_passes_and_slips_are_named():
    assert judged(judge_encoding, loop_encoding, ENCODING_CALLS).passed
    from_one = judged(judge_encoding, lambda n, d: loop_encoding(n + 1, d)[1:], ENCODING_CALLS)
    assert_slip(from_one.message, POSITIONS_FROM_ONE)

    def swapped(n, d):
        PE = loop_encoding(n, d)
        PE[:, 0::2], PE[:, 1::2] = PE[:, 1::2].copy(), PE[:, 0::2].copy()
        return PE

    assert_slip(judged(judge_encoding, swapped, ENCODING_CALLS).message, SIN_COS_SWAPPED)

    def i_not_2i(n, d):
        angles = np.arange(n)[:, None] / 10000 ** (np.arange(d // 2)[None, :] / d)
        return np.stack([np.sin(angles), np.cos(angles)], axis=2).reshape(n, d)

    assert_slip(judged(judge_encoding, i_not_2i, ENCODING_CALLS).message, EXPONENT_I_NOT_2I)


# ---------------------------------------------------------------- qkv is not the student's


@pytest.mark.parametrize("func", [
    lambda n: qkv.causal_mask(n),
    lambda n: qkv.masks.padding_mask(np.array([n]), n)[0].repeat(n, axis=0),
    lambda n: qkv.position.sinusoidal_position_encoding(n, 4)[:, :n] > 2,
])
def test_calling_qkv_masks_or_positions_fails_while_the_checks_still_use_them(func):
    result = judged(judge_causal_mask, func, MASK_CALLS)
    assert not result.passed and "write the computation yourself with numpy" in result.message
    assert judged(judge_causal_mask, loop_causal_mask, MASK_CALLS).passed
