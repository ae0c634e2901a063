"""The block around attention: layer norm, feed-forward layer, cross-attention, encoder and decoder
blocks, against loops written here, properties, and every error they raise.

PyTorch cross-checks of the same functions are in test_against_torch.py.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .seeds import SEED_000_O_CONCAT
from .strategies import matrices, multi_head_inputs
from .test_against_loops import loop_linear, loop_multi_head
from .test_errors import raises

rng = np.random.default_rng(0)


def loop_layer_norm(row, gamma, beta, eps):
    """One token's layer norm, feature by feature."""
    d = len(row)
    mean = sum(row) / d
    variance = sum((x - mean) ** 2 for x in row) / d
    return [g * (x - mean) / math.sqrt(variance + eps) + b for x, g, b in zip(row, gamma, beta)]


def loop_feed_forward(X, W_1, b_1, W_2, b_2, activation):
    phi = (lambda z: max(z, 0.0)) if activation == "relu" else (lambda z: z * (1 + math.erf(z / math.sqrt(2))) / 2)
    hidden = [[phi(z) for z in row] for row in loop_linear(X, W_1, b_1)]
    return loop_linear(hidden, W_2, b_2)


def small_layer(seed=0, d_model=4, h=2, d_ff=6, activation="relu", scale=0.5):
    """An EncoderLayer with random weights, biases and norms (nothing at its default)."""
    r = np.random.default_rng(seed)
    d_k = d_model // h

    def w(*shape):
        return r.normal(scale=scale, size=shape)

    heads = [qkv.Head(w(d_model, d_k), w(d_model, d_k), w(d_model, d_k), w(d_k), w(d_k), w(d_k)) for _ in range(h)]
    return qkv.EncoderLayer(
        qkv.MultiHead(heads, w(d_model, d_model), w(d_model)),
        qkv.LayerNorm(1 + w(d_model), w(d_model)),
        qkv.FeedForward(w(d_model, d_ff), w(d_ff), w(d_ff, d_model), w(d_model), activation),
        qkv.LayerNorm(1 + w(d_model), w(d_model)),
    )


# ---------------------------------------------------------------- layer norm and feed-forward


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.data())
def test_layer_norm_matches_loops(n, d, data):
    X = data.draw(matrices((n, d)))
    gamma, beta = data.draw(matrices((d,))), data.draw(matrices((d,)))
    expected = [loop_layer_norm(row, gamma.tolist(), beta.tolist(), 1e-5) for row in X.tolist()]
    np.testing.assert_allclose(qkv.layer_norm(X, gamma, beta), expected, rtol=1e-10, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(matrices((3, 5)), st.floats(0.5, 20), st.floats(-10, 10))
def test_layer_norm_ignores_the_shift_and_the_scale_of_a_token(X, scale, shift):
    """LN(a x + c) = LN(x) for a > 0 (up to eps): the output depends on the token's shape, not its size."""
    ones, zeros = np.ones(5), np.zeros(5)
    X = X + np.arange(5)  # no constant rows: their normalisation is eps-dominated
    np.testing.assert_allclose(qkv.layer_norm(scale * X + shift, ones, zeros, eps=1e-12),
                               qkv.layer_norm(X, ones, zeros, eps=1e-12), atol=1e-7)


def test_layer_norm_rows_have_mean_beta_and_spread_gamma():
    X = rng.normal(size=(2, 3, 8)) * 5 + 3
    Z = qkv.layer_norm(X, np.ones(8), np.zeros(8), eps=1e-12)
    np.testing.assert_allclose(Z.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(Z.var(axis=-1), 1, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=-1), np.sqrt(8), atol=1e-9)


def test_layer_norm_of_a_constant_row_is_beta():
    """eps keeps the division finite: a row with no spread becomes beta, never NaN."""
    beta = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(qkv.layer_norm(np.full((1, 3), 7.0), np.ones(3), beta), beta[None, :])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 5), st.sampled_from(["relu", "gelu"]), st.data())
