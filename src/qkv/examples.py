"""The seed articles' worked examples, as data with their tokens.

Each function returns a fresh copy, so changing an example in a notebook never
changes it for the next cell that asks. The numbers are the ones the articles
print, digit for digit (for instance ``0.707107`` rather than ``1/sqrt(2)``), so
that what the course computes can be compared with the articles' tables.

- :func:`delivery_example`: seed 000, "外送 晚到 補償", two heads, d_model = 4.
- :func:`q1_example`: seed 002, one query ``q1 = [1, 0]`` over three keys, d_k = 2.
- :func:`softmax_saturation_example`: seed 002, softmax of [2, 1, 0] against [20, 10, 0].
- :func:`zhonghe_example`: seed 001, the attention matrix of "中和 有 一個 永和路".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .multihead import Head


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
class QueryExample:
    """Queries ``Q`` ``(n_q, d_k)``, keys ``K`` ``(n_k, d_k)`` and values ``V`` ``(n_k, d_v)``."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray


def q1_example() -> QueryExample:
    """Seed 002: token 1's query ``q1 = [1, 0]`` against keys k1 = [1, 0], k2 = [0, 1],
    k3 = [1, 1] and values v1 = [1, 0], v2 = [0, 1], v3 = [1, 1] (d_k = 2)."""
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
