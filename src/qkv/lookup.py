"""Attention as a soft lookup: a hard dictionary lookup, kernel regression (Nadaraya-Watson),
and additive (Bahdanau) scoring beside the dot product.

Every function here returns ``(output, weights)``, like :func:`qkv.scaled_dot_product_attention`:
only the way the weights are made from the queries and the keys differs.
"""

from __future__ import annotations

import numpy as np

from .attention import _check_qkv, softmax
from .validate import (
    as_mask,
    as_matrix,
    as_positive_number,
    as_real_array,
    check_broadcast,
    shape_str,
)


def hard_lookup(Q, K, V):
    r"""A dictionary lookup as attention: weight 1 on the key equal to q_i.

    .. math:: A_{ij} = [\,k_j = q_i\,], \qquad O = A V

    Row ``i`` of ``A`` is one-hot, so row ``i`` of the output is exactly the
    value stored under the key ``q_i``, as ``dictionary[q_i]`` returns it.

    Args:
        Q: queries, shape ``(n_q, d_k)``.
        K: keys, shape ``(n_k, d_k)``, no two equal (as in a dictionary).
        V: values, shape ``(n_k, d_v)``.

    Returns:
        ``(output, weights)`` with shapes ``(n_q, d_v)`` and ``(n_q, n_k)``.

    Raises:
        KeyError: if a query equals no key, naming it, as a dictionary does.
        ValueError: if two keys are equal, or the shapes do not fit.
    """
    Q, K, V = as_matrix("Q", Q), as_matrix("K", K), as_matrix("V", V)
    Q, K, V = _check_qkv(Q, K, V)
    _check_distinct(K)
    equal = np.all(Q[:, None, :] == K[None, :, :], axis=-1)  # (n_q, n_k)
    missing = np.flatnonzero(~equal.any(axis=1))
    if len(missing):
        i = int(missing[0])
        raise KeyError(f"query {i}, {Q[i].tolist()}, equals no key: "
                       "a hard lookup finds nothing")
    weights = equal.astype(float)  # (n_q, n_k): one 1 per row
    return weights @ V, weights  # (n_q, d_v), (n_q, n_k)


def _check_distinct(K) -> None:
    """A lookup's keys must be distinct, as a dictionary's are."""
    equal = np.all(K[:, None, :] == K[None, :, :], axis=-1)  # (n_k, n_k)
    duplicates = np.argwhere(np.triu(equal, k=1))
    if len(duplicates):
        first, second = (int(i) for i in duplicates[0])
        raise ValueError(
            f"keys {first} and {second} are equal; a lookup needs distinct keys")


def squared_distances(Q, K):
    r"""Every squared Euclidean distance between a query and a key.

    .. math:: D_{ij} = \lVert q_i - k_j \rVert^2 = \sum_c (q_{ic} - k_{jc})^2

    Args:
        Q: ``(..., n_q, d)``.  K: ``(..., n_k, d)``.

    Returns:
        Array of shape ``(..., n_q, n_k)``.

    Raises:
        ValueError: if ``Q`` and ``K`` differ in ``d`` or their leading axes
            do not broadcast.
    """
    Q, K, _ = _check_qkv(Q, K, K)
    differences = Q[..., :, None, :] - K[..., None, :, :]  # (..., n_q, n_k, d)
    return np.sum(differences**2, axis=-1)  # (..., n_q, n_k)


def gaussian_kernel_weights(Q, K, sigma):
    r"""Gaussian kernel weights: near keys weigh much, far keys little.

    .. math::
        A_{ij}
        = \frac{\exp\big(-\lVert q_i - k_j\rVert^2 / 2\sigma^2\big)}
               {\sum_m \exp\big(-\lVert q_i - k_m\rVert^2 / 2\sigma^2\big)}

        A_{ij} = \mathrm{softmax}_j\big(-\lVert q_i - k_j\rVert^2 / 2\sigma^2\big)

    Each row sums to 1.

    Args:
        Q: queries, shape ``(..., n_q, d)``.
        K: keys, shape ``(..., n_k, d)``.
        sigma: the kernel's width, a positive number.

    Returns:
        Array of shape ``(..., n_q, n_k)``.

    Raises:
        ValueError: if ``sigma`` is not a positive number, or ``Q`` and ``K``
            differ in ``d``.
    """
    Q, K, _ = _check_qkv(Q, K, K)
    sigma = as_positive_number("sigma (the kernel's width)", sigma)
    distances = squared_distances(Q, K)  # (..., n_q, n_k)
    return softmax(-distances / (2 * sigma**2), axis=-1)  # (..., n_q, n_k)


def nadaraya_watson(Q, K, V, sigma):
    r"""Nadaraya-Watson kernel regression: Gaussian-weighted mean of values.

    .. math::
        \hat f(q_i) = \sum_j A_{ij}\, v_j, \qquad
        A = \text{the Gaussian kernel weights}

    This is attention with the weights of :func:`gaussian_kernel_weights`.

    Args:
        Q: queries, shape ``(..., n_q, d)``.
        K: keys (where the values were observed), shape ``(..., n_k, d)``.
        V: values, shape ``(..., n_k, d_v)``.
        sigma: the kernel's width, a positive number.

    Returns:
        ``(output, weights)`` with shapes ``(..., n_q, d_v)`` and
        ``(..., n_q, n_k)``.

    Raises:
        ValueError: as :func:`gaussian_kernel_weights`, or if ``K`` and ``V``
            differ in ``n_k``.
    """
    Q, K, V = _check_qkv(Q, K, V)
    weights = gaussian_kernel_weights(Q, K, sigma)  # (..., n_q, n_k)
    return weights @ V, weights  # (..., n_q, d_v), (..., n_q, n_k)


