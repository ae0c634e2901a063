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
