"""qkv: the course's one reference implementation of attention, in numpy.

Shapes are written ``(..., n, d_model)``, ``(h, n, d_k)`` and so on; the book's
notation page explains every symbol. The course's machinery lives beside it and
uses it: :mod:`qkv_book` (the website's display, plots and widgets),
:mod:`qkv_exercises` (checking answers) and :mod:`qkv_grading` (the instructors'
commands). Nothing in ``qkv`` imports them.
"""

from . import examples
from .attention import causal_mask, linear, scaled_dot_product_attention, self_attention, softmax
from .multihead import Head, fuse_heads, fused_multi_head_attention, merge_heads, multi_head_attention, split_heads
from .trace import HeadTrace, MultiHeadTrace, Projection, project, trace_head, trace_multi_head
from .vision import patchify, to_patch_grid
from .initialisation import lecun_normal

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
    "lecun_normal",
]
