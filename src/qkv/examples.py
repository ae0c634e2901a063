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
- :func:`softmax_saturation_example`: seed 002, softmax of [2, 1, 0] against [20, 10, 0], d_k = 100.
- :func:`zhonghe_example`: seed 001, the attention matrix of "中和 有 一個 永和路".

The course adds examples of its own where a chapter needs numbers that no seed prints;
their docstrings say so:

- :func:`delivery_batch_example`: seed 000's token vectors in three sentences, padded.
- :func:`delivery_translation_example`: English words whose queries read 外送 晚到 補償.
- :func:`zhonghe_vectors_example`: token vectors and one head for 中和 有 一個 永和路.
- :func:`delivery_encoder_layer`: seed 000's heads inside a whole encoder block.
- :func:`causal_delivery_example`: head 1 of seed 000's example under a causal mask (variants).
- :func:`zhonghe_reordered_example`: 中和 有 一個 永和路 and a reordering of its tokens (variants).
- :func:`position_encoding_example`: a width, a position and a pair of positions to encode (variants).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from .attention import scaled_dot_product_attention, softmax
from .block import EncoderLayer, FeedForward, LayerNorm, MultiHead
from .multihead import Head
from .variants import APART_FROM_SEED, VariantDraw, apart_from_seed

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
    halves. Every question the problem sets ask of it has one clear answer, and never
    the seed's:

    - in head 1, 補償 attends most to 晚到; in head 2, most to 外送 and least to 晚到
      (each by a margin of 0.05 or more in its weights);
    - one token's query is the longest (外送 or 晚到), so that it attends most sharply,
      and attends most to 晚到 in head 1 (by 0.05 or more);
    - one key of head 2 is the longest, and it is not 外送's;
    - the key bias of head 1 is neither zero nor the seed's;
    - no weight is below 0.02 or above 0.9, and every step of both heads differs
      from the seed's by more than 0.01 somewhere.
    """
    if variant != 0:
        return _delivery_variant(variant)
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
        return _q1_variant(variant)
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


def softmax_saturation_example(variant: int = 0) -> SoftmaxSaturationExample:
    """Seed 002: softmax of [2, 1, 0] is a healthy mix, of [20, 10, 0] nearly one-hot;
    dividing by sqrt(d_k) = sqrt(100) = 10 turns the second into the first.

    Other variants: three different moderate scores, multiples of 0.5 from -2 to 3,
    whose softmax is a healthy mix (no weight below 0.02 or above 0.9, the largest
    clear by 0.05), scaled up by a whole factor from 4 to 10 (so ``d_k`` is its square,
    16 to 100) into a nearly one-hot softmax (largest weight 0.95 or more); neither
    softmax is the seed's.
    """
    if variant != 0:
        return _saturation_variant(variant)
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


def delivery_translation_example(variant: int = 0) -> CrossAttentionExample:
    """The course's own cross-attention: the English words "late delivery compensation" (a
    decoder's tokens) attend over seed 000's "外送 晚到 補償" (the encoder's tokens).

    The English words are one-hot vectors, so each word's query is one row of ``W_Q``; those
    rows are made to point at the word's Chinese counterpart (late -> 晚到, delivery -> 外送,
    compensation -> 補償), as a trained translation model's would. ``W_K = W_V = I``: the keys
    and values are the Chinese token vectors themselves. ``d_k = 4``, so ``sqrt(d_k) = 2``.

    Other variants keep that form: Chinese token vectors of 0s and 1s (three different ones,
    none zero), rows of ``W_Q`` of whole numbers from -2 to 2 (so the scaled scores come out
    in halves), each word's query pointing at its counterpart (a positive score) and attending
    most to it by 0.05 or more in its weights,
    no weight of "late" or "delivery" below 0.03 or above 0.85 (none of "compensation" below
    0.02 or above 0.9), and the scores, weights and output of "late delivery" (2 x 3) differ
    from the seed's.
    """
    if variant != 0:
        return _translation_variant(variant)
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


def zhonghe_vectors_example(variant: int = 0) -> SelfAttentionExample:
    """The course's own vectors for seed 001's tokens 中和 / 有 / 一個 / 永和路 (the seed gives
    an attention matrix but no vectors), and one head that reads them.

    The coordinates are (place name, "has", "a", which place): 中和 and 永和路 share the
    first and differ in the sign of the last. ``W_Q = W_K = diag(2, 2, 2, 1)`` counts "which
    place" half as much, so the two place names attend mostly to themselves and to each
    other, 有 and 一個 mostly to themselves, as in seed 001's matrix. ``W_V = I``.
    ``d_k = 4``, so ``sqrt(d_k) = 2``.

    Other variants keep the vectors and ``W_V = I`` and weigh the coordinates differently:
    ``W_Q = W_K = diag(w)`` with whole numbers ``w`` from 1 to 3, chosen so that the story
    holds (by 0.05 or more in the weights) and no weight is below 0.02 or above 0.9.
    """
    if variant != 0:
        return _zhonghe_vectors_variant(variant)
    X = np.array([
        [1, 0, 0, 1],  # 中和
        [0, 1, 0, 0],  # 有
        [0, 0, 1, 0],  # 一個
        [1, 0, 0, -1],  # 永和路
    ], dtype=float)  # (n, d_model) = (4, 4)
    W_QK = np.diag([2.0, 2.0, 2.0, 1.0])  # (d_model, d_k) = (4, 4)
    head = Head(W_Q=W_QK, W_K=W_QK, W_V=np.eye(4))
    return SelfAttentionExample(tokens=("中和", "有", "一個", "永和路"), X=X, head=head)


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


# --------------------------------------------------------------------------- variants
#
# Each variant is drawn in stages from its own stream (qkv.variants.VariantDraw). Where
# a stage has few enough possibilities, every workable one is listed once (in a fixed
# order) and the stream picks one; otherwise the stream draws until the stage is
# workable. Changing anything here changes students' numbers: tests pin a few variants.


def _clear_largest(row: np.ndarray, margin: float) -> bool:
    top, second = np.sort(row)[::-1][:2]
    return top - second >= margin


def _all_differ(steps, seed_steps) -> bool:
    """Every step differs from the seed's (:func:`qkv.variants.apart_from_seed`)."""
    return all(apart_from_seed(a, b) for a, b in zip(steps, seed_steps))


def _margins(values: np.ndarray) -> np.ndarray:
    """The largest minus the second largest along the last axis."""
    ordered = np.sort(values, axis=-1)
    return ordered[..., -1] - ordered[..., -2]


# ------------------------------------------------------------------ q1: one query over three keys


def _attention_steps(Q, K, V) -> list[np.ndarray]:
    """Q K^T, the scaled scores, the weights and the output: the steps a student writes down."""
    output, weights = scaled_dot_product_attention(Q, K, V)
    scores = Q @ K.T  # (n_q, n_k)
    return [scores, scores / np.sqrt(Q.shape[-1]), weights, output]


