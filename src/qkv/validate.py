"""Input checks shared by every public function.

Each check raises an error that names the argument, its shape and the rule it
breaks, so that a wrong input never turns into a silently wrong answer.
"""

from __future__ import annotations

import numpy as np


def shape_str(shape: tuple[int, ...]) -> str:
    """Format a shape the way the book writes it: ``(3, 4)``."""
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def as_real_array(name: str, x, *, min_ndim: int = 1, allow_neg_inf: bool = False) -> np.ndarray:
    """Return ``x`` as a float64 array, or raise naming ``name`` and what is wrong.

    Rejects: ragged nested lists, non-numeric or complex data, fewer than
    ``min_ndim`` axes, empty axes, NaN and +inf (and -inf unless ``allow_neg_inf``).
    """
    try:
        raw = np.asarray(x)
    except ValueError as err:  # ragged nested lists
        raise ValueError(f"{name} is not a rectangular array of numbers: {err}") from None
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {raw.dtype} ({type(x).__name__})")
    a = raw.astype(np.float64, copy=False)
    if a.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes, got shape {shape_str(a.shape)}")
    if 0 in a.shape:
        raise ValueError(f"{name} has an empty axis: shape {shape_str(a.shape)}")
    bad = np.isnan(a) | (a == np.inf) if allow_neg_inf else ~np.isfinite(a)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        allowed = "finite numbers or -inf" if allow_neg_inf else "finite numbers"
        raise ValueError(f"{name}{list(index)} is {a[index]}; {name} must hold {allowed}")
    return a


def as_matrix(name: str, x) -> np.ndarray:
    """A parameter matrix: exactly two axes, finite."""
    a = as_real_array(name, x, min_ndim=2)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a matrix (2 axes), got shape {shape_str(a.shape)}")
    return a


def as_bias(name: str, b, width: int, matrix_name: str) -> np.ndarray | None:
    """A bias row for a matrix with ``width`` columns: shape (width,) or (1, width), or None."""
    if b is None:
        return None
    a = as_real_array(name, b, min_ndim=1)
    if a.shape not in ((width,), (1, width)):
        raise ValueError(
            f"{name} has shape {shape_str(a.shape)} but {matrix_name} has {width} columns; "
            f"{name} must have shape ({width},) or (1, {width})"
        )
    return a.reshape(width)


def check_broadcast(what: str, name_a: str, a: tuple[int, ...], name_b: str, b: tuple[int, ...]) -> None:
    """Raise if the leading (batch/head) axes ``a`` and ``b`` do not broadcast."""
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        raise ValueError(
            f"the {what} of {name_a} {shape_str(a)} and {name_b} {shape_str(b)} do not broadcast"
        ) from None


def check_qkv_widths(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> None:
    """Q and K must share d_k (the last axis), K and V the number of keys (axis -2)."""
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"Q has d_k={Q.shape[-1]} but K has d_k={K.shape[-1]}; Q @ K^T needs the same last axis "
            f"(Q {shape_str(Q.shape)}, K {shape_str(K.shape)})"
        )
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"K has n_k={K.shape[-2]} keys but V has {V.shape[-2]} values; every key needs one value row "
            f"(K {shape_str(K.shape)}, V {shape_str(V.shape)})"
        )


def as_mask(mask, scores_shape: tuple[int, ...]) -> np.ndarray:
    """A boolean mask (True = may attend) that broadcasts to ``scores_shape`` (..., n_q, n_k)."""
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(
            f"mask must be boolean (True = may attend, False = blocked), got dtype {m.dtype}; "
            "convert a 0/1 mask with mask.astype(bool)"
        )
    try:
        m = np.broadcast_to(m, scores_shape)
    except ValueError:
        raise ValueError(
            f"mask has shape {shape_str(np.shape(mask))} but the scores have shape "
            f"{shape_str(scores_shape)} (..., n_q, n_k); the mask must broadcast to it"
        ) from None
    blocked_rows = np.argwhere(~m.any(axis=-1))
    if len(blocked_rows):
        row = tuple(int(i) for i in blocked_rows[0])
        raise ValueError(
            f"mask row {list(row)} is all False: query {row[-1]} may attend to no key, "
            "so its attention weights are undefined"
        )
    return m


def check_num_heads(num_heads) -> int:
    """num_heads must be a positive whole number."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, (int, np.integer)) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    return int(num_heads)


def check_head_params(W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None):
    """Validate one head's projections against each other; return them as float arrays.

    W_Q and W_K must be (d_model, d_k), W_V (d_model, d_v), each bias a row that fits.
    """
    W_Q, W_K, W_V = as_matrix("W_Q", W_Q), as_matrix("W_K", W_K), as_matrix("W_V", W_V)
    if W_Q.shape[1] != W_K.shape[1]:
        raise ValueError(
            f"W_Q has d_k={W_Q.shape[1]} columns but W_K has {W_K.shape[1]}; queries and keys "
            f"must have the same width (W_Q {shape_str(W_Q.shape)}, W_K {shape_str(W_K.shape)})"
        )
    for name, W in (("W_K", W_K), ("W_V", W_V)):
        if W.shape[0] != W_Q.shape[0]:
            raise ValueError(
                f"W_Q has d_model={W_Q.shape[0]} rows but {name} has {W.shape[0]}; every projection "
                f"reads the same tokens (W_Q {shape_str(W_Q.shape)}, {name} {shape_str(W.shape)})"
            )
    b_Q = as_bias("b_Q", b_Q, W_Q.shape[1], "W_Q")
    b_K = as_bias("b_K", b_K, W_K.shape[1], "W_K")
    b_V = as_bias("b_V", b_V, W_V.shape[1], "W_V")
    return W_Q, W_K, W_V, b_Q, b_K, b_V


def check_tokens(X, d_model: int, matrix_name: str, name: str = "X") -> np.ndarray:
    """X (called ``name``) must be (..., n, d_model) where d_model is the row count of ``matrix_name``."""
    X = as_real_array(name, X, min_ndim=2)
    if X.shape[-1] != d_model:
        raise ValueError(
            f"{name} has d_model={X.shape[-1]} (shape {shape_str(X.shape)}) but {matrix_name} has "
            f"{d_model} rows; {name} @ {matrix_name} needs {name}.shape[-1] == {matrix_name}.shape[0]"
        )
    return X


def check_positive_int(name: str, value) -> int:
    """A count such as a number of tokens or a width: a whole number >= 1 (not a bool, not a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def as_positive_number(name: str, x) -> float:
    """A positive, finite real number (a kernel's width, a norm's epsilon); not a bool."""
    number = isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
    if not (number and np.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    return float(x)
