"""qkv's layer norm, GELU, feed-forward layer and encoder and decoder blocks against PyTorch.

PyTorch is an independent implementation of the same operations. Each torch layer is made with
its own random initialisation (in float64, dropout 0, batch_first=True) and its weights are copied
into qkv's parameter containers; both then run on the same input. torch stores a linear map as
``weight`` of shape ``(out, in)`` and computes ``x @ weight.T + bias``; qkv's ``W`` is ``weight.T``.
torch's boolean attention masks mean the opposite of qkv's (True = blocked), hence the ``~``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import matrices

torch = pytest.importorskip("torch")
F = torch.nn.functional


def numpy_of(tensor) -> np.ndarray:
    return tensor.detach().to(torch.float64).numpy()


def multi_head_from_torch(attention, num_heads: int) -> qkv.MultiHead:
    """qkv.MultiHead with the weights of a torch.nn.MultiheadAttention (packed in_proj)."""
    d_model = attention.embed_dim
    d_k = d_model // num_heads
    W = numpy_of(attention.in_proj_weight)  # (3 d_model, d_model): rows Q, then K, then V
    b = numpy_of(attention.in_proj_bias)  # (3 d_model,)
    W_Q, W_K, W_V = (W[i * d_model:(i + 1) * d_model].T for i in range(3))  # (d_model, d_model)
    b_Q, b_K, b_V = (b[i * d_model:(i + 1) * d_model] for i in range(3))
    heads = []
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)  # torch cuts heads by columns, head 1 first
        heads.append(qkv.Head(W_Q[:, cols], W_K[:, cols], W_V[:, cols], b_Q[cols], b_K[cols], b_V[cols]))
    return qkv.MultiHead(heads, numpy_of(attention.out_proj.weight).T, numpy_of(attention.out_proj.bias))


def norm_from_torch(norm) -> qkv.LayerNorm:
    return qkv.LayerNorm(numpy_of(norm.weight), numpy_of(norm.bias), norm.eps)


def feed_forward_from_torch(layer, activation: str) -> qkv.FeedForward:
    return qkv.FeedForward(numpy_of(layer.linear1.weight).T, numpy_of(layer.linear1.bias),
                           numpy_of(layer.linear2.weight).T, numpy_of(layer.linear2.bias), activation)


def randomise_norms(layer, generator) -> None:
    """torch starts gamma at 1 and beta at 0; other values make the comparison stronger."""
    for module in layer.modules():
        if isinstance(module, torch.nn.LayerNorm):
            with torch.no_grad():
                module.weight.copy_(1 + 0.3 * torch.randn(module.weight.shape, generator=generator,
                                                          dtype=torch.float64))
                module.bias.copy_(0.3 * torch.randn(module.bias.shape, generator=generator, dtype=torch.float64))


def torch_layer(kind, d_model, num_heads, d_ff, activation, norm_first, seed):
    torch.manual_seed(seed)
    layer = kind(d_model, num_heads, dim_feedforward=d_ff, dropout=0.0, activation=activation,
                 batch_first=True, norm_first=norm_first, dtype=torch.float64)
    randomise_norms(layer, torch.Generator().manual_seed(seed))
    return layer.eval()


def encoder_layer_from_torch(layer, num_heads, activation) -> qkv.EncoderLayer:
    return qkv.EncoderLayer(multi_head_from_torch(layer.self_attn, num_heads), norm_from_torch(layer.norm1),
                            feed_forward_from_torch(layer, activation), norm_from_torch(layer.norm2))


def decoder_layer_from_torch(layer, num_heads, activation) -> qkv.DecoderLayer:
    return qkv.DecoderLayer(
        multi_head_from_torch(layer.self_attn, num_heads), norm_from_torch(layer.norm1),
        multi_head_from_torch(layer.multihead_attn, num_heads), norm_from_torch(layer.norm2),
        feed_forward_from_torch(layer, activation), norm_from_torch(layer.norm3),
    )


def padding_mask(lengths, n):
    """(batch, n, n) qkv mask: every query may attend to the first ``length`` keys of its sentence."""
    keys_present = np.arange(n)[None, :] < np.array(lengths)[:, None]  # (batch, n)
    return np.broadcast_to(keys_present[:, None, :], (len(lengths), n, n))


# ---------------------------------------------------------------- the pieces


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.data())
def test_layer_norm_matches_torch(n, d_model, data):
    X = data.draw(matrices((n, d_model)))
    gamma, beta = data.draw(matrices((d_model,))), data.draw(matrices((d_model,)))
    eps = data.draw(st.sampled_from([1e-5, 1e-3, 0.5]))
    expected = F.layer_norm(torch.from_numpy(X), (d_model,), torch.from_numpy(gamma), torch.from_numpy(beta), eps)
    np.testing.assert_allclose(qkv.layer_norm(X, gamma, beta, eps), numpy_of(expected), rtol=1e-10, atol=1e-10)


def test_gelu_and_relu_match_torch():
    x = np.linspace(-8, 8, 401)
    np.testing.assert_allclose(qkv.gelu(x), numpy_of(F.gelu(torch.from_numpy(x))), rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(qkv.relu(x), numpy_of(F.relu(torch.from_numpy(x))))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_matches_the_two_linear_layers_of_a_torch_encoder_layer(activation):
    layer = torch_layer(torch.nn.TransformerEncoderLayer, 6, 2, 10, activation, False, seed=1)
    X = np.random.default_rng(1).normal(size=(2, 5, 6))
    hidden = F.linear(torch.from_numpy(X), layer.linear1.weight, layer.linear1.bias)
    expected = layer.linear2(F.relu(hidden) if activation == "relu" else F.gelu(hidden))
    ffn = feed_forward_from_torch(layer, activation)
    np.testing.assert_allclose(qkv.feed_forward(X, *ffn), numpy_of(expected), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- the blocks


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "padding mask"])
def test_encoder_block_matches_torch_transformer_encoder_layer(norm_first, activation, masked):
    d_model, num_heads, n = 8, 2, 5
    layer = torch_layer(torch.nn.TransformerEncoderLayer, d_model, num_heads, 16, activation, norm_first, seed=2)
    X = np.random.default_rng(2).normal(size=(3, n, d_model))  # (batch, n, d_model)
    mask = padding_mask([5, 3, 1], n) if masked else None
    # torch takes one mask per sentence and head, (batch * h, n, n), with True = blocked
    blocked = torch.from_numpy(~np.repeat(mask, num_heads, axis=0)) if masked else None
    with torch.no_grad():
        expected = layer(torch.from_numpy(X), src_mask=blocked)
    Y, weights = qkv.encoder_block(X, encoder_layer_from_torch(layer, num_heads, activation), mask=mask,
                                   norm_first=norm_first)
    np.testing.assert_allclose(Y, numpy_of(expected), rtol=1e-9, atol=1e-10)
    assert weights.shape == (3, num_heads, n, n)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_block_matches_torch_transformer_decoder_layer(norm_first, activation):
    d_model, num_heads, n, n_k = 8, 4, 4, 6
    layer = torch_layer(torch.nn.TransformerDecoderLayer, d_model, num_heads, 12, activation, norm_first, seed=3)
    rng = np.random.default_rng(3)
    X, memory = rng.normal(size=(2, n, d_model)), rng.normal(size=(2, n_k, d_model))
    causal = qkv.causal_mask(n)
    memory_mask = np.ones((n, n_k), dtype=bool)
    memory_mask[:, -2:] = False  # the encoder's last two tokens are padding
    with torch.no_grad():
        expected = layer(torch.from_numpy(X), torch.from_numpy(memory), tgt_mask=torch.from_numpy(~causal),
                         memory_mask=torch.from_numpy(~memory_mask))
    Y, weights = qkv.decoder_block(X, memory, decoder_layer_from_torch(layer, num_heads, activation),
                                   self_mask=causal, memory_mask=memory_mask, norm_first=norm_first)
    np.testing.assert_allclose(Y, numpy_of(expected), rtol=1e-9, atol=1e-10)
    assert weights.self_attention.shape == (2, num_heads, n, n)
    assert weights.cross_attention.shape == (2, num_heads, n, n_k)
    np.testing.assert_array_equal(weights.cross_attention[..., -2:], 0.0)


def test_cross_attention_weights_match_torch_multihead_attention():
    """torch's MultiheadAttention returns per-head weights (average_attn_weights=False): the same as qkv's."""
    torch.manual_seed(4)
    attention = torch.nn.MultiheadAttention(6, 3, batch_first=True, dtype=torch.float64).eval()
    rng = np.random.default_rng(4)
    X, memory = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 5, 6))
    with torch.no_grad():
        expected_Y, expected_weights = attention(torch.from_numpy(X), torch.from_numpy(memory), torch.from_numpy(memory),
                                                 average_attn_weights=False)
    Y, weights = qkv.multi_head_cross_attention(X, memory, *multi_head_from_torch(attention, 3))
    np.testing.assert_allclose(Y, numpy_of(expected_Y), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, numpy_of(expected_weights), rtol=1e-10, atol=1e-13)