@functools.cache
def _workable_queries_and_keys() -> tuple[np.ndarray, np.ndarray]:
    """Every ``q1`` ``(2,)`` and keys ``(3, 2)`` of whole numbers from -1 to 2 that make workable weights."""
    vectors = np.array(list(itertools.product(range(-1, 3), repeat=2)), dtype=float)  # (16, 2)
    queries = vectors[np.any(vectors != 0, axis=1)]  # (15, 2)
    keys = vectors[np.array(list(itertools.product(range(16), repeat=3)))]  # (4096, 3, 2)
    distinct = np.array([len({tuple(k) for k in K}) == 3 for K in keys])
    keys = keys[distinct]
    q_all = np.repeat(queries, len(keys), axis=0)  # (m, 2)
    k_all = np.tile(keys, (len(queries), 1, 1))  # (m, 3, 2)
    scores = np.einsum("md,mjd->mj", q_all, k_all)  # (m, 3)
    weights = softmax(scores / np.sqrt(2), axis=-1)
    seed = q1_example()
    seed_steps = _attention_steps(seed.Q, seed.K, seed.V)
    workable = ((_margins(weights) >= 0.05) & (weights.min(axis=1) >= 0.03) & (weights.max(axis=1) <= 0.85)
                & (np.abs(scores - seed_steps[0]).max(axis=1) > APART_FROM_SEED)
                & (np.abs(weights - seed_steps[2]).max(axis=1) > APART_FROM_SEED))
    return q_all[workable], k_all[workable]


def _q1_variant(variant: int) -> QueryExample:
    draw = VariantDraw("q1", variant)
    queries, keys = _workable_queries_and_keys()
    pick = draw.integer(0, len(queries) - 1)
    Q, K = queries[pick][None, :], keys[pick]  # (1, 2), (3, 2)
    seed = q1_example()
    seed_output = _attention_steps(seed.Q, seed.K, seed.V)[3]

    def values(d: VariantDraw) -> np.ndarray:
        return np.array(d.integers(0, 2, (3, 2)), dtype=float)  # (3, 2)

    def workable(V: np.ndarray) -> bool:
        return len({tuple(v) for v in V}) == 3 and _all_differ([_attention_steps(Q, K, V)[3]], [seed_output])

    return QueryExample(Q=Q.copy(), K=K.copy(), V=draw.until(values, workable, "values"))


# ------------------------------------------------------------------ softmax saturation


@functools.cache
def _workable_saturations() -> tuple[tuple[tuple[float, ...], int], ...]:
    """Every (moderate scores, factor) that makes a workable saturation example, in a fixed order."""
    halves = [h / 2 for h in range(-4, 7)]  # -2, -1.5, ..., 3
    seed = softmax_saturation_example()
    seed_moderate, seed_scaled = softmax(seed.moderate), softmax(seed.scaled_up)
    found = []
    for scores in itertools.permutations(halves, 3):
        moderate = softmax(np.array(scores))
        if (moderate.min() < 0.02 or moderate.max() > 0.9 or not _clear_largest(moderate, 0.05)
                or not apart_from_seed(moderate, seed_moderate)):
            continue
        for factor in range(4, 11):
            scaled = softmax(factor * np.array(scores))
            if scaled.max() >= 0.95 and apart_from_seed(scaled, seed_scaled):
                found.append((scores, factor))
    return tuple(found)


def _saturation_variant(variant: int) -> SoftmaxSaturationExample:
    scores, factor = VariantDraw("softmax_saturation", variant).choice(_workable_saturations())
    moderate = np.array(scores)
    return SoftmaxSaturationExample(moderate=moderate, scaled_up=factor * moderate, d_k=factor**2)


# ------------------------------------------------------------------ delivery: 外送 晚到 補償

_COLUMN_PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (1, 0), (2, 0), (3, 2))
_HALF_SCALE = ROOT_HALF / np.sqrt(2)  # a score q . k / sqrt(2) with keys in steps of 0.707107: 0.5 per step
CAUSE, TOPIC, COMPENSATION = 0, 1, 2  # 外送 is token 0, 晚到 token 1, 補償 token 2
# Head 1 links 補償 to 晚到 (index 1), head 2 to 外送 (index 0).


def _pick_columns(columns: tuple[int, int], d_model: int = 4) -> np.ndarray:
    """A (d_model, 2) matrix of 0s and 1s whose product with X keeps two of X's columns."""
    W = np.zeros((d_model, 2))
    W[columns[0], 0] = W[columns[1], 1] = 1.0
    return W


@functools.cache
def _key_choices() -> tuple[np.ndarray, np.ndarray]:
    """Every key direction k (whole numbers from -2 to 2 per dimension of X) and key bias c (-1 to 3).

    A head's keys are ``(X k + c) * 0.707107`` in both of their columns: ``W_K`` has
    ``k * 0.707107`` in each column and ``b_K = c * 0.707107``.
    """
    pairs = list(itertools.product(itertools.product(range(-2, 3), repeat=4), range(-1, 4)))
    return (np.array([k for k, _ in pairs], dtype=float),  # (3125, 4)
            np.array([c for _, c in pairs], dtype=float))  # (3125,)


@functools.cache
def _workable_tokens() -> tuple[np.ndarray, tuple[tuple[int, int], ...]]:
    """Every ``X`` (3 x 4, of 0s and 1s) and query columns that can tell the story, in a fixed order.

    The three tokens differ and none is empty; 補償's query is not zero, and 外送's or
    晚到's query is the one longest (so that one token clearly attends most sharply).
    """
    bits = (np.arange(2**12)[:, None] >> np.arange(11, -1, -1)[None, :]) & 1  # (4096, 12)
    X_all = bits.reshape(-1, 3, 4).astype(float)
    rows = X_all @ (2.0 ** np.arange(4))  # (4096, 3): each row as a whole number
    usable = (rows > 0).all(axis=1) & (rows[:, 0] != rows[:, 1]) & (rows[:, 0] != rows[:, 2]) & (
        rows[:, 1] != rows[:, 2])
    found_X, found_columns = [], []
    for columns in _COLUMN_PAIRS:
        q = X_all[:, :, list(columns)].sum(axis=2)  # (4096, 3): each query's length squared
        ordered = np.sort(q, axis=1)
        ok = usable & (q[:, 2] >= 1) & (np.argmax(q, axis=1) != 2) & (ordered[:, 2] > ordered[:, 1])
        found_X.extend(X_all[ok])
        found_columns.extend([columns] * int(ok.sum()))
    return np.array(found_X), tuple(found_columns)


_KEY_LENGTHS = range(-9, 12)  # every m_j = X_j . k + c that the key choices can make


