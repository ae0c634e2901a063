r"""Linear attention: a kernel of feature maps in place of the softmax, computed in O(n).

Softmax attention weights key ``j`` for query ``i`` by the kernel :math:`\exp(q_i\cdot k_j /
\sqrt{d_k})`, normalised over the keys (the kernel view of the soft-lookup chapter). Replace that
kernel by a dot product of feature maps, :math:`\phi(q_i)\cdot\phi(k_j)`, and the weighted sum of
the values can be regrouped:

.. math::
    o_i = \frac{\sum_j \phi(q_i)^\top \phi(k_j)\, v_j^\top}{\sum_j \phi(q_i)^\top \phi(k_j)}
        = \frac{\phi(q_i)^\top S}{\phi(q_i)^\top z}, \qquad
    S = \sum_j \phi(k_j)\, v_j^\top,\quad z = \sum_j \phi(k_j)

:func:`kernel_attention` computes the left side, with its ``n_q x n_k`` weights, in
:math:`O(n^2)`; :func:`linear_attention` the right side in :math:`O(n)`, never forming them
(Katharopoulos et al. 2020). Under a causal mask the sums run over ``j <= i`` and become a
recurrence: a decoder keeps ``S`` and ``z``, a state of fixed size, instead of a growing cache.

Feature maps: :func:`elu_feature_map` (Katharopoulos et al.) and :func:`positive_random_features`
(Performer, Choromanski et al. 2021), whose dot products approximate the softmax's kernel.
"""

from __future__ import annotations

import numpy as np

from .attention import _check_qkv
from .validate import as_mask, as_real_array, shape_str


def elu_feature_map(X):
    r"""Katharopoulos et al.'s feature map: ELU plus one, positive everywhere.

    .. math:: \phi(x) = \mathrm{elu}(x) + 1
              = \begin{cases} x + 1 & x > 0 \\ e^{x} & x \le 0 \end{cases}

    Args:
        X: queries or keys, shape ``(..., n, d_k)``.

    Returns:
        Array of shape ``(..., n, d_k)``, every entry > 0.
    """
    X = as_real_array("X", X, min_ndim=2)
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def positive_random_features(X, W):
    r"""Performer's positive random features of the softmax kernel.

    .. math:: \phi(x) = \frac{1}{\sqrt{m}}\,
              \exp\!\big(W x - \lVert x\rVert^2 / 2\big)

    With the ``m`` rows of ``W`` drawn from :math:`\mathcal N(0, I)`, the average of
    :math:`\phi(q)\cdot\phi(k)` over draws is exactly :math:`e^{q\cdot k}`; more rows,
    a closer estimate. Scale the queries and keys by :math:`d_k^{-1/4}` first to get
    softmax attention's :math:`e^{q\cdot k/\sqrt{d_k}}`.

    Args:
        X: queries or keys, shape ``(..., n, d_k)``.
        W: the random directions, shape ``(m, d_k)``.

    Returns:
        Array of shape ``(..., n, m)``, every entry > 0.

    Raises:
        ValueError: if ``W`` is not a matrix with ``d_k`` columns.
    """
    X = as_real_array("X", X, min_ndim=2)
    W = as_real_array("W", W, min_ndim=2)
    if W.ndim != 2 or W.shape[1] != X.shape[-1]:
        d_k = X.shape[-1]
        raise ValueError(f"W has shape {shape_str(W.shape)} but X has d_k={d_k}; W "
                         f"must be (m, {d_k}), one random direction per row")
    projected = X @ W.T  # (..., n, m): w_r . x
    half_norm = 0.5 * np.sum(X**2, axis=-1, keepdims=True)  # (..., n, 1): |x|^2 / 2
    return np.exp(projected - half_norm) / np.sqrt(W.shape[0])


def kernel_attention(Q, K, V, feature_map=elu_feature_map, mask=None):
    r"""Attention with the kernel :math:`\phi(q)\cdot\phi(k)`, in :math:`O(n^2)`.

    .. math:: A_{ij} = \frac{\phi(q_i)\cdot\phi(k_j)}
                             {\sum_{m} \phi(q_i)\cdot\phi(k_m)}, \qquad O = A V

    (the sum over the allowed keys when there is a mask). It forms the ``n_q x n_k``
    weights, as softmax attention does; :func:`linear_attention` computes the same
    output without them.

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        feature_map: ``phi``, maps ``(..., n, d_k)`` to ``(..., n, d_phi)`` with
            positive entries.
        mask: optional boolean array broadcastable to ``(..., n_q, n_k)``, True = may
            attend.

    Returns:
        ``(output, weights)`` with shapes ``(..., n_q, d_v)`` and ``(..., n_q, n_k)``.

    Raises:
        ValueError: as :func:`qkv.scaled_dot_product_attention`, or if the feature map
            gives a number that is not positive.
        TypeError: if ``mask`` is not boolean.
    """
    Q, K, V = _check_qkv(Q, K, V)
    phi_Q, phi_K = _features(feature_map, Q, "Q"), _features(feature_map, K, "K")
    kernel = phi_Q @ phi_K.swapaxes(-1, -2)  # (..., n_q, n_k): phi(q_i) . phi(k_j)
    if mask is not None:
        kernel = np.where(as_mask(mask, kernel.shape), kernel, 0.0)
    weights = kernel / kernel.sum(axis=-1, keepdims=True)  # (..., n_q, n_k)
    return weights @ V, weights