def test_feed_forward_matches_loops(n, d_model, d_ff, activation, data):
    X = data.draw(matrices((n, d_model)))
    W_1, b_1 = data.draw(matrices((d_model, d_ff))), data.draw(matrices((d_ff,)))
    W_2, b_2 = data.draw(matrices((d_ff, d_model))), data.draw(matrices((d_model,)))
    expected = loop_feed_forward(X.tolist(), W_1.tolist(), b_1.tolist(), W_2.tolist(), b_2.tolist(), activation)
    np.testing.assert_allclose(qkv.feed_forward(X, W_1, b_1, W_2, b_2, activation), expected,
                               rtol=1e-10, atol=1e-10)


def test_gelu_at_known_points():
    """GELU(x) = x Phi(x): 0 at 0, Phi(1) = 0.841345 at 1, -Phi(-1) = -0.158655 at -1 (normal tables)."""
    np.testing.assert_allclose(qkv.gelu([0.0, 1.0, -1.0]), [0.0, 0.841345, -0.158655], atol=1e-6)


def test_gelu_without_scipy_is_math_erf_entry_by_entry(monkeypatch):
    """A student's install has no SciPy: gelu then takes erf from :func:`math.erf`, entry by entry, which
    is x Phi(x) computed by hand exactly; with SciPy's erf it agrees to 1e-15 (the two erfs differ in
    their last bits)."""
    x = np.linspace(-6.0, 6.0, 243).reshape(3, 81)
    by_hand = np.array([[v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in row] for row in x.tolist()])
    with_scipy = qkv.gelu(x)
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # `from scipy.special import erf` fails
    without_scipy = qkv.gelu(x)
    np.testing.assert_allclose(without_scipy, by_hand, rtol=0, atol=0)
    np.testing.assert_allclose(with_scipy, by_hand, rtol=1e-15, atol=1e-16)


def test_feed_forward_acts_on_every_token_separately():
    """Changing token 2 changes only row 2 of the output."""
    ffn = small_layer().feed_forward
    X = rng.normal(size=(4, 4))
    changed = X.copy()
    changed[2] += 1.0
    difference = np.abs(qkv.feed_forward(changed, *ffn) - qkv.feed_forward(X, *ffn)).max(axis=1)
    assert difference[2] > 0 and np.all(difference[[0, 1, 3]] == 0)


# ---------------------------------------------------------------- cross-attention and the blocks


@settings(max_examples=30, deadline=None)
@given(multi_head_inputs())
def test_cross_attention_over_its_own_tokens_is_self_attention(inputs):
    X, heads, W_O, b_O = inputs
    Y, weights = qkv.multi_head_cross_attention(X, X, heads, W_O, b_O)
    expected_Y, expected_weights = loop_multi_head(X.tolist(), heads, W_O, b_O)
    np.testing.assert_allclose(Y, expected_Y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-9, atol=1e-12)


def test_cross_attention_has_a_row_per_query_token_and_a_column_per_memory_token():
    attention = small_layer(h=2).self_attention
    X, memory = rng.normal(size=(2, 4)), rng.normal(size=(5, 4))
    Y, weights = qkv.multi_head_cross_attention(X, memory, *attention)
    assert Y.shape == (2, 4) and weights.shape == (2, 2, 5)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
    # the output for a query does not depend on the other queries
    Y_first, _ = qkv.multi_head_cross_attention(X[:1], memory, *attention)
    np.testing.assert_allclose(Y_first, Y[:1])


def loop_encoder_block(X, layer, norm_first):
    """The block's two formulas, with the loop implementations of each part."""
    def norm(rows, ln):
        return [loop_layer_norm(r, ln.gamma.tolist(), ln.beta.tolist(), ln.eps) for r in rows]

    def attend(rows):
        return loop_multi_head(rows, layer.self_attention.heads, layer.self_attention.W_O,
                               layer.self_attention.b_O)[0]

    def ffn(rows):
        f = layer.feed_forward
        return loop_feed_forward(rows, f.W_1.tolist(), f.b_1.tolist(), f.W_2.tolist(), f.b_2.tolist(), f.activation)

    def add(a, b):
        return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]

    if norm_first:
        H = add(X, attend(norm(X, layer.norm_1)))
        return add(H, ffn(norm(H, layer.norm_2)))
    H = norm(add(X, attend(X)), layer.norm_1)
    return norm(add(H, ffn(H)), layer.norm_2)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_matches_loops(norm_first, activation):
    layer = small_layer(seed=5, activation=activation)
    X = rng.normal(size=(3, 4))
    Y, _ = qkv.encoder_block(X, layer, norm_first=norm_first)
    np.testing.assert_allclose(Y, loop_encoder_block(X.tolist(), layer, norm_first), rtol=1e-9, atol=1e-10)


