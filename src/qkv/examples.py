"""The seed articles' worked examples, as data with their tokens.

Each function returns a fresh copy, so changing an example in a notebook never
changes it for the next cell that asks. The numbers are the ones the articles
print, digit for digit (for instance ``0.707107`` rather than ``1/sqrt(2)``), so
that what the course computes can be compared with the articles' tables.

An example that students compute by hand also has variants: ``variant=0`` (the
default) is the seed's own numbers, any other whole number gives the same story,
tokens and shapes with other small numbers (see :mod:`qkv.variants`), so that every
student works their own. The book shows variant 0.

- :func:`delivery_example`: seed 000, "外送 晚到 補償", two heads, d_model = 4.
- :func:`q1_example`: seed 002, one query ``q1 = [1, 0]`` over three keys, d_k = 2.
- :func:`softmax_saturation_example`: seed 002, softmax of [2, 1, 0] against [20, 10, 0].
- :func:`zhonghe_example`: seed 001, the attention matrix of "中和 有 一個 永和路".

The course adds examples of its own where a chapter needs numbers that no seed prints;
their docstrings say so:

- :func:`delivery_batch_example`: seed 000's token vectors in three sentences, padded.
- :func:`delivery_translation_example`: English words whose queries read 外送 晚到 補償.
- :func:`zhonghe_vectors_example`: token vectors and one head for 中和 有 一個 永和路.
- :func:`delivery_encoder_layer`: seed 000's heads inside a whole encoder block.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .attention import scaled_dot_product_attention
from .block import EncoderLayer, FeedForward, LayerNorm, MultiHead
from .multihead import Head
from .trace import trace_multi_head
from .variants import VariantDraw, first_accepted

ROOT_HALF = 0.707107  # 1/sqrt(2) as seed 000 prints it


@dataclass(frozen=True)
class MultiHeadExample:
    """Inputs of a multi-head self-attention forward pass.

    ``tokens`` names the rows of ``X`` ``(n, d_model)``; ``heads`` holds each head's
    parameters; ``W_O`` ``(h * d_v, d_model)`` and ``b_O`` ``(d_model,)`` project the
    concatenation.
    """

    tokens: tuple[str, ...]
    X: np.ndarray
    heads: tuple[Head, ...]
    W_O: np.ndarray
    b_O: np.ndarray


def delivery_example(variant: int = 0) -> MultiHeadExample:
    """Seed 000: the customer writes "外送 晚到 補償" (delivery, late, compensation).

    Head 1 is built so that 補償 attends most to 晚到 (the cause); head 2 so that
    補償 attends most to 外送 (the policy topic). ``W_O`` is the identity.

    Other variants keep that story and the seed's shapes and form: ``X`` of 0s and 1s,
    ``W_Q`` and ``W_V`` that pick columns of ``X``, and keys in multiples of 0.707107
    (1/sqrt(2), rounded as the seed rounds it), so that the scaled scores come out in
    halves. In each head 補償's largest weight is clear of the others (by 0.05 or
    more), no weight is below 0.02 or above 0.9, and every step of both heads
    differs from the seed's.
    """
    if variant != 0:
        return _delivery_from(first_accepted("delivery", variant, _draw_delivery, _workable_delivery))
    X = np.array([
        [1, 0, 0, 1],  # 外送
        [0, 1, 1, 0],  # 晚到
        [1, 1, 0, 0],  # 補償
    ], dtype=float)  # (n, d_model) = (3, 4)
    first_two = np.array([[1, 0], [0, 1], [0, 0], [0, 0]], dtype=float)  # picks dimensions 1 and 2
    head_1 = Head(
        W_Q=first_two,
        W_K=np.array([[-0.707107, -0.707107], [0.707107, 0.707107], [0, 0], [0, 0]]),
        W_V=first_two,
        b_Q=np.zeros(2),
        b_K=np.array([0.707107, 0.707107]),
        b_V=np.zeros(2),
    )
    head_2 = Head(
        W_Q=first_two,
        W_K=np.array([[-0.707107, -0.707107], [-1.414214, -1.414214], [0, 0], [0, 0]]),
        W_V=np.array([[0, 0], [0, 0], [1, 0], [0, 1]], dtype=float),
        b_Q=np.zeros(2),
        b_K=np.array([2.121321, 2.121321]),
        b_V=np.zeros(2),
    )
    return MultiHeadExample(
        tokens=("外送", "晚到", "補償"), X=X, heads=(head_1, head_2), W_O=np.eye(4), b_O=np.zeros(4)
    )


@dataclass(frozen=True)
class QueryExample:
    """Queries ``Q`` ``(n_q, d_k)``, keys ``K`` ``(n_k, d_k)`` and values ``V`` ``(n_k, d_v)``."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray


