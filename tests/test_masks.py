"""Padding masks, causal masks and cross-attention.

Checked against loops written here (and the loop attention of test_against_loops), against
properties that any correct masking has, against seed 000's printed scores, and against
PyTorch's ``scaled_dot_product_attention`` and ``nn.MultiheadAttention`` (each with its own
mask convention: True = may attend for the first, True = ignore for the second).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .seeds import SEED_000
from .strategies import matrices, sizes
from .test_against_loops import loop_attention, loop_linear
from .test_errors import raises

# ---------------------------------------------------------------- padding_mask


@st.composite
def lengths_and_n(draw):
    """A padded length n and one length from 1 to n per sentence."""
    n = draw(sizes)
    lengths = draw(st.lists(st.integers(1, n), min_size=1, max_size=4))
    return np.array(lengths), n


@settings(max_examples=60, deadline=None)
@given(lengths_and_n())
def test_padding_mask_matches_a_loop(case):
    lengths, n = case
    mask = qkv.padding_mask(lengths, n)
    expected = [[[j < int(length) for j in range(n)]] for length in lengths]
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, expected)


@st.composite
def padded_batches(draw):
    """(X, lengths, head): a batch (batch, n, d_model) whose padding rows hold arbitrary numbers."""
    lengths, n = draw(lengths_and_n())
    d_model, d_k, d_v = draw(sizes), draw(sizes), draw(sizes)
    X = draw(matrices((len(lengths), n, d_model)))
    head = qkv.Head(draw(matrices((d_model, d_k))), draw(matrices((d_model, d_k))),
                    draw(matrices((d_model, d_v))), draw(matrices((d_k,))), draw(matrices((d_k,))),
                    draw(matrices((d_v,))))
    return X, lengths, head


@settings(max_examples=60, deadline=None)
@given(padded_batches())
def test_padded_sentence_gets_exactly_the_attention_it_gets_alone(batch):
    """Real tokens: the same output as the unpadded sentence; padding keys: weight exactly 0."""
    X, lengths, head = batch
    n = X.shape[1]
    output, weights = qkv.self_attention(X, *head, mask=qkv.padding_mask(lengths, n))
    for b, length in enumerate(lengths):
        alone_output, alone_weights = qkv.self_attention(X[b, :length], *head)
        np.testing.assert_allclose(output[b, :length], alone_output, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(weights[b, :length, :length], alone_weights, rtol=1e-12, atol=1e-15)
        assert (weights[b, :, length:] == 0.0).all(), f"sentence {b}: a padding key got weight"
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(padded_batches(), st.integers(0, 2**32 - 1))
def test_padding_vectors_do_not_reach_any_real_token(batch, seed):
    X, lengths, head = batch
    n = X.shape[1]
    mask = qkv.padding_mask(lengths, n)
    real = mask[:, 0, :]  # (batch, n)
    noise = np.random.default_rng(seed).normal(scale=10.0, size=X.shape)
    output, _ = qkv.self_attention(X, *head, mask=mask)
    output_noisy, _ = qkv.self_attention(np.where(real[..., None], X, noise), *head, mask=mask)
    np.testing.assert_allclose(output_noisy[real], output[real], rtol=1e-12, atol=1e-12)


def test_delivery_batch_is_seed_000_padded_with_zeros():
    """The course's batch: the seed's token vectors, in three sentences, zero padding after them."""
    batch = qkv.examples.delivery_batch_example()
    seed = qkv.examples.delivery_example()
    rows = dict(zip(seed.tokens, seed.X))
    assert [len(s) for s in batch.sentences] == batch.lengths.tolist() == [3, 2, 1]
    for b, sentence in enumerate(batch.sentences):
        np.testing.assert_array_equal(batch.X[b, : len(sentence)], [rows[t] for t in sentence])
        assert (batch.X[b, len(sentence):] == 0).all()


# ---------------------------------------------------------------- causal mask


def test_causal_rows_of_head_1_from_seed_000_scores():
    """Seed 000 prints S^(1); masking the future leaves softmax of the allowed scores, by hand."""
    ex = qkv.examples.delivery_example()
    _, weights = qkv.self_attention(ex.X, *ex.heads[0], mask=qkv.causal_mask(3))
    S = SEED_000[1]["S"]
    expected = []
    for i in range(3):
        exps = [math.exp(S[i][j]) for j in range(i + 1)]
        expected.append([e / sum(exps) for e in exps] + [0.0] * (2 - i))
    np.testing.assert_allclose(weights, expected, atol=1e-6)
    np.testing.assert_allclose(weights[1], [1 / (1 + math.e), math.e / (1 + math.e), 0.0], atol=1e-6)
    np.testing.assert_allclose(weights[2], SEED_000[1]["A"][2], atol=1e-6)  # nothing to block


@settings(max_examples=40, deadline=None)
@given(padded_batches(), st.integers(0, 2**32 - 1))
def test_causal_outputs_do_not_depend_on_later_tokens(batch, seed):
    X, _, head = batch
    n = X.shape[1]
    rng = np.random.default_rng(seed)
    cut = int(rng.integers(0, n))  # change every token after position `cut`
    X_changed = X.copy()
    X_changed[:, cut + 1:] = rng.normal(scale=5.0, size=X_changed[:, cut + 1:].shape)
    output, _ = qkv.self_attention(X, *head, mask=qkv.causal_mask(n))
    output_changed, _ = qkv.self_attention(X_changed, *head, mask=qkv.causal_mask(n))
    np.testing.assert_allclose(output_changed[:, : cut + 1], output[:, : cut + 1], rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(lengths_and_n())
def test_padding_and_causal_masks_together_leave_no_row_empty(case):
    lengths, n = case
    mask = qkv.padding_mask(lengths, n) & qkv.causal_mask(n)
    assert mask.shape == (len(lengths), n, n)
    assert mask.any(axis=-1).all()
    for b, length in enumerate(lengths):
        for i in range(n):
            assert mask[b, i].tolist() == [j <= i and j < length for j in range(n)]


# ---------------------------------------------------------------- cross-attention


@st.composite
def cross_inputs(draw):
    """(X_q, X_kv, head, mask) with n_q and n_k drawn separately."""
    n_q, n_k, d_model, d_k, d_v = (draw(sizes) for _ in range(5))
    X_q, X_kv = draw(matrices((n_q, d_model))), draw(matrices((n_k, d_model)))
    head = qkv.Head(draw(matrices((d_model, d_k))), draw(matrices((d_model, d_k))),
                    draw(matrices((d_model, d_v))), draw(matrices((d_k,))), None, draw(matrices((d_v,))))
    length = draw(st.integers(1, n_k))
    mask = np.arange(n_k)[None, :] < length  # (1, n_k): the encoder's padding, for every query
    return X_q, X_kv, head, mask


@settings(max_examples=60, deadline=None)
@given(cross_inputs())
def test_cross_attention_matches_loops(inputs):
    X_q, X_kv, head, mask = inputs
    output, weights = qkv.cross_attention(X_q, X_kv, *head, mask=mask)
    Q = loop_linear(X_q.tolist(), head.W_Q.tolist(), head.b_Q.tolist())
    K = loop_linear(X_kv.tolist(), head.W_K.tolist())
    V = loop_linear(X_kv.tolist(), head.W_V.tolist(), head.b_V.tolist())
    full_mask = np.broadcast_to(mask, (len(X_q), len(X_kv))).tolist()
    expected_output, expected_weights = loop_attention(Q, K, V, full_mask)
    assert weights.shape == (len(X_q), len(X_kv)) and output.shape == (len(X_q), head.d_v)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(output, expected_output, rtol=1e-9, atol=1e-9)


def test_cross_attention_of_a_sequence_with_itself_is_self_attention():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2, 5, 4))
    head = qkv.Head(*(rng.normal(size=(4, 3)) for _ in range(3)), *(rng.normal(size=3) for _ in range(3)))
    for got, expected in zip(qkv.cross_attention(X, X, *head), qkv.self_attention(X, *head)):
        np.testing.assert_array_equal(got, expected)


def test_translation_example_reads_each_word_from_its_counterpart():
    """The example's claim: late -> 晚到, delivery -> 外送, compensation -> 補償; weights of
    "late" are the softmax of the hand scores [0, 2, 1]."""
    ex = qkv.examples.delivery_translation_example()
    _, weights = qkv.cross_attention(ex.X_q, ex.X_kv, *ex.head)
    strongest = [ex.key_tokens[j] for j in weights.argmax(axis=1)]
    assert dict(zip(ex.query_tokens, strongest)) == {"late": "晚到", "delivery": "外送", "compensation": "補償"}
    exps = [math.exp(s) for s in (0, 2, 1)]
    np.testing.assert_allclose(weights[0], [e / sum(exps) for e in exps], rtol=1e-12)


# ---------------------------------------------------------------- PyTorch


def as_torch(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


@pytest.mark.parametrize("batch_shape, n_q, n_k, d_k, d_v", [
    ((), 2, 3, 4, 4), ((2,), 4, 3, 2, 5), ((2, 3), 1, 6, 8, 2), ((3,), 5, 5, 3, 3),
])
def test_attention_with_a_boolean_mask_agrees_with_torch_sdpa(batch_shape, n_q, n_k, d_k, d_v):
    """torch's boolean attn_mask: True = takes part, the convention qkv uses."""
    rng = np.random.default_rng(n_q * 10 + n_k)
    Q = rng.normal(size=(*batch_shape, n_q, d_k))
    K = rng.normal(size=(*batch_shape, n_k, d_k))
    V = rng.normal(size=(*batch_shape, n_k, d_v))
    mask = rng.random(size=(*batch_shape, n_q, n_k)) < 0.6
    mask[..., 0] = True  # no empty row
    output, _ = qkv.scaled_dot_product_attention(Q, K, V, mask)
    expected = torch.nn.functional.scaled_dot_product_attention(*as_torch(Q, K, V, mask))
    np.testing.assert_allclose(output, expected.numpy(), rtol=1e-10, atol=1e-12)


