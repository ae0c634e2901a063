"""The seed articles' worked examples, as data with their tokens, one module per story.

Each function returns a fresh copy, so changing an example in a notebook never
changes it for the next cell that asks. The numbers are the ones the articles
print, digit for digit (for instance ``0.707107`` rather than ``1/sqrt(2)``), so
that what the course computes can be compared with the articles' tables. These are
the numbers the book shows; the problem sets give every student other numbers for
the same stories, drawn by :mod:`qkv_exercises.variants` (nothing here draws them).

Seed 000, "外送 晚到 補償" (:mod:`qkv.examples.delivery`):

- :func:`delivery_example`: the seed's two heads, d_model = 4.
- :func:`delivery_batch_example`: its token vectors in three sentences, padded.
- :func:`delivery_translation_example`: English words whose queries read 外送 晚到 補償.
- :func:`delivery_encoder_layer`: its heads inside a whole encoder block.
- :func:`causal_delivery_example`: head 1 under a causal mask.
- :func:`delivery_block_row_example`: 補償's residual sum and layer norm in that block.
- :func:`grouped_delivery_example`: its two heads' keys and values shared by four query heads.

Seed 001, "中和 有 一個 永和路" (:mod:`qkv.examples.zhonghe`):

- :func:`zhonghe_example`: the seed's attention matrix.
- :func:`zhonghe_vectors_example`: token vectors and one head that tell its story.
- :func:`zhonghe_reordered_example`: the same tokens, the two place names swapped.
- :func:`zhonghe_alibi_example`: 永和路's scores, to be biased by ALiBi.

Seed 002, the ViT guide (:mod:`qkv.examples.vit_guide`):

- :func:`q1_example`: one query ``q1 = [1, 0]`` over three keys, d_k = 2.
- :func:`softmax_saturation_example`: softmax of [2, 1, 0] against [20, 10, 0], d_k = 100.
- :func:`online_softmax_example`: [2, 1, 0] read block by block.
- :func:`attention_memory_example`: what ViT-Base's 197 tokens' weights cost in bytes.
- :func:`kernel_lookup_example`: q1's keys weighed by a Gaussian kernel.

The rest, examples of the course's own where a chapter needs numbers that no seed prints
(their docstrings say so):

- :func:`position_encoding_example` (:mod:`qkv.examples.position_encoding`): a width, a
  position and a pair of positions to encode.
- :func:`compensation_head_example` (:mod:`qkv.examples.trained_model`): a head of
  all-MiniLM-L6-v2 and what "compensation" attends to in it.
- :func:`kv_cache_example` and :func:`sliding_window_example` (:mod:`qkv.examples.inference`):
  a published model's key-value cache, and the entries a sliding window keeps.

A new story is a new module here, and its names one line each below.
"""

from __future__ import annotations

from .delivery import (
    ROOT_HALF,
    BlockRowExample,
    CrossAttentionExample,
    GroupedHeadsExample,
    MultiHeadExample,
    PaddedBatchExample,
    causal_delivery_example,
    delivery_batch_example,
    delivery_block_row_example,
    delivery_encoder_layer,
    delivery_example,
    delivery_translation_example,
    grouped_delivery_example,
)
from .forms import SelfAttentionExample
from .inference import KVCacheExample, SlidingWindowExample, kv_cache_example, sliding_window_example
from .position_encoding import PositionEncodingExample, position_encoding_example
from .trained_model import (
    HEAD_PATTERNS,
    PATTERN_SCORE,
    QUERY_WORD,
    TrainedHeadExample,
    compensation_head_example,
    compensation_head_pattern,
    excerpt_maps,
    named_heads,
    trained_head_example,
)
from .vit_guide import (
    BYTES_PER_NUMBER,
    AttentionMemoryExample,
    KernelLookupExample,
    OnlineSoftmaxExample,
    QueryExample,
    SoftmaxSaturationExample,
    attention_memory_example,
    kernel_lookup_example,
    online_softmax_example,
    q1_example,
    softmax_saturation_example,
)
from .zhonghe import (
    SEED_ORDER,
    AttentionMatrixExample,
    BiasedRowExample,
    ReorderedExample,
    zhonghe_alibi_example,
    zhonghe_example,
    zhonghe_reordered_example,
    zhonghe_vectors_example,
)

__all__ = [
    # seed 000: 外送 晚到 補償
    "delivery_example",
    "MultiHeadExample",
    "ROOT_HALF",
    "delivery_batch_example",
    "PaddedBatchExample",
    "delivery_translation_example",
    "CrossAttentionExample",
    "delivery_encoder_layer",
    "causal_delivery_example",
    "SelfAttentionExample",
    "delivery_block_row_example",
    "BlockRowExample",
    "grouped_delivery_example",
    "GroupedHeadsExample",
    # seed 001: 中和 有 一個 永和路
    "zhonghe_example",
    "AttentionMatrixExample",
    "zhonghe_vectors_example",
    "zhonghe_reordered_example",
    "ReorderedExample",
    "SEED_ORDER",
    "zhonghe_alibi_example",
    "BiasedRowExample",
    # seed 002: the ViT guide
    "q1_example",
    "QueryExample",
    "softmax_saturation_example",
    "SoftmaxSaturationExample",
    "online_softmax_example",
    "OnlineSoftmaxExample",
    "attention_memory_example",
    "AttentionMemoryExample",
    "BYTES_PER_NUMBER",
    "kernel_lookup_example",
    "KernelLookupExample",
    # the course's own: position, a trained model's head
    "position_encoding_example",
    "PositionEncodingExample",
    "compensation_head_example",
    "trained_head_example",
    "TrainedHeadExample",
    "compensation_head_pattern",
    "named_heads",
    "excerpt_maps",
    "QUERY_WORD",
    "HEAD_PATTERNS",
    "PATTERN_SCORE",
    # the course's own: attention at inference
    "kv_cache_example",
    "KVCacheExample",
    "sliding_window_example",
    "SlidingWindowExample",
]