def linear_attention(Q, K, V, feature_map=elu_feature_map, causal=False):
    r"""Attention with the kernel :math:`\phi(q)\cdot\phi(k)` in :math:`O(n)`.

    .. math::
        S = \sum_j \phi(k_j)\, v_j^\top \quad (d_\phi \times d_v),

        z = \sum_j \phi(k_j) \quad (d_\phi),

        o_i = \frac{\phi(q_i)^\top S}{\phi(q_i)^\top z}

    With ``causal``, query ``i`` uses the sums over ``j <= i``, built one token at a
    time: :math:`S_i = S_{i-1} + \phi(k_i) v_i^\top`,
    :math:`z_i = z_{i-1} + \phi(k_i)`, a recurrent layer whose state does not grow
    with ``n``. The output equals :func:`kernel_attention`'s (with
    :func:`qkv.causal_mask` when causal); the time is :math:`O(n\, d_\phi\, d_v)`.

    Args:
        Q: queries, shape ``(..., n_q, d_k)``; with ``causal``, ``n_q = n_k``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        feature_map: ``phi``, as in :func:`kernel_attention`.
        causal: whether query ``i`` may attend only to keys ``0 .. i``.

    Returns:
        ``(output, state)``: the output ``(..., n_q, d_v)`` and the final
        ``(S, z)``, shapes ``(..., d_phi, d_v)`` and ``(..., d_phi)``: what a decoder
        carries to the next token.

    Raises:
        ValueError: as :func:`kernel_attention`, or if ``causal`` and ``n_q != n_k``.
    """
    Q, K, V = _check_qkv(Q, K, V)
    phi_Q, phi_K = _features(feature_map, Q, "Q"), _features(feature_map, K, "K")
    if not causal:
        S = phi_K.swapaxes(-1, -2) @ V  # (..., d_phi, d_v)
        z = phi_K.sum(axis=-2)  # (..., d_phi)
        numerator = phi_Q @ S  # (..., n_q, d_v)
        denominator = phi_Q @ z[..., None]  # (..., n_q, 1)
        return numerator / denominator, (S, z)
    if Q.shape[-2] != K.shape[-2]:
        raise ValueError(f"causal linear attention pairs query i with keys 0 .. i: "
                         f"it needs as many queries as keys, got n_q={Q.shape[-2]} "
                         f"and n_k={K.shape[-2]}")
    return _causal_recurrence(phi_Q, phi_K, V)


def _causal_recurrence(phi_Q, phi_K, V):
    """The causal sums, one token at a time: S_i = S_(i-1) + phi(k_i) v_i^T, z_i = z_(i-1) + phi(k_i)."""
    lead = np.broadcast_shapes(phi_Q.shape[:-2], phi_K.shape[:-2], V.shape[:-2])
    n, d_phi, d_v = phi_Q.shape[-2], phi_K.shape[-1], V.shape[-1]
    S = np.zeros((*lead, d_phi, d_v))  # (..., d_phi, d_v)
    z = np.zeros((*lead, d_phi))  # (..., d_phi)
    output = np.empty((*lead, n, d_v))  # (..., n, d_v)
    for i in range(n):
        phi_k, v = phi_K[..., i, :], V[..., i, :]  # (..., d_phi), (..., d_v)
        S = S + phi_k[..., :, None] * v[..., None, :]  # add phi(k_i) v_i^T
        z = z + phi_k
        phi_q = phi_Q[..., i, :]  # (..., d_phi)
        numerator = np.einsum("...f,...fv->...v", phi_q, S)  # (..., d_v)
        output[..., i, :] = numerator / np.sum(phi_q * z, axis=-1, keepdims=True)
    return output, (S, z)


def _features(feature_map, X: np.ndarray, name: str) -> np.ndarray:
    """phi(X): positive features, one row per row of X."""
    if not callable(feature_map):
        raise TypeError(f"feature_map must be a function of the queries or keys, got "
                        f"{type(feature_map).__name__}")
    features = as_real_array(f"feature_map({name})", feature_map(X), min_ndim=2)
    if features.shape[:-1] != X.shape[:-1]:
        raise ValueError(f"feature_map({name}) has shape {shape_str(features.shape)} but {name} has "
                         f"{shape_str(X.shape)}; a feature map keeps the rows: (..., n, d_phi)")
    if (features <= 0).any():
        index = tuple(int(i) for i in np.argwhere(features <= 0)[0])
        raise ValueError(f"feature_map({name}){list(index)} is {features[index]}; the features must "
                         "be positive so that every weight is positive and no row sums to 0")
    return features
