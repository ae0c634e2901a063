"""The online softmax and blockwise attention: the same numbers as the full computation, without
the n x n matrix (memory measured with tracemalloc), and every error they raise.

The independent references are the loop attention of test_against_loops.py, softmax and
log-sum-exp written here with math.exp, and seed 002's printed softmax of [2, 1, 0].
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .seeds import SEED_002_SOFTMAX_MODERATE
from .strategies import attention_inputs, values
from .test_against_loops import loop_attention, loop_softmax
from .test_errors import raises

rng = np.random.default_rng(0)


@st.composite
def rows_in_blocks(draw):
    """A row of scores (some -inf, not all) and a split of it into consecutive non-empty blocks."""
    n = draw(st.integers(1, 9))
    row = draw(st.lists(values | st.just(-math.inf), min_size=n, max_size=n))
    if all(s == -math.inf for s in row):
        row[draw(st.integers(0, n - 1))] = draw(values)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1))) if n > 1 else []
    edges = [0, *cuts, n]
    return row, [np.array(row[a:b]) for a, b in zip(edges, edges[1:])]


# ---------------------------------------------------------------- the online softmax


def test_online_softmax_of_seed_002_scores_by_hand():
    """[2, 1, 0] as [2, 1] | [0]: m stays 2, l = 1 + e^-1, then + e^-2; the weights are the seed's."""
    weights, steps = qkv.online_softmax([np.array([2.0, 1.0]), np.array([0.0])])
    assert [step.running_max for step in steps] == [2.0, 2.0]
    np.testing.assert_allclose([step.running_sum for step in steps],
                               [1 + math.exp(-1), 1 + math.exp(-1) + math.exp(-2)], rtol=1e-15)
    assert steps[1].rescale == 1.0
    np.testing.assert_allclose(weights, SEED_002_SOFTMAX_MODERATE, atol=0.005)


def test_online_softmax_rescales_when_the_maximum_arrives_late():
    """[0, 1] | [2]: m goes 1 -> 2, so the old sum is multiplied by e^(1 - 2) before e^0 is added."""
    weights, steps = qkv.online_softmax([np.array([0.0, 1.0]), np.array([2.0])])
    assert [step.running_max for step in steps] == [1.0, 2.0]
    assert steps[1].rescale == pytest.approx(math.exp(-1), rel=1e-15)
    assert steps[1].running_sum == pytest.approx((math.exp(-1) + 1) * math.exp(-1) + 1, rel=1e-15)
    np.testing.assert_allclose(weights, SEED_002_SOFTMAX_MODERATE[::-1], atol=0.005)


@settings(max_examples=100, deadline=None)
@given(rows_in_blocks())
def test_online_softmax_is_the_softmax_of_the_whole_row(row_and_blocks):
    row, blocks = row_and_blocks
    weights, steps = qkv.online_softmax(blocks)
    np.testing.assert_allclose(weights, loop_softmax(row), rtol=1e-12, atol=1e-15)
    # after each block: m is the largest score so far, l the sum of e^(s - m) over the scores so far
    seen = []
    for block, step in zip(blocks, steps):
        seen += block.tolist()
        assert step.running_max == max(seen)
        if step.running_max > -math.inf:
            expected_sum = sum(math.exp(s - step.running_max) for s in seen if s > -math.inf)
            assert step.running_sum == pytest.approx(expected_sum, rel=1e-12)


# ---------------------------------------------------------------- blockwise attention


@settings(max_examples=60, deadline=None)
@given(attention_inputs(with_mask=True), st.integers(1, 6), st.booleans())
def test_blockwise_attention_matches_loops(inputs, block_size, use_mask):
    Q, K, V, mask = inputs
    mask = mask if use_mask else None
    output, logsumexp = qkv.blockwise_attention(Q, K, V, block_size, mask)
    expected_output, _ = loop_attention(Q.tolist(), K.tolist(), V.tolist(), None if mask is None else mask.tolist())
    np.testing.assert_allclose(output, expected_output, rtol=1e-9, atol=1e-9)
    for i, q in enumerate(Q.tolist()):  # lse_i = log sum_j e^(s_ij) over the keys it may attend to
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(len(q)) for k in K.tolist()]
        allowed = [s for j, s in enumerate(scores) if mask is None or mask[i][j]]
        top = max(allowed)
        assert logsumexp[i] == pytest.approx(top + math.log(sum(math.exp(s - top) for s in allowed)), abs=1e-9)


@pytest.mark.parametrize("block_size", [7, 64, 128, 500])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "random"])
def test_blockwise_attention_equals_scaled_dot_product_attention(block_size, mask_kind):
    """To 1e-12, with n_q and n_k not multiples of the block size, on a batch of two heads."""
    Q, K, V = rng.normal(size=(2, 300, 16)), rng.normal(size=(2, 333, 16)), rng.normal(size=(2, 333, 8))
    masks = {
        "none": None,
        "causal": np.tril(np.ones((300, 333), dtype=bool)),
        "padding": np.arange(333)[None, None, :] < np.array([333, 201])[:, None, None],  # (2, 1, n_k)
        "random": rng.random((2, 300, 333)) < 0.3,
    }
    mask = masks[mask_kind]
    if mask_kind == "random":
        mask[..., 0] = True
    expected, weights = qkv.scaled_dot_product_attention(Q, K, V, mask)
    output, logsumexp = qkv.blockwise_attention(Q, K, V, block_size, mask)
    np.testing.assert_allclose(output, expected, rtol=0, atol=1e-12)
    scores = Q @ K.swapaxes(-1, -2) / 4.0
    allowed = True if mask is None else mask
    np.testing.assert_allclose(np.exp(np.where(allowed, scores, -np.inf) - logsumexp[..., None]), weights,
                               rtol=0, atol=1e-12)