def q1_example(variant: int = 0) -> QueryExample:
    """Seed 002: token 1's query ``q1 = [1, 0]`` against keys k1 = [1, 0], k2 = [0, 1],
    k3 = [1, 1] and values v1 = [1, 0], v2 = [0, 1], v3 = [1, 1] (d_k = 2).

    Other variants: one query over three keys, d_k = 2, whole numbers from -1 to 2 in
    ``q1`` and the keys and from 0 to 2 in the values; the three keys and the three
    values differ from each other, one weight is clearly the largest (by 0.05 or
    more), none is below 0.03 or above 0.85, and no step equals the seed's.
    """
    if variant != 0:
        return first_accepted("q1", variant, _draw_q1, _workable_q1)
    return QueryExample(
        Q=np.array([[1.0, 0.0]]),  # (1, 2): q1
        K=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),  # (3, 2): k1, k2, k3
        V=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),  # (3, 2): v1, v2, v3
    )


@dataclass(frozen=True)
class SoftmaxSaturationExample:
    """Two rows of scores with the same order, the second ten times the first, and the
    ``d_k`` whose square root (10) scales the second back to the first."""

    moderate: np.ndarray
    scaled_up: np.ndarray
    d_k: int


def softmax_saturation_example() -> SoftmaxSaturationExample:
    """Seed 002: softmax of [2, 1, 0] is a healthy mix, of [20, 10, 0] nearly one-hot;
    dividing by sqrt(d_k) = sqrt(100) = 10 turns the second into the first."""
    return SoftmaxSaturationExample(
        moderate=np.array([2.0, 1.0, 0.0]), scaled_up=np.array([20.0, 10.0, 0.0]), d_k=100
    )


@dataclass(frozen=True)
class AttentionMatrixExample:
    """Tokens and an attention-weight matrix ``(n, n)`` whose rows sum to 1."""

    tokens: tuple[str, ...]
    weights: np.ndarray


def zhonghe_example() -> AttentionMatrixExample:
    """Seed 001: "中和有一個永和路" cut into 中和 / 有 / 一個 / 永和路. 中和 and 永和路
    (two place names) attend to each other half and half; 有 and 一個 (filler
    words) attend only to themselves."""
    return AttentionMatrixExample(
        tokens=("中和", "有", "一個", "永和路"),
        weights=np.array([
            [0.5, 0.0, 0.0, 0.5],  # 中和 = 0.5×中和 + 0.5×永和路
            [0.0, 1.0, 0.0, 0.0],  # 有
            [0.0, 0.0, 1.0, 0.0],  # 一個
            [0.5, 0.0, 0.0, 0.5],  # 永和路 = 0.5×中和 + 0.5×永和路
        ]),
    )


@dataclass(frozen=True)
class PaddedBatchExample:
    """Sentences of different lengths padded to one length ``n``.

    ``sentences[b]`` holds the real tokens of sentence ``b`` (``lengths[b]`` of them); row
    ``b`` of ``X`` ``(batch, n, d_model)`` holds their vectors, then ``pad_token``'s vector
    (zeros) up to ``n``.
    """

    sentences: tuple[tuple[str, ...], ...]
    X: np.ndarray
    lengths: np.ndarray
    pad_token: str


