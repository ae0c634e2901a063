"""Attention as lookup: hard lookup against a Python dict, kernel weights and additive attention
against loops written here, the Gaussian kernel as a scaled dot product, and every error raised.
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

rng = np.random.default_rng(0)


def loop_gaussian_weights(Q, K, sigma):
    weights = []
    for q in Q:
        kernel = [math.exp(-sum((a - b) ** 2 for a, b in zip(q, k)) / (2 * sigma**2)) for k in K]
        weights.append([value / sum(kernel) for value in kernel])
    return weights


def loop_additive(Q, K, V, W_q, W_k, w_v):
    """s_ij = w_v . tanh(q_i W_q + k_j W_k), softmax over j, weighted sum of the values."""
    d_h = len(w_v)
    weights, output = [], []
    for q in Q:
        hq = [sum(q[r] * W_q[r][c] for r in range(len(q))) for c in range(d_h)]
        scores = []
        for k in K:
            hk = [sum(k[r] * W_k[r][c] for r in range(len(k))) for c in range(d_h)]
            scores.append(sum(w_v[c] * math.tanh(hq[c] + hk[c]) for c in range(d_h)))
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        row = [e / sum(exps) for e in exps]
        weights.append(row)
        output.append([sum(row[j] * V[j][c] for j in range(len(K))) for c in range(len(V[0]))])
    return output, weights


# ---------------------------------------------------------------- hard lookup


def test_hard_lookup_returns_what_a_dictionary_returns():
    keys = rng.integers(-3, 4, size=(6, 2)).astype(float)
    keys = np.unique(keys, axis=0)  # a dictionary's keys are distinct
    values = rng.normal(size=(len(keys), 3))
    dictionary = {tuple(k): v for k, v in zip(keys.tolist(), values)}
    queries = keys[rng.permutation(len(keys))]
    output, weights = qkv.hard_lookup(queries, keys, values)
    for query, row in zip(queries.tolist(), output):
        np.testing.assert_array_equal(row, dictionary[tuple(query)])
    assert set(np.unique(weights)) == {0.0, 1.0} and np.all(weights.sum(axis=1) == 1)


def test_soft_weights_become_the_hard_lookup_as_the_scores_grow():
    """softmax(c q.K^T) over one-hot keys tends to the one-hot weights of the lookup."""
    keys = np.eye(4)
    _, hard = qkv.hard_lookup(keys[[2]], keys, np.ones((4, 1)))
    for c, tolerance in [(10, 1e-3), (40, 1e-16)]:
        np.testing.assert_allclose(qkv.softmax(c * keys[[2]] @ keys.T), hard, atol=tolerance)


# ---------------------------------------------------------------- Gaussian kernel, Nadaraya-Watson


def test_gaussian_kernel_over_three_keys_by_hand():
    """q1 = [1, 0] over k1 = [1, 0], k2 = [0, 1], k3 = [1, 1], sigma = 1: squared distances 0, 2, 1,
    so weights proportional to 1, e^-1, e^-1/2."""
    ex = qkv.examples.q1_example()
    np.testing.assert_array_equal(qkv.squared_distances(ex.Q, ex.K), [[0.0, 2.0, 1.0]])
    kernel = [1.0, math.exp(-1), math.exp(-0.5)]
    expected = [k / sum(kernel) for k in kernel]
    np.testing.assert_allclose(qkv.gaussian_kernel_weights(ex.Q, ex.K, 1.0)[0], expected, rtol=1e-15)
    np.testing.assert_allclose(expected, [0.50648, 0.186324, 0.307196], atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.floats(0.5, 5), st.data())
def test_gaussian_kernel_weights_match_loops(n_q, n_k, d, sigma, data):
    Q, K = data.draw(matrices((n_q, d))), data.draw(matrices((n_k, d)))
    np.testing.assert_allclose(qkv.gaussian_kernel_weights(Q, K, sigma), loop_gaussian_weights(Q.tolist(), K.tolist(), sigma),
                               rtol=1e-10, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.integers(1, 3), st.floats(0.3, 5), st.data())
def test_nadaraya_watson_is_attention_on_extended_queries_and_keys(n_q, n_k, d, d_v, sigma, data):
    """softmax(q~ . k~ / sqrt(d + 1)) with the extra coordinate is the Gaussian kernel exactly."""
    Q, K, V = data.draw(matrices((n_q, d))), data.draw(matrices((n_k, d))), data.draw(matrices((n_k, d_v)))
    output, weights = qkv.nadaraya_watson(Q, K, V, sigma)
    Q_tilde, K_tilde = qkv.gaussian_as_dot_product(Q, K, sigma)
    attention_output, attention_weights = qkv.scaled_dot_product_attention(Q_tilde, K_tilde, V)
    np.testing.assert_allclose(attention_weights, weights, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(attention_output, output, rtol=1e-9, atol=1e-9)
    expected = np.array(loop_gaussian_weights(Q.tolist(), K.tolist(), sigma)) @ V
    np.testing.assert_allclose(output, expected, rtol=1e-9, atol=1e-9)


def test_keys_of_equal_length_need_no_extra_coordinate():
    """With every key of the same length, the Gaussian kernel is softmax(q . k / sigma^2) as it stands."""
    K = rng.normal(size=(6, 3))
    K = 2.0 * K / np.linalg.norm(K, axis=1, keepdims=True)  # all of length 2
    Q, sigma = rng.normal(size=(4, 3)), 0.8
    np.testing.assert_allclose(qkv.softmax(Q @ K.T / sigma**2), qkv.gaussian_kernel_weights(Q, K, sigma), atol=1e-14)


def test_nadaraya_watson_between_nearest_neighbour_and_the_mean():
    """A very narrow kernel returns the nearest key's value; a very wide one the mean of all values."""
    keys = np.array([[0.0], [1.0], [2.0], [5.0]])
    values = np.array([[10.0], [20.0], [30.0], [40.0]])
    queries = np.array([[0.2], [1.9], [4.0]])
    narrow, _ = qkv.nadaraya_watson(queries, keys, values, sigma=0.01)
    wide, _ = qkv.nadaraya_watson(queries, keys, values, sigma=1e4)
    np.testing.assert_allclose(narrow[:, 0], [10.0, 30.0, 40.0])
    np.testing.assert_allclose(wide[:, 0], 25.0, rtol=1e-6)


