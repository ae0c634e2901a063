"""Attention as soft lookup: a Gaussian kernel's slips, for problem set 11.

:func:`kernel_steps` gives the distances, exponents, weights, prediction and extended scores of a
Gaussian kernel with one slip made (the minus sign, the 1/2, sigma not squared, the weights
applied to the keys, ...), and :func:`qkv_exercises.slips.merged` makes slips that give the same
value into one.
"""

from __future__ import annotations

import numpy as np

from qkv.attention import softmax
from qkv.lookup import gaussian_as_dot_product, gaussian_kernel_weights, squared_distances

from ..slips import NOT_NORMALISED, SOFTMAX_OVER_COLUMNS, WEIGHTS_APPLIED_TO_K, Slip, remembered


MINUS_SIGN_FORGOTTEN = Slip(
    "minus_sign_forgotten",
    "did you forget the minus sign? The exponent is -|q - k|^2 / (2 sigma^2): the nearer the key, the larger "
    "its weight.",
)

HALF_FORGOTTEN = Slip(
    "half_forgotten",
    "did you forget the 1/2? The exponent is -|q - k|^2 / (2 sigma^2), with 2 sigma^2 below the line.",
)

KEY_HALF_FORGOTTEN = Slip(
    "key_half_forgotten",
    "did you forget the 1/2 of the key's term? The extended score is (q . k - |k|^2 / 2) / sigma^2: half the "
    "key's squared length.",
)

SIGMA_NOT_SQUARED = Slip(
    "sigma_not_squared",
    "divide by 2 sigma^2 (sigma squared), not by 2 sigma.",
)

DISTANCE_NOT_SQUARED = Slip(
    "distance_not_squared",
    "the kernel uses the SQUARED distance |q - k|^2, the sum of the squared differences, with no square root.",
)

DIFFERENCES_NOT_SQUARED = Slip(
    "differences_not_squared",
    "square each coordinate's difference, then add them up: |q - k|^2 = (q_1 - k_1)^2 + (q_2 - k_2)^2.",
)

DOT_PRODUCT_WEIGHTS = Slip(
    "dot_product_weights",
    "those are the scaled dot-product weights, softmax(q . k / sqrt(d)); the Gaussian kernel scores each key "
    "by minus its squared distance from the query.",
)

PLAIN_MEAN = Slip(
    "plain_mean",
    "that is the plain mean of the values, every weight 1/3; the prediction weighs each value by its key's "
    "kernel weight.",
)

NO_SIGMA_SCALE = Slip(
    "no_sigma_scale",
    "did you divide by sigma^2? The extended score is (q . k - |k|^2 / 2) / sigma^2.",
)

KEY_TERM_SIGN = Slip(
    "key_term_sign",
    "the key's extra coordinate is -|k|^2 / 2, with a minus sign: the extended score is "
    "(q . k - |k|^2 / 2) / sigma^2.",
)

EXPONENTS_NOT_EXTENDED = Slip(
    "exponents_not_extended",
    "those are the kernel's exponents -|q - k|^2 / (2 sigma^2); the extended score leaves out the query's own "
    "term -|q|^2 / (2 sigma^2), the same for every key (so the softmax is the same).",
)

KERNEL_SLIPS = (MINUS_SIGN_FORGOTTEN, HALF_FORGOTTEN, SIGMA_NOT_SQUARED, DISTANCE_NOT_SQUARED,
                DIFFERENCES_NOT_SQUARED, DOT_PRODUCT_WEIGHTS, NOT_NORMALISED, SOFTMAX_OVER_COLUMNS, PLAIN_MEAN,
                WEIGHTS_APPLIED_TO_K, NO_SIGMA_SCALE, KEY_TERM_SIGN, KEY_HALF_FORGOTTEN, EXPONENTS_NOT_EXTENDED)


@remembered
def kernel_steps(Q, K, V, sigma: float, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``distances``, ``exponents``, ``weights``, ``prediction`` (``A V``) and ``extended_scores`` of a
    Gaussian kernel of width ``sigma`` over ``K`` ``(n_k, d)`` for ``Q`` ``(n_q, d)``, with ``slip`` made.

    Without a slip the weights are :func:`qkv.gaussian_kernel_weights`, the distances
    :func:`qkv.squared_distances`, and the extended scores the scaled dot products of
    :func:`qkv.gaussian_as_dot_product`'s queries and keys.
    """
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    sigma = float(sigma)
    if slip is None:
        weights = gaussian_kernel_weights(Q, K, sigma)  # (n_q, n_k)
        distances = squared_distances(Q, K)
        Q_tilde, K_tilde = gaussian_as_dot_product(Q, K, sigma)  # (n_q, d + 1), (n_k, d + 1)
        return {"distances": distances, "exponents": -distances / (2 * sigma**2), "weights": weights,
                "prediction": weights @ V, "extended_scores": Q_tilde @ K_tilde.T / np.sqrt(Q.shape[-1] + 1)}
    if slip == PLAIN_MEAN:
        return {"prediction": np.tile(V.mean(axis=0), (len(Q), 1))}
    if slip == WEIGHTS_APPLIED_TO_K:
        return {"prediction": gaussian_kernel_weights(Q, K, sigma) @ K}  # (n_q, d): the keys mixed, not the values
    differences = Q[:, None, :] - K[None, :, :]  # (n_q, n_k, d)
    distances = {DISTANCE_NOT_SQUARED: np.sqrt((differences**2).sum(axis=-1)),
                 DIFFERENCES_NOT_SQUARED: np.abs(differences).sum(axis=-1)}.get(slip, (differences**2).sum(axis=-1))
    scale = {HALF_FORGOTTEN: sigma**2, SIGMA_NOT_SQUARED: 2 * sigma}.get(slip, 2 * sigma**2)
    exponents = (distances if slip == MINUS_SIGN_FORGOTTEN else -distances) / scale  # (n_q, n_k)
    dot, half_square = Q @ K.T, 0.5 * (K**2).sum(axis=-1)  # (n_q, n_k), (n_k,)
    extended = {NO_SIGMA_SCALE: dot - half_square, KEY_TERM_SIGN: (dot + half_square) / sigma**2,
                KEY_HALF_FORGOTTEN: (dot - 2 * half_square) / sigma**2, EXPONENTS_NOT_EXTENDED: exponents}
    if slip in extended:
        return {"extended_scores": extended[slip]}
    with np.errstate(all="ignore"):
        if slip == DOT_PRODUCT_WEIGHTS:
            weights = softmax(dot / np.sqrt(Q.shape[-1]), axis=-1)
        elif slip == NOT_NORMALISED:
            weights = np.exp(exponents)
        elif slip == SOFTMAX_OVER_COLUMNS:
            weights = softmax(exponents, axis=-2)  # (with one query: every weight 1)
        else:
            weights = softmax(exponents, axis=-1)
    return {"distances": distances, "exponents": exponents, "weights": weights, "prediction": weights @ V}
