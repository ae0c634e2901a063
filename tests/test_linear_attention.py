"""Linear attention: its O(n) form equals its O(n^2) form, and random features estimate the softmax kernel.

The O(n^2) form is checked against a loop written here (each weight phi(q_i) . phi(k_j) over its
row's sum); the O(n) form against the O(n^2) form, with and without the causal mask; Performer's
positive random features against the exponential kernel they estimate.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import matrices
from .test_errors import raises


def loop_kernel_attention(Q, K, V, phi, causal=False):
    """Each weight phi(q_i) . phi(k_j) / sum_m phi(q_i) . phi(k_m), index by index."""
    fq, fk = phi(np.asarray(Q)).tolist(), phi(np.asarray(K)).tolist()
    output = []
    for i, q in enumerate(fq):
        keys = range(i + 1) if causal else range(len(fk))
        kernel = [sum(a * b for a, b in zip(q, fk[j])) for j in keys]
        total = sum(kernel)
        output.append([sum(kernel[j] / total * V[j][c] for j in keys) for c in range(len(V[0]))])
    return np.array(output)


@st.composite
def kernel_inputs(draw, square=False):
    n_q = draw(st.integers(1, 6))
    n_k = n_q if square else draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return (draw(matrices((n_q, d_k))), draw(matrices((n_k, d_k))), draw(matrices((n_k, d_v))))


@settings(max_examples=60, deadline=None)
@given(kernel_inputs())
def test_kernel_attention_matches_a_loop(case):
    Q, K, V = case
    output, weights = qkv.kernel_attention(Q, K, V)
    np.testing.assert_allclose(output, loop_kernel_attention(Q, K, V, qkv.elu_feature_map),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(kernel_inputs())
def test_linear_attention_in_o_n_equals_its_o_n_squared_form(case):
    Q, K, V = case
    output, (S, z) = qkv.linear_attention(Q, K, V)
    expected, _ = qkv.kernel_attention(Q, K, V)
    np.testing.assert_allclose(output, expected, rtol=1e-10, atol=1e-12)
    phi_K = qkv.elu_feature_map(K)
    np.testing.assert_allclose(S, sum(np.outer(f, v) for f, v in zip(phi_K, V)), atol=1e-12)
    np.testing.assert_allclose(z, phi_K.sum(axis=0), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(kernel_inputs(square=True))
def test_causal_linear_attention_is_the_masked_kernel_attention(case):
    Q, K, V = case
    output, _ = qkv.linear_attention(Q, K, V, causal=True)
    expected, _ = qkv.kernel_attention(Q, K, V, mask=qkv.causal_mask(len(Q)))
    np.testing.assert_allclose(output, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(output, loop_kernel_attention(Q, K, V, qkv.elu_feature_map, causal=True),
                               rtol=1e-10, atol=1e-12)


def test_linear_attention_takes_heads_and_batches():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 3, 40, 8)), rng.normal(size=(2, 3, 40, 8)), rng.normal(size=(2, 3, 40, 5))
    for causal in (False, True):
        mask = qkv.causal_mask(40) if causal else None
        output, (S, z) = qkv.linear_attention(Q, K, V, causal=causal)
        expected, _ = qkv.kernel_attention(Q, K, V, mask=mask)
        np.testing.assert_allclose(output, expected, rtol=1e-10, atol=1e-12)
        assert S.shape == (2, 3, 8, 5) and z.shape == (2, 3, 8)


def test_the_elu_feature_map_is_x_plus_1_above_0_and_e_to_the_x_below():
    x = np.array([[-2.0, -0.5, 0.0, 0.5, 3.0]])
    expected = [[math.exp(-2.0), math.exp(-0.5), 1.0, 1.5, 4.0]]
    np.testing.assert_allclose(qkv.elu_feature_map(x), expected, rtol=1e-15)


def test_positive_random_features_estimate_the_exponential_kernel():
    """The mean of phi(q) . phi(k) over draws is e^(q . k); 200,000 features get within 2%."""
    rng = np.random.default_rng(7)
    q, k = np.array([[0.3, -0.4, 0.2]]), np.array([[0.5, 0.1, -0.3]])
    W = rng.standard_normal((200_000, 3))
    estimate = (qkv.positive_random_features(q, W) @ qkv.positive_random_features(k, W).T)[0, 0]
    assert abs(estimate / math.exp(float((q @ k.T)[0, 0])) - 1) < 0.02


def test_with_many_random_features_linear_attention_approaches_softmax_attention():
    rng = np.random.default_rng(8)
    Q, K, V = rng.normal(scale=0.5, size=(3, 6, 4))
    softmax_output, _ = qkv.scaled_dot_product_attention(Q, K, V)
    errors = []
    for m in (16, 256, 4096, 65536):
        W = rng.standard_normal((m, 4))
        phi = lambda X: qkv.positive_random_features(X / 4**0.25, W)  # noqa: E731  (d_k^(-1/4) each)
        output, _ = qkv.linear_attention(Q, K, V, feature_map=phi)
        errors.append(np.abs(output - softmax_output).max())
    assert errors[-1] < 0.02 and errors[-1] < errors[0] / 5, errors


def test_a_feature_map_that_is_not_positive_is_named():
    with raises(ValueError, "feature_map(Q)[0, 0] is -1.0", "positive"):
        qkv.kernel_attention(-np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), feature_map=lambda X: X)


def test_causal_linear_attention_needs_as_many_queries_as_keys():
    with raises(ValueError, "n_q=2 and n_k=3"):
        qkv.linear_attention(np.ones((2, 2)), np.ones((3, 2)), np.ones((3, 2)), causal=True)


def test_random_directions_of_the_wrong_width_are_named():
    with raises(ValueError, "W has shape (5, 2) but X has d_k=3"):
        qkv.positive_random_features(np.ones((2, 3)), np.ones((5, 2)))