def test_the_delivery_block_by_hand():
    """Seed 000's heads in a block: the residual sum of 補償 is its token [1, 1, 0, 0] plus the seed's
    printed O_concat row, and its layer norm is that row standardised."""
    ex = qkv.examples.delivery_example()
    layer = qkv.examples.delivery_encoder_layer()
    attended, _ = qkv.multi_head_attention(ex.X, *layer.self_attention)
    residual = ex.X[2] + attended[2]
    np.testing.assert_allclose(residual, np.add([1, 1, 0, 0], SEED_000_O_CONCAT[2]), atol=1e-6)
    mean, variance = residual.mean(), residual.var()
    np.testing.assert_allclose(qkv.layer_norm(residual, *layer.norm_1),
                               (residual - mean) / math.sqrt(variance + 1e-5), rtol=1e-12)


def test_pre_ln_block_with_silent_sublayers_is_the_identity():
    """x + F(LN(x)) with F = 0: the residual connection passes the tokens through untouched."""
    layer = small_layer()
    silent = qkv.EncoderLayer(
        qkv.MultiHead(layer.self_attention.heads, np.zeros((4, 4)), np.zeros(4)), layer.norm_1,
        qkv.FeedForward(layer.feed_forward.W_1, layer.feed_forward.b_1, np.zeros((6, 4)), np.zeros(4)),
        layer.norm_2)
    X = rng.normal(size=(3, 4))
    np.testing.assert_array_equal(qkv.encoder_block(X, silent, norm_first=True)[0], X)
    post, _ = qkv.encoder_block(X, silent, norm_first=False)  # post-LN normalises even then
    np.testing.assert_allclose(post, qkv.layer_norm(qkv.layer_norm(X, *layer.norm_1), *layer.norm_2))


def test_a_post_ln_block_ends_on_a_layer_norm():
    X = rng.normal(size=(2, 5, 4)) * 10
    layer = qkv.examples.delivery_encoder_layer()
    Y, weights = qkv.encoder_block(X, layer)
    np.testing.assert_allclose(Y.mean(axis=-1), 0, atol=1e-12)
    assert weights.shape == (2, 2, 5, 5)


def test_encoder_block_with_a_causal_mask_is_a_decoder_only_block():
    """Token i's output depends on tokens 1..i only: changing the last token changes only the last row."""
    layer = small_layer(seed=2)
    X = rng.normal(size=(4, 4))
    changed = X.copy()
    changed[3] += 1.0
    Y, _ = qkv.encoder_block(X, layer, mask=qkv.causal_mask(4), norm_first=True)
    Y_changed, _ = qkv.encoder_block(changed, layer, mask=qkv.causal_mask(4), norm_first=True)
    np.testing.assert_array_equal(Y[:3], Y_changed[:3])
    assert np.abs(Y[3] - Y_changed[3]).max() > 0


