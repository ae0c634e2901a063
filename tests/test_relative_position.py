"""ALiBi's slopes and biases, T5's relative buckets and RoFormer's decay bound, against their sources.

- ALiBi: the slopes the paper states (Press et al. 2022, §3: 8 heads 1/2 .. 1/256; 16 heads
  1/2^0.5 .. 1/2^8), the paper's reference code (``get_slopes`` of
  ofirpress/attention_with_linear_biases, fairseq/models/transformer.py, transcribed below) for
  every h up to 64, and BLOOM's port in transformers, a third implementation (in float32).
- T5: transformers' ``T5Attention._relative_position_bucket`` (torch), and a loop written here.
- RoFormer's bound: a loop over the partial sums of §3.4.3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import matrices
from .test_errors import raises

torch = pytest.importorskip("torch")


def reference_get_slopes(n):
    """The ALiBi paper's own code for the slopes of n heads (fairseq/models/transformer.py)."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + reference_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2])


def test_alibi_slopes_of_8_and_16_heads_are_the_papers():
    np.testing.assert_allclose(qkv.alibi_slopes(8), [2.0**-k for k in range(1, 9)], rtol=1e-15)
    np.testing.assert_allclose(qkv.alibi_slopes(16), [2.0 ** (-k / 2) for k in range(1, 17)], rtol=1e-15)


def test_alibi_slopes_of_12_heads_take_8_heads_then_every_other_slope_of_16():
    """The rule for h not a power of two, worked by hand: 1/2 .. 1/256, then 2^-0.5, 2^-1.5, ..."""
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    np.testing.assert_allclose(qkv.alibi_slopes(12), expected, rtol=1e-15)


@pytest.mark.parametrize("h", range(1, 65))
def test_alibi_slopes_are_the_reference_codes(h):
    np.testing.assert_allclose(qkv.alibi_slopes(h), reference_get_slopes(h), rtol=1e-12)


@pytest.mark.parametrize("h", [1, 3, 5, 6, 7, 12, 20, 24, 40, 48, 64, 96, 112])
def test_alibi_slopes_are_blooms(h):
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    np.testing.assert_allclose(qkv.alibi_slopes(h), _get_alibi_slopes(h, "cpu").numpy(), rtol=1e-6)


def test_alibi_bias_is_minus_the_slope_times_the_distance():
    slopes = np.array([0.5, 0.25])
    bias = qkv.alibi_bias(slopes, 4)
    for head, m in enumerate(slopes):
        for i in range(4):
            for j in range(4):
                assert bias[head, i, j] == -m * abs(i - j)


def test_a_decoding_steps_alibi_row_is_the_last_row_of_the_full_bias():
    """One query over 6 keys stands at position 5: its row is row 5 of the 6 x 6 bias."""
    slopes = qkv.alibi_slopes(4)
    np.testing.assert_array_equal(qkv.alibi_bias(slopes, 1, 6), qkv.alibi_bias(slopes, 6)[:, 5:])
    np.testing.assert_array_equal(qkv.alibi_bias(slopes, 2, 6), qkv.alibi_bias(slopes, 6)[:, 4:])


def test_alibi_under_the_causal_mask_equals_blooms_shifted_form():
    """BLOOM adds +m j instead of -m (i - j): the same row up to a constant, so the same softmax."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    h, n = 6, 5
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(h, n, n))
    bloom = build_alibi_tensor(torch.ones(1, n), h, torch.float64).numpy()  # (h, 1, n): m j
    causal = qkv.causal_mask(n)
    ours = qkv.softmax(np.where(causal, scores + qkv.alibi_bias(qkv.alibi_slopes(h), n), -np.inf))
    theirs = qkv.softmax(np.where(causal, scores + bloom, -np.inf))
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.data())
def test_attention_with_bias_adds_the_bias_to_the_scaled_scores(n_q, n_k, d_k, data):
    Q, K, V = (data.draw(matrices(s)) for s in ((2, n_q, d_k), (2, n_k, d_k), (2, n_k, 3)))
    bias = data.draw(matrices((2, n_q, n_k)))
    output, weights = qkv.attention_with_bias(Q, K, V, bias)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(x) for x in (Q, K, V)), attn_mask=torch.from_numpy(bias))
    np.testing.assert_allclose(output, expected.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)


# ----------------------------------------------------------------------------- T5's buckets


def loop_bucket(offset, bidirectional, num_buckets, max_distance):
    """T5's bucket of one offset j - i, following the rule step by step."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        if offset > 0:
            bucket = num_buckets
        distance = abs(offset)
    else:
        distance = max(-offset, 0)
    exact = num_buckets // 2
    if distance < exact:
        return bucket + distance
    # float32, as T5 computes it
    scaled = (np.log(np.float32(distance) / np.float32(exact)) / np.float32(math.log(max_distance / exact))
              * np.float32(num_buckets - exact))
    return bucket + min(exact + int(scaled), num_buckets - 1)


