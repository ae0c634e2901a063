"""Every student's own numbers for the book's worked examples: the variants, one module per story.

A problem set gives each student a variant (a whole number, from their id:
:mod:`qkv_exercises.identity`) and asks for the same steps as the book, on numbers of their
own. Variant 0 is always the book's: the seed's example from :mod:`qkv.examples`. Any other
variant keeps the story, tokens, shapes and steps, with small numbers that are as workable
by hand as the seed's and whose answers are never the seed's, drawn from a stream that
depends on nothing but the example's name and the variant (:class:`VariantDraw`).

- :mod:`qkv_exercises.variants.draw`: the stream (:class:`VariantDraw`) and the tests every
  draw shares (:func:`apart_from_seed`).
- :mod:`qkv_exercises.variants.delivery`: seed 000, 外送 晚到 補償.
- :mod:`qkv_exercises.variants.zhonghe`: seed 001, 中和 有 一個 永和路.
- :mod:`qkv_exercises.variants.vit_guide`: seed 002, the ViT guide.
- :mod:`qkv_exercises.variants.position_encoding`: the position chapter's encoding.
- :mod:`qkv_exercises.variants.trained_model`: a head of the trained model.
- :mod:`qkv_exercises.variants.inference`: a model's key-value cache, a sliding window.

Each function is named as the example it varies: ``delivery_example(variant)`` here is variant
``variant`` of :func:`qkv.examples.delivery_example`. Called by the problem sets'
``givens(variant)``; never by the book, and nothing in :mod:`qkv` imports this package. A new
story is a new module here and one import line below.
"""

from __future__ import annotations

from .delivery import (
    causal_delivery_example,
    delivery_block_row_example,
    delivery_example,
    delivery_translation_example,
    grouped_delivery_example,
)
from .draw import APART_FROM_SEED, VariantDraw, apart_from_seed
from .inference import kv_cache_example, sliding_window_example
from .position_encoding import position_encoding_example
from .trained_model import compensation_head_example
from .vit_guide import (
    attention_memory_example,
    kernel_lookup_example,
    online_softmax_example,
    q1_example,
    softmax_saturation_example,
)
from .zhonghe import zhonghe_alibi_example, zhonghe_reordered_example, zhonghe_vectors_example

__all__ = [
    "VariantDraw",
    "apart_from_seed",
    "APART_FROM_SEED",
    "delivery_example",
    "causal_delivery_example",
    "delivery_translation_example",
    "delivery_block_row_example",
    "grouped_delivery_example",
    "zhonghe_vectors_example",
    "zhonghe_reordered_example",
    "zhonghe_alibi_example",
    "q1_example",
    "softmax_saturation_example",
    "online_softmax_example",
    "attention_memory_example",
    "kernel_lookup_example",
    "position_encoding_example",
    "compensation_head_example",
    "kv_cache_example",
    "sliding_window_example",
]