def decoder_layer_from(seed):
    a, b = small_layer(seed), small_layer(seed + 1)
    return qkv.DecoderLayer(a.self_attention, a.norm_1, b.self_attention, b.norm_1, a.feed_forward, a.norm_2)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_block_is_its_three_sublayers_in_order(norm_first):
    """The decoder block, rebuilt from qkv's pieces by its formulas (each piece checked above)."""
    layer = decoder_layer_from(7)
    X, memory = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    mask = qkv.causal_mask(3)
    Y, weights = qkv.decoder_block(X, memory, layer, self_mask=mask, norm_first=norm_first)

    def sublayer(x, f, norm):
        return x + f(qkv.layer_norm(x, *norm)) if norm_first else qkv.layer_norm(x + f(x), *norm)

    H_1 = sublayer(X, lambda z: qkv.multi_head_attention(z, *layer.self_attention, mask=mask)[0], layer.norm_1)
    H_2 = sublayer(H_1, lambda z: qkv.multi_head_cross_attention(z, memory, *layer.cross_attention)[0],
                   layer.norm_2)
    expected = sublayer(H_2, lambda z: qkv.feed_forward(z, *layer.feed_forward), layer.norm_3)
    np.testing.assert_allclose(Y, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.triu(weights.self_attention, k=1), 0.0)
    assert weights.cross_attention.shape == (2, 3, 5)


def test_parameter_containers_are_read_only_copies():
    W_1 = rng.normal(size=(4, 6))
    ffn = qkv.FeedForward(W_1, None, rng.normal(size=(6, 4)), None)
    W_1[0, 0] = 99.0
    assert ffn.W_1[0, 0] != 99.0
    with pytest.raises(ValueError, match="read-only"):
        ffn.W_1[0, 0] = 1.0


def test_multi_head_from_fused_undoes_fuse_heads():
    """Cutting the stacked columns apart gives back every head, biases and missing biases included."""
    attention = small_layer(d_model=6, h=3).self_attention
    W_Q, W_K, W_V, b_Q, b_K, b_V = qkv.fuse_heads(attention.heads)
    again = qkv.MultiHead.from_fused(W_Q, W_K, W_V, attention.W_O, 3, b_Q, b_K, b_V, attention.b_O)
    assert again.num_heads == 3
    for head, other in zip(attention.heads, again.heads):
        for mine, theirs in zip(head, other):
            np.testing.assert_array_equal(mine, theirs)
    no_bias = qkv.MultiHead.from_fused(np.ones((4, 6)), np.ones((4, 6)), np.ones((4, 4)), np.ones((4, 4)), 2)
    assert [head.b_Q for head in no_bias.heads] == [None, None]
    assert [(head.d_k, head.d_v) for head in no_bias.heads] == [(3, 2), (3, 2)]  # d_k from W_Q, d_v from W_V


# ---------------------------------------------------------------- errors


def test_layer_norm_names_gamma_that_does_not_fit():
    with raises(ValueError, "gamma has shape (3,)", "X has 4 features", "must have shape (4,)"):
        qkv.layer_norm(np.ones((2, 4)), np.ones(3), np.zeros(4))


def test_layer_norm_names_beta_that_does_not_fit():
    with raises(ValueError, "beta has shape (1, 4)", "X has 4 features"):
        qkv.layer_norm(np.ones((2, 4)), np.ones(4), np.zeros((1, 4)))


@pytest.mark.parametrize("eps", [0, -1e-5, float("nan"), True, "1e-5"])
def test_layer_norm_rejects_an_eps_that_is_not_positive(eps):
    with raises(ValueError, "eps must be a positive number"):
        qkv.layer_norm(np.ones((2, 4)), np.ones(4), np.zeros(4), eps)


def test_layer_norm_container_needs_a_vector_gamma():
    with raises(ValueError, "gamma must be a vector (d_model,)", "(2, 2)"):
        qkv.LayerNorm(np.ones((2, 2)), np.zeros((2, 2)))


def test_feed_forward_names_an_unknown_activation():
    with raises(ValueError, "activation must be one of 'relu', 'gelu'", "'tanh'"):
        qkv.feed_forward(np.ones((2, 4)), np.ones((4, 6)), None, np.ones((6, 4)), None, "tanh")


def test_feed_forward_names_w1_and_w2_that_do_not_fit():
    with raises(ValueError, "W_1 has d_ff=6 columns but W_2 has 5 rows", "(4, 6)", "(5, 4)"):
        qkv.feed_forward(np.ones((2, 4)), np.ones((4, 6)), None, np.ones((5, 4)), None)


