"""A trained model's layer run from its fused matrices: the slips problem set 12 recognises.

:func:`layer_attention_with_slip` runs the layer's heads with one slip made (sqrt(d_model), or
d_model / num_heads when only some of the layer's heads are given, for d_k; heads split without
the transpose, ...) for the student's ``layer_attention``; a head counted from 0 is named by the
problem set's reading of the map. On a layer whose heads are all given, sqrt(d_model) and
sqrt(num_heads * d_k) are one number (sqrt(d_model) is named), and d_model / num_heads is d_k.
"""

from __future__ import annotations

import numpy as np

from qkv.attention import linear, softmax
from qkv.multihead import merge_heads, split_heads

from ..slips import (
    BIAS_DROPPED,
    MERGED_WITHOUT_TRANSPOSE,
    NO_SQRT_DK,
    RESHAPED_WITHOUT_TRANSPOSE,
    SOFTMAX_OVER_COLUMNS,
    W_O_TRANSPOSED,
    Slip,
    merge_heads_with_slip,
    split_heads_with_slip,
)


HEAD_COUNTED_FROM_0 = Slip(
    "head_counted_from_0",
    "heads are numbered from 1 in the question and Python counts from 0: head k is weights[k - 1].",
)

DIVIDED_BY_SQRT_OF_EVERY_HEAD = Slip(
    "divided_by_sqrt_of_every_head",
    "divide the scores by sqrt(d_k), the width of ONE head: the columns of W_Q divided by num_heads "
    "(Q.shape[-1] of one head's Q). You divided by the square root of every given head's width together, "
    "num_heads * d_k.",
)

DIVIDED_BY_SQRT_D_MODEL = Slip(
    "divided_by_sqrt_d_model",
    "divide the scores by sqrt(d_k), the width of ONE head: the columns of W_Q divided by num_heads "
    "(Q.shape[-1] of one head's Q). You divided by sqrt(d_model), the width of X.",
)

D_K_FROM_D_MODEL = Slip(
    "d_k_from_d_model",
    "divide the scores by sqrt(d_k), the width of ONE head: the columns of W_Q divided by num_heads "
    "(Q.shape[-1] of one head's Q). d_model / num_heads is d_k only when every head of the layer is "
    "given; here num_heads counts only the heads you were given.",
)

LAYER_ATTENTION_SLIPS = (NO_SQRT_DK, DIVIDED_BY_SQRT_D_MODEL, DIVIDED_BY_SQRT_OF_EVERY_HEAD, D_K_FROM_D_MODEL,
                         SOFTMAX_OVER_COLUMNS, RESHAPED_WITHOUT_TRANSPOSE, MERGED_WITHOUT_TRANSPOSE, BIAS_DROPPED,
                         W_O_TRANSPOSED)


def layer_attention_with_slip(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads,
                              slip: Slip) -> tuple[np.ndarray, np.ndarray] | None:
    """A layer's multi-head attention from its fused matrices (:func:`qkv.fused_multi_head_attention`)
    computed with ``slip``: ``(output, weights)``, or None if the slip does not apply."""
    X, W_Q, W_K, W_V, W_O = (np.asarray(v, dtype=float) for v in (X, W_Q, W_K, W_V, W_O))
    if slip == BIAS_DROPPED:
        b_Q = b_K = b_V = b_O = None
    if slip == W_O_TRANSPOSED:
        if W_O.shape[0] != W_O.shape[1]:
            return None
        W_O = W_O.T
    Q, K, V = linear(X, W_Q, b_Q), linear(X, W_K, b_K), linear(X, W_V, b_V)  # (n, h * d_k)
    if slip == RESHAPED_WITHOUT_TRANSPOSE:
        Q, K, V = (split_heads_with_slip(M, num_heads, slip) for M in (Q, K, V))  # (h, n, d_k), mixed up
    else:
        Q, K, V = (split_heads(M, num_heads) for M in (Q, K, V))  # (h, n, d_k)
    d_k, d_model = Q.shape[-1], X.shape[-1]
    scale = {NO_SQRT_DK: 1.0, DIVIDED_BY_SQRT_OF_EVERY_HEAD: np.sqrt(d_k * num_heads),
             DIVIDED_BY_SQRT_D_MODEL: np.sqrt(d_model), D_K_FROM_D_MODEL: np.sqrt(d_model / num_heads)}.get(
                 slip, np.sqrt(d_k))
    scores = Q @ K.swapaxes(-1, -2) / scale  # (h, n, n)
    weights = softmax(scores, axis=-2 if slip == SOFTMAX_OVER_COLUMNS else -1)
    heads = weights @ V  # (h, n, d_v)
    concat = merge_heads_with_slip(heads, slip) if slip == MERGED_WITHOUT_TRANSPOSE else merge_heads(heads)
    return linear(concat, W_O, b_O), weights