def delivery_batch_example() -> PaddedBatchExample:
    """The course's own batch: "外送 晚到 補償", "晚到 補償" and "補償", with seed 000's token
    vectors, padded with zero vectors named ``[PAD]`` to ``n = 3``."""
    vectors = dict(zip(delivery_example().tokens, delivery_example().X))
    sentences = (("外送", "晚到", "補償"), ("晚到", "補償"), ("補償",))
    n, d_model = max(len(s) for s in sentences), len(next(iter(vectors.values())))
    X = np.zeros((len(sentences), n, d_model))  # (batch, n, d_model), padding rows stay 0
    for b, sentence in enumerate(sentences):
        X[b, : len(sentence)] = [vectors[token] for token in sentence]
    lengths = np.array([len(s) for s in sentences])  # (batch,)
    return PaddedBatchExample(sentences=sentences, X=X, lengths=lengths, pad_token="[PAD]")


@dataclass(frozen=True)
class CrossAttentionExample:
    """Queries from one sequence, keys and values from another: ``X_q`` ``(n_q, d_model)``
    names its rows ``query_tokens``, ``X_kv`` ``(n_k, d_model)`` names its rows
    ``key_tokens``; ``head`` holds ``W_Q, W_K, W_V``."""

    query_tokens: tuple[str, ...]
    X_q: np.ndarray
    key_tokens: tuple[str, ...]
    X_kv: np.ndarray
    head: Head


def delivery_translation_example() -> CrossAttentionExample:
    """The course's own cross-attention: the English words "late delivery compensation" (a
    decoder's tokens) attend over seed 000's "外送 晚到 補償" (the encoder's tokens).

    The English words are one-hot vectors, so each word's query is one row of ``W_Q``; those
    rows are made to point at the word's Chinese counterpart (late -> 晚到, delivery -> 外送,
    compensation -> 補償), as a trained translation model's would. ``W_K = W_V = I``: the keys
    and values are the Chinese token vectors themselves. ``d_k = 4``, so ``sqrt(d_k) = 2``.
    """
    chinese = delivery_example()
    X_q = np.array([
        [1, 0, 0, 0],  # late
        [0, 1, 0, 0],  # delivery
        [0, 0, 1, 0],  # compensation
    ], dtype=float)  # (n_q, d_model) = (3, 4)
    W_Q = np.array([
        [0, 2, 2, 0],  # late's query: 晚到's direction
        [2, 0, 0, 2],  # delivery's query: 外送's direction
        [2, 2, -2, -2],  # compensation's query: 補償's direction, away from 外送 and 晚到
        [0, 0, 0, 0],  # (no English word uses the fourth coordinate)
    ], dtype=float)  # (d_model, d_k) = (4, 4)
    head = Head(W_Q=W_Q, W_K=np.eye(4), W_V=np.eye(4))
    return CrossAttentionExample(query_tokens=("late", "delivery", "compensation"), X_q=X_q,
                                 key_tokens=chinese.tokens, X_kv=chinese.X, head=head)


@dataclass(frozen=True)
class SelfAttentionExample:
    """Token vectors ``X`` ``(n, d_model)`` whose rows ``tokens`` names, and one head."""

    tokens: tuple[str, ...]
    X: np.ndarray
    head: Head


def zhonghe_vectors_example() -> SelfAttentionExample:
    """The course's own vectors for seed 001's tokens 中和 / 有 / 一個 / 永和路 (the seed gives
    an attention matrix but no vectors), and one head that reads them.

    The coordinates are (place name, "has", "a", which place): 中和 and 永和路 share the
    first and differ in the sign of the last. ``W_Q = W_K = diag(2, 2, 2, 1)`` counts "which
    place" half as much, so the two place names attend mostly to themselves and to each
    other, 有 and 一個 mostly to themselves, as in seed 001's matrix. ``W_V = I``.
    ``d_k = 4``, so ``sqrt(d_k) = 2``.
    """
    X = np.array([
        [1, 0, 0, 1],  # 中和
        [0, 1, 0, 0],  # 有
        [0, 0, 1, 0],  # 一個
        [1, 0, 0, -1],  # 永和路
    ], dtype=float)  # (n, d_model) = (4, 4)
    W_QK = np.diag([2.0, 2.0, 2.0, 1.0])  # (d_model, d_k) = (4, 4)
    head = Head(W_Q=W_QK, W_K=W_QK, W_V=np.eye(4))
    return SelfAttentionExample(tokens=("中和", "有", "一個", "永和路"), X=X, head=head)


