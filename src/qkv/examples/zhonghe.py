"""Seed 001's story: "中和有一個永和路" cut into 中和 / 有 / 一個 / 永和路.

The two place names attend to each other, the filler words to themselves. The seed gives
the attention matrix (:func:`zhonghe_example`); the course adds token vectors and a head
that reproduce its story (:func:`zhonghe_vectors_example`), and a reordering of the tokens
for the position chapter (:func:`zhonghe_reordered_example`).

Chapters and tests reach these through :mod:`qkv.examples`; the problem sets' other numbers
for the same story are drawn by :mod:`qkv_exercises.variants.zhonghe`, never here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..multihead import Head
from .forms import SelfAttentionExample

SEED_ORDER = (3, 1, 2, 0)  # the position chapter swaps the two place names


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


@dataclass(frozen=True)
class ReorderedExample:
    """A self-attention example and a reordering of its tokens: the reordered sentence has
    ``example.tokens[order[i]]`` at place ``i`` (``P = I[order]``, so its tokens are ``P X``)."""

    example: SelfAttentionExample
    order: np.ndarray


def zhonghe_reordered_example() -> ReorderedExample:
    """中和 有 一個 永和路 (:func:`zhonghe_vectors_example`) and a reordering of its tokens.

    The position chapter's: the vectors of :func:`zhonghe_vectors_example` and the two place
    names swapped, ``order = (3, 1, 2, 0)``.
    """
    return ReorderedExample(example=zhonghe_vectors_example(), order=np.array(SEED_ORDER))


@dataclass(frozen=True)
class BiasedRowExample:
    """The last token's scaled scores ``(n,)`` over ``tokens``, and ALiBi's head ``head`` (counting
    from 1, as the paper does) of a model with ``h`` heads, whose bias is added to them."""

    tokens: tuple[str, ...]
    scores: np.ndarray
    h: int
    head: int


def zhonghe_alibi_example() -> BiasedRowExample:
    """永和路's scaled scores over 中和 有 一個 永和路 (:func:`zhonghe_vectors_example`'s head,
    read as a decoder: [1.5, 0, 0, 2.5]) with ALiBi's first head of 8, slope 1/2: the
    long-context chapter's row by hand."""
    ex = zhonghe_vectors_example()
    W_Q, W_K, _, b_Q, b_K, _ = ex.head
    Q = ex.X @ W_Q + (0.0 if b_Q is None else b_Q)  # (n, d_k)
    K = ex.X @ W_K + (0.0 if b_K is None else b_K)  # (n, d_k)
    return BiasedRowExample(tokens=ex.tokens, scores=(Q @ K.T)[-1] / np.sqrt(Q.shape[1]), h=8, head=1)
