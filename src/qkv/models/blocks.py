"""The pieces of a transformer layer around attention: LayerNorm, GELU, the feed-forward network,
mean pooling and unit length. Plain numpy, one function per formula.

These serve the trained models of :mod:`qkv.models`; they take the same ``(..., n, d_model)``
tokens as the attention functions.
"""

from __future__ import annotations

import math

import numpy as np

from ..attention import linear
from ..validate import as_real_array, shape_str

_erf = np.frompyfunc(math.erf, 1, 1)  # the standard library's erf, entry by entry (numpy has none)


def layer_norm(X, gamma, beta, eps):
    r"""Normalise each token's vector to mean 0 and variance 1, then scale and shift it.

    .. math:: \mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta,
              \quad \mu = \tfrac{1}{d}\textstyle\sum_i x_i,\ \sigma^2 = \tfrac{1}{d}\sum_i (x_i - \mu)^2

    Args:
        X: tokens, shape ``(..., n, d_model)``; each row is normalised on its own.
        gamma, beta: learned scale and shift, shape ``(d_model,)``.
        eps: the small number that keeps the division finite (``1e-12`` in BERT).

    Raises:
        ValueError: if ``gamma`` or ``beta`` does not have one entry per column of ``X``.
    """
    X = as_real_array("X", X)
    gamma, beta = _row("gamma", gamma, X.shape[-1]), _row("beta", beta, X.shape[-1])
    mean = X.mean(axis=-1, keepdims=True)  # (..., n, 1)
    variance = ((X - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., n, 1)
    return gamma * (X - mean) / np.sqrt(variance + eps) + beta  # (..., n, d_model)


def gelu(x):
    r"""The Gaussian error linear unit, exactly (with the error function, not an approximation).

    .. math:: \mathrm{GELU}(x) = x\,\Phi(x) = \tfrac{x}{2}\left(1 + \mathrm{erf}\!\left(x / \sqrt{2}\right)\right)
    """
    x = as_real_array("x", x)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def feed_forward(X, W_1, b_1, W_2, b_2):
    r"""The position-wise feed-forward network: widen, GELU, narrow, for every token on its own.

    .. math:: \mathrm{FFN}(X) = \mathrm{GELU}(X W_1 + b_1)\, W_2 + b_2

    Args:
        X: ``(..., n, d_model)``.  W_1: ``(d_model, d_ff)``.  b_1: ``(d_ff,)``.
        W_2: ``(d_ff, d_model)``.  b_2: ``(d_model,)``.

    Raises:
        ValueError: if a matrix does not fit ``X`` or the other matrix (see :func:`qkv.linear`).
    """
    hidden = gelu(linear(X, W_1, b_1))  # (..., n, d_ff)
    return linear(hidden, W_2, b_2)  # (..., n, d_model)


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


def _row(name, value, width):
    """A parameter with one entry per column: shape ``(width,)``."""
    value = as_real_array(name, value)
    if value.shape != (width,):
        raise ValueError(f"{name} has shape {shape_str(value.shape)} but the tokens have {width} columns; "
                         f"{name} must have shape ({width},)")
    return value
