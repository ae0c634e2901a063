"""Other numbers for the course's examples of attention at inference: a cache to count, a window to read.

``kv_cache_example(variant)`` and ``sliding_window_example(variant)`` return
:mod:`qkv.examples.inference`'s example for variant 0 (the book's numbers) and, for any other whole
number, another model shape or another window. The problem sets call them with the student's
variant; the book never does. Changing anything here changes students' numbers: tests pin a few
variants.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from qkv import examples, kv_cache_bytes
from qkv.decoding import ModelShape
from qkv.examples import KVCacheExample, SlidingWindowExample

from .draw import VariantDraw, apart_from_seed

BYTES = {"float16": 2, "float32": 4}


def cache_gib(ex: KVCacheExample) -> float:
    """The GiB (2^30 bytes) of ``ex``'s key-value cache for one sequence of ``ex.n`` tokens."""
    shape = ex.shape
    return kv_cache_bytes(shape.layers, shape.kv_heads, shape.d_k, ex.n, BYTES[ex.dtype]) / 2**30


def kv_cache_example(variant: int) -> KVCacheExample:
    """Variant ``variant`` of :func:`qkv.examples.kv_cache_example`: a model's shape and a context.

    Other variants: 16 to 96 layers, 16 to 96 query heads over 1, 2, 4 or 8 key/value heads (never
    8 times fewer, the seed's saving), ``d_k`` 64 or 128, 2,048 to 32,768 tokens, in float16 or
    float32; the cache takes 0.05 to 512 GiB, and not the seed's 1.25 GiB.
    """
    if variant == 0:
        return examples.kv_cache_example()
    return VariantDraw("kv_cache", variant).choice(_workable_caches())


@functools.cache
def _workable_caches() -> tuple[KVCacheExample, ...]:
    seed_gib = cache_gib(examples.kv_cache_example())
    found = []
    for layers, heads, kv_heads, d_k, n, dtype in itertools.product(
            (16, 24, 32, 40, 48, 60, 80, 96), (16, 32, 48, 64, 96), (1, 2, 4, 8), (64, 128),
            (2048, 4096, 8192, 16384, 32768), tuple(BYTES)):
        if heads % kv_heads or heads // kv_heads == 8:
            continue
        shape = ModelShape("a model of the problem set's own", layers, heads, kv_heads, d_k, n,
                           source="drawn for one student")
        ex = KVCacheExample(shape=shape, n=n, dtype=dtype)
        if 0.05 <= cache_gib(ex) <= 512 and apart_from_seed(cache_gib(ex), seed_gib):
            found.append(ex)
    return tuple(found)


def window_entries(ex: SlidingWindowExample) -> tuple[np.ndarray, int]:
    """The cache entries ``ex.token`` keeps under the causal window, and the pairs the window keeps."""
    kept = np.arange(max(0, ex.token - ex.window + 1), ex.token + 1)
    return kept, sum(min(i + 1, ex.window) for i in range(ex.n))


def sliding_window_example(variant: int) -> SlidingWindowExample:
    """Variant ``variant`` of :func:`qkv.examples.sliding_window_example`: a window and a token.

    Other variants: 7 to 16 tokens, a window of 2 to 6, and a token at least a window from the start
    (so that its window is full: a window one too wide, or the first entries kept instead of the
    last, would show); the entries kept and the number of pairs differ from the seed's.
    """
    if variant == 0:
        return examples.sliding_window_example()
    seed_kept, seed_pairs = window_entries(examples.sliding_window_example())

    def draw_once(draw: VariantDraw) -> SlidingWindowExample:
        n, window = draw.integer(7, 16), draw.integer(2, 6)
        return SlidingWindowExample(n=n, window=window, token=draw.integer(window, n - 1))

    def workable(ex: SlidingWindowExample) -> bool:
        kept, pairs = window_entries(ex)
        return apart_from_seed(kept, seed_kept) and pairs != seed_pairs

    return VariantDraw("sliding_window", variant).until(draw_once, workable, "sliding window")
