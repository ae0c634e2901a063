"""One vector for a whole sentence: the mean of its token vectors, scaled to length 1.

The layers of the trained models are :func:`qkv.encoder_block`, built from :func:`qkv.layer_norm`,
:func:`qkv.feed_forward` (with :func:`qkv.gelu`) and :func:`qkv.multi_head_attention`; these two
functions are what a sentence encoder adds after them.
"""

from __future__ import annotations

import numpy as np

from ..validate import as_real_array


def mean_pooling(H):
    r"""One vector for the whole sequence: the average of its token vectors.

    .. math:: e = \frac{1}{n}\sum_{i=1}^{n} h_i

    Args:
        H: token vectors, shape ``(..., n, d_model)``.

    Returns:
        ``(..., d_model)``.
    """
    H = as_real_array("H", H, min_ndim=2)
    return H.mean(axis=-2)


def unit_length(v):
    r"""Scale a vector to length 1 (so that a dot product of two such vectors is their cosine).

    .. math:: \hat e = \frac{e}{\max(\lVert e \rVert,\ 10^{-12})}

    Args:
        v: ``(..., d)``; each vector along the last axis is scaled on its own.
    """
    v = as_real_array("v", v)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