CONFIGS = [(True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 16, 64), (True, 64, 256)]


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", CONFIGS)
def test_t5_buckets_are_transformers(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    offsets = np.arange(-1000, 1001)
    expected = T5Attention._relative_position_bucket(torch.from_numpy(offsets), bidirectional=bidirectional,
                                                     num_buckets=num_buckets, max_distance=max_distance)
    buckets = qkv.relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(buckets, expected.numpy())


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", CONFIGS)
def test_t5_buckets_follow_the_rule_offset_by_offset(bidirectional, num_buckets, max_distance):
    offsets = np.arange(-300, 301)
    buckets = qkv.relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    expected = [loop_bucket(int(t), bidirectional, num_buckets, max_distance) for t in offsets]
    np.testing.assert_array_equal(buckets, expected)


def test_t5s_near_offsets_have_a_bucket_each_and_far_ones_share_the_last():
    """Decoder (unidirectional, 32 buckets): distances 0..15 are buckets 0..15; the last bucket, 31,
    begins where 16 + 16 log(r / 16) / log(128 / 16) reaches 31, at r = 16 * 8^(15/16) (~112.5)."""
    distances = np.arange(0, 400)
    buckets = qkv.relative_position_bucket(-distances, bidirectional=False)
    np.testing.assert_array_equal(buckets[:16], np.arange(16))
    first_last = math.ceil(16 * 8 ** (15 / 16))
    assert (buckets[first_last:] == 31).all() and buckets[first_last - 1] == 30
    assert (np.diff(buckets) >= 0).all()
    assert (qkv.relative_position_bucket(np.arange(1, 50), bidirectional=False) == 0).all()


def test_t5_position_bias_reads_the_table_at_each_offsets_bucket():
    table = np.arange(32 * 3, dtype=float).reshape(32, 3)  # (num_buckets, h)
    bias = qkv.t5_position_bias(table, 5, 7)
    assert bias.shape == (3, 5, 7)
    for head in range(3):
        for i in range(5):
            for j in range(7):
                bucket = loop_bucket(j - (i + 2), True, 32, 128)
                assert bias[head, i, j] == table[bucket, head]


# ----------------------------------------------------------------------------- RoFormer's bound


def test_rope_decay_bound_is_the_mean_of_the_partial_sums():
    d, offsets = 16, [0, 1, 5, 40, 250]
    bound = qkv.rope_decay_bound(offsets, d)
    for t, value in zip(offsets, bound):
        omega = [10000 ** (-2 * k / d) for k in range(d // 2)]
        partial = [abs(sum(complex(math.cos(t * w), math.sin(t * w)) for w in omega[:j]))
                   for j in range(1, d // 2 + 1)]
        assert value == pytest.approx(sum(partial) / (d // 2), rel=1e-12)
    assert bound[0] == pytest.approx((d / 2 + 1) / 2)


def test_rope_decay_bound_falls_with_the_distance():
    """With ripples: averaged over windows of 50 offsets, each window's bound is below the last."""
    bound = qkv.rope_decay_bound(np.arange(0, 250), 128)
    window_means = bound.reshape(5, 50).mean(axis=1)
    assert (np.diff(window_means) < 0).all(), window_means
    assert bound[0] > 3 * bound[200:].max()


# ----------------------------------------------------------------------------- errors


def test_alibi_needs_positive_slopes():
    with raises(ValueError, "slopes[1] is -0.5", "positive"):
        qkv.alibi_bias([0.5, -0.5], 3)


def test_alibi_queries_are_the_last_of_the_keys():
    with raises(ValueError, "n_q=4 queries but n_k=2 keys"):
        qkv.alibi_bias([0.5], 4, 2)


def test_a_bias_that_does_not_fit_the_scores_is_named():
    with raises(ValueError, "bias has shape (3, 3)", "scores have shape (2, 2)"):
        qkv.attention_with_bias(np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((3, 3)))


def test_offsets_must_be_whole_numbers():
    with raises(ValueError, "relative_position must hold whole numbers"):
        qkv.relative_position_bucket(np.array([0.5, 1.0]))


def test_bidirectional_buckets_need_an_even_count():
    with raises(ValueError, "num_buckets=7", "even number"):
        qkv.relative_position_bucket(np.arange(3), num_buckets=7)
