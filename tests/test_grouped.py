"""Grouped-query and multi-query attention against PyTorch, and against multi-head attention.

PyTorch's ``scaled_dot_product_attention(..., enable_gqa=True)`` is an independent
implementation of the same grouping (query head i reads key/value head i // (h / g)); with
``g = h`` the result must be ``qkv.fused_multi_head_attention``'s, and with ``g = 1`` every head
reads the same keys and values.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import matrices
from .test_errors import raises

torch = pytest.importorskip("torch")
F = torch.nn.functional


@st.composite
def grouped_inputs(draw):
    """(Q, K, V, mask): Q (batch, h, n, d_k), K and V (batch, g, m, d) with g dividing h."""
    g = draw(st.integers(1, 3))
    h = g * draw(st.integers(1, 3))
    batch, n, m = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 5))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    Q, K, V = (draw(matrices(shape)) for shape in
               ((batch, h, n, d_k), (batch, g, m, d_k), (batch, g, m, d_v)))
    mask = None
    if draw(st.booleans()):
        mask = np.asarray(draw(matrices((n, m)))) > 0
        mask[np.arange(n), np.minimum(np.arange(n), m - 1)] = True  # no row fully blocked
    return Q, K, V, mask


@settings(max_examples=80, deadline=None)
@given(grouped_inputs())
def test_grouped_query_attention_matches_torch_with_enable_gqa(case):
    Q, K, V, mask = case
    output, weights = qkv.grouped_query_attention(Q, K, V, mask=mask)
    attn_mask = None if mask is None else torch.from_numpy(mask)
    expected = F.scaled_dot_product_attention(
        *(torch.from_numpy(x) for x in (Q, K, V)), attn_mask=attn_mask, enable_gqa=True)
    np.testing.assert_allclose(output, expected.numpy(), rtol=1e-10, atol=1e-12)
    assert weights.shape == (*Q.shape[:-1], K.shape[-2])
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)


def test_query_head_i_reads_key_value_head_i_over_h_by_g():
    """Each query head's output equals plain attention over its own group's keys and values."""
    rng = np.random.default_rng(0)
    h, g = 6, 2
    Q, K, V = rng.normal(size=(h, 3, 4)), rng.normal(size=(g, 5, 4)), rng.normal(size=(g, 5, 2))
    output, weights = qkv.grouped_query_attention(Q, K, V)
    for i in range(h):
        group = i // (h // g)  # 0, 0, 0, 1, 1, 1: not i % g
        expected, expected_weights = qkv.scaled_dot_product_attention(Q[i], K[group], V[group])
        np.testing.assert_allclose(output[i], expected, atol=1e-12, err_msg=f"query head {i}")
        np.testing.assert_allclose(weights[i], expected_weights, atol=1e-12)
    np.testing.assert_array_equal(qkv.kv_head_of(6, 2), [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(qkv.kv_head_of(8, 8), np.arange(8))
    np.testing.assert_array_equal(qkv.kv_head_of(4, 1), [0, 0, 0, 0])


def test_with_as_many_key_value_heads_as_query_heads_it_is_multi_head_attention():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2, 5, 8))  # (batch, n, d_model)
    W_Q, W_K, W_V, W_O = rng.normal(size=(4, 8, 8))
    Y, weights = qkv.grouped_query_self_attention(X, W_Q, W_K, W_V, W_O, 4, 4,
                                                  mask=qkv.causal_mask(5))
    Y_mha, weights_mha = qkv.fused_multi_head_attention(X, W_Q, W_K, W_V, W_O, 4,
                                                        mask=qkv.causal_mask(5))
    np.testing.assert_allclose(Y, Y_mha, atol=1e-12)
    np.testing.assert_allclose(weights, weights_mha, atol=1e-12)


def test_grouped_self_attention_matches_torch_on_projected_tokens():
    """8 query heads over 2 key/value heads of width 4: torch gets the same projected Q, K, V."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 16))
    W_Q, W_O = rng.normal(size=(16, 32)), rng.normal(size=(32, 16))
    W_K, W_V = rng.normal(size=(16, 8)), rng.normal(size=(16, 8))
    Y, _ = qkv.grouped_query_self_attention(X, W_Q, W_K, W_V, W_O, 8, 2)
    Q = torch.from_numpy(X @ W_Q).reshape(6, 8, 4).transpose(0, 1)  # (h, n, d_k)
    K = torch.from_numpy(X @ W_K).reshape(6, 2, 4).transpose(0, 1)  # (g, n, d_k)
    V = torch.from_numpy(X @ W_V).reshape(6, 2, 4).transpose(0, 1)
    heads = F.scaled_dot_product_attention(Q, K, V, enable_gqa=True)  # (h, n, d_v)
    expected = heads.transpose(0, 1).reshape(6, 32).numpy() @ W_O
    np.testing.assert_allclose(Y, expected, rtol=1e-10, atol=1e-10)


def test_with_one_key_value_head_every_head_reads_the_same_keys():
    """Multi-query attention: heads with equal queries get equal weights."""
    rng = np.random.default_rng(4)
    q = rng.normal(size=(1, 3, 2))
    Q = np.concatenate([q, q, rng.normal(size=(1, 3, 2))])  # heads 0 and 1 ask the same
    K, V = rng.normal(size=(1, 4, 2)), rng.normal(size=(1, 4, 3))
    _, weights = qkv.grouped_query_attention(Q, K, V)
    np.testing.assert_array_equal(weights[0], weights[1])
    assert not np.allclose(weights[0], weights[2])


def test_h_not_a_multiple_of_g_is_named():
    with raises(ValueError, "Q has h=4 query heads", "K has g=3", "multiple of g"):
        qkv.grouped_query_attention(np.zeros((4, 2, 2)), np.zeros((3, 2, 2)), np.zeros((3, 2, 2)))
    with raises(ValueError, "4 query heads do not share 3 key/value heads evenly"):
        qkv.kv_head_of(4, 3)


def test_keys_and_values_with_different_head_counts_are_named():
    with raises(ValueError, "K has 2 key heads but V has 1 value heads"):
        qkv.grouped_query_attention(np.zeros((4, 2, 2)), np.zeros((2, 3, 2)), np.zeros((1, 3, 2)))


def test_a_head_axis_is_required():
    with raises(ValueError, "Q must have at least 3 axes", "(2, 2)"):
        qkv.grouped_query_attention(np.zeros((2, 2)), np.zeros((1, 2, 2)), np.zeros((1, 2, 2)))


def test_fused_key_columns_that_do_not_cut_into_their_heads_are_named():
    X = np.zeros((3, 8))
    with raises(ValueError, "W_K has 6 columns", "not divisible by its 4 heads"):
        qkv.grouped_query_self_attention(X, np.zeros((8, 8)), np.zeros((8, 6)), np.zeros((8, 4)),
                                         np.zeros((8, 8)), 8, 4)
    with raises(ValueError, "W_Q cuts into 8 query heads of width 1", "W_K into 2 key heads of width 2"):
        qkv.grouped_query_self_attention(X, np.zeros((8, 8)), np.zeros((8, 4)), np.zeros((8, 4)),
                                         np.zeros((16, 8)), 8, 2)
