"""Problem set 13's variants: variant 0 is the chapters' examples, every variant's hand answers are what
qkv's decoding step, grouped heads, masks and ALiBi give, and each slip the set names is named in the
message of the answer it changes.

The independent truths: seed 000's printed weights of 補償 (variant 0's decoding step), the ALiBi
paper's slopes, Llama 2 70B's published shape, and for every variant qkv's own functions, each
tested against loops, PyTorch or the papers in their own test files.
"""

from __future__ import annotations

import numpy as np
import pytest

import qkv
from qkv_exercises.problem_sets import get_problem_set
from qkv_exercises.problem_sets import ps13_inference as ps13
from qkv_exercises.problem_sets import ps13_inference_slips as slips

from .notebook_support import givens_of
from .seeds import SEED_000

PS = get_problem_set("ps13_inference")
SAMPLE = range(0, 1000, 37)  # students whose answers are recomputed with qkv


def test_variant_0_is_the_chapters_examples():
    g = PS.givens(0)
    step = ps13.step_answers(*(g[k] for k in ("x_3", "W_Q", "W_K", "b_K", "W_V", "K_cache", "V_cache")))
    np.testing.assert_allclose(step["weights_3"], SEED_000[1]["A"][2], atol=1e-6)  # 補償's row of seed 000
    np.testing.assert_allclose(step["output_3"], SEED_000[1]["O"][2], atol=1e-6)
    np.testing.assert_allclose(step["K_cache_3"], SEED_000[1]["K"], atol=1e-6)
    assert (g["layers"], g["heads"], g["kv_heads"], g["d_k"], g["n_tokens"]) == (80, 64, 8, 128, 4096)
    assert (g["n_window"], g["window"], g["token"]) == (6, 3, 5)
    np.testing.assert_allclose(g["scores_row"], [1.5, 0, 0, 2.5])
    assert (g["h_alibi"], g["alibi_head"]) == (8, 1)
    assert g["query_head"] == 1 and g["Q_gqa"].shape == (4, 2) and g["K_gqa"].shape == (2, 3, 2)


def test_variant_0s_answers_are_the_numbers_the_chapters_print():
    """1.25 GiB and 8 (Llama 2 70B), query head 1 over key/value head 0, [3, 4, 5] and slope 1/2."""
    g = PS.givens(0)
    answers = {c.answer: c.expect(g).expected for c in PS.checks if c.kind == "value"}
    assert answers["cache_gib"] == pytest.approx(2 * 80 * 8 * 128 * 4096 * 2 / 2**30)
    assert answers["gqa_saving"] == 8 and answers["kv_head"] == 0
    np.testing.assert_array_equal(answers["kept"], [3, 4, 5])
    assert answers["pairs_kept"] == 1 + 2 + 3 + 3 + 3 + 3
    assert answers["slope"] == 0.5
    np.testing.assert_allclose(answers["biased_row"], [0, -1, -0.5, 2.5])


@pytest.mark.parametrize("index", SAMPLE)
def test_the_decoding_step_is_qkvs_decode_step(index):
    _, g = givens_of("ps13_inference")[index]
    step = ps13.step_answers(*(g[k] for k in ("x_3", "W_Q", "W_K", "b_K", "W_V", "K_cache", "V_cache")))
    x_3 = g["x_3"][None, :]  # (1, d_model)
    cache = qkv.KVCache(g["K_cache"], g["V_cache"])
    output, weights, cache = qkv.decode_step(x_3 @ g["W_Q"], x_3 @ g["W_K"] + g["b_K"], x_3 @ g["W_V"], cache)
    np.testing.assert_allclose(step["K_cache_3"], cache.K, rtol=1e-12)
    np.testing.assert_allclose(step["weights_3"], weights[0], rtol=1e-12)
    np.testing.assert_allclose(step["output_3"], output[0], rtol=1e-12)
    full, _ = qkv.self_attention(g["X_delivery"], g["W_Q"], g["W_K"], g["W_V"], b_K=g["b_K"],
                                 mask=qkv.causal_mask(3))
    np.testing.assert_allclose(step["output_3"], full[2], rtol=1e-12)  # step 3 is row 3 of the causal pass


@pytest.mark.parametrize("index", SAMPLE)
def test_the_grouped_head_is_qkvs_grouped_query_attention(index):
    _, g = givens_of("ps13_inference")[index]
    answers = ps13.gqa_answers(g["Q_gqa"], g["K_gqa"], g["query_head"])
    h, groups = len(g["Q_gqa"]), len(g["K_gqa"])
    assert answers["kv_head"] == qkv.kv_head_of(h, groups)[g["query_head"]]
    _, weights = qkv.grouped_query_attention(g["Q_gqa"][:, None, :], g["K_gqa"], g["V_gqa"])
    np.testing.assert_allclose(answers["weights_gqa"], weights[g["query_head"], 0], rtol=1e-12)
    assert g["query_head"] % groups != answers["kv_head"], "the variant tells i % g from i // (h / g)"