# --------------------------------------------------------------------------- variants


def _draw_q1(draw: VariantDraw) -> QueryExample:
    return QueryExample(
        Q=np.array([draw.integers(-1, 2, (2,))], dtype=float),  # (1, 2)
        K=np.array(draw.integers(-1, 2, (3, 2)), dtype=float),  # (3, 2)
        V=np.array(draw.integers(0, 2, (3, 2)), dtype=float),  # (3, 2)
    )


def _attention_steps(Q, K, V) -> list[np.ndarray]:
    """Q K^T, the scaled scores, the weights and the output: the steps a student writes down."""
    output, weights = scaled_dot_product_attention(Q, K, V)
    scores = Q @ K.T  # (n_q, n_k)
    return [scores, scores / np.sqrt(Q.shape[-1]), weights, output]


def _clear_largest(row: np.ndarray, margin: float) -> bool:
    top, second = np.sort(row)[::-1][:2]
    return top - second >= margin


def _all_differ(steps: list[np.ndarray], seed_steps: list[np.ndarray], tol: float = 0.011) -> bool:
    """Every step differs from the seed's somewhere by more than a hand answer's tolerance."""
    return all(a.shape != b.shape or np.abs(a - b).max() > tol for a, b in zip(steps, seed_steps))


def _workable_q1(ex: QueryExample) -> bool:
    if not ex.Q.any() or len({tuple(k) for k in ex.K}) < 3 or len({tuple(v) for v in ex.V}) < 3:
        return False
    steps = _attention_steps(ex.Q, ex.K, ex.V)
    weights = steps[2][0]
    return (_clear_largest(weights, 0.05) and weights.min() >= 0.03 and weights.max() <= 0.85
            and _all_differ(steps, _seed_steps("q1")))


@functools.cache
def _seed_steps(example: str) -> tuple[np.ndarray, ...]:
    """The steps of the seed's own numbers (variant 0), which no other variant may repeat."""
    if example == "q1":
        seed = q1_example()
        return tuple(_attention_steps(seed.Q, seed.K, seed.V))
    return tuple(_delivery_steps(delivery_example()))


def _pick_columns(columns: tuple[int, int], d_model: int = 4) -> np.ndarray:
    """A (d_model, 2) matrix of 0s and 1s whose product with X keeps two of X's columns."""
    W = np.zeros((d_model, 2))
    W[columns[0], 0] = W[columns[1], 1] = 1.0
    return W


_COLUMN_PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (1, 0), (2, 0), (3, 2))


def _draw_delivery(draw: VariantDraw) -> tuple[np.ndarray, ...]:
    """X, W_Q, then W_K, b_K and W_V of each head, as plain arrays (a candidate, not yet checked)."""
    X = np.array(draw.integers(0, 1, (3, 4)), dtype=float)  # (n, d_model) = (3, 4)
    W_Q = _pick_columns(draw.choice(_COLUMN_PAIRS))  # both heads read the same queries, as in the seed
    arrays = [X, W_Q]
    for _ in range(2):
        key_steps = np.array(draw.integers(-2, 2, (4, 1)), dtype=float) @ np.ones((1, 2))  # equal columns
        arrays.append(np.round(key_steps * ROOT_HALF, 6))  # W_K: multiples of 0.707107
        arrays.append(np.round(np.full(2, float(draw.integer(-1, 3))) * ROOT_HALF, 6))  # b_K
        arrays.append(_pick_columns(draw.choice(_COLUMN_PAIRS)))  # W_V
    return tuple(arrays)