@functools.cache
def _workable_key_steps(q: tuple[int, ...], head: int) -> np.ndarray:
    """Which keys ``m_j * 0.707107 * [1, 1]`` (m_j in :data:`_KEY_LENGTHS`) make head ``head`` tell the story.

    ``q`` holds each token's query length squared (its entries' sum); the result is a
    boolean table indexed by ``(m_0, m_1, m_2)`` minus the smallest ``m``.
    """
    m = np.array(list(itertools.product(_KEY_LENGTHS, repeat=3)), dtype=float)  # (9261, 3)
    scores = np.array(q, dtype=float)[None, :, None] * m[:, None, :] * _HALF_SCALE  # (9261, n, n)
    weights = softmax(scores, axis=-1)
    row = weights[:, COMPENSATION]  # 補償's row, (9261, n)
    ok = (weights.min(axis=(1, 2)) >= 0.02) & (weights.max(axis=(1, 2)) <= 0.9) & (_margins(row) >= 0.05)
    if head == 0:  # 補償 attends most to 晚到, and one token attends most to 晚到
        ok &= (np.argmax(row, axis=1) == 1) & (_margins(weights[:, :, 1]) >= 0.05)
    else:  # 補償 attends most to 外送 and least to 晚到; the longest key is not 外送's
        length = np.abs(m)
        ok &= ((np.argmax(row, axis=1) == 0) & (np.argmin(row, axis=1) == 1) & (_margins(-row) >= 0.05)
               & (_margins(length) >= 1) & (np.argmax(length, axis=1) != 0))
    size = len(_KEY_LENGTHS)
    return ok.reshape(size, size, size)


@functools.cache
def _key_steps_by_token() -> np.ndarray:
    """``m = x . k + c`` of every key choice (:func:`_key_choices`) for every token ``x`` (4 bits), as
    indices into the tables of :func:`_workable_key_steps`: (16, 3125)."""
    k, c = _key_choices()
    x = ((np.arange(16)[:, None] >> np.arange(3, -1, -1)[None, :]) & 1).astype(float)  # (16, 4)
    return (x @ k.T + c[None, :]).astype(int) - _KEY_LENGTHS[0]


def _workable_keys(X: np.ndarray, q: np.ndarray, head: int) -> np.ndarray:
    """The indices into :func:`_key_choices` that make head ``head`` (0 or 1) tell the story."""
    tokens = (X @ (2 ** np.arange(3, -1, -1))).astype(int)  # each token's 4 bits as a whole number
    m = _key_steps_by_token()[tokens]  # (3, 3125)
    ok = _workable_key_steps(tuple(int(v) for v in q), head)[m[0], m[1], m[2]]
    if head == 0:
        ok &= (_key_choices()[1] != 0) & (_key_choices()[1] != 1)  # a key bias to broadcast, not the seed's
    return np.flatnonzero(ok)


def _delivery_candidate(draw: VariantDraw) -> MultiHeadExample | None:
    X_all, column_pairs = _workable_tokens()
    pick = draw.integer(0, len(X_all) - 1)
    X, columns = X_all[pick].copy(), column_pairs[pick]
    q = X[:, list(columns)].sum(axis=1)
    k, c = _key_choices()
    heads = []
    for head in (0, 1):
        workable = _workable_keys(X, q, head)
        if not len(workable):
            return None
        pick = workable[draw.integer(0, len(workable) - 1)]
        heads.append(Head(
            W_Q=_pick_columns(columns),
            W_K=np.round(np.outer(k[pick], np.ones(2)) * ROOT_HALF, 6),  # (4, 2), multiples of 0.707107
            W_V=_pick_columns(draw.choice(_COLUMN_PAIRS)),
            b_Q=np.zeros(2),
            b_K=np.round(np.full(2, c[pick]) * ROOT_HALF, 6),
            b_V=np.zeros(2),
        ))
    tokens = ("外送", "晚到", "補償")
    return MultiHeadExample(tokens=tokens, X=X, heads=tuple(heads), W_O=np.eye(4), b_O=np.zeros(4))


def _delivery_steps(ex: MultiHeadExample) -> list[np.ndarray]:
    """Every step a student writes down, in plain numpy (tests check them against qkv's trace)."""
    steps, outputs = [], []
    for head in ex.heads:
        Q, B_K, V = ex.X @ head.W_Q + head.b_Q, np.tile(head.b_K, (len(ex.X), 1)), ex.X @ head.W_V + head.b_V
        K = ex.X @ head.W_K + B_K
        S_raw = Q @ K.T
        A = softmax(S_raw / np.sqrt(Q.shape[1]), axis=-1)
        outputs.append(A @ V)
        steps += [Q, B_K, K, V, S_raw, S_raw / np.sqrt(Q.shape[1]), A, outputs[-1]]
    O_concat = np.concatenate(outputs, axis=1)
    return steps + [O_concat, O_concat @ ex.W_O + ex.b_O]


@functools.cache
def _seed_delivery_steps() -> tuple[np.ndarray, ...]:
    return tuple(_delivery_steps(delivery_example()))


def _delivery_variant(variant: int) -> MultiHeadExample:
    return VariantDraw("delivery", variant).until(
        _delivery_candidate,
        lambda ex: ex is not None and _all_differ(_delivery_steps(ex), _seed_delivery_steps()),
        "delivery example")


# --------------------------------------------------------------------------- what attention costs, soft lookup
#
# The examples of the chapters "What attention costs, and online softmax" and "Attention as soft
# lookup", with their variants (problem sets 10 and 11).


@dataclass(frozen=True)
class OnlineSoftmaxExample:
    """A row of scores read in two blocks: ``scores[:split]``, then ``scores[split:]``."""

    scores: np.ndarray
    split: int

    @property
    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        return self.scores[: self.split].copy(), self.scores[self.split:].copy()

    @property
    def reversed_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """The same scores in the other order, cut after as many: the largest score then comes last."""
        backwards = self.scores[::-1]
        return backwards[: self.split].copy(), backwards[self.split:].copy()


def online_softmax_example(variant: int = 0) -> OnlineSoftmaxExample:
    """Seed 002's scores [2, 1, 0], read by the online softmax in the blocks [2, 1] and [0]; read
    backwards, [0, 1] and [2], the largest score arrives in the second block and the running sum
    is rescaled.

    Other variants: three different scores, multiples of 0.5 from -2 to 3, the first the largest
    (so that, read forwards, the second block's maximum is lower than the running maximum and,
    read backwards, higher); every exponent ``s_j - m`` a multiple of 0.5 from -3 to 0; the
    weights neither below 0.04 nor above 0.85; and every step (the running maximum and sum after
    each block, both ways, the rescaling factor, the weights) differs from the seed's.
    """
    if variant != 0:
        return OnlineSoftmaxExample(np.array(VariantDraw("online_softmax", variant).choice(_workable_online_rows())),
                                    split=2)
    return OnlineSoftmaxExample(scores=softmax_saturation_example().moderate, split=2)


