"""The variants of problem sets 7 (masks and cross-attention) and 8 (order and position) are workable by hand.

For 1000 students of each problem set and 50 practice variants, the properties the
examples promise are recomputed here with plain numpy and math (a softmax written out,
loops over the tokens, math.sin and math.cos): the seed's story and shapes, small numbers,
one clear answer wherever a story says "most", weights neither near 0 nor near 1, and
steps that differ from the seed's. Variant 0 is the chapters' own numbers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkv
from qkv_exercises import variants

from .notebook_support import givens_of, student_variants
from .test_variants import differs, is_multiple, margin, row_softmax


def causal_rows_by_hand(S):
    """The exponentials and weights of every row of ``S`` under a causal mask, with loops."""
    n = len(S)
    exponentials = [[math.exp(S[i][j]) if j <= i else 0.0 for j in range(n)] for i in range(n)]
    weights = [[e / sum(row) for e in row] for row in exponentials]
    return np.array(exponentials), np.array(weights)


def scaled_scores(X, head):
    Q, K = X @ head.W_Q + head.b_Q, X @ head.W_K + head.b_K
    return Q @ K.T / math.sqrt(Q.shape[1])


# ---------------------------------------------------------------- problem set 7


@pytest.fixture(scope="module")
def causal_variants():
    return [variants.causal_delivery_example(v) for v in student_variants("ps7_masks")]


def test_the_causal_seed_is_head_1_of_seed_000_and_its_masked_row_is_the_chapters():
    seed = variants.causal_delivery_example(0)
    delivery = variants.delivery_example(0)
    assert seed.tokens == delivery.tokens and np.array_equal(seed.X, delivery.X)
    assert all(np.array_equal(a, b) for a, b in zip(seed.head, delivery.heads[0]) if a is not None)
    exponentials, weights = causal_rows_by_hand(scaled_scores(seed.X, seed.head))
    np.testing.assert_allclose(weights[1], [1 / (1 + math.e), math.e / (1 + math.e), 0], atol=1e-6)  # e^0, e^1


def test_causal_variants_keep_head_1s_form_and_make_the_masked_row_workable(causal_variants):
    seed_exponentials, seed_weights = causal_rows_by_hand(scaled_scores(variants.causal_delivery_example(0).X,
                                                                        variants.causal_delivery_example(0).head))
    for ex in causal_variants:
        assert ex.tokens == ("外送", "晚到", "補償") and set(np.unique(ex.X)) <= {0.0, 1.0}
        assert len({tuple(x) for x in ex.X}) == 3 and ex.X.any(axis=1).all()
        head = ex.head
        assert is_multiple(head.W_K, 0.707107) and is_multiple(head.b_K, 0.707107)
        assert np.array_equal(head.W_K[:, 0], head.W_K[:, 1]) and not head.b_Q.any() and not head.b_V.any()
        S = scaled_scores(ex.X, head)
        assert is_multiple(np.round(S, 4), 0.5), "scaled scores in halves"
        late = S[1, :2]  # 晚到's allowed scores: 外送 and itself
        assert np.abs(late).max() <= 2 + 1e-5 and 0.5 - 1e-5 <= abs(late[1] - late[0]) <= 2 + 1e-5
        exponentials, weights = causal_rows_by_hand(S)
        assert 0.11 <= weights[1, 0] <= 0.89
        unmasked = row_softmax(S)
        assert np.argmax(unmasked[2]) == 1 and margin(unmasked[2]) >= 0.05, "head 1: 補償 attends most to 晚到"
        assert differs(exponentials[1], seed_exponentials[1]) and differs(weights[1], seed_weights[1])
        assert differs(weights, seed_weights)
        _, qkv_weights = qkv.self_attention(ex.X, *head, mask=qkv.causal_mask(3))
        np.testing.assert_allclose(qkv_weights, weights, atol=1e-12)


@pytest.fixture(scope="module")
def translation_variants():
    return [variants.delivery_translation_example(v) for v in student_variants("ps7_masks")]


def test_translation_variants_read_each_word_from_its_counterpart(translation_variants):
    seed = variants.delivery_translation_example(0)
    seed_steps = translation_by_hand(seed)
    counterparts = {"late": "晚到", "delivery": "外送", "compensation": "補償"}
    for ex in translation_variants:
        assert ex.query_tokens == seed.query_tokens and ex.key_tokens == seed.key_tokens
        assert np.array_equal(ex.X_q, seed.X_q), "the English words stay one-hot"
        assert np.array_equal(ex.head.W_K, np.eye(4)) and np.array_equal(ex.head.W_V, np.eye(4))
        assert set(np.unique(ex.X_kv)) <= {0.0, 1.0} and len({tuple(x) for x in ex.X_kv}) == 3
        assert ex.X_kv.any(axis=1).all()
        assert is_multiple(ex.head.W_Q, 1) and np.abs(ex.head.W_Q).max() <= 2 and not ex.head.W_Q[3].any()
        S = ex.X_q @ ex.head.W_Q @ ex.X_kv.T / 2  # (3, 3), sqrt(d_k) = 2
        assert is_multiple(S, 0.5)
        weights = row_softmax(S)
        for word, row in zip(ex.query_tokens, weights):
            assert ex.key_tokens[int(np.argmax(row))] == counterparts[word] and margin(row) >= 0.05
            assert S[ex.query_tokens.index(word), ex.key_tokens.index(counterparts[word])] > 0
        assert weights[:2].min() >= 0.03 and weights[:2].max() <= 0.85
        assert weights.min() >= 0.02 and weights.max() <= 0.9
        assert all(differs(a, b) for a, b in zip(translation_by_hand(ex), seed_steps))


def translation_by_hand(ex):
    """S, A and O of "late delivery" (2 x 3), with loops."""
    Q = [[sum(ex.X_q[w, m] * ex.head.W_Q[m, c] for m in range(4)) for c in range(4)] for w in range(2)]
    S = np.array([[sum(q[c] * x[c] for c in range(4)) / 2 for x in ex.X_kv] for q in Q])
    A = row_softmax(S)
    return [S, A, A @ ex.X_kv]


def test_ps7_options_come_in_orders_of_their_own():
    seed = givens_of("ps7_masks")[0][1]
    for given in ("keys_options", "later_options", "padding_options", "cross_options"):
        orders = {g[given] for _, g in givens_of("ps7_masks")}
        assert all(sorted(order) == sorted(seed[given]) for order in orders)
        assert len(orders) >= 10, given


# ---------------------------------------------------------------- problem set 8


def test_zhonghe_variants_tell_seed_001s_story_and_reorder_the_sentence():
    seed = variants.zhonghe_reordered_example(0)
    assert seed.order.tolist() == [3, 1, 2, 0], "the chapter swaps the two place names"
    seed_O = attention_by_hand(seed.example.X, seed.example.head)[0][[3, 1, 2, 0]]
    orders, weighings = set(), set()
    for v in student_variants("ps8_position"):
        reordered = variants.zhonghe_reordered_example(v)
        ex, order = reordered.example, reordered.order
        assert ex.tokens == ("中和", "有", "一個", "永和路") and np.array_equal(ex.X, seed.example.X)
        w = np.diag(ex.head.W_Q)
        assert np.array_equal(ex.head.W_Q, np.diag(w)) and np.array_equal(ex.head.W_K, ex.head.W_Q)
        assert set(w) <= {1.0, 2.0, 3.0} and np.array_equal(ex.head.W_V, np.eye(4))
        O, A = attention_by_hand(ex.X, ex.head)
        for place, other in ((0, 3), (3, 0)):  # the place names: themselves first, then each other
            assert list(np.argsort(-A[place])[:2]) == [place, other] and margin(A[place]) >= 0.05
        for filler in (1, 2):
            assert np.argmax(A[filler]) == filler and margin(A[filler]) >= 0.05
        assert A.min() >= 0.02 and A.max() <= 0.9
        assert sorted(order.tolist()) == [0, 1, 2, 3] and order.tolist() != [3, 1, 2, 0]
        O_reordered, _ = qkv.self_attention(ex.X[order], *ex.head)  # attention computed again, on P X
        np.testing.assert_allclose(O_reordered, O[order], atol=1e-12)
        assert differs(O[order], O) and differs(O[order], seed_O)
        orders.add(tuple(order))
        weighings.add(tuple(w))
    assert len(orders) >= 15 and len(weighings) >= 3


def attention_by_hand(X, head):
    Z_q, Z_k = X @ head.W_Q, X @ head.W_K
    A = row_softmax(np.array([[sum(q * k) / 2 for k in Z_k] for q in Z_q]))  # sqrt(d_k) = 2
    return A @ (X @ head.W_V), A


def encoding_by_hand(p, d_model):
    """PE_p with math.sin and math.cos: dimension 2i is sin(p / 10000^(2i/d)), 2i + 1 its cosine."""
    return [math.sin(p / 10000 ** (j / d_model)) if j % 2 == 0 else math.cos(p / 10000 ** ((j - 1) / d_model))
            for j in range(d_model)]


def test_the_position_seed_is_the_chapters_by_hand_encoding():
    seed = variants.position_encoding_example(0)
    assert (seed.d_model, seed.position, seed.pair) == (4, 1, (0, 3))
    np.testing.assert_allclose(encoding_by_hand(1, 4), [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
                               atol=1e-15)


def test_position_variants_have_frequencies_in_powers_of_ten_and_differ_from_the_seed():
    seed = variants.position_encoding_example(0)
    seed_dot = sum(a * b for a, b in zip(encoding_by_hand(0, 4), encoding_by_hand(3, 4)))
    seen = set()
    for v in student_variants("ps8_position"):
        ex = variants.position_encoding_example(v)
        assert ex.d_model in (4, 8) and 2 <= ex.position <= 9
        omega = [10000 ** (-2 * i / ex.d_model) for i in range(ex.d_model // 2)]
        assert all(abs(math.log10(w) - round(math.log10(w))) < 1e-12 for w in omega), "powers of 10"
        p, q = ex.pair
        assert 0 <= p <= 9 and 1 <= q - p <= 6
        encoding = encoding_by_hand(ex.position, ex.d_model)
        dot = sum(a * b for a, b in zip(encoding_by_hand(p, ex.d_model), encoding_by_hand(q, ex.d_model)))
        assert differs(encoding, encoding_by_hand(seed.position, seed.d_model)) and differs(dot, seed_dot)
        np.testing.assert_allclose(qkv.sinusoidal_position_encoding(ex.position + 1, ex.d_model)[ex.position],
                                   encoding, atol=1e-12)
        seen.add((ex.d_model, ex.position, ex.pair))
    assert len(seen) >= 300


def test_ps8_pair_options_have_one_pair_at_the_same_offset():
    for _, g in givens_of("ps8_position"):
        p, q = (int(v) for v in g["pair"])
        offsets = [int(text.split()[3]) - int(text.split()[1]) for text in g["pair_options"]]
        assert len(offsets) == 4 and offsets.count(q - p) == 1 and -(q - p) not in offsets
        assert all(abs(offset) > 0 for offset in offsets)
