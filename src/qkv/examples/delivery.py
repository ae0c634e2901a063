"""Seed 000's story: a customer writes "外送 晚到 補償" (delivery, late, compensation).

Two heads read the three tokens: in head 1, 補償 attends most to 晚到 (the cause); in
head 2, most to 外送 (the policy topic). The chapters compute with these numbers as the
seed prints them (see :mod:`qkv.examples`), and so do the course's own examples built on
the same tokens: a padded batch, a translation that reads them, a whole encoder block, a
causal mask on head 1 and one token's row through the block.

Chapters and tests reach these through :mod:`qkv.examples`; the problem sets' other numbers
for the same story are drawn by :mod:`qkv_exercises.variants.delivery`, never here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..block import EncoderLayer, FeedForward, LayerNorm, MultiHead
from ..multihead import Head, multi_head_attention
from .forms import SelfAttentionExample

ROOT_HALF = 0.707107  # 1/sqrt(2) as seed 000 prints it
CAUSE, TOPIC, COMPENSATION = 0, 1, 2  # 外送 is token 0, 晚到 token 1, 補償 token 2
LATE = 1  # 晚到's index among 外送 晚到 補償


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


def delivery_example() -> MultiHeadExample:
    """Seed 000: the customer writes "外送 晚到 補償" (delivery, late, compensation).

    Head 1 is built so that 補償 attends most to 晚到 (the cause); head 2 so that
    補償 attends most to 外送 (the policy topic). ``W_O`` is the identity.
    """
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


def causal_delivery_example() -> SelfAttentionExample:
    """Head 1 of seed 000's delivery example, read left to right under a causal mask.

    Under :func:`qkv.causal_mask` 外送 attends only to itself, 晚到 to 外送 and itself, 補償
    to all three. These are seed 000's tokens and head 1, whose masked row of 晚到 the masks
    chapter works by hand.
    """
    seed = delivery_example()
    return SelfAttentionExample(tokens=seed.tokens, X=seed.X, head=seed.heads[0])


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


def delivery_block_row_example() -> BlockRowExample:
    """補償's residual sum and layer norm in the encoder block of :func:`delivery_encoder_layer`.

    ``x = [1, 1, 0, 0]``, ``attended`` is seed 000's two heads' output for 補償 (``W_O = I``),
    and the layer norm starts as before training (``gamma = 1``, ``beta = 0``, ``eps = 1e-5``):
    the transformer-block chapter's row.
    """
    ex = delivery_example()
    attended, _ = multi_head_attention(ex.X, ex.heads, ex.W_O, ex.b_O)
    return BlockRowExample(token=ex.tokens[COMPENSATION], x=ex.X[COMPENSATION].copy(),
                           attended=attended[COMPENSATION], gamma=np.ones(4), beta=np.zeros(4), eps=1e-5)


@dataclass(frozen=True)
class GroupedHeadsExample:
    """補償's query in ``h`` query heads over ``g`` key/value heads of 外送 晚到 補償.

    ``Q`` ``(h, d_k)``: 補償's query in each query head; ``K`` ``(g, n, d_k)`` and ``V``
    ``(g, n, d_v)``: the keys and values of the three tokens in each key/value head;
    ``query_head``: the query head the decoding chapter reads (counting from 0).
    """

    tokens: tuple[str, ...]
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    query_head: int


def grouped_delivery_example() -> GroupedHeadsExample:
    """Seed 000's two heads as ``g = 2`` key/value heads, read by ``h = 4`` query heads.

    Query heads 0 and 2 ask 補償's question ``q = [1, 1]`` (seed 000's two heads share
    ``W_Q``), heads 1 and 3 the turned question ``-q``. Query head ``i`` reads key/value
    head ``i // 2``: the decoding chapter's grouped-query example, which reads query head 1
    (``-q`` over head 1's keys: 補償 attends most to 外送).
    """
    ex = delivery_example()
    q = ex.X[COMPENSATION] @ ex.heads[0].W_Q + ex.heads[0].b_Q  # (d_k,) = [1, 1]
    K = np.stack([ex.X @ head.W_K + head.b_K for head in ex.heads])  # (g, n, d_k) = (2, 3, 2)
    V = np.stack([ex.X @ head.W_V + head.b_V for head in ex.heads])  # (2, 3, 2)
    return GroupedHeadsExample(tokens=ex.tokens, Q=np.stack([q, -q, q, -q]), K=K, V=V, query_head=1)
