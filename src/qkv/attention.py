"""Single-head attention: softmax, the linear projections and scaled dot-product attention.

Shapes use one notation throughout the course: ``n`` tokens (``n_q`` queries and
``n_k`` keys when they differ), model width ``d_model``, query/key width ``d_k``,
value width ``d_v``, ``h`` heads, and ``...`` for any leading batch or head axes.
"""

from __future__ import annotations

import numpy as np

from .validate import (
    as_bias,
    as_mask,
    as_matrix,
    as_real_array,
    check_broadcast,
    check_head_params,
    check_positive_int,
    check_qkv_widths,
    check_tokens,
    shape_str,
)


def softmax(x, axis=-1):
    r"""Turn scores into weights that are positive and sum to 1 along ``axis``.

    .. math::
        \mathrm{softmax}(s)_j
        = \frac{e^{s_j - \max_m s_m}}{\sum_m e^{s_m - \max_m s_m}}

    Subtracting the maximum changes nothing mathematically and keeps every
    exponent <= 0, so large scores never overflow. Entries equal to ``-inf``
    (masked positions) get weight exactly 0.

    Args:
        x: scores, any shape ``(..., n)``; finite or ``-inf``.
        axis: the axis that is normalised (the key axis, ``-1``, in attention).

    Returns:
        Array of the same shape as ``x``.

    Raises:
        ValueError: on NaN or +inf, or when a whole slice along ``axis`` is
            ``-inf`` (a fully masked row), naming that row.
    """
    x = as_real_array("x", x, allow_neg_inf=True)
    x_max = np.max(x, axis=axis, keepdims=True)  # (..., 1)
    _reject_fully_masked(x_max, axis)
    e = np.exp(x - x_max)  # (..., n), every entry in [0, 1]
    return e / np.sum(e, axis=axis, keepdims=True)


def _reject_fully_masked(x_max: np.ndarray, axis: int) -> None:
    """Raise if some slice of the softmax input has no finite entry."""
    empty = np.isneginf(x_max)
    if empty.any():
        row = [int(i) for i in np.argwhere(empty)[0]]
        del row[axis]
        where = f"row {row}" if row else "the input"
        raise ValueError(
            f"softmax: every entry of {where} along axis {axis} is -inf (fully masked); "
            "there is nothing to normalise"
        )


def linear(X, W, b=None):
    """Project every row of ``X``: ``X W + b``, the bias row added to every row.

    .. math:: Z = X W + \\mathbf{1} b

    Seed 000 writes the broadcast bias as a matrix ``B`` with one copy of ``b``
    per row.

    Args:
        X: inputs, shape ``(..., n, d_in)``.
        W: weights, shape ``(d_in, d_out)``.
        b: bias, shape ``(d_out,)`` or ``(1, d_out)``, or None for no bias.

    Returns:
        Array of shape ``(..., n, d_out)``.

    Raises:
        ValueError: if ``X.shape[-1] != W.shape[0]`` or ``b`` does not fit ``W``.
    """
    X = as_real_array("X", X, min_ndim=2)
    W = as_matrix("W", W)
    b = as_bias("b", b, W.shape[1], "W")
    if X.shape[-1] != W.shape[0]:
        raise ValueError(
            f"X has d_in={X.shape[-1]} (shape {shape_str(X.shape)}) "
            f"but W has {W.shape[0]} rows (shape {shape_str(W.shape)}); "
            "X @ W needs X.shape[-1] == W.shape[0]"
        )
    Z = X @ W  # (..., n, d_out)
    return Z if b is None else Z + b


