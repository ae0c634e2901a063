"""What qkv.models adds around qkv.encoder_block (pooling, the layers of a trained model) and its head
analyses, against plain loops and properties that follow from their definitions.

qkv.layer_norm, qkv.gelu, qkv.feed_forward and qkv.encoder_block, which the trained models run on, are
checked against PyTorch in test_against_torch.py and against loops in test_block.py."""

from __future__ import annotations

import numpy as np
import pytest

import qkv
import qkv.models

rng = np.random.default_rng(7)


def test_mean_pooling_and_unit_length():
    H = rng.standard_normal((2, 6, 4))
    np.testing.assert_allclose(qkv.models.mean_pooling(H), H.sum(axis=1) / 6)
    unit = qkv.models.unit_length(H)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=-1), 1)
    np.testing.assert_array_equal(qkv.models.unit_length(np.zeros(3)), np.zeros(3))


def random_fused(d_model=8, num_heads=2, d_ff=16):
    """A trained layer's arrays as a model file stores them: the heads side by side."""
    matrix = lambda *shape: rng.standard_normal(shape) * 0.5  # noqa: E731
    return dict(
        W_Q=matrix(d_model, d_model), b_Q=matrix(d_model), W_K=matrix(d_model, d_model), b_K=matrix(d_model),
        W_V=matrix(d_model, d_model), b_V=matrix(d_model), W_O=matrix(d_model, d_model), b_O=matrix(d_model),
        norm_1=(1 + matrix(d_model), matrix(d_model)), W_1=matrix(d_model, d_ff), b_1=matrix(d_ff),
        W_2=matrix(d_ff, d_model), b_2=matrix(d_model), norm_2=(1 + matrix(d_model), matrix(d_model)),
        num_heads=num_heads, eps=1e-6)


def random_layer(**sizes):
    return qkv.models.gelu_encoder_layer(**random_fused(**sizes))


def test_a_trained_layer_cuts_its_heads_from_the_fused_columns():
    """Head i owns columns i*d_k .. (i+1)*d_k - 1 of W_Q, W_K, W_V and of their biases."""
    fused = random_fused(d_model=6, num_heads=3)
    layer = qkv.models.gelu_encoder_layer(**fused)
    assert layer.num_heads == 3 and layer.feed_forward.activation == "gelu"
    for i, head in enumerate(layer.self_attention.heads):
        columns = slice(2 * i, 2 * i + 2)
        for name in ("W_Q", "W_K", "W_V"):
            np.testing.assert_array_equal(getattr(head, name), fused[name][:, columns], err_msg=name)
        for name in ("b_Q", "b_K", "b_V"):
            np.testing.assert_array_equal(getattr(head, name), fused[name][columns], err_msg=name)
    assert layer.norm_1.eps == layer.norm_2.eps == 1e-6


def test_a_trained_layer_runs_as_fused_attention_would():
    """The per-head layer gives the weights and output of fused_multi_head_attention on the fused arrays."""
    fused = random_fused()
    X = rng.standard_normal((3, 5, 8))
    expected, expected_weights = qkv.fused_multi_head_attention(
        X, fused["W_Q"], fused["W_K"], fused["W_V"], fused["W_O"], 2,
        fused["b_Q"], fused["b_K"], fused["b_V"], fused["b_O"])
    output, weights = qkv.multi_head_attention(X, *qkv.models.gelu_encoder_layer(**fused).self_attention)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-12)
    np.testing.assert_allclose(output, expected, atol=1e-12)


def test_run_layers_keeps_every_input_and_output():
    layers = [random_layer(), random_layer()]
    X = rng.standard_normal((4, 8))
    hidden, weights = qkv.models.run_layers(X, layers, norm_first=True)
    assert hidden.shape == (3, 4, 8) and weights.shape == (2, 2, 4, 4)
    np.testing.assert_array_equal(hidden[0], X)
    for index, layer in enumerate(layers):
        Y, layer_weights = qkv.encoder_block(hidden[index], layer, norm_first=True)
        np.testing.assert_array_equal(hidden[index + 1], Y)
        np.testing.assert_array_equal(weights[index], layer_weights)


def test_a_trained_layer_refuses_mismatched_matrices():
    good = random_fused()
    with pytest.raises(ValueError, match=r"feed_forward reads vectors of width 7 but the block's tokens have d_model=8"):
        qkv.models.gelu_encoder_layer(**{**good, "W_1": np.ones((7, 16))})
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        qkv.models.gelu_encoder_layer(**{**good, "num_heads": 3})


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
    d_k = 4
    for h, head in enumerate(layer.self_attention.heads):
        V = X @ head.W_V + head.b_V  # (n, d_k)
        W_O = layer.self_attention.W_O[h * d_k:(h + 1) * d_k]  # (d_k, d_model)
        for i in range(4):
            for j in range(4):
                expected = np.linalg.norm(weights[h, i, j] * V[j] @ W_O)
                assert norms[h, i, j] == pytest.approx(expected, rel=1e-12)


def test_value_output_norms_are_the_length_of_each_values_share_of_w_o():
    """|v_j^(h) W_O^(h)| for every head and key, against a loop over the value's entries and W_O's rows."""
    layer = random_layer()
    X = rng.standard_normal((5, 8))
    lengths = qkv.models.value_output_norms(X, layer)
    assert lengths.shape == (len(layer.self_attention.heads), 5)
    d_k = 4
    for h, head in enumerate(layer.self_attention.heads):
        W_O = layer.self_attention.W_O[h * d_k:(h + 1) * d_k]  # (d_k, d_model)
        for j in range(5):
            v = [sum(X[j, m] * head.W_V[m, c] for m in range(8)) + head.b_V[c] for c in range(d_k)]
            moved = [sum(v[c] * W_O[c, k] for c in range(d_k)) for k in range(W_O.shape[1])]
            assert lengths[h, j] == pytest.approx(sum(x * x for x in moved) ** 0.5, rel=1e-12)