def test_colour_head_is_a_gaussian_kernel_of_width_sqrt2_over_g():
    """The ViT colour head of the attention-maps chapter equals the Gaussian kernel over the patches'
    mean colours with sigma = sqrt(2) / g."""
    image = rng.random((32, 48, 3))
    tokens = qkv.colour_tokens(qkv.patchify(image, 8))  # (24, 4)
    colours = image.reshape(4, 8, 6, 8, 3).mean(axis=(1, 3)).reshape(24, 3)  # each patch's mean colour
    np.testing.assert_allclose(tokens[:, :3], colours - colours.mean(axis=0), atol=1e-15)
    np.testing.assert_allclose(tokens[:, 3], -0.5 * np.sum(tokens[:, :3] ** 2, axis=1), atol=1e-15)
    for g in (3.0, 10.0):
        _, head_weights = qkv.self_attention(tokens, *qkv.colour_head(g))
        kernel = loop_gaussian_weights(tokens[:, :3].tolist(), tokens[:, :3].tolist(), math.sqrt(2) / g)
        np.testing.assert_allclose(head_weights, kernel, rtol=1e-9, atol=1e-14)


# ---------------------------------------------------------------- additive attention


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 3), st.data())
def test_additive_attention_matches_loops(n_q, n_k, d_q, d_k, d_h, d_v, data):
    Q, K, V = data.draw(matrices((n_q, d_q))), data.draw(matrices((n_k, d_k))), data.draw(matrices((n_k, d_v)))
    W_q, W_k, w_v = data.draw(matrices((d_q, d_h))), data.draw(matrices((d_k, d_h))), data.draw(matrices((d_h,)))
    output, weights = qkv.additive_attention(Q, K, V, W_q, W_k, w_v)
    expected_output, expected_weights = loop_additive(Q.tolist(), K.tolist(), V.tolist(), W_q.tolist(),
                                                      W_k.tolist(), w_v.tolist())
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(output, expected_output, rtol=1e-9, atol=1e-9)


