"""A measurable toy of length extrapolation: position-only heads, fitted on short inputs, run on long ones.

A model trained on inputs of at most ``n_train`` tokens has only ever seen distances ``0 ..
n_train - 1`` between a query and a key. What its heads do at longer distances is whatever the
position method makes of them. The toy makes that measurable without training a model: each
method gets one head whose queries and keys carry position only (no content), fitted by least
squares so that its scores follow the same ``target_scores[r]`` at every trained distance ``r``
(a query at position ``p`` and a key at ``p - r``, both below ``n_train``). Run on longer inputs,
the heads are then compared on what they give to the distances never seen.

- RoPE (:func:`fit_rope_head`, :func:`rope_scores`): one query and one key vector, rotated by
  :func:`qkv.rotary_embedding` at each position; with ``scale < 1``, position interpolation
  (Chen et al. 2023): positions multiplied by ``n_train / n`` so every distance falls inside the
  trained range.
- Sinusoidal (:func:`fit_sinusoidal_head`, :func:`sinusoidal_scores`): tokens that are their
  :func:`qkv.sinusoidal_position_encoding`, and a fitted ``M = W_Q W_K^T``.
- ALiBi (:func:`fit_alibi_slope`): one slope, scores :func:`qkv.alibi_bias`.
- T5 (:func:`fit_t5_table`): one learned number per bucket, scores :func:`qkv.t5_position_bias`.
- A learned table has no row beyond ``n_train - 1`` (:func:`qkv.add_positions` refuses).

The fits use a small ridge penalty, as training keeps weights from growing without need.
"""

from __future__ import annotations

import numpy as np

from .position import position_angles, rotary_embedding, sinusoidal_position_encoding
from .relative_position import relative_position_bucket
from .validate import as_real_array, check_positive_int, shape_str