def test_blockwise_attention_broadcasts_leading_axes_like_attention():
    Q = rng.normal(size=(3, 1, 10, 4))  # (batch, 1, n_q, d_k)
    K, V = rng.normal(size=(2, 12, 4)), rng.normal(size=(2, 12, 5))  # (h, n_k, d)
    expected, _ = qkv.scaled_dot_product_attention(Q, K, V)
    output, logsumexp = qkv.blockwise_attention(Q, K, V, 4)
    assert output.shape == (3, 2, 10, 5) and logsumexp.shape == (3, 2, 10)
    np.testing.assert_allclose(output, expected, atol=1e-12)


def test_blockwise_attention_survives_scores_that_overflow_exp():
    """Scores near 1000 would overflow e^s; the running maximum keeps every exponent <= 0."""
    Q, K, V = rng.normal(size=(20, 4)) * 40, rng.normal(size=(20, 4)) * 40, rng.normal(size=(20, 3))
    expected, _ = qkv.scaled_dot_product_attention(Q, K, V)
    output, _ = qkv.blockwise_attention(Q, K, V, 3)
    assert np.isfinite(output).all()
    np.testing.assert_allclose(output, expected, atol=1e-12)


def traced_peak(function, *args) -> int:
    tracemalloc.start()
    try:
        function(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_blockwise_attention_uses_far_less_memory_than_one_n_by_n_matrix():
    """n = 2048: one n x n float64 matrix is 32 MiB. The full computation peaks above that (the check
    can see it); blockwise attention with blocks of 64 stays under a twentieth of it."""
    n, d = 2048, 16
    Q, K, V = rng.normal(size=(3, n, d))
    one_matrix = n * n * 8
    full = traced_peak(qkv.scaled_dot_product_attention, Q, K, V)
    blockwise = traced_peak(qkv.blockwise_attention, Q, K, V, 64)
    assert full > one_matrix, f"the full computation peaked at {full:,} bytes, less than one n x n matrix"
    assert blockwise < one_matrix / 20, (
        f"blockwise attention peaked at {blockwise:,} bytes, not far below one n x n matrix ({one_matrix:,})")


# ---------------------------------------------------------------- errors


def test_online_softmax_needs_blocks():
    with raises(ValueError, "needs at least one block of scores, got none"):
        qkv.online_softmax([])


def test_online_softmax_names_one_array_given_instead_of_blocks():
    with raises(ValueError, "needs a sequence of blocks, got one array of shape (3,)", "split it"):
        qkv.online_softmax(np.array([2.0, 1.0, 0.0]))


def test_online_softmax_names_a_block_that_is_not_a_vector():
    with raises(ValueError, "block 1 must be a vector of scores, got shape (1, 2)"):
        qkv.online_softmax([np.array([1.0]), np.array([[2.0, 3.0]])])


def test_online_softmax_names_a_nan_in_a_block():
    with raises(ValueError, "block 0[1] is nan", "finite numbers or -inf"):
        qkv.online_softmax([np.array([1.0, np.nan])])


def test_online_softmax_rejects_a_row_that_is_all_minus_inf():
    with raises(ValueError, "every score is -inf (fully masked)"):
        qkv.online_softmax([np.array([-np.inf]), np.array([-np.inf, -np.inf])])


@pytest.mark.parametrize("block_size", [0, -3, 2.5, True, "64"])
def test_blockwise_attention_names_a_bad_block_size(block_size):
    with raises(ValueError, "block_size must be a positive integer", repr(block_size)):
        qkv.blockwise_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), block_size)


def test_blockwise_attention_names_q_and_k_that_differ_in_d_k():
    with raises(ValueError, "Q has d_k=2 but K has d_k=3"):
        qkv.blockwise_attention(np.ones((3, 2)), np.ones((4, 3)), np.ones((4, 2)), 2)


def test_blockwise_attention_names_a_fully_masked_row():
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    with raises(ValueError, "mask row [1] is all False"):
        qkv.blockwise_attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2)), 2, mask)


def test_blockwise_attention_rejects_a_mask_that_is_not_boolean():
    with raises(TypeError, "mask must be boolean"):
        qkv.blockwise_attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2)), 2, np.ones((3, 4)))


def test_online_softmax_update_names_a_running_state_of_the_wrong_shape():
    with raises(ValueError, "running_sum has shape (3,)", "block of scores has shape (3, 4)", "(3, 1)"):
        qkv.online_softmax_update(np.full((3, 1), -np.inf), np.zeros(3), np.ones((3, 4)))