def test_additive_attention_masks_like_dot_product_attention():
    Q, K, V = rng.normal(size=(2, 3, 2)), rng.normal(size=(2, 4, 5)), rng.normal(size=(2, 4, 2))
    mask = np.array([[True, False, True, False]] * 3)
    _, weights = qkv.additive_attention(Q, K, V, rng.normal(size=(2, 3)), rng.normal(size=(5, 3)),
                                        rng.normal(size=3), mask=mask)
    assert np.all(weights[..., ~mask[0]] == 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)


# ---------------------------------------------------------------- errors


def test_hard_lookup_raises_key_error_for_a_missing_query():
    with raises(KeyError, "query 1, [0.0, 0.9]", "equals no key"):
        qkv.hard_lookup([[1.0, 0.0], [0.0, 0.9]], np.eye(2), np.ones((2, 3)))


def test_hard_lookup_needs_distinct_keys():
    with raises(ValueError, "keys 0 and 2 are equal", "distinct keys"):
        qkv.hard_lookup([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], np.ones((3, 1)))


def test_hard_lookup_takes_matrices():
    with raises(ValueError, "Q must be a matrix (2 axes)", "(1, 1, 2)"):
        qkv.hard_lookup(np.ones((1, 1, 2)), np.eye(2), np.ones((2, 1)))


@pytest.mark.parametrize("sigma", [0, -1.0, float("inf"), None, True])
def test_kernel_functions_name_a_bad_sigma(sigma):
    for call in (lambda: qkv.gaussian_kernel_weights(np.ones((1, 2)), np.ones((3, 2)), sigma),
                 lambda: qkv.nadaraya_watson(np.ones((1, 2)), np.ones((3, 2)), np.ones((3, 1)), sigma),
                 lambda: qkv.gaussian_as_dot_product(np.ones((1, 2)), np.ones((3, 2)), sigma)):
        with raises(ValueError, "sigma (the kernel's width) must be a positive number"):
            call()


def test_kernel_weights_name_queries_and_keys_of_different_widths():
    with raises(ValueError, "Q has d_k=2 but K has d_k=3"):
        qkv.gaussian_kernel_weights(np.ones((1, 2)), np.ones((3, 3)), 1.0)


def test_nadaraya_watson_names_keys_and_values_that_do_not_pair():
    with raises(ValueError, "K has n_k=3 keys but V has 2 values"):
        qkv.nadaraya_watson(np.ones((1, 2)), np.ones((3, 2)), np.ones((2, 1)), 1.0)


def test_additive_attention_names_a_projection_that_does_not_fit_its_input():
    with raises(ValueError, "K has width 5", "(4, 5)", "W_k has 3 rows", "(3, 2)"):
        qkv.additive_attention(np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 1)),
                               np.ones((3, 2)), np.ones((3, 2)), np.ones(2))


def test_additive_attention_names_hidden_widths_that_disagree():
    with raises(ValueError, "W_q (3, 2), W_k (5, 4) and w_v (2,) must agree on the hidden width d_h"):
        qkv.additive_attention(np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 1)),
                               np.ones((3, 2)), np.ones((5, 4)), np.ones(2))


def test_additive_attention_names_keys_and_values_that_do_not_pair():
    with raises(ValueError, "K has n_k=4 keys but V has 3 values"):
        qkv.additive_attention(np.ones((2, 3)), np.ones((4, 5)), np.ones((3, 1)),
                               np.ones((3, 2)), np.ones((5, 2)), np.ones(2))


def test_additive_attention_names_leading_axes_that_do_not_broadcast():
    with raises(ValueError, "leading (batch/head) axes of Q (2,) and K (3,) do not broadcast"):
        qkv.additive_attention(np.ones((2, 2, 3)), np.ones((3, 4, 5)), np.ones((3, 4, 1)),
                               np.ones((3, 2)), np.ones((5, 2)), np.ones(2))


def test_colour_tokens_names_patches_that_do_not_hold_whole_pixels():
    with raises(ValueError, "patches must be (N, P * P * 3)", "(4, 10)"):
        qkv.colour_tokens(np.ones((4, 10)))


def test_colour_head_needs_a_positive_g():
    with raises(ValueError, "g must be a positive number"):
        qkv.colour_head(0.0)


def test_squared_distances_names_queries_and_keys_of_different_widths():
    """A width-1 query would otherwise broadcast silently against width-3 keys."""
    with raises(ValueError, "Q has d_k=1 but K has d_k=3"):
        qkv.squared_distances(np.ones((2, 1)), np.ones((3, 3)))
