"""Seed 002's story, the ViT guide: one query ``q1 = [1, 0]`` over three keys, and the softmax
of [2, 1, 0] against [20, 10, 0].

The seed's numbers (:func:`q1_example`, :func:`softmax_saturation_example`) and the
course's examples that reuse them: the same scores read block by block by the online
softmax (:func:`online_softmax_example`), ViT-Base's 197 tokens counted in bytes
(:func:`attention_memory_example`), and the same query and keys weighed by a Gaussian
kernel (:func:`kernel_lookup_example`).

Chapters and tests reach these through :mod:`qkv.examples`; the problem sets' other numbers
for the same story are drawn by :mod:`qkv_exercises.variants.vit_guide`, never here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BYTES_PER_NUMBER = {"float16": 2, "float32": 4, "float64": 8}


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
class OnlineSoftmaxExample:
    """A row of scores read in two blocks: ``scores[:split]``, then ``scores[split:]``."""

    scores: np.ndarray
    split: int

    @property
    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        return self.scores[: self.split].copy(), self.scores[self.split:].copy()

    @property
    def reversed_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """The same scores in the other order, cut after as many, so that the largest score comes last."""
        backwards = self.scores[::-1]
        return backwards[: self.split].copy(), backwards[self.split:].copy()


def online_softmax_example() -> OnlineSoftmaxExample:
    """Seed 002's scores [2, 1, 0], read by the online softmax in the blocks [2, 1] and [0]; read
    backwards, [0, 1] and [2], the largest score arrives in the second block and the running sum
    is rescaled."""
    return OnlineSoftmaxExample(scores=softmax_saturation_example().moderate, split=2)


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


def attention_memory_example() -> AttentionMemoryExample:
    """The chapter's counts: ViT-Base's n = 197 tokens (196 patches and a class token) and 12
    heads, weights stored as float32; a long context of 32,768 tokens with 32 heads in 16-bit
    numbers (64 GiB of weights per layer); n doubled."""
    return AttentionMemoryExample(197, 12, "float32", 32_768, 32, "float16", 2)


@dataclass(frozen=True)
class KernelLookupExample:
    """One query ``Q`` ``(1, d)`` over keys ``K`` ``(n_k, d)`` with values ``V`` ``(n_k, d_v)``, and the
    width ``sigma`` of a Gaussian kernel."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    sigma: float


def kernel_lookup_example() -> KernelLookupExample:
    """Seed 002's query q1 = [1, 0] over k1 = [1, 0], k2 = [0, 1], k3 = [1, 1] with values v1, v2, v3,
    weighted by a Gaussian kernel of width sigma = 1: the exponents are 0, -1 and -0.5."""
    seed = q1_example()
    return KernelLookupExample(Q=seed.Q, K=seed.K, V=seed.V, sigma=1.0)