def test_feed_forward_names_a_bias_of_the_wrong_width():
    with raises(ValueError, "b_1 has shape (4,)", "W_1 has 6 columns"):
        qkv.feed_forward(np.ones((2, 4)), np.ones((4, 6)), np.ones(4), np.ones((6, 4)), None)


def test_feed_forward_names_tokens_of_the_wrong_width():
    with raises(ValueError, "X has d_model=3", "W_1 has 4 rows"):
        qkv.feed_forward(np.ones((2, 3)), np.ones((4, 6)), None, np.ones((6, 4)), None)


def test_cross_attention_names_memory_of_the_wrong_width():
    attention = small_layer().self_attention
    with raises(ValueError, "memory has d_model=3", "(5, 3)", "heads' W_K has 4 rows"):
        qkv.multi_head_cross_attention(np.ones((2, 4)), np.ones((5, 3)), *attention)


def test_multi_head_container_checks_w_o_against_the_heads():
    heads = small_layer().self_attention.heads
    with raises(ValueError, "W_O has 3 rows but the 2 heads' outputs concatenate to 4 columns"):
        qkv.MultiHead(heads, np.ones((3, 4)))


def test_multi_head_from_fused_names_columns_that_do_not_cut_into_equal_heads():
    with raises(ValueError, "W_Q has 6 columns", "not divisible by num_heads=4"):
        qkv.MultiHead.from_fused(np.ones((4, 6)), np.ones((4, 6)), np.ones((4, 8)), np.ones((8, 4)), 4)
    with raises(ValueError, "num_heads must be a positive integer, got 0"):
        qkv.MultiHead.from_fused(np.ones((4, 6)), np.ones((4, 6)), np.ones((4, 6)), np.ones((6, 4)), 0)


def test_encoder_layer_names_a_part_of_another_width():
    layer = small_layer()
    with raises(ValueError, "feed_forward reads vectors of width 3", "d_model=4", "residual sum"):
        qkv.EncoderLayer(layer.self_attention, layer.norm_1,
                         qkv.FeedForward(np.ones((3, 6)), None, np.ones((6, 4)), None), layer.norm_2)
    with raises(ValueError, "norm_2 normalises vectors of width 5", "d_model=4"):
        qkv.EncoderLayer(layer.self_attention, layer.norm_1, layer.feed_forward, qkv.LayerNorm.identity(5))
    with raises(ValueError, "self_attention writes vectors of width 2", "d_model=4"):
        qkv.EncoderLayer(qkv.MultiHead(layer.self_attention.heads, np.ones((4, 2))), layer.norm_1,
                         layer.feed_forward, layer.norm_2)


def test_decoder_layer_names_a_part_of_another_width():
    layer = small_layer()
    with raises(ValueError, "norm_3 normalises vectors of width 2", "d_model=4"):
        qkv.DecoderLayer(layer.self_attention, layer.norm_1, layer.self_attention, layer.norm_1,
                         layer.feed_forward, qkv.LayerNorm.identity(2))


def test_blocks_name_a_layer_of_the_wrong_kind():
    encoder = small_layer()
    with raises(TypeError, "encoder_block needs a qkv.EncoderLayer, got tuple"):
        qkv.encoder_block(np.ones((2, 4)), tuple(vars(encoder).values()))
    with raises(TypeError, "decoder_block needs a qkv.DecoderLayer, got EncoderLayer"):
        qkv.decoder_block(np.ones((2, 4)), np.ones((3, 4)), encoder)


def test_blocks_name_tokens_of_the_wrong_width():
    with raises(ValueError, "X has d_model=3", "W_Q has 4 rows"):
        qkv.encoder_block(np.ones((2, 3)), small_layer())
    with raises(ValueError, "memory has d_model=5"):
        qkv.decoder_block(np.ones((2, 4)), np.ones((3, 5)), decoder_layer_from(1))


@pytest.mark.parametrize("function", [qkv.relu, qkv.gelu])
def test_activations_name_an_entry_that_is_not_finite(function):
    with raises(ValueError, "x[1] is nan", "finite numbers"):
        function([0.0, np.nan])