def scaled_dot_product_attention(Q, K, V, mask=None):
    r"""Attention of every query over every key: the output and the weights.

    .. math::
        \mathrm{Attention}(Q, K, V)
        = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        mask: optional boolean array broadcastable to ``(..., n_q, n_k)``;
            True means the query may attend to that key (the convention of
            ``torch.nn.functional.scaled_dot_product_attention``).

    Returns:
        ``(output, weights)`` with shapes ``(..., n_q, d_v)`` and
        ``(..., n_q, n_k)``; each row of ``weights`` sums to 1.

    Raises:
        ValueError: if ``Q`` and ``K`` differ in ``d_k``, ``K`` and ``V`` in
            ``n_k``, the leading axes do not broadcast, or a mask row is all False.
        TypeError: if ``mask`` is not boolean.
    """
    Q, K, V = _check_qkv(Q, K, V)
    d_k = Q.shape[-1]
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(d_k)  # (..., n_q, n_k)
    if mask is not None:
        scores = np.where(as_mask(mask, scores.shape), scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (..., n_q, n_k), rows sum to 1
    output = weights @ V  # (..., n_q, d_v)
    return output, weights


def _check_qkv(Q, K, V):
    """Validate the shapes of Q, K, V against each other; return them as float arrays."""
    Q = as_real_array("Q", Q, min_ndim=2)
    K = as_real_array("K", K, min_ndim=2)
    V = as_real_array("V", V, min_ndim=2)
    check_qkv_widths(Q, K, V)
    check_broadcast("leading (batch/head) axes", "Q", Q.shape[:-2], "K", K.shape[:-2])
    check_broadcast("leading (batch/head) axes", "K", K.shape[:-2], "V", V.shape[:-2])
    return Q, K, V


def self_attention(X, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None, mask=None):
    """One attention head over a sequence: project ``X`` to Q, K, V, then attend.

    .. math::
        Q = X W_Q + b_Q,\\quad K = X W_K + b_K,\\quad V = X W_V + b_V

        \\mathrm{Attention}(Q, K, V)

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        W_Q, W_K: shape ``(d_model, d_k)``.  W_V: shape ``(d_model, d_v)``.
        b_Q, b_K: shape ``(d_k,)`` or None.  b_V: shape ``(d_v,)`` or None.
        mask: optional boolean ``(..., n, n)``, True = may attend.

    Returns:
        ``(output, weights)`` with shapes ``(..., n, d_v)`` and ``(..., n, n)``.

    Raises:
        ValueError: naming the argument whose shape does not fit the others.
    """
    W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V, b_Q, b_K, b_V)
    X = check_tokens(X, W_Q.shape[0], "W_Q")
    Q = linear(X, W_Q, b_Q)  # (..., n, d_k)
    K = linear(X, W_K, b_K)  # (..., n, d_k)
    V = linear(X, W_V, b_V)  # (..., n, d_v)
    return scaled_dot_product_attention(Q, K, V, mask)


def cross_attention(X_q, X_kv, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None,
                    mask=None):
    r"""One head: queries from one sequence, keys and values from another.

    .. math::
        Q = X_q W_Q + b_Q

        K = X_{kv} W_K + b_K,\quad V = X_{kv} W_V + b_V

        \mathrm{Attention}(Q, K, V)

    In an encoder-decoder Transformer ``X_q`` holds the decoder's tokens and
    ``X_kv`` the encoder's output; the two may differ in length.
    :func:`self_attention` is the case ``X_q = X_kv``.

    Args:
        X_q: the tokens that ask, shape ``(..., n_q, d_model)``.
        X_kv: the tokens that are read, shape ``(..., n_k, d_model)``.
        W_Q, W_K: shape ``(d_model, d_k)``.  W_V: shape ``(d_model, d_v)``.
        b_Q, b_K: shape ``(d_k,)`` or None.  b_V: shape ``(d_v,)`` or None.
        mask: optional boolean, broadcastable to ``(..., n_q, n_k)``,
            True = may attend (e.g. :func:`qkv.padding_mask` of ``X_kv``).

    Returns:
        ``(output, weights)`` of shapes ``(..., n_q, d_v)`` and
        ``(..., n_q, n_k)``.

    Raises:
        ValueError: naming the argument whose shape does not fit the others.
    """
    W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V,
                                                     b_Q, b_K, b_V)
    X_q = check_tokens(X_q, W_Q.shape[0], "W_Q", name="X_q")
    X_kv = check_tokens(X_kv, W_K.shape[0], "W_K", name="X_kv")
    check_broadcast("leading (batch) axes", "X_q", X_q.shape[:-2],
                    "X_kv", X_kv.shape[:-2])
    Q = linear(X_q, W_Q, b_Q)  # (..., n_q, d_k)
    K = linear(X_kv, W_K, b_K)  # (..., n_k, d_k)
    V = linear(X_kv, W_V, b_V)  # (..., n_k, d_v)
    return scaled_dot_product_attention(Q, K, V, mask)


def causal_mask(n):
    r"""Boolean ``(n, n)`` mask: token ``i`` may attend to tokens ``0..i``.

    .. math:: M_{ij} = \mathrm{True} \iff j \le i

    Args:
        n: the number of tokens.

    Returns:
        Boolean array of shape ``(n, n)``: True on and below the diagonal.

    Raises:
        ValueError: if ``n`` is not a positive integer.
    """
    n = check_positive_int("causal_mask's n (the number of tokens)", n)
    return np.tril(np.ones((n, n), dtype=bool))  # (n, n)