def test_causal_mask_agrees_with_torch_is_causal():
    rng = np.random.default_rng(5)
    Q, K, V = rng.normal(size=(3, 2, 6, 4)), rng.normal(size=(3, 2, 6, 4)), rng.normal(size=(3, 2, 6, 3))
    output, _ = qkv.scaled_dot_product_attention(Q, K, V, qkv.causal_mask(6))
    expected = torch.nn.functional.scaled_dot_product_attention(*as_torch(Q, K, V), is_causal=True)
    np.testing.assert_allclose(output, expected.numpy(), rtol=1e-10, atol=1e-12)


def torch_multihead(d_model, num_heads, seed):
    """A float64 nn.MultiheadAttention with random weights and biases, and the same weights in
    qkv's layout (x @ W, so torch's weight matrices transposed), one qkv.Head per torch head."""
    torch.manual_seed(seed)
    layer = torch.nn.MultiheadAttention(d_model, num_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        layer.in_proj_bias.normal_()
        layer.out_proj.bias.normal_()
    W_in = layer.in_proj_weight.detach().numpy().T  # (d_model, 3 d_model): [W_Q | W_K | W_V]
    b_in = layer.in_proj_bias.detach().numpy()
    d_k = d_model // num_heads
    heads = []
    for i in range(num_heads):
        columns = [slice(role * d_model + i * d_k, role * d_model + (i + 1) * d_k) for role in range(3)]
        heads.append(qkv.Head(*(W_in[:, c] for c in columns), *(b_in[c] for c in columns)))
    W_O = layer.out_proj.weight.detach().numpy().T
    b_O = layer.out_proj.bias.detach().numpy()
    return layer, heads, W_O, b_O


def test_padding_mask_agrees_with_torch_key_padding_mask():
    """nn.MultiheadAttention's key_padding_mask says True = ignore: it is ~padding_mask."""
    layer, heads, W_O, b_O = torch_multihead(d_model=6, num_heads=2, seed=0)
    rng = np.random.default_rng(1)
    lengths, n = np.array([4, 2, 1]), 4
    X = rng.normal(size=(3, n, 6))
    mask = qkv.padding_mask(lengths, n)  # (batch, 1, n)
    Y, weights = qkv.multi_head_attention(X, heads, W_O, b_O, mask=mask)
    X_t, ignore = as_torch(X, ~mask[:, 0, :])
    expected_Y, expected_weights = layer(X_t, X_t, X_t, key_padding_mask=ignore, average_attn_weights=False)
    np.testing.assert_allclose(weights, expected_weights.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Y, expected_Y.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_cross_attention_agrees_with_torch_multihead_attention():
    """Decoder queries (n_q = 2) over encoder keys and values (n_k = 5, padded): each torch head
    is one qkv.cross_attention; their concatenation times W_O is torch's output."""
    layer, heads, W_O, b_O = torch_multihead(d_model=4, num_heads=2, seed=2)
    rng = np.random.default_rng(3)
    decoder, encoder = rng.normal(size=(2, 2, 4)), rng.normal(size=(2, 5, 4))
    mask = qkv.padding_mask([5, 3], 5)  # (batch, 1, n_k)
    per_head = [qkv.cross_attention(decoder, encoder, *head, mask=mask) for head in heads]
    Y = qkv.linear(np.concatenate([out for out, _ in per_head], axis=-1), W_O, b_O)
    weights = np.stack([w for _, w in per_head], axis=1)  # (batch, h, n_q, n_k)
    q_t, kv_t, ignore = as_torch(decoder, encoder, ~mask[:, 0, :])
    expected_Y, expected_weights = layer(q_t, kv_t, kv_t, key_padding_mask=ignore, average_attn_weights=False)
    assert weights.shape == (2, 2, 2, 5)
    np.testing.assert_allclose(weights, expected_weights.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Y, expected_Y.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_a_fully_masked_row_torch_gives_zeros_and_qkv_refuses():
    """What the masks chapter says: PyTorch's sdpa returns zeros for a row with no allowed key;
    qkv raises, naming the row."""
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(2, 3)), rng.normal(size=(3, 3)), rng.normal(size=(3, 2))
    mask = np.array([[True, False, True], [False, False, False]])
    output = torch.nn.functional.scaled_dot_product_attention(*as_torch(Q, K, V, mask))
    assert (output[1] == 0).all()
    with raises(ValueError, "mask row [1] is all False", "query 1 may attend to no key"):
        qkv.scaled_dot_product_attention(Q, K, V, mask)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("n", [0, -2, 2.5, True, "3"])
def test_padding_mask_needs_a_positive_whole_n(n):
    with raises(ValueError, "n (the padded length) must be a positive integer", f"got {n!r}"):
        qkv.padding_mask([1], n)


def test_padding_mask_needs_a_vector_of_lengths():
    with raises(ValueError, "lengths must be a vector with one length per sentence", "(2, 1)"):
        qkv.padding_mask([[1], [2]], 3)
    with raises(ValueError, "lengths must be a vector", "got shape (0,)"):
        qkv.padding_mask([], 3)


@pytest.mark.parametrize("lengths", [[1.0, 2.0], [True, True]])
def test_padding_mask_needs_whole_numbers(lengths):
    with raises(ValueError, "lengths must be whole numbers (an integer array)", "got dtype"):
        qkv.padding_mask(lengths, 3)


def test_padding_mask_refuses_a_sentence_without_tokens():
    with raises(ValueError, "lengths[1] is 0: sentence 1 has no real token", "attend to nothing"):
        qkv.padding_mask([2, 0], 3)


def test_padding_mask_refuses_a_length_beyond_n():
    with raises(ValueError, "lengths[0] is 5 but the padded length n is 3", "n >= 5"):
        qkv.padding_mask([5, 1], 3)


def test_causal_mask_needs_a_positive_whole_n():
    with raises(ValueError, "causal_mask's n (the number of tokens) must be a positive integer", "got 0"):
        qkv.causal_mask(0)


def test_cross_attention_names_the_decoder_tokens_that_do_not_fit():
    W = np.ones((4, 2))
    with raises(ValueError, "X_q has d_model=3", "(2, 3)", "W_Q has 4 rows", "X_q @ W_Q"):
        qkv.cross_attention(np.ones((2, 3)), np.ones((5, 4)), W, W, W)


def test_cross_attention_names_the_encoder_tokens_that_do_not_fit():
    W = np.ones((4, 2))
    with raises(ValueError, "X_kv has d_model=5", "(3, 5)", "W_K has 4 rows", "X_kv @ W_K"):
        qkv.cross_attention(np.ones((2, 4)), np.ones((3, 5)), W, W, W)


def test_cross_attention_names_batches_that_do_not_broadcast():
    W = np.ones((4, 2))
    with raises(ValueError, "leading (batch) axes of X_q (2,) and X_kv (3,) do not broadcast"):
        qkv.cross_attention(np.ones((2, 1, 4)), np.ones((3, 5, 4)), W, W, W)