def online_softmax_steps(example: OnlineSoftmaxExample) -> dict[str, np.ndarray]:
    """Every number a student writes down for ``example``, in plain numpy.

    ``state_1``, ``state_2``: ``[m, l]`` after each block read forwards; ``weights``: the
    softmax; ``reversed_state_1``, ``rescale``, ``reversed_state_2``: the same read backwards,
    and the factor ``e^(m_1 - m_2)`` the running sum is multiplied by in the second block.
    """
    steps = {}
    for prefix, blocks in (("", example.blocks), ("reversed_", example.reversed_blocks)):
        m, l = -np.inf, 0.0
        for t, block in enumerate(blocks, start=1):
            new_m = max(m, float(block.max()))
            rescale = np.exp(m - new_m)
            m, l = new_m, l * rescale + float(np.exp(block - new_m).sum())
            steps[f"{prefix}state_{t}"] = np.array([m, l])
        if prefix:
            steps["rescale"] = np.array(rescale)
    steps["weights"] = np.exp(example.scores - m) / l
    return steps


@functools.cache
def _workable_online_rows() -> tuple[tuple[float, ...], ...]:
    seed = online_softmax_steps(online_softmax_example())
    halves = [h / 2 for h in range(-4, 7)]  # -2, -1.5, ..., 3
    found = []
    for row in itertools.permutations(halves, 3):
        if row[0] <= max(row[1:]) or row[0] - min(row[1:]) > 3:
            continue
        steps = online_softmax_steps(OnlineSoftmaxExample(np.array(row), split=2))
        if (steps["weights"].min() >= 0.04 and steps["weights"].max() <= 0.85
                and all(apart_from_seed(steps[name], seed[name]) for name in seed)):
            found.append(row)
    return tuple(found)


@dataclass(frozen=True)
class AttentionMemoryExample:
    """What the weights of one attention layer cost: ``n`` tokens and ``heads`` heads stored as
    ``dtype`` (a ViT-like model), a long context of ``n_long`` tokens and ``heads_long`` heads
    stored as ``dtype_long``, and a context grown ``growth``-fold."""

    n: int
    heads: int
    dtype: str
    n_long: int
    heads_long: int
    dtype_long: str
    growth: int


BYTES_PER_NUMBER = {"float16": 2, "float32": 4, "float64": 8}


def attention_memory_example(variant: int = 0) -> AttentionMemoryExample:
    """The chapter's counts: ViT-Base's n = 197 tokens (196 patches and a class token) and 12
    heads, weights stored as float32; a long context of 32,768 tokens with 32 heads in 16-bit
    numbers (64 GiB of weights per layer); n doubled.

    Other variants: a ViT's token count for another grid of patches (g^2 + 1), 4 to 16 heads and
    float32 or float64; a long context of a power of two from 4,096 to 131,072 tokens, 8 to 64
    heads and float16 or float32, whose weights fill a whole number of GiB from 1 to 1024; a
    context grown 3 to 10-fold. Every count differs from the seed's.
    """
    if variant == 0:
        return AttentionMemoryExample(197, 12, "float32", 32_768, 32, "float16", 2)
    draw = VariantDraw("attention_memory", variant)
    n = draw.choice([g * g + 1 for g in (7, 8, 10, 12, 16, 20, 24)])  # 14 * 14 + 1 is the seed's
    heads, dtype = draw.choice((4, 6, 8, 12, 16)), draw.choice(("float32", "float64"))
    n_long, heads_long, dtype_long = draw.choice(_workable_long_contexts())
    return AttentionMemoryExample(n, heads, dtype, n_long, heads_long, dtype_long, draw.choice((3, 4, 5, 8, 10)))


@functools.cache
def _workable_long_contexts() -> tuple[tuple[int, int, str], ...]:
    """Every (tokens, heads, dtype) whose weights fill a whole number of GiB from 1 to 1024, not the seed's 64."""
    found = []
    for n, heads, dtype in itertools.product([2**k for k in range(12, 18)], (8, 16, 32, 64), ("float16", "float32")):
        gib, rest = divmod(heads * n * n * BYTES_PER_NUMBER[dtype], 2**30)
        if rest == 0 and 1 <= gib <= 1024 and gib != 64:
            found.append((n, heads, dtype))
    return tuple(found)


