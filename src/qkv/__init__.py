"""qkv: the course's one reference implementation of attention, in numpy.

Shapes are written ``(..., n, d_model)``, ``(h, n, d_k)`` and so on; the book's
notation page explains every symbol. :mod:`qkv.examples` holds the seed articles'
worked examples, one module per story. The course's machinery lives beside it and
uses it: :mod:`qkv_book` (the website's display, plots and widgets),
:mod:`qkv_exercises` (every student's own numbers, checking answers) and
:mod:`qkv_grading` (the instructors' commands). Nothing in ``qkv`` imports them.
"""

from . import examples, extrapolation, models
from .attention import causal_mask, linear, scaled_dot_product_attention, self_attention, softmax
from .multihead import Head, fuse_heads, fused_multi_head_attention, merge_heads, multi_head_attention, split_heads
from .trace import HeadTrace, MultiHeadTrace, Projection, project, trace_head, trace_multi_head
from .vision import patchify, to_patch_grid
from .attention import cross_attention
from .masks import padding_mask
from .position import add_positions, position_angles, rotary_embedding, sinusoidal_position_encoding
from .vision import colour_head, colour_tokens
from .block import DecoderLayer, DecoderWeights, EncoderLayer, FeedForward, LayerNorm, MultiHead
from .block import decoder_block, encoder_block, feed_forward, gelu, layer_norm, multi_head_cross_attention, relu
from .blockwise import OnlineSoftmaxStep, blockwise_attention, online_softmax, online_softmax_update
from .lookup import additive_attention, gaussian_as_dot_product, gaussian_kernel_weights, hard_lookup
from .lookup import nadaraya_watson, squared_distances
from .initialisation import lecun_normal
from .decoding import KVCache, ModelShape, PUBLISHED_SHAPES, decode_step, decode_with_cache
from .decoding import decode_without_cache, kv_cache_bytes
from .grouped import grouped_query_attention, grouped_query_self_attention, kv_head_of
from .relative_position import alibi_bias, alibi_slopes, attention_with_bias, relative_position_bucket
from .relative_position import rope_decay_bound, t5_position_bias
from .patterns import global_tokens_mask, path_length, sliding_window_mask, strided_mask
from .linearised import elu_feature_map, kernel_attention, linear_attention, positive_random_features
from .backward import attention_backward, central_differences, linear_backward, multi_head_attention_backward
from .backward import softmax_backward
from .training import Adam, cross_entropy, cross_entropy_backward

__all__ = [
    "softmax",
    "linear",
    "scaled_dot_product_attention",
    "self_attention",
    "causal_mask",
    "Head",
    "multi_head_attention",
    "split_heads",
    "merge_heads",
    "fuse_heads",
    "fused_multi_head_attention",
    "Projection",
    "project",
    "HeadTrace",
    "trace_head",
    "MultiHeadTrace",
    "trace_multi_head",
    "patchify",
    "to_patch_grid",
    "examples",
    "extrapolation",
    "cross_attention",
    "padding_mask",
    "position_angles",
    "sinusoidal_position_encoding",
    "add_positions",
    "rotary_embedding",
    "colour_tokens",
    "colour_head",
    "layer_norm",
    "relu",
    "gelu",
    "feed_forward",
    "multi_head_cross_attention",
    "LayerNorm",
    "FeedForward",
    "MultiHead",
    "EncoderLayer",
    "DecoderLayer",
    "DecoderWeights",
    "encoder_block",
    "decoder_block",
    "online_softmax_update",
    "OnlineSoftmaxStep",
    "online_softmax",
    "blockwise_attention",
    "hard_lookup",
    "squared_distances",
    "gaussian_kernel_weights",
    "nadaraya_watson",
    "gaussian_as_dot_product",
    "additive_attention",
    "models",
    "lecun_normal",
    "KVCache",
    "decode_step",
    "decode_with_cache",
    "decode_without_cache",
    "kv_cache_bytes",
    "ModelShape",
    "PUBLISHED_SHAPES",
    "kv_head_of",
    "grouped_query_attention",
    "grouped_query_self_attention",
    "alibi_slopes",
    "alibi_bias",
    "attention_with_bias",
    "relative_position_bucket",
    "t5_position_bias",
    "rope_decay_bound",
    "sliding_window_mask",
    "strided_mask",
    "global_tokens_mask",
    "path_length",
    "elu_feature_map",
    "positive_random_features",
    "kernel_attention",
    "linear_attention",
    "softmax_backward",
    "attention_backward",
    "linear_backward",
    "multi_head_attention_backward",
    "central_differences",
    "cross_entropy",
    "cross_entropy_backward",
    "Adam",
]
