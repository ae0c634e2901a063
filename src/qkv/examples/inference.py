"""The course's own numbers for attention at inference: a model's key-value cache and a sliding window.

No seed prints these: the decoding chapter counts the cache of a published model
(:data:`qkv.PUBLISHED_SHAPES`), and the long-context chapter asks which entries a token keeps
under a causal sliding window. The problem sets' other numbers for the same questions are drawn
by :mod:`qkv_exercises.variants.inference`, never here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..decoding import PUBLISHED_SHAPES, ModelShape


@dataclass(frozen=True)
class KVCacheExample:
    """A model's shape (layers, query heads, key/value heads, ``d_k``), a context of ``n`` tokens
    and the numbers' type, ``dtype`` (``"float16"`` or ``"float32"``)."""

    shape: ModelShape
    n: int
    dtype: str


def kv_cache_example() -> KVCacheExample:
    """Llama 2 70B (80 layers, 64 query heads over 8 key/value heads of width 128) at 4,096 tokens
    in 16-bit numbers: the decoding chapter's cache of 1.25 GiB, 8 times smaller than with one
    key/value head per query head."""
    return KVCacheExample(shape=PUBLISHED_SHAPES["Llama 2 70B"], n=4096, dtype="float16")


@dataclass(frozen=True)
class SlidingWindowExample:
    """``n`` tokens under a causal sliding window of ``window``, and the ``token`` (counting from 0)
    whose cache entries are asked for."""

    n: int
    window: int
    token: int


def sliding_window_example() -> SlidingWindowExample:
    """Six tokens, a window of 3, the sixth token (index 5): it keeps the cache entries 3, 4 and 5,
    the long-context chapter's example."""
    return SlidingWindowExample(n=6, window=3, token=5)