@dataclass(frozen=True)
class KernelLookupExample:
    """One query ``Q`` ``(1, d)`` over keys ``K`` ``(n_k, d)`` with values ``V`` ``(n_k, d_v)``, and the
    width ``sigma`` of a Gaussian kernel."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    sigma: float


def kernel_lookup_example(variant: int = 0) -> KernelLookupExample:
    """Seed 002's query q1 = [1, 0] over k1 = [1, 0], k2 = [0, 1], k3 = [1, 1] with values v1, v2, v3,
    weighted by a Gaussian kernel of width sigma = 1: the exponents are 0, -1 and -0.5.

    Other variants: sigma is 0.5, 1 or 2, and the query and keys have coordinates that are whole
    multiples of sigma from -sigma to 2 sigma, so that every exponent ``-|q - k_j|^2 / (2 sigma^2)`` is a
    multiple of 0.5 (and so is every extended score ``(q . k_j - |k_j|^2 / 2) / sigma^2``); the values
    are whole numbers from 0 to 2. The three keys differ and one is clearly the nearest (its weight
    larger by 0.05 or more), and it is not k1 (the seed's); no weight is below 0.03 or above 0.85;
    the three values differ and every step differs from the seed's.
    """
    if variant != 0:
        return _kernel_lookup_variant(variant)
    seed = q1_example()
    return KernelLookupExample(Q=seed.Q, K=seed.K, V=seed.V, sigma=1.0)


def kernel_lookup_steps(example: KernelLookupExample) -> dict[str, np.ndarray]:
    """Every number a student writes down for ``example``, in plain numpy (one query)."""
    q, K, V, sigma = example.Q[0], example.K, example.V, example.sigma
    distances = ((K - q) ** 2).sum(axis=1)  # (n_k,)
    exponents = -distances / (2 * sigma**2)
    weights = softmax(exponents)
    extended = (K @ q - 0.5 * (K**2).sum(axis=1)) / sigma**2  # (n_k,): exponents + |q|^2 / 2 sigma^2
    return {"distances": distances, "exponents": exponents, "weights": weights, "prediction": weights @ V,
            "extended_scores": extended}


@functools.cache
def _workable_kernel_geometries() -> tuple[np.ndarray, np.ndarray]:
    """Every query (2,) and keys (3, 2) of whole numbers from -1 to 2 (in units of sigma) that make
    workable weights, with the nearest key not the first."""
    vectors = np.array(list(itertools.product(range(-1, 3), repeat=2)), dtype=float)  # (16, 2)
    keys = vectors[np.array(list(itertools.product(range(16), repeat=3)))]  # (4096, 3, 2)
    keys = keys[np.array([len({tuple(k) for k in K}) == 3 for K in keys])]
    q_all = np.repeat(vectors, len(keys), axis=0)  # (m, 2)
    k_all = np.tile(keys, (len(vectors), 1, 1))  # (m, 3, 2)
    weights = softmax(-((k_all - q_all[:, None, :]) ** 2).sum(axis=2) / 2, axis=-1)  # (m, 3), sigma = 1
    workable = ((_margins(weights) >= 0.05) & (np.argmax(weights, axis=1) != 0)
                & (weights.min(axis=1) >= 0.03) & (weights.max(axis=1) <= 0.85))
    return q_all[workable], k_all[workable]


def _kernel_lookup_variant(variant: int) -> KernelLookupExample:
    draw = VariantDraw("kernel_lookup", variant)
    queries, keys = _workable_kernel_geometries()
    seed_steps = kernel_lookup_steps(kernel_lookup_example())

    def draw_once(d: VariantDraw) -> KernelLookupExample:
        pick, sigma = d.integer(0, len(queries) - 1), d.choice((0.5, 1.0, 2.0))
        return KernelLookupExample(Q=sigma * queries[pick][None, :], K=sigma * keys[pick],
                                   V=np.array(d.integers(0, 2, (3, 2)), dtype=float), sigma=sigma)

    def workable(ex: KernelLookupExample) -> bool:
        steps = kernel_lookup_steps(ex)
        return (len({tuple(v) for v in ex.V}) == 3 and apart_from_seed(steps["prediction"], ex.Q[0])
                and all(apart_from_seed(steps[name], seed_steps[name]) for name in seed_steps))

    return draw.until(draw_once, workable, "kernel lookup")
# ------------------------------------------------------------------ masks and position (problem sets 7 and 8)
#
# Variants for the chapters "Masks and cross-attention" and "Order and position": the causal mask
# on head 1 of 外送 晚到 補償, the translation "late delivery compensation" over 外送 晚到 補償,
# 中和 有 一個 永和路 and a reordering of it, and the sinusoidal encoding of one position.

LATE = 1  # 晚到's index among 外送 晚到 補償


def causal_delivery_example(variant: int = 0) -> SelfAttentionExample:
    """Head 1 of seed 000's delivery example, read left to right under a causal mask.

    Under :func:`qkv.causal_mask` 外送 attends only to itself, 晚到 to 外送 and itself, 補償
    to all three. Variant 0 is seed 000's tokens and head 1, whose masked row of 晚到 the
    masks chapter works by hand. Other variants are drawn like :func:`delivery_example`'s
    (the same form, and head 1's story: 補償 attends most to 晚到), and make that row
    workable: 晚到's two allowed scaled scores lie between -2 and 2 and differ by 0.5 to 2, so
    its two weights lie between 0.11 and 0.89; the row's exponentials and weights and the whole masked weight
    matrix differ from the seed's.
    """
    if variant != 0:
        return VariantDraw("causal_delivery", variant).until(
            _causal_candidate,
            lambda ex: ex is not None and _all_differ(_causal_steps(ex), _seed_causal_steps()),
            "causal delivery example")
    seed = delivery_example()
    return SelfAttentionExample(tokens=seed.tokens, X=seed.X, head=seed.heads[0])


def _causal_steps(ex: SelfAttentionExample) -> list[np.ndarray]:
    """What a student writes down, in plain numpy: the exponentials and the weights of 晚到's
    masked row, and the whole masked weight matrix."""
    head = ex.head
    Q, K = ex.X @ head.W_Q + head.b_Q, ex.X @ head.W_K + head.b_K
    S = Q @ K.T / np.sqrt(Q.shape[1])  # (n, n)
    allowed = np.tril(np.ones(S.shape, dtype=bool))  # j <= i
    exponentials = np.where(allowed, np.exp(S), 0.0)  # e^(-inf) = 0 for the blocked keys
    weights = exponentials / exponentials.sum(axis=1, keepdims=True)
    return [exponentials[LATE], weights[LATE], weights]


@functools.cache
def _seed_causal_steps() -> tuple[np.ndarray, ...]:
    return tuple(_causal_steps(causal_delivery_example()))


def _causal_candidate(draw: VariantDraw) -> SelfAttentionExample | None:
    X_all, column_pairs = _workable_tokens()
    pick = draw.integer(0, len(X_all) - 1)
    X, columns = X_all[pick].copy(), column_pairs[pick]
    q = X[:, list(columns)].sum(axis=1)  # each token's query length squared
    workable = _workable_keys(X, q, 0)  # head 1's story
    k, c = _key_choices()
    m = X @ k[workable].T + c[workable]  # (3, W): each token's key step m_j, for every workable choice
    allowed = q[LATE] * m[:2] * 0.5  # (2, W): 晚到's scaled scores for 外送 and itself, in halves
    difference = np.abs(allowed[1] - allowed[0])
    workable = workable[(difference >= 0.5) & (difference <= 2) & (np.abs(allowed).max(axis=0) <= 2)]
    if not len(workable):
        return None
    choice = workable[draw.integer(0, len(workable) - 1)]
    head = Head(W_Q=_pick_columns(columns),
                W_K=np.round(np.outer(k[choice], np.ones(2)) * ROOT_HALF, 6),  # (4, 2), multiples of 0.707107
                W_V=_pick_columns(draw.choice(_COLUMN_PAIRS)),
                b_Q=np.zeros(2), b_K=np.round(np.full(2, c[choice]) * ROOT_HALF, 6), b_V=np.zeros(2))
    return SelfAttentionExample(tokens=("外送", "晚到", "補償"), X=X, head=head)


# ------------------------------------------------------------------ translation: late delivery compensation

_COUNTERPARTS = (LATE, 0, 2)  # late -> 晚到, delivery -> 外送, compensation -> 補償


@functools.cache
def _translation_tables() -> tuple[np.ndarray, np.ndarray]:
    """Every Chinese side ``X_kv`` (3 x 4, 0s and 1s, three different non-zero rows) and every query
    row (4 whole numbers from -2 to 2, not all zero), in a fixed order."""
    bits = (np.arange(2**12)[:, None] >> np.arange(11, -1, -1)[None, :]) & 1  # (4096, 12)
    X_all = bits.reshape(-1, 3, 4).astype(float)
    rows = X_all @ (2.0 ** np.arange(4))  # (4096, 3): each row as a whole number
    usable = (rows > 0).all(axis=1) & (rows[:, 0] != rows[:, 1]) & (rows[:, 0] != rows[:, 2]) & (
        rows[:, 1] != rows[:, 2])
    queries = np.array(list(itertools.product(range(-2, 3), repeat=4)), dtype=float)  # (625, 4)
    return X_all[usable], queries[np.any(queries != 0, axis=1)]


def _translation_steps(ex: CrossAttentionExample) -> list[np.ndarray]:
    """The scaled scores, weights and output of "late delivery" (the first two words), in plain numpy."""
    Q = ex.X_q[:2] @ ex.head.W_Q  # (2, d_k)
    K, V = ex.X_kv @ ex.head.W_K, ex.X_kv @ ex.head.W_V  # (3, d_k), (3, d_v)
    S = Q @ K.T / np.sqrt(Q.shape[1])
    A = softmax(S, axis=-1)
    return [S, A, A @ V]


@functools.cache
def _seed_translation_steps() -> tuple[np.ndarray, ...]:
    return tuple(_translation_steps(delivery_translation_example()))


def _translation_candidate(draw: VariantDraw) -> CrossAttentionExample | None:
    X_all, queries = _translation_tables()
    X_kv = X_all[draw.integer(0, len(X_all) - 1)]
    weights = softmax(queries @ X_kv.T / 2, axis=-1)  # (625, 3): each query row's weights, sqrt(d_k) = 2
    clear = _margins(weights) >= 0.05
    moderate = (weights.min(axis=1) >= 0.03) & (weights.max(axis=1) <= 0.85)
    loose = (weights.min(axis=1) >= 0.02) & (weights.max(axis=1) <= 0.9)
    W_Q = np.zeros((4, 4))  # (d_model, d_k); the fourth row stays 0: no English word uses it
    pointing = queries @ X_kv.T > 0  # (625, 3): the query points towards that token (a positive score)
    for word, counterpart in enumerate(_COUNTERPARTS):
        ok = (clear & (np.argmax(weights, axis=1) == counterpart) & pointing[:, counterpart]
              & (moderate if word < 2 else loose))
        if not ok.any():
            return None
        W_Q[word] = queries[np.flatnonzero(ok)[draw.integer(0, int(ok.sum()) - 1)]]
    seed = delivery_translation_example()
    return CrossAttentionExample(query_tokens=seed.query_tokens, X_q=seed.X_q, key_tokens=seed.key_tokens,
                                 X_kv=X_kv.copy(), head=Head(W_Q=W_Q, W_K=np.eye(4), W_V=np.eye(4)))


def _translation_variant(variant: int) -> CrossAttentionExample:
    return VariantDraw("delivery_translation", variant).until(
        _translation_candidate,
        lambda ex: ex is not None and _all_differ(_translation_steps(ex), _seed_translation_steps()),
        "translation example")


# ------------------------------------------------------------------ 中和 有 一個 永和路, reordered


@functools.cache
def _workable_zhonghe_weights() -> tuple[tuple[float, ...], ...]:
    """Every diagonal ``w`` (whole numbers 1 to 3) of ``W_Q = W_K`` that tells seed 001's story, in a fixed order.

    The place names attend most to themselves, then to each other; 有 and 一個 most to
    themselves (each by 0.05 or more); no weight is below 0.02 or above 0.9.
    """
    X = zhonghe_vectors_example().X
    places, fillers = (0, 3), (1, 2)
    found = []
    for w in itertools.product((1.0, 2.0, 3.0), repeat=4):
        Z = X * np.array(w)  # X diag(w): the queries, and the keys
        weights = softmax(Z @ Z.T / 2, axis=-1)  # (4, 4), sqrt(d_k) = 2
        ordered = np.argsort(-weights, axis=1)
        story = (all(ordered[i, 0] == i and ordered[i, 1] == places[1 - places.index(i)] for i in places)
                 and all(ordered[i, 0] == i for i in fillers))
        if (story and (_margins(weights) >= 0.05).all() and weights.min() >= 0.02 and weights.max() <= 0.9
                and w != (2.0, 2.0, 2.0, 1.0)):
            found.append(w)
    return tuple(found)


def _zhonghe_vectors_variant(variant: int) -> SelfAttentionExample:
    seed = zhonghe_vectors_example()
    w = VariantDraw("zhonghe_vectors", variant).choice(_workable_zhonghe_weights())
    W_QK = np.diag(w)  # (d_model, d_k) = (4, 4)
    return SelfAttentionExample(tokens=seed.tokens, X=seed.X, head=Head(W_Q=W_QK, W_K=W_QK.copy(), W_V=np.eye(4)))


@dataclass(frozen=True)
class ReorderedExample:
    """A self-attention example and a reordering of its tokens: the reordered sentence has
    ``example.tokens[order[i]]`` at place ``i`` (``P = I[order]``, so its tokens are ``P X``)."""

    example: SelfAttentionExample
    order: np.ndarray


SEED_ORDER = (3, 1, 2, 0)  # the position chapter swaps the two place names


def zhonghe_reordered_example(variant: int = 0) -> ReorderedExample:
    """中和 有 一個 永和路 (:func:`zhonghe_vectors_example`) and a reordering of its tokens.

    Variant 0 is the position chapter's: the vectors of :func:`zhonghe_vectors_example` and
    the two place names swapped, ``order = (3, 1, 2, 0)``. Other variants take the vectors of
    the same variant of :func:`zhonghe_vectors_example` and another reordering than the seed's,
    chosen so that the reordered outputs ``P O`` differ from the seed's and from the outputs
    before reordering.
    """
    example = zhonghe_vectors_example(variant)
    if variant == 0:
        return ReorderedExample(example=example, order=np.array(SEED_ORDER))
    orders = _workable_orders(tuple(np.diag(example.head.W_Q)))
    return ReorderedExample(example=example, order=np.array(VariantDraw("zhonghe_order", variant).choice(orders)))


@functools.cache
def _workable_orders(w: tuple[float, ...]) -> tuple[tuple[int, ...], ...]:
    """The reorderings of 中和 有 一個 永和路, weighed by ``W_Q = W_K = diag(w)``, other than the seed's,
    whose ``P O`` differs from the seed's and from ``O``, in a fixed order."""
    W_QK = np.diag(w)
    O = _self_attention_output(zhonghe_vectors_example().X, Head(W_Q=W_QK, W_K=W_QK, W_V=np.eye(4)))
    seed_O = _self_attention_output(zhonghe_vectors_example().X, zhonghe_vectors_example().head)[list(SEED_ORDER)]
    return tuple(order for order in itertools.permutations(range(4)) if order != SEED_ORDER
                 and apart_from_seed(O[list(order)], seed_O) and apart_from_seed(O[list(order)], O))


def _self_attention_output(X: np.ndarray, head: Head) -> np.ndarray:
    """The output of one head on ``X`` (no biases), in plain numpy."""
    Q, K, V = X @ head.W_Q, X @ head.W_K, X @ head.W_V
    return softmax(Q @ K.T / np.sqrt(Q.shape[1]), axis=-1) @ V


# ------------------------------------------------------------------ the sinusoidal encoding of one position


@dataclass(frozen=True)
class PositionEncodingExample:
    """A width ``d_model``, one ``position`` whose encoding is worked by hand, and a ``pair`` of
    positions ``(p, q)`` whose encodings' dot product is worked from their offset ``q - p``."""

    d_model: int
    position: int
    pair: tuple[int, int]


def position_encoding_example(variant: int = 0) -> PositionEncodingExample:
    """The position chapter's by-hand encoding: position 1 with ``d_model = 4``, and positions 0 and 3.

    Other variants keep a width whose frequencies ``10000^(-2i/d_model)`` are powers of 10
    (``d_model`` 4: 1 and 0.01; 8: 1, 0.1, 0.01 and 0.001), so that every angle ``p w_i`` is
    worked with a pencil and only its sine and cosine need a calculator. The position is
    2 to 9; the pair is ``(p, p + k)`` with p from 0 to 9 and offset k from 1 to 6. The angles,
    the encoding and the dot product differ from the seed's.
    """
    if variant != 0:
        return VariantDraw("position_encoding", variant).choice(_workable_positions())
    return PositionEncodingExample(d_model=4, position=1, pair=(0, 3))


def _position_steps(ex: PositionEncodingExample) -> list[np.ndarray]:
    """The angles and the encoding of the position, and the dot product of the pair's encodings, in plain numpy."""
    omega = 10000.0 ** (-np.arange(0, ex.d_model, 2) / ex.d_model)  # (d_model/2,)
    angles = ex.position * omega
    encoding = np.ravel(np.column_stack([np.sin(angles), np.cos(angles)]))  # sin, cos, sin, cos, ...
    p, q = ex.pair
    return [angles, encoding, np.array(np.cos((q - p) * omega).sum())]


@functools.cache
def _workable_positions() -> tuple[PositionEncodingExample, ...]:
    seed_steps = _position_steps(position_encoding_example())
    found = []
    for d_model, position, p, k in itertools.product((4, 8), range(2, 10), range(10), range(1, 7)):
        ex = PositionEncodingExample(d_model=d_model, position=position, pair=(p, p + k))
        if _all_differ(_position_steps(ex), seed_steps):
            found.append(ex)
    return tuple(found)



# =========================================================================== the block around attention
#
# Problem set 9 (book/transformer_block.md) follows one token through a block: 補償's residual sum and
# its layer norm, in the delivery example.


@dataclass(frozen=True)
class BlockRowExample:
    """One token's row through the first half of a post-LN block.

    ``x`` ``(d_model,)`` is the token's vector and ``attended`` ``(d_model,)`` what multi-head
    attention adds to it; their residual sum is normalised by a layer norm with ``gamma``,
    ``beta`` ``(d_model,)`` and ``eps``.
    """

    token: str
    x: np.ndarray
    attended: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    eps: float


def delivery_block_row_example(variant: int = 0) -> BlockRowExample:
    """補償's residual sum and layer norm in the encoder block of :func:`delivery_encoder_layer`.

    Variant 0 is the chapter's: ``x = [1, 1, 0, 0]``, ``attended`` is seed 000's two heads'
    output for 補償 (``W_O = I``), and the layer norm starts as before training (``gamma = 1``,
    ``beta = 0``, ``eps = 1e-5``).

    Other variants keep the token, the shapes and the steps, with numbers a student can
    follow by hand: ``x`` of 0s and 1s, ``attended`` of whole numbers, so that the residual
    sum is 4 whole numbers with a whole mean and a whole standard deviation (1 to 5; mostly
    rows whose normalised entries are not all +-1); ``gamma`` in halves from 0.5 to 2 and
    ``beta`` in halves from -1 to 1, neither the identity. Every step (the sum, its mean and
    variance, the normalised row, the scaled and shifted row) differs from the chapter's by
    more than 0.01, and neither the sum nor the final row is one of the given rows.
    """
    if variant != 0:
        return _block_row_variant(variant)
    ex = delivery_example()
    attended, _ = _delivery_multi_head(ex)
    return BlockRowExample(token=ex.tokens[COMPENSATION], x=ex.X[COMPENSATION].copy(),
                           attended=attended[COMPENSATION], gamma=np.ones(4), beta=np.zeros(4), eps=1e-5)


def _delivery_multi_head(ex: MultiHeadExample) -> tuple[np.ndarray, np.ndarray]:
    from .multihead import multi_head_attention

    return multi_head_attention(ex.X, ex.heads, ex.W_O, ex.b_O)


def block_row_steps(example: BlockRowExample) -> list[np.ndarray]:
    """The residual sum, its mean and variance, the normalised row and gamma * it + beta, in plain numpy."""
    r = example.x + example.attended  # (d_model,)
    mean = r.mean()
    variance = ((r - mean) ** 2).mean()
    normalised = (r - mean) / np.sqrt(variance + example.eps)
    return [r, np.array(mean), np.array(variance), normalised, example.gamma * normalised + example.beta]


@functools.cache
def _workable_residual_rows() -> tuple[np.ndarray, np.ndarray]:
    """Rows of 4 whole numbers from -6 to 8 with a whole mean and a whole standard deviation from 1 to 5:
    ``(interesting, plain)``, the plain ones those whose normalised entries are all +-1."""
    values = np.arange(-6, 9)
    rows = np.array(list(itertools.product(values, repeat=4)), dtype=float)  # (50625, 4)
    total = rows.sum(axis=1)
    rows = rows[total % 4 == 0]
    deviations = rows - rows.mean(axis=1, keepdims=True)
    squares = (deviations ** 2).sum(axis=1)  # 4 * variance
    root = np.round(np.sqrt(squares / 4))
    whole = (root >= 1) & (root <= 5) & np.isclose(root ** 2 * 4, squares)
    rows, deviations, root = rows[whole], deviations[whole], root[whole]
    plain = np.all(np.isclose(np.abs(deviations), root[:, None]), axis=1)
    return rows[~plain], rows[plain]


def _block_row_candidate(draw: VariantDraw) -> BlockRowExample:
    interesting, plain = _workable_residual_rows()
    rows = draw.choice((interesting, interesting, interesting, plain))
    r = rows[draw.integer(0, len(rows) - 1)]
    x = np.array(draw.until(lambda d: d.integers(0, 1, (4,)), any, "token vector"), dtype=float)
    gamma = np.array([draw.halves(0.5, 2) for _ in range(4)])
    beta = np.array([draw.halves(-1, 1) for _ in range(4)])
    return BlockRowExample(token="補償", x=x, attended=r - x, gamma=gamma, beta=beta, eps=1e-5)


@functools.cache
def _seed_block_row_steps() -> tuple[np.ndarray, ...]:
    return tuple(block_row_steps(delivery_block_row_example()))


def _block_row_workable(example: BlockRowExample) -> bool:
    steps = block_row_steps(example)
    givens = (example.x, example.attended, example.gamma, example.beta)
    return (not np.all(example.gamma == 1) and not np.all(example.beta == 0)
            and _all_differ(steps, _seed_block_row_steps())
            and all(apart_from_seed(steps[i], given) for i in (0, 3, 4) for given in givens))


def _block_row_variant(variant: int) -> BlockRowExample:
    return VariantDraw("delivery_block_row", variant).until(_block_row_candidate, _block_row_workable,
                                                            "block row")


# =========================================================================== a head of a trained model
#
# Problem set 12 (book/trained_model.md) runs the first heads of one layer of all-MiniLM-L6-v2 from
# their matrices and reads one head's map from "compensation". Its numbers come from the excerpt of the
# model that ships with the course (qkv.models.load_minilm_excerpt): a student's install has no model
# package.

QUERY_WORD = "compensation"
HEAD_PATTERNS = ("previous token", "next token", "[CLS]")  # what a variant's head may be named after
PATTERN_SCORE = 0.5  # a head is named after a pattern when its score, over the excerpt's sentences, is this or more
ROW_MARGIN = 0.3  # and the query word's row puts this much more on the pattern's key than on any other


@dataclass(frozen=True, eq=False)
class TrainedHeadExample:
    """One head of a trained model's layer, on one sentence.

    ``X`` ``(n, d_model)`` is what layer ``layer`` (counting from 1) reads for ``sentence``, whose
    ``tokens`` it has one row each; ``attention`` holds the fused matrices of the layer's first
    ``num_heads`` heads (``W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O``, see
    :class:`qkv.models.TextModelExcerpt`); ``head`` (counting from 1) follows ``pattern`` (one of
    :data:`HEAD_PATTERNS`), and the row of ``query`` in its map puts the most weight on
    ``tokens[attended]``. ``sentence_index`` is the sentence's place in the excerpt.
    """

    model: str
    sentence: str
    sentence_index: int
    tokens: tuple[str, ...]
    layer: int
    head: int
    num_heads: int
    X: np.ndarray
    attention: dict
    query: str
    attended: int
    pattern: str


def compensation_head_example(variant: int = 0) -> TrainedHeadExample:
    """A head of all-MiniLM-L6-v2 that follows a clear pattern, and what "compensation" attends to in it.

    Variant 0 is the trained-model chapter's sentence, "The delivery was late, so I want
    compensation.", in layer 1, head 3: the previous-token head, so compensation attends to
    "want". Other variants draw a pattern (the previous token, or [CLS]; no head of the
    excerpt follows the next token from "compensation"), then a layer, head and
    sentence of the excerpt whose head is named after that pattern (its score over the
    excerpt's sentences is :data:`PATTERN_SCORE` or more) and whose row for "compensation"
    puts the most weight on the pattern's key, by :data:`ROW_MARGIN` or more, and on another
    word than "want".
    """
    candidates = _compensation_heads()
    if variant == 0:
        layer, head, sentence, pattern = 1, 3, 0, compensation_head_pattern(1, 3)
    else:
        draw = VariantDraw("compensation_head", variant)
        pattern = draw.choice(sorted(p for p, found in candidates.items() if found))
        layer, head, sentence = draw.choice(candidates[pattern])
    return _trained_head_example(layer, head, sentence, pattern)


def _trained_head_example(layer: int, head: int, sentence: int, pattern: str) -> TrainedHeadExample:
    from .models.excerpt import load_minilm_excerpt

    excerpt = load_minilm_excerpt()
    tokens = excerpt.tokens[sentence]
    weights = _excerpt_maps()[layer][sentence]  # (h, n, n)
    query = tokens.index(QUERY_WORD)
    return TrainedHeadExample(
        model=excerpt.name, sentence=excerpt.sentences[sentence], sentence_index=sentence, tokens=tokens,
        layer=layer, head=head, num_heads=excerpt.num_heads[layer], X=excerpt.inputs[layer][sentence],
        attention=dict(excerpt.attention[layer]), query=QUERY_WORD,
        attended=int(np.argmax(weights[head - 1, query])), pattern=pattern)


@functools.cache
def _excerpt_maps() -> dict[int, tuple[np.ndarray, ...]]:
    """The map ``(h, n, n)`` of every head the excerpt holds, by layer, on every sentence."""
    from .models.excerpt import load_minilm_excerpt
    from .multihead import fused_multi_head_attention

    excerpt = load_minilm_excerpt()
    maps = {}
    for layer in excerpt.layers:
        a = excerpt.attention[layer]
        maps[layer] = tuple(
            fused_multi_head_attention(X, a["W_Q"], a["W_K"], a["W_V"], a["W_O"], excerpt.num_heads[layer],
                                       a["b_Q"], a["b_K"], a["b_V"], a["b_O"])[1]
            for X in excerpt.inputs[layer])
    return maps


@functools.cache
def _named_heads() -> dict[tuple[int, int], str]:
    """``{(layer, head): pattern}`` for every head of the excerpt named after one of :data:`HEAD_PATTERNS`
    (heads counting from 1): its score over the excerpt's sentences is :data:`PATTERN_SCORE` or more."""
    from .models.analysis import head_pattern_scores
    from .models.excerpt import load_minilm_excerpt

    excerpt = load_minilm_excerpt()
    named = {}
    for layer in excerpt.layers:
        scores = [head_pattern_scores(w, tokens) for w, tokens in zip(_excerpt_maps()[layer], excerpt.tokens)]
        for pattern in HEAD_PATTERNS:
            average = np.nanmean([s[pattern] for s in scores], axis=0)  # (h,)
            for head in np.flatnonzero(average >= PATTERN_SCORE):
                named[(layer, int(head) + 1)] = pattern
    return named


def compensation_head_pattern(layer: int, head: int) -> str:
    """The pattern that head ``head`` (counting from 1) of layer ``layer`` of the model excerpt follows.

    Raises:
        ValueError: if the head follows none of :data:`HEAD_PATTERNS` clearly enough to be named.
    """
    try:
        return _named_heads()[(layer, head)]
    except KeyError:
        raise ValueError(f"head {head} of layer {layer} follows none of {', '.join(HEAD_PATTERNS)} "
                         f"(score {PATTERN_SCORE} or more)") from None


@functools.cache
def _compensation_heads() -> dict[str, tuple[tuple[int, int, int], ...]]:
    """For each pattern, every ``(layer, head, sentence)`` a variant may ask about (heads counting from 1)."""
    from .models.analysis import pattern_targets
    from .models.excerpt import load_minilm_excerpt

    excerpt = load_minilm_excerpt()
    seed = _seed_compensation_answer()
    found = {pattern: [] for pattern in HEAD_PATTERNS}
    for (layer, head), pattern in sorted(_named_heads().items()):
        for sentence, tokens in enumerate(excerpt.tokens):
            query = tokens.index(QUERY_WORD)
            row = _excerpt_maps()[layer][sentence][head - 1, query]  # (n,)
            target = np.flatnonzero(pattern_targets(tokens)[pattern][query])
            top = int(np.argmax(row))
            if (len(target) == 1 and top == target[0] and _margins(row) >= ROW_MARGIN
                    and tokens[top] != seed and (layer, head, sentence) != (1, 3, 0)):
                found[pattern].append((layer, head, sentence))
    return {pattern: tuple(candidates) for pattern, candidates in found.items()}


def _seed_compensation_answer() -> str:
    """The word compensation attends to most in variant 0 (layer 1, head 3, the chapter's sentence)."""
    from .models.excerpt import load_minilm_excerpt

    tokens = load_minilm_excerpt().tokens[0]
    row = _excerpt_maps()[1][0][2, tokens.index(QUERY_WORD)]
    return tokens[int(np.argmax(row))]
