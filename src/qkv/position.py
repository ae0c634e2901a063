"""Where a token stands: sinusoidal encodings, learned tables and rotary embeddings.

Attention itself ignores the order of the tokens (it is permutation-equivariant), so
position has to be put in: added to the token vectors (a sinusoidal encoding or a
learned table, both through :func:`add_positions`), or applied to the queries and keys
as a rotation (:func:`rotary_embedding`). The sinusoidal encoding and the rotary
embedding share their angles, :func:`position_angles`.
"""

from __future__ import annotations

import numpy as np

from .validate import as_real_array, check_positive_int, shape_str


def position_angles(positions, d, base=10000.0):
    r"""The angle of each (position, frequency) pair: ``p`` times ``w_i``.

    .. math:: \theta_{p,i} = p\,\omega_i, \qquad
              \omega_i = \mathrm{base}^{-2i/d}, \qquad i = 0, \dots, d/2 - 1

    Frequency ``w_0 = 1`` turns fastest (a full turn every 2π ≈ 6.3
    positions), the last one slowest (every 2π base^((d-2)/d) positions).

    Args:
        positions: the positions, shape ``(n,)``; usually ``0, ..., n - 1``.
        d: the width encoded, even (one angle per pair of dimensions).
        base: sets the slowest frequency; greater than 1, 10000 in the
            Transformer paper and in most models.

    Returns:
        Array of shape ``(n, d / 2)``.

    Raises:
        ValueError: if ``positions`` is not a vector of finite numbers,
            ``d`` is not a positive even integer, or ``base`` is not a
            finite number greater than 1.
    """
    positions = _check_position_vector(positions)
    d = _check_even_width("d", d)
    base = _check_base(base)
    omega = base ** (-np.arange(0, d, 2) / d)  # (d/2,): base^(-2i/d)
    return positions[:, None] * omega[None, :]  # (n, d/2)


def sinusoidal_position_encoding(n, d_model, base=10000.0):
    r"""The Transformer paper's encodings: sines and cosines per position.

    .. math::
        PE_{p,\,2i} = \sin(p\,\omega_i), \qquad
        PE_{p,\,2i+1} = \cos(p\,\omega_i)

        \omega_i = \mathrm{base}^{-2i/d_{\mathrm{model}}}

    Row ``p`` is added to the token at position ``p`` (see
    :func:`add_positions`).
    The dot product of two rows depends only on their offset:
    ``PE_p . PE_q = sum_i cos((p - q) w_i)``.

    Args:
        n: the number of positions, ``0, 1, ..., n - 1``.
        d_model: the width of a token vector, an even number.
        base: greater than 1; 10000 in the paper.

    Returns:
        Array of shape ``(n, d_model)``.

    Raises:
        ValueError: if ``n`` is not a positive integer, ``d_model`` is not
            a positive even integer, or ``base`` is not a finite number
            greater than 1.
    """
    n = check_positive_int("n (the number of positions)", n)
    d_model = _check_even_width("d_model", d_model)
    angles = position_angles(np.arange(n), d_model, base)  # (n, d_model/2)
    PE = np.empty((n, d_model))  # (n, d_model)
    PE[:, 0::2] = np.sin(angles)  # columns 0, 2, 4, ...
    PE[:, 1::2] = np.cos(angles)  # columns 1, 3, 5, ...
    return PE


def add_positions(X, P):
    r"""Add row ``p`` of the position table ``P`` to the token at ``p``.

    .. math:: X' = X + P_{0:n}

    ``P`` has one row per position: a :func:`sinusoidal_position_encoding`
    (fixed), or a learned table (a parameter matrix trained like any weight,
    as in BERT and GPT-2). A table of ``n_max`` rows has nothing to add
    beyond position ``n_max - 1``.

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        P: position table, shape ``(n_max, d_model)`` with ``n_max >= n``.

    Returns:
        Array of shape ``(..., n, d_model)``.

    Raises:
        ValueError: if ``P`` is not a matrix of width ``d_model``, or has
            fewer rows than ``X`` has tokens.
    """
    X = as_real_array("X", X, min_ndim=2)
    P = _check_position_table(P, X.shape)
    n = X.shape[-2]
    return X + P[:n]  # (..., n, d_model)