def _rough_weights(X, W_Q, W_K, b_K) -> np.ndarray:
    """A head's weights (n, n), in plain numpy: a fast first test of a candidate."""
    scores = (X @ W_Q) @ (X @ W_K + b_K).T / np.sqrt(W_Q.shape[1])  # (n, n)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _delivery_from(arrays: tuple[np.ndarray, ...]) -> MultiHeadExample:
    X, W_Q = arrays[:2]
    heads = tuple(Head(W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=np.zeros(2), b_K=b_K, b_V=np.zeros(2))
                  for W_K, b_K, W_V in (arrays[2:5], arrays[5:8]))
    return MultiHeadExample(tokens=("外送", "晚到", "補償"), X=X, heads=heads, W_O=np.eye(4), b_O=np.zeros(4))


def _delivery_steps(ex: MultiHeadExample) -> list[np.ndarray]:
    trace = trace_multi_head(ex.X, ex.heads, ex.W_O, ex.b_O)
    steps = []
    for head in trace.heads:
        steps += [head.Q.Z, head.K.B, head.K.Z, head.V.Z, head.S_raw, head.S, head.A, head.O]
    return steps + [trace.O_concat, trace.Y.Z]


def _workable_delivery(arrays: tuple[np.ndarray, ...]) -> bool:
    X, W_Q = arrays[:2]
    if len({tuple(row) for row in X}) < 3 or not X.any(axis=1).all():
        return False
    weights = np.stack([_rough_weights(X, W_Q, W_K, b_K) for W_K, b_K in (arrays[2:4], arrays[5:7])])
    compensation = weights[:, 2]  # 補償's row in each head, (h, n)
    story = compensation[0].argmax() == 1 and compensation[1].argmax() == 0  # 晚到 in head 1, 外送 in head 2
    return (story and all(_clear_largest(row, 0.05) for row in compensation)
            and weights.min() >= 0.02 and weights.max() <= 0.9
            and _all_differ(_delivery_steps(_delivery_from(arrays)), _seed_steps("delivery")))
def delivery_encoder_layer():
    """Seed 000's two heads (``W_O = I``) inside a whole encoder block, for 外送 晚到 補償.

    The attention is seed 000's; the layer norms start as they do before training
    (``gamma = 1``, ``beta = 0``); the feed-forward layer (``d_ff = 8``) has weights typed
    with one decimal, as small random numbers would be, so that a step can be followed by hand.
    Returns a :class:`qkv.EncoderLayer` for the tokens ``delivery_example().X`` ``(3, 4)``.
    """
    ex = delivery_example()
    W_1 = np.array([  # (d_model, d_ff) = (4, 8)
        [0.0, 0.1, -0.1, -0.4, -0.2, -0.5, 0.0, 0.7],
        [-0.2, -0.3, 0.2, 0.2, 0.1, -0.5, 0.0, 0.3],
        [-0.7, -0.2, -1.0, -0.6, -0.9, -0.1, -0.6, 0.1],
        [0.1, -0.1, -1.3, -0.3, 0.0, 0.1, -0.8, -0.2],
    ])
    b_1 = np.array([-0.1, -0.1, 0.1, -0.1, 0.0, 0.1, -0.1, 0.0])  # (d_ff,)
    W_2 = np.array([  # (d_ff, d_model) = (8, 4)
        [0.0, 0.0, -0.4, 0.0],
        [0.5, -0.5, 0.3, 0.0],
        [-0.2, 0.7, 0.3, -0.4],
        [0.0, 0.2, -0.1, 0.2],
        [0.0, 0.2, 0.5, -0.2],
        [0.1, -0.2, 0.0, -0.4],
        [-0.2, -0.1, 0.3, 0.4],
        [-0.5, -0.3, 0.2, -0.7],
    ])
    b_2 = np.zeros(4)  # (d_model,)
    return EncoderLayer(
        self_attention=MultiHead(ex.heads, ex.W_O, ex.b_O),
        norm_1=LayerNorm.identity(4),
        feed_forward=FeedForward(W_1, b_1, W_2, b_2, activation="relu"),
        norm_2=LayerNorm.identity(4),
    )