def fit_rope_head(target_scores, d, ridge=1e-3, base=10000.0):
    r"""A query and a key whose rotated score at distance ``r`` is close to ``target_scores[r]``.

    With the query :math:`(1, 0, 1, 0, \dots)` and the key pairs :math:`(a_i, b_i)`,
    the score of the query at ``p`` and the key at ``p - r`` is
    :math:`\sum_i a_i\cos(r\omega_i) + b_i\sin(r\omega_i)`, linear in ``a`` and ``b``,
    which are fitted by ridge regression over the trained distances:

    .. math:: \min_{a, b} \sum_{r=0}^{n_{\mathrm{train}}-1}
              \Big(\sum_i a_i \cos r\omega_i + b_i \sin r\omega_i - t_r\Big)^2
              + \lambda \lVert (a, b)\rVert^2

    Args:
        target_scores: ``t_r`` for ``r = 0 .. n_train - 1``, shape ``(n_train,)``.
        d: the width of the query and key, even.
        ridge: ``lambda``, >= 0.
        base: RoPE's base, as in :func:`qkv.rotary_embedding`.

    Returns:
        ``(q, k)``, each of shape ``(d,)``.

    Raises:
        ValueError: if ``target_scores`` is not a vector of finite numbers, ``d`` not
            even, or ``ridge`` negative.
    """
    target = _check_target(target_scores)
    distances = np.arange(len(target))
    omega = position_angles([1.0], d, base)[0]  # (d/2,)
    angles = np.outer(distances, omega)  # (n_train, d/2): r w_i
    design = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)  # (n_train, d)
    coefficients = _ridge(design, target, ridge)  # (d,): a then b
    q, k = np.zeros(d), np.zeros(d)
    q[0::2] = 1.0  # (1, 0) in every pair
    k[0::2], k[1::2] = coefficients[: d // 2], coefficients[d // 2:]
    return q, k


def rope_scores(q, k, n, scale=1.0, base=10000.0):
    r"""The ``(n, n)`` scores of a head whose every query is ``q`` and every key ``k``, rotated.

    .. math:: S_{ij} = (R_{s i}\, q) \cdot (R_{s j}\, k)

    with :func:`qkv.rotary_embedding`'s rotations at positions ``s i`` and ``s j``.
    ``scale = 1`` is RoPE as trained; ``scale = n_train / n`` is position
    interpolation.

    Args:
        q, k: shape ``(d,)``, as :func:`fit_rope_head` returns them.
        n: the number of tokens.
        scale: ``s``, the factor of every position, > 0.
        base: RoPE's base.

    Returns:
        Array of shape ``(n, n)``.
    """
    n = check_positive_int("n", n)
    q, k = as_real_array("q", q), as_real_array("k", k)
    positions = np.arange(n) * float(scale)  # (n,)
    Q = rotary_embedding(np.tile(q, (n, 1)), positions, base)  # (n, d): q at each position
    K = rotary_embedding(np.tile(k, (n, 1)), positions, base)  # (n, d)
    return Q @ K.T  # (n, n)


def fit_sinusoidal_head(target_scores, d_model, ridge=1e-3):
    r"""``M = W_Q W_K^T`` for tokens that are their sinusoidal encodings, fitted to the target.

    .. math:: \min_M \sum_{0 \le j \le i < n_{\mathrm{train}}}
              \big(PE_i\, M\, PE_j^\top - t_{i-j}\big)^2 + \lambda \lVert M\rVert_F^2

    Args:
        target_scores: ``t_r`` for ``r = 0 .. n_train - 1``, shape ``(n_train,)``.
        d_model: the width of the encodings, even.
        ridge: ``lambda``, >= 0.

    Returns:
        Array of shape ``(d_model, d_model)``.
    """
    target = _check_target(target_scores)
    n_train = len(target)
    PE = sinusoidal_position_encoding(n_train, d_model)  # (n_train, d_model)
    i, j = np.tril_indices(n_train)  # every trained pair with j <= i
    design = (PE[i][:, :, None] * PE[j][:, None, :]).reshape(len(i), -1)  # (pairs, d_model^2)
    M = _ridge(design, target[i - j], ridge)
    return M.reshape(d_model, d_model)


def sinusoidal_scores(M, n):
    r"""The ``(n, n)`` scores :math:`PE\, M\, PE^\top` of tokens that are their encodings.

    Args:
        M: shape ``(d_model, d_model)``, as :func:`fit_sinusoidal_head` returns it.
        n: the number of tokens.

    Returns:
        Array of shape ``(n, n)``.
    """
    M = as_real_array("M", M, min_ndim=2)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be square (d_model, d_model), got shape {shape_str(M.shape)}")
    PE = sinusoidal_position_encoding(check_positive_int("n", n), M.shape[0])  # (n, d_model)
    return PE @ M @ PE.T  # (n, n)


def fit_alibi_slope(target_scores):
    r"""ALiBi's slope that fits the target best: :math:`\min_m \sum_r (-m r - t_r)^2`.

    .. math:: m = -\frac{\sum_r r\, t_r}{\sum_r r^2}

    Args:
        target_scores: ``t_r`` for ``r = 0 .. n_train - 1``, shape ``(n_train,)``, at
            least two.

    Returns:
        The slope ``m``, a float (positive for a target that falls with the distance).
    """
    target = _check_target(target_scores)
    if len(target) < 2:
        raise ValueError("fit_alibi_slope needs the target at two distances or more")
    r = np.arange(len(target))
    return float(-(r @ target) / (r @ r))


def fit_t5_table(target_scores, num_buckets, max_distance):
    r"""T5's learned number of each bucket: the mean target over the trained distances in it.

    Decoder buckets (:func:`qkv.relative_position_bucket` with
    ``bidirectional=False``) of the distances ``0 .. n_train - 1``; a bucket that no
    trained distance falls into keeps 0, its value before training.

    Args:
        target_scores: ``t_r`` for ``r = 0 .. n_train - 1``, shape ``(n_train,)``.
        num_buckets, max_distance: as :func:`qkv.relative_position_bucket`.

    Returns:
        Array of shape ``(num_buckets, 1)``: the table of one head, for
        :func:`qkv.t5_position_bias` with ``bidirectional=False``.
    """
    target = _check_target(target_scores)
    buckets = relative_position_bucket(-np.arange(len(target)), False, num_buckets, max_distance)
    table = np.zeros((num_buckets, 1))
    for bucket in np.unique(buckets):
        table[bucket, 0] = target[buckets == bucket].mean()
    return table


def _ridge(design: np.ndarray, target: np.ndarray, ridge) -> np.ndarray:
    """argmin_x |design x - target|^2 + ridge |x|^2 (the minimum-norm least squares for ridge 0)."""
    if isinstance(ridge, bool) or not np.isfinite(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a number >= 0, got {ridge!r}")
    if ridge == 0:
        return np.linalg.lstsq(design, target, rcond=None)[0]
    rows, columns = design.shape
    if columns > rows:  # fewer equations than unknowns: solve in the rows' space
        return design.T @ np.linalg.solve(design @ design.T + ridge * np.eye(rows), target)
    return np.linalg.solve(design.T @ design + ridge * np.eye(columns), design.T @ target)


def _check_target(target_scores) -> np.ndarray:
    target = as_real_array("target_scores", target_scores)
    if target.ndim != 1:
        raise ValueError(f"target_scores must be a vector, one score per trained distance 0 .. "
                         f"n_train - 1, got shape {shape_str(target.shape)}")
    return target