def rotary_embedding(X, positions=None, base=10000.0):
    r"""Rotary embedding (RoPE): turn each pair of dimensions by an angle.

    The pair ``(x_{2i}, x_{2i+1})`` of the row at position ``m`` turns by
    ``m w_i``, the angles of :func:`position_angles`:

    .. math:: \begin{bmatrix} x'_{2i} \\ x'_{2i+1} \end{bmatrix}
              = \begin{bmatrix} \cos m\omega_i & -\sin m\omega_i \\
                                \sin m\omega_i & \cos m\omega_i
                \end{bmatrix}
                \begin{bmatrix} x_{2i} \\ x_{2i+1} \end{bmatrix}

    Applied to the queries and the keys (not the values), it makes the
    score of a query at ``m`` and a key at ``n`` depend on ``n - m`` only:
    ``R_m q . R_n k = q . R_{n-m} k``. Lengths are kept: ``|R_m x| = |x|``.

    Args:
        X: queries or keys, shape ``(..., n, d)`` with ``d`` even.
        positions: the position of each row, shape ``(n,)``; None means
            ``0, 1, ..., n - 1``.
        base: greater than 1; 10000 in the RoPE paper and in LLaMA.

    Returns:
        Array of shape ``(..., n, d)``.

    Raises:
        ValueError: if ``d`` is odd (the dimensions must pair up),
            ``positions`` does not give one position per row, or ``base``
            is not a finite number greater than 1.
    """
    X = _check_rotary_input(X)
    n, d = X.shape[-2:]
    if positions is None:
        positions = np.arange(n)  # (n,)
    angles = position_angles(_check_positions(positions, X.shape), d, base)
    cos, sin = np.cos(angles), np.sin(angles)  # (n, d/2): m w_i
    x_even, x_odd = X[..., 0::2], X[..., 1::2]  # (..., n, d/2): the pairs
    rotated = np.empty_like(X)  # (..., n, d)
    rotated[..., 0::2] = x_even * cos - x_odd * sin
    rotated[..., 1::2] = x_even * sin + x_odd * cos
    return rotated


def _check_position_vector(positions) -> np.ndarray:
    """Positions: a vector of finite numbers."""
    positions = as_real_array("positions", positions)
    if positions.ndim != 1:
        raise ValueError(f"positions must be a vector (n,), got shape {shape_str(positions.shape)}")
    return positions


def _check_positions(positions, x_shape: tuple[int, ...]) -> np.ndarray:
    """One finite position per row of X."""
    positions = _check_position_vector(positions)
    n = x_shape[-2]
    if positions.shape != (n,):
        raise ValueError(
            f"positions has shape {shape_str(positions.shape)} but X has n={n} rows "
            f"(shape {shape_str(x_shape)}); give one position per row: ({n},)"
        )
    return positions


def _check_rotary_input(X) -> np.ndarray:
    """Queries or keys (..., n, d) whose d splits into pairs."""
    X = as_real_array("X", X, min_ndim=2)
    if X.shape[-1] % 2:
        raise ValueError(
            "rotary_embedding needs an even d (it rotates pairs of dimensions), "
            f"got d={X.shape[-1]} (X shape {shape_str(X.shape)})"
        )
    return X


def _check_position_table(P, x_shape: tuple[int, ...]) -> np.ndarray:
    """A table (n_max, d_model) with a row for each of the n positions of X."""
    P = as_real_array("P", P, min_ndim=2)
    n, d_model = x_shape[-2:]
    if P.ndim != 2 or P.shape[1] != d_model:
        raise ValueError(
            f"P has shape {shape_str(P.shape)} but X has d_model={d_model} "
            f"(shape {shape_str(x_shape)}); P must be (n_max, {d_model})"
        )
    if P.shape[0] < n:
        raise ValueError(
            f"P has rows for {P.shape[0]} positions but X has n={n} tokens; "
            f"the table has no row for positions {P.shape[0]} to {n - 1}"
        )
    return P


def _check_even_width(name: str, d) -> int:
    """A width that splits into pairs of dimensions: a positive even integer."""
    d = check_positive_int(name, d)
    if d % 2:
        raise ValueError(f"{name} must be even (sines and cosines come in pairs), got {name}={d}")
    return d


def _check_base(base) -> float:
    """The base of the frequencies: a finite number greater than 1."""
    is_number = isinstance(base, (int, float, np.integer, np.floating)) and not isinstance(base, bool)
    if not is_number or not np.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number greater than 1, got {base!r}")
    return float(base)