def gaussian_as_dot_product(Q, K, sigma):
    r"""Queries and keys, one coordinate longer, whose scaled dot products
    give the Gaussian kernel.

    .. math::
        -\frac{\lVert q - k\rVert^2}{2\sigma^2}
        = \frac{1}{\sigma^2}\Big(q\cdot k - \tfrac12\lVert k\rVert^2\Big)
          - \frac{\lVert q\rVert^2}{2\sigma^2},

        \tilde q = \frac{\sqrt{d+1}}{\sigma^2}\,[\,q,\ 1\,], \qquad
        \tilde k = \big[\,k,\ -\tfrac12\lVert k\rVert^2\,\big]

    so :math:`\tilde q\cdot\tilde k/\sqrt{d+1}` is the kernel's exponent plus
    a term that is the same for every key of a row, which the softmax
    cancels: ``scaled_dot_product_attention(Q~, K~, V)`` equals
    ``nadaraya_watson(Q, K, V, sigma)``.

    Args:
        Q: ``(..., n_q, d)``.  K: ``(..., n_k, d)``.
        sigma: the kernel's width, a positive number.

    Returns:
        ``(Q_tilde, K_tilde)`` with shapes ``(..., n_q, d + 1)`` and
        ``(..., n_k, d + 1)``.
    """
    Q, K, _ = _check_qkv(Q, K, K)
    sigma = as_positive_number("sigma (the kernel's width)", sigma)
    d = Q.shape[-1]
    ones = np.ones((*Q.shape[:-1], 1))  # (..., n_q, 1)
    Q_tilde = np.concatenate([Q, ones], axis=-1)  # (..., n_q, d + 1)
    Q_tilde = np.sqrt(d + 1) / sigma**2 * Q_tilde
    half_square = -0.5 * (K**2).sum(axis=-1, keepdims=True)  # (..., n_k, 1)
    K_tilde = np.concatenate([K, half_square], axis=-1)  # (..., n_k, d + 1)
    return Q_tilde, K_tilde


def additive_attention(Q, K, V, W_q, W_k, w_v, mask=None):
    r"""Additive (Bahdanau) attention: a small network scores each pair.

    .. math::
        s_{ij} = w_v \cdot \tanh\big(q_i W_q + k_j W_k\big)

        A = \mathrm{softmax}(S), \qquad O = A V

    Queries and keys may differ in width; the hidden layer has ``d_h`` units.

    Args:
        Q: queries, shape ``(..., n_q, d_q)``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        W_q: ``(d_q, d_h)``.  W_k: ``(d_k, d_h)``.  w_v: ``(d_h,)``.
        mask: optional boolean, broadcastable to ``(..., n_q, n_k)``;
            True = may attend.

    Returns:
        ``(output, weights)`` with shapes ``(..., n_q, d_v)`` and
        ``(..., n_q, n_k)``.

    Raises:
        ValueError: naming the argument whose shape does not fit the others.
    """
    Q, K, V, W_q, W_k, w_v = _check_additive(Q, K, V, W_q, W_k, w_v)
    hidden_q = (Q @ W_q)[..., :, None, :]  # (..., n_q, 1, d_h)
    hidden_k = (K @ W_k)[..., None, :, :]  # (..., 1, n_k, d_h)
    hidden = np.tanh(hidden_q + hidden_k)  # (..., n_q, n_k, d_h)
    scores = hidden @ w_v  # (..., n_q, n_k)
    if mask is not None:
        scores = np.where(as_mask(mask, scores.shape), scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (..., n_q, n_k)
    return weights @ V, weights  # (..., n_q, d_v), (..., n_q, n_k)


def _check_additive(Q, K, V, W_q, W_k, w_v):
    """Q (..., n_q, d_q), K (..., n_k, d_k), V (..., n_k, d_v);
    W_q (d_q, d_h), W_k (d_k, d_h), w_v (d_h,)."""
    Q, K, V = (as_real_array(name, x, min_ndim=2) for name, x in (("Q", Q), ("K", K), ("V", V)))
    W_q, W_k = as_matrix("W_q", W_q), as_matrix("W_k", W_k)
    w_v = as_real_array("w_v", w_v)
    for name, X, W_name, W in (("Q", Q, "W_q", W_q), ("K", K, "W_k", W_k)):
        if X.shape[-1] != W.shape[0]:
            raise ValueError(
                f"{name} has width {X.shape[-1]} (shape {shape_str(X.shape)}) but {W_name} has "
                f"{W.shape[0]} rows (shape {shape_str(W.shape)})"
            )
    if W_k.shape[1] != W_q.shape[1] or w_v.shape != (W_q.shape[1],):
        raise ValueError(
            f"W_q {shape_str(W_q.shape)}, W_k {shape_str(W_k.shape)} and "
            f"w_v {shape_str(w_v.shape)} must agree on the hidden width d_h: "
            "W_q (d_q, d_h), W_k (d_k, d_h), w_v (d_h,)"
        )
    _check_qkv(K, K, V)  # every key has a value; their leading axes broadcast
    check_broadcast("leading (batch/head) axes", "Q", Q.shape[:-2], "K", K.shape[:-2])
    return Q, K, V, W_q, W_k, w_v
