"""Properties that any correct attention implementation has, checked on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import attention_inputs, masks, matrices, multi_head_inputs, sizes


@settings(max_examples=80, deadline=None)
@given(attention_inputs(with_mask=True))
def test_weights_are_a_distribution_over_keys(inputs):
    Q, K, V, mask = inputs
    _, weights = qkv.scaled_dot_product_attention(Q, K, V, mask)
    assert weights.shape == (Q.shape[0], K.shape[0])
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(attention_inputs(with_mask=True))
def test_masked_weights_are_exactly_zero(inputs):
    Q, K, V, mask = inputs
    _, weights = qkv.scaled_dot_product_attention(Q, K, V, mask)
    assert (weights[~mask] == 0.0).all(), f"blocked positions got weight {weights[~mask].max()}"


@settings(max_examples=60, deadline=None)
@given(attention_inputs(with_mask=True))
def test_blocked_keys_do_not_influence_the_output(inputs):
    """Changing the value and key of a blocked position changes nothing."""
    Q, K, V, mask = inputs
    output, _ = qkv.scaled_dot_product_attention(Q, K, V, mask)
    blocked_everywhere = ~mask.any(axis=0)
    K2, V2 = K.copy(), V.copy()
    K2[blocked_everywhere] += 3.0
    V2[blocked_everywhere] -= 7.0
    output2, _ = qkv.scaled_dot_product_attention(Q, K2, V2, mask)
    np.testing.assert_allclose(output2, output, rtol=0, atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(matrices(st.tuples(sizes, sizes)), st.floats(-1e6, 1e6))
def test_softmax_is_shift_invariant(x, shift):
    np.testing.assert_allclose(qkv.softmax(x + shift), qkv.softmax(x), rtol=1e-6, atol=1e-9)


@given(st.sampled_from([1e3, 1e5, 1e300]))
def test_softmax_never_overflows(scale):
    """A naive exp(1000) is inf; subtracting the max keeps every exponent <= 0."""
    weights = qkv.softmax(np.array([1.0, 0.5, 0.0]) * scale)
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights, [1.0, 0.0, 0.0], atol=1e-200)


@settings(max_examples=40, deadline=None)
@given(matrices(st.tuples(sizes, sizes, sizes)))
def test_softmax_axis_is_the_axis_normalised(x):
    for axis in range(3):
        np.testing.assert_allclose(qkv.softmax(x, axis=axis).sum(axis=axis), 1.0, atol=1e-12)


def test_softmax_gives_minus_inf_weight_zero():
    weights = qkv.softmax([[0.0, -np.inf, 0.0], [-np.inf, 2.0, -np.inf]])
    np.testing.assert_array_equal(weights, [[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]])


@settings(max_examples=60, deadline=None)
@given(multi_head_inputs(), st.randoms(use_true_random=False))
def test_self_attention_is_permutation_equivariant(inputs, rng):
    """Shuffling the tokens shuffles the outputs the same way, and the weights on both axes."""
    X, heads, W_O, b_O = inputs
    order = list(range(len(X)))
    rng.shuffle(order)
    Y, weights = qkv.multi_head_attention(X, heads, W_O, b_O)
    Y_perm, weights_perm = qkv.multi_head_attention(X[order], heads, W_O, b_O)
    np.testing.assert_allclose(Y_perm, Y[order], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weights_perm, weights[:, order][:, :, order], rtol=1e-9, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(multi_head_inputs(uniform=True))
def test_fused_form_equals_per_head_form(inputs):
    X, heads, W_O, b_O = inputs
    Y, weights = qkv.multi_head_attention(X, heads, W_O, b_O)
    fused = qkv.fuse_heads(heads)
    Y_fused, weights_fused = qkv.fused_multi_head_attention(
        X, fused.W_Q, fused.W_K, fused.W_V, W_O, len(heads), fused.b_Q, fused.b_K, fused.b_V, b_O
    )
    np.testing.assert_allclose(Y_fused, Y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weights_fused, weights, rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_fused_weights_cut_into_column_blocks_are_the_heads(data):
    """Seed 001's direction: one wide W_Q for all heads equals per-head blocks of its columns."""
    n, h, d_k, d_model = data.draw(sizes), data.draw(st.integers(1, 3)), data.draw(sizes), data.draw(sizes)
    X = data.draw(matrices((n, d_model)))
    W_Q, W_K, W_V = (data.draw(matrices((d_model, h * d_k))) for _ in range(3))
    W_O = data.draw(matrices((h * d_k, d_model)))
    Y_fused, weights_fused = qkv.fused_multi_head_attention(X, W_Q, W_K, W_V, W_O, h)
    cols = [slice(i * d_k, (i + 1) * d_k) for i in range(h)]
    heads = [qkv.Head(W_Q[:, c], W_K[:, c], W_V[:, c]) for c in cols]
    Y, weights = qkv.multi_head_attention(X, heads, W_O)
    np.testing.assert_allclose(Y_fused, Y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weights_fused, weights, rtol=1e-9, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_split_heads_is_view_then_transpose(data):
    """split_heads(Z, h)[..., i, t, c] == Z[..., t, i * d_k + c], as torch's view(...).transpose(1, 2)."""
    batch, n, h, d_k = data.draw(st.integers(1, 3)), data.draw(sizes), data.draw(st.integers(1, 4)), data.draw(sizes)
    Z = data.draw(matrices((batch, n, h * d_k)))
    split = qkv.split_heads(Z, h)
    assert split.shape == (batch, h, n, d_k)
    for b in range(batch):
        for i in range(h):
            for t in range(n):
                np.testing.assert_array_equal(split[b, i, t], Z[b, t, i * d_k:(i + 1) * d_k])
    np.testing.assert_array_equal(qkv.merge_heads(split), Z)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_batched_inputs_equal_one_call_per_item(data):
    """Leading batch/head axes are independent problems."""
    batch = data.draw(st.integers(1, 3))
    Q, K, V, _ = data.draw(attention_inputs(batch_shape=(batch,)))
    mask = data.draw(masks(Q.shape[-2], K.shape[-2]))
    output, weights = qkv.scaled_dot_product_attention(Q, K, V, mask)
    for b in range(batch):
        out_b, w_b = qkv.scaled_dot_product_attention(Q[b], K[b], V[b], mask)
        np.testing.assert_allclose(output[b], out_b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(weights[b], w_b, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(multi_head_inputs())
def test_trace_ends_where_the_public_functions_end(inputs):
    X, heads, W_O, b_O = inputs
    trace = qkv.trace_multi_head(X, heads, W_O, b_O)
    Y, weights = qkv.multi_head_attention(X, heads, W_O, b_O)
    np.testing.assert_allclose(trace.Y.Z, Y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trace.weights, weights, rtol=1e-12, atol=1e-12)


def test_cross_attention_has_one_row_per_query_and_one_column_per_key():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    output, weights = qkv.scaled_dot_product_attention(Q, K, V)
    assert output.shape == (2, 4) and weights.shape == (2, 5)


def test_causal_mask_lets_token_i_see_tokens_up_to_i():
    mask = qkv.causal_mask(4)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4, 3))
    _, weights = qkv.self_attention(X, *(rng.normal(size=(3, 2)) for _ in range(3)), mask=mask)
    for i in range(4):
        assert (weights[i, i + 1:] == 0).all() and (weights[i, : i + 1] > 0).all()
    np.testing.assert_allclose(weights[0], [1, 0, 0, 0])


def test_patchify_numbers_patches_row_by_row():
    image = np.arange(4 * 6).reshape(4, 6)  # pixel value = 6 * row + column
    patches = qkv.patchify(image, 2)  # a 2 x 3 grid of 2x2 patches
    assert patches.shape == (6, 4)
    np.testing.assert_array_equal(patches[0], [0, 1, 6, 7])
    np.testing.assert_array_equal(patches[4], [14, 15, 20, 21])  # grid row 1, column 1
    grid = qkv.to_patch_grid(np.arange(6) / 15, (2, 3))
    assert grid[1, 1] == 4 / 15


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_fused_equals_per_head_on_a_batch_with_one_mask_per_item(data):
    """X (B, n, d_model) with a mask (B, n, n): both forms give each item its own mask."""
    X1, heads, W_O, b_O = data.draw(multi_head_inputs(uniform=True))
    batch = data.draw(st.integers(2, 3))
    n, d_model = X1.shape
    X = data.draw(matrices((batch, n, d_model)))
    mask = np.stack([data.draw(masks(n, n)) for _ in range(batch)])  # (B, n, n)
    Y, weights = qkv.multi_head_attention(X, heads, W_O, b_O, mask=mask)
    fused = qkv.fuse_heads(heads)
    Y_fused, weights_fused = qkv.fused_multi_head_attention(
        X, fused.W_Q, fused.W_K, fused.W_V, W_O, len(heads), fused.b_Q, fused.b_K, fused.b_V, b_O, mask=mask
    )
    assert weights.shape == (batch, len(heads), n, n)
    np.testing.assert_allclose(Y_fused, Y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weights_fused, weights, rtol=1e-9, atol=1e-12)
    for b in range(batch):
        Y_b, _ = qkv.multi_head_attention(X[b], heads, W_O, b_O, mask=mask[b])
        np.testing.assert_allclose(Y[b], Y_b, rtol=1e-12, atol=1e-12)
        assert (weights[b][:, ~mask[b]] == 0).all()
