"""The pieces around attention (LayerNorm, GELU, feed-forward, pooling) and the head analyses of
qkv.models, against PyTorch, plain loops and properties that follow from their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import qkv
import qkv.models
from qkv.models.encoder import EncoderLayer

rng = np.random.default_rng(7)


def test_layer_norm_matches_pytorch():
    X = rng.standard_normal((2, 5, 16)) * 3 + 1
    gamma, beta = rng.standard_normal(16), rng.standard_normal(16)
    expected = torch.nn.functional.layer_norm(torch.tensor(X), (16,), torch.tensor(gamma), torch.tensor(beta),
                                              eps=1e-12).numpy()
    np.testing.assert_allclose(qkv.models.layer_norm(X, gamma, beta, 1e-12), expected, atol=1e-12)


def test_layer_norm_gives_mean_0_and_variance_1_before_scaling():
    X = rng.standard_normal((4, 9)) * 5 - 2
    Y = qkv.models.layer_norm(X, np.ones(9), np.zeros(9), 0.0)
    np.testing.assert_allclose(Y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(Y.var(axis=-1), 1, atol=1e-12)


def test_gelu_matches_pytorch_and_the_definition():
    x = np.linspace(-6, 6, 241)
    np.testing.assert_allclose(qkv.models.gelu(x), torch.nn.functional.gelu(torch.tensor(x)).numpy(), atol=1e-15)
    for value in (-1.0, 0.0, 0.5, 2.0):  # x * Phi(x), Phi the standard normal CDF
        phi = 0.5 * math.erfc(-value / math.sqrt(2))
        assert qkv.models.gelu(np.array([value]))[0] == pytest.approx(value * phi, abs=1e-15)


def test_feed_forward_matches_pytorch():
    X = rng.standard_normal((3, 8))
    W_1, b_1 = rng.standard_normal((8, 12)), rng.standard_normal(12)
    W_2, b_2 = rng.standard_normal((12, 8)), rng.standard_normal(8)
    t = torch.tensor
    expected = (torch.nn.functional.gelu(t(X) @ t(W_1) + t(b_1)) @ t(W_2) + t(b_2)).numpy()
    np.testing.assert_allclose(qkv.models.feed_forward(X, W_1, b_1, W_2, b_2), expected, atol=1e-12)


def test_mean_pooling_and_unit_length():
    H = rng.standard_normal((2, 6, 4))
    np.testing.assert_allclose(qkv.models.mean_pooling(H), H.sum(axis=1) / 6)
    unit = qkv.models.unit_length(H)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=-1), 1)
    np.testing.assert_array_equal(qkv.models.unit_length(np.zeros(3)), np.zeros(3))


def test_layer_norm_refuses_parameters_of_the_wrong_width():
    with pytest.raises(ValueError, match=r"gamma has shape \(5,\) but the tokens have 4 columns"):
        qkv.models.layer_norm(np.ones((2, 4)), np.ones(5), np.zeros(4), 1e-5)


def random_layer(d_model=8, num_heads=2, d_ff=16):
    matrix = lambda *shape: rng.standard_normal(shape) * 0.5  # noqa: E731
    return EncoderLayer(
        W_Q=matrix(d_model, d_model), b_Q=matrix(d_model), W_K=matrix(d_model, d_model), b_K=matrix(d_model),
        W_V=matrix(d_model, d_model), b_V=matrix(d_model), W_O=matrix(d_model, d_model), b_O=matrix(d_model),
        norm_1_gamma=1 + matrix(d_model), norm_1_beta=matrix(d_model), W_1=matrix(d_model, d_ff), b_1=matrix(d_ff),
        W_2=matrix(d_ff, d_model), b_2=matrix(d_model), norm_2_gamma=1 + matrix(d_model),
        norm_2_beta=matrix(d_model), num_heads=num_heads, eps=1e-6)


def torch_encoder_layer(layer, norm_first):
    """torch.nn.TransformerEncoderLayer holding the same parameters (PyTorch stores W^T)."""
    d_model, d_ff = layer.W_1.shape
    torch_layer = torch.nn.TransformerEncoderLayer(d_model, layer.num_heads, d_ff, dropout=0.0, activation="gelu",
                                                   layer_norm_eps=layer.eps, batch_first=True,
                                                   norm_first=norm_first, dtype=torch.float64)
    t = torch.tensor
    with torch.no_grad():
        attention = torch_layer.self_attn
        attention.in_proj_weight.copy_(t(np.concatenate([layer.W_Q.T, layer.W_K.T, layer.W_V.T])))
        attention.in_proj_bias.copy_(t(np.concatenate([layer.b_Q, layer.b_K, layer.b_V])))
        attention.out_proj.weight.copy_(t(layer.W_O.T))
        attention.out_proj.bias.copy_(t(layer.b_O))
        torch_layer.linear1.weight.copy_(t(layer.W_1.T))
        torch_layer.linear1.bias.copy_(t(layer.b_1))
        torch_layer.linear2.weight.copy_(t(layer.W_2.T))
        torch_layer.linear2.bias.copy_(t(layer.b_2))
        for norm, prefix in ((torch_layer.norm1, "norm_1"), (torch_layer.norm2, "norm_2")):
            norm.weight.copy_(t(getattr(layer, prefix + "_gamma")))
            norm.bias.copy_(t(getattr(layer, prefix + "_beta")))
    return torch_layer.eval()


@pytest.mark.parametrize("norm_first, layer_function", [(False, qkv.models.post_norm_layer),
                                                        (True, qkv.models.pre_norm_layer)])
def test_encoder_layers_match_pytorch_transformer_encoder_layer(norm_first, layer_function):
    """Post-norm (BERT) and pre-norm (ViT) against torch.nn.TransformerEncoderLayer, in float64."""
    layer = random_layer()
    X = rng.standard_normal((3, 5, 8))
    with torch.no_grad():
        expected = torch_encoder_layer(layer, norm_first)(torch.tensor(X)).numpy()
    Y, weights = layer_function(X, layer)
    np.testing.assert_allclose(Y, expected, atol=1e-10)
    assert weights.shape == (3, 2, 5, 5)


def test_an_encoder_layer_refuses_mismatched_matrices():
    good = random_layer()
    fields = {name: getattr(good, name) for name in good.__dataclass_fields__}
    with pytest.raises(ValueError, match=r"W_1 has shape \(7, 16\); every projection of the layer reads d_model=8"):
        EncoderLayer(**{**fields, "W_1": np.ones((7, 16))})
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        EncoderLayer(**{**fields, "num_heads": 3})


# ---------------------------------------------------------------- reading heads


TOKENS = ["[CLS]", "the", "cat", "saw", "the", "cat", "[SEP]"]


def test_pattern_targets_name_the_right_keys():
    targets = qkv.models.pattern_targets(TOKENS)
    assert np.flatnonzero(targets["previous token"][3]).tolist() == [2]
    assert not targets["previous token"][0].any()
    assert np.flatnonzero(targets["next token"][3]).tolist() == [4]
    assert np.flatnonzero(targets["same word"][2]).tolist() == [5]
    assert np.flatnonzero(targets["same word"][1]).tolist() == [4]
    assert not targets["same word"][3].any() and not targets["same word"][0].any()
    assert targets["[CLS]"][:, 0].all() and targets["[SEP]"][:, -1].all()


def test_a_head_that_does_exactly_one_thing_scores_1_there():
    n = len(TOKENS)
    previous = np.zeros((n, n))
    previous[0, 0] = 1
    for i in range(1, n):
        previous[i, i - 1] = 1
    scores = qkv.models.head_pattern_scores(previous, TOKENS)
    assert scores["previous token"] == pytest.approx(1.0)
    assert scores["next token"] == pytest.approx(0.0)
    assert scores["[CLS]"] == pytest.approx(2 / n)  # the [CLS] row and the "the" row


def test_an_even_spread_scores_about_1_over_n():
    n = len(TOKENS)
    scores = qkv.models.head_pattern_scores(np.full((2, n, n), 1 / n), TOKENS)
    for pattern in ("previous token", "next token", "itself", "same word", "[CLS]", "[SEP]"):
        np.testing.assert_allclose(scores[pattern], [1 / n, 1 / n], err_msg=pattern)


def test_same_word_is_undefined_when_no_word_repeats():
    scores = qkv.models.head_pattern_scores(np.full((3, 3), 1 / 3), ["[CLS]", "hi", "[SEP]"])
    assert np.isnan(scores["same word"])


def test_pattern_scores_refuse_weights_that_do_not_fit_the_tokens():
    with pytest.raises(ValueError, match=r"weights have shape \(2, 4, 4\) but there are 7 tokens"):
        qkv.models.head_pattern_scores(np.ones((2, 4, 4)), TOKENS)


def test_head_contribution_norms_match_a_loop():
    """N[h, i, j] = || A[h, i, j] v_j^(h) W_O^(h) ||, computed with one head's slices at a time."""
    layer = random_layer()
    X = rng.standard_normal((4, 8))
    norms, weights = qkv.models.head_contribution_norms(X, layer)
    d_k = layer.d_k
    for h, head in enumerate(layer.heads()):
        V = X @ head.W_V + head.b_V  # (n, d_k)
        W_O = layer.W_O[h * d_k:(h + 1) * d_k]  # (d_k, d_model)
        for i in range(4):
            for j in range(4):
                expected = np.linalg.norm(weights[h, i, j] * V[j] @ W_O)
                assert norms[h, i, j] == pytest.approx(expected, rel=1e-12)