@pytest.mark.parametrize("index", SAMPLE)
def test_the_window_answers_are_qkvs_masks(index):
    _, g = givens_of("ps13_inference")[index]
    n, window, token = g["n_window"], g["window"], g["token"]
    answers = ps13.window_answers(n, window, token)
    mask = qkv.sliding_window_mask(n, window) & qkv.causal_mask(n)
    np.testing.assert_array_equal(answers["kept"], np.flatnonzero(mask[token]))
    assert answers["pairs_kept"] == mask.sum()


@pytest.mark.parametrize("index", SAMPLE)
def test_the_alibi_answers_are_qkvs_slopes_and_bias(index):
    _, g = givens_of("ps13_inference")[index]
    answers = ps13.alibi_answers(g["scores_row"], g["h_alibi"], g["alibi_head"])
    slope = qkv.alibi_slopes(g["h_alibi"])[g["alibi_head"] - 1]
    assert answers["slope"] == slope
    bias = qkv.alibi_bias([slope], 4)[0, 3]  # the last query's row
    np.testing.assert_allclose(answers["biased_row"], g["scores_row"] + bias, rtol=1e-12)
    np.testing.assert_allclose(answers["weights_alibi"], qkv.softmax(g["scores_row"] + bias), rtol=1e-12)


def test_some_variants_ask_for_a_head_past_the_largest_power_of_two():
    """The paper's rule for h not a power of two is asked of some students, not only 2^(-8k/h)."""
    asked = {(g["h_alibi"], g["alibi_head"]) for _, g in givens_of("ps13_inference")}
    beyond = [(h, k) for h, k in asked if h & (h - 1) and k > 2 ** int(np.log2(h))]
    assert len(beyond) >= 3, beyond


def test_the_cache_sizes_of_the_variants_are_counted_from_their_shapes():
    for _, g in givens_of("ps13_inference")[:200]:
        expected = (2 * g["layers"] * g["kv_heads"] * g["d_k"] * g["n_tokens"]
                    * {"float16": 2, "float32": 4}[g["dtype"]] / 2**30)
        assert PS.check("cache_size").expect(g).expected == pytest.approx(expected)


HAND_SLIPS = {
    "step": (ps13.STEP_SLIPS, lambda g, slip: ps13.step_answers(
        *(g[k] for k in ("x_3", "W_Q", "W_K", "b_K", "W_V", "K_cache", "V_cache")), slip)),
    "gqa": (ps13.GQA_SLIPS, lambda g, slip: ps13.gqa_answers(g["Q_gqa"], g["K_gqa"], g["query_head"], slip)),
    "window": (ps13.WINDOW_SLIPS, lambda g, slip: ps13.window_answers(g["n_window"], g["window"], g["token"],
                                                                      slip)),
    "alibi": (ps13.ALIBI_SLIPS, lambda g, slip: ps13.alibi_answers(g["scores_row"], g["h_alibi"],
                                                                   g["alibi_head"], slip)),
}
SLIP_CASES = [(part, slip) for part, (part_slips, _) in HAND_SLIPS.items() for slip in part_slips]


@pytest.mark.parametrize("part, slip", SLIP_CASES, ids=[f"{p}-{s.key}" for p, s in SLIP_CASES])
def test_each_slip_of_the_hand_parts_is_named_where_it_changes_an_answer(part, slip):
    named = 0
    part_slips, answers_with = HAND_SLIPS[part]
    earlier = part_slips[:part_slips.index(slip)]  # a slip that gives the same answer is named first

    def same(a, b, tol=1e-12) -> bool:
        return a is not None and a.shape == b.shape and np.allclose(a, b, rtol=0, atol=tol)

    for variant in (0, 1, 2, 3, 4, 5, 6, 7):
        g = PS.givens(variant)
        right, slipped = answers_with(g, None), answers_with(g, slip)
        for check in PS.checks:
            if check.kind != "value" or check.answer not in slipped:
                continue
            value = slipped[check.answer]
            if same(value, right[check.answer]) or any(  # the answer as written, to 2 decimals
                    same(answers_with(g, other).get(check.answer), np.round(value, 2), 0.01 * (1 + 1e-9))
                    for other in earlier):
                continue
            verdict = check.judge(np.round(value, 2), g, reveal=False)
            assert not verdict.passed and slip.advice in verdict.message, (variant, check.grade_id, verdict.message)
            named += 1
    assert named, f"the slip {slip.key} changes no answer of the first variants"


def test_the_bias_sign_is_named_in_the_weights_too():
    g = PS.givens(0)
    flipped = ps13.alibi_answers(g["scores_row"], 8, 1, slips.BIAS_SIGN)["weights_alibi"]
    message = PS.check("alibi_weights").judge(np.round(flipped, 2), g, reveal=False).message
    assert "did you add m (i - j) instead of subtracting it?" in message
