"""The backward pass of attention: how a loss changes with ``Q``, ``K``, ``V`` and with a
multi-head layer's parameters, given how it changes with the layer's output.

Training moves every parameter against its gradient, the derivative of the loss with respect to
it. The forward pass of one head runs three steps,

    S = Q K^T / sqrt(d_k),   A = softmax(S),   O = A V,

and backpropagation runs them in reverse: each step turns the gradient of its output into the
gradient of its inputs (the chain rule). A gradient has the shape of what it is the gradient of:
``dQ`` is the array of :math:`\\partial L / \\partial Q_{ij}`, shaped like ``Q``.

Nothing here computes a loss: the caller hands in ``dO`` (or ``dY``), the gradient that arrives
from above. :func:`central_differences` approximates any gradient from the function alone, which
is how the analytic gradients here are checked (and PyTorch's autograd, in the tests).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .attention import _check_qkv, linear, scaled_dot_product_attention
from .block import MultiHead
from .multihead import Head, _check_multi_head
from .validate import as_matrix, as_positive_number, as_real_array, shape_str


def softmax_backward(A, dA):
    r"""The gradient at the scores of a row-wise softmax, from the gradient at its
    weights.

    .. math::
        dS_{ij} = A_{ij}\Big(dA_{ij} - \sum_m dA_{im}\, A_{im}\Big)

    This is each row's Jacobian,
    :math:`\partial A_{ij} / \partial S_{im} = A_{ij}(\delta_{jm} - A_{im})`,
    applied to that row's ``dA``: the diagonal gives :math:`A_{ij}\, dA_{ij}`, and
    the off-diagonal entries take back from every score the weighted mean of
    ``dA``. A masked entry (weight 0) gets gradient 0.

    Args:
        A: the softmax's output, shape ``(..., n_q, n_k)``; rows sum to 1.
        dA: the gradient at the weights, the same shape.

    Returns:
        ``dS``, shape ``(..., n_q, n_k)``; every row of it sums to 0.

    Raises:
        ValueError: if ``A`` and ``dA`` differ in shape.
    """
    A = as_real_array("A", A)
    dA = as_real_array("dA", dA)
    if A.shape != dA.shape:
        raise ValueError(
            f"A has shape {shape_str(A.shape)} but dA has {shape_str(dA.shape)}; "
            "a gradient has the shape of what it is the gradient of")
    weighted_mean = np.sum(dA * A, axis=-1, keepdims=True)  # (..., n_q, 1)
    return A * (dA - weighted_mean)  # (..., n_q, n_k)


def attention_backward(Q, K, V, dO, mask=None):
    r"""The gradients of a loss at ``Q``, ``K`` and ``V`` of one head, from the
    gradient ``dO`` at its output.

    The forward pass is :func:`qkv.scaled_dot_product_attention`, run again here
    for its weights ``A``. Backwards, step by step:

    .. math::
        dV = A^\top dO, \qquad dA = dO\, V^\top,

        dS = A \odot \big(dA - \mathrm{rowsum}(dA \odot A)\big),

        dQ = \frac{dS\, K}{\sqrt{d_k}}, \qquad dK = \frac{dS^\top Q}{\sqrt{d_k}}

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        dO: the gradient at the output, shape ``(..., n_q, d_v)``.
        mask: optional boolean, broadcastable to ``(..., n_q, n_k)``, True = may
            attend (as in the forward pass; a blocked score gets no gradient).

    Returns:
        ``(dQ, dK, dV)``, shaped like ``Q``, ``K`` and ``V``. An input whose
        leading axes were broadcast (one ``K`` for several batches of queries)
        gets the sum of its copies' gradients.

    Raises:
        ValueError: as :func:`qkv.scaled_dot_product_attention`, or if ``dO``
            does not have the output's shape.
    """
    Q, K, V = _check_qkv(Q, K, V)
    _, A = scaled_dot_product_attention(Q, K, V, mask)  # (..., n_q, n_k)
    output_shape = A.shape[:-1] + V.shape[-1:]  # (..., n_q, d_v)
    dO = as_real_array("dO", dO, min_ndim=2)
    if dO.shape != output_shape:
        raise ValueError(
            f"dO has shape {shape_str(dO.shape)} but the output has "
            f"{shape_str(output_shape)} (..., n_q, d_v); dO is the gradient at "
            "the output and has its shape")
    return _backward_through_weights(Q, K, V, A, dO)


def _backward_through_weights(Q, K, V, A, dO):
    """:func:`attention_backward` once the forward pass's weights ``A`` are known (checked arrays)."""
    scale = np.sqrt(Q.shape[-1])
    dV = A.swapaxes(-1, -2) @ dO  # (..., n_k, d_v): A transposed
    dA = dO @ V.swapaxes(-1, -2)  # (..., n_q, n_k)
    dS = softmax_backward(A, dA)  # (..., n_q, n_k)
    dQ = dS @ K / scale  # (..., n_q, d_k)
    dK = dS.swapaxes(-1, -2) @ Q / scale  # (..., n_k, d_k)
    return _sum_to_shape(dQ, Q.shape), _sum_to_shape(dK, K.shape), _sum_to_shape(dV, V.shape)


def _sum_to_shape(gradient: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``gradient`` over the axes that broadcasting added or stretched, back to ``shape``.

    An input that was broadcast was used once per copy, so its gradient adds the copies' gradients.
    """
    extra = gradient.ndim - len(shape)
    summed = gradient.sum(axis=tuple(range(extra))) if extra else gradient
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and summed.shape[i] != 1)
    return summed.sum(axis=stretched, keepdims=True) if stretched else summed


def linear_backward(X, W, dZ):
    r"""The gradients of a loss at ``X``, ``W`` and the bias of :func:`qkv.linear`, from ``dZ``.

    .. math::
        Z = X W + \mathbf{1} b:

        dX = dZ\, W^\top, \qquad dW = X^\top dZ,

        db = \mathbf{1}^\top dZ

    ``dW`` and ``db`` add up the contributions of every row of ``X`` (every token of every batch):
    the same ``W`` projected them all.

    Args:
        X: the inputs, shape ``(..., n, d_in)``.
        W: the weights, shape ``(d_in, d_out)``.
        dZ: the gradient at the output, shape ``(..., n, d_out)``.

    Returns:
        ``(dX, dW, db)`` of shapes ``(..., n, d_in)``, ``(d_in, d_out)`` and ``(d_out,)``.

    Raises:
        ValueError: if a shape does not fit, naming it.
    """
    X = as_real_array("X", X, min_ndim=2)
    W = as_matrix("W", W)
    dZ = as_real_array("dZ", dZ, min_ndim=2)
    expected = X.shape[:-1] + W.shape[1:]
    if X.shape[-1] != W.shape[0] or dZ.shape != expected:
        raise ValueError(f"X {shape_str(X.shape)} @ W {shape_str(W.shape)} does not give dZ's shape "
                         f"{shape_str(dZ.shape)}; dZ must be (..., n, d_out) with X's leading axes")
    X_rows = X.reshape(-1, X.shape[-1])  # (rows, d_in): every token of every batch
    dZ_rows = dZ.reshape(-1, dZ.shape[-1])  # (rows, d_out)
    return dZ @ W.T, X_rows.T @ dZ_rows, dZ_rows.sum(axis=0)


def multi_head_attention_backward(X, dY, heads, W_O, b_O=None, mask=None):
    r"""The gradients of a loss at the input and at every parameter of
    :func:`qkv.multi_head_attention`.

    Backwards through :math:`Y = \mathrm{Concat}(\mathrm{head}^{(1)}, \dots)\,
    W_O + b_O`: the gradient at the concatenation is cut into one ``dO`` per head;
    each head's :func:`attention_backward` gives ``dQ``, ``dK``, ``dV``, and
    :func:`linear_backward` takes each back through its projection:

    .. math::
        dW_Q^{(i)} = X^\top dQ^{(i)}, \quad dW_K^{(i)} = X^\top dK^{(i)}, \quad
        dW_V^{(i)} = X^\top dV^{(i)},

        dX = \sum_i dQ^{(i)} W_Q^{(i)\top} + dK^{(i)} W_K^{(i)\top}
        + dV^{(i)} W_V^{(i)\top}

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        dY: the gradient at the output ``Y``, shape ``(..., n, d_out)``.
        heads, W_O, b_O, mask: as in :func:`qkv.multi_head_attention` (a
            :class:`qkv.MultiHead` unpacks into ``heads, W_O, b_O``).

    Returns:
        ``(dX, gradients)``: ``dX`` shaped like ``X``, and a
        :class:`qkv.MultiHead` that holds, in place of each parameter, the
        gradient at it (``None`` where the layer has no such bias).

    Raises:
        ValueError: as :func:`qkv.multi_head_attention`, or if ``dY`` does not
            have the shape of ``Y``.
    """
    heads, W_O, b_O = _check_multi_head(X, heads, W_O, b_O)
    X = as_real_array("X", X, min_ndim=2)
    # 1) forward again, keeping each head's Q, K, V and weights A
    projected = [tuple(linear(X, W, b) for W, b in
                       ((h.W_Q, h.b_Q), (h.W_K, h.b_K), (h.W_V, h.b_V)))
                 for h in heads]
    attended = [scaled_dot_product_attention(Q, K, V, mask)  # (output, A)
                for Q, K, V in projected]
    concat = np.concatenate([O for O, _ in attended], axis=-1)  # (..., n, h d_v)
    Y_shape = concat.shape[:-1] + W_O.shape[1:]
    dY = as_real_array("dY", dY, min_ndim=2)
    if dY.shape != Y_shape:
        raise ValueError(f"dY has shape {shape_str(dY.shape)} but Y has "
                         f"{shape_str(Y_shape)}; dY has the shape of Y")
    # 2) through W_O, then cut the concatenation's gradient into one dO per head
    d_concat, dW_O, db_O = linear_backward(concat, W_O, dY)  # (..., n, h d_v)
    d_outputs = np.split(d_concat, np.cumsum([h.d_v for h in heads])[:-1], axis=-1)
    dX = np.zeros_like(X)
    head_gradients = []
    for head, (Q, K, V), (_, A), dO in zip(heads, projected, attended, d_outputs):
        # 3) through attention, then 4) through each projection into X
        dQ, dK, dV = _backward_through_weights(Q, K, V, A, dO)
        gradients = []
        for W, b, dZ in ((head.W_Q, head.b_Q, dQ), (head.W_K, head.b_K, dK),
                         (head.W_V, head.b_V, dV)):
            dX_part, dW, db = linear_backward(X, W, dZ)
            dX += dX_part
            gradients += [dW, None if b is None else db]
        dW_Q, db_Q, dW_K, db_K, dW_V, db_V = gradients
        head_gradients.append(Head(dW_Q, dW_K, dW_V, db_Q, db_K, db_V))
    db_O = None if b_O is None else db_O
    return dX, MultiHead(tuple(head_gradients), dW_O, db_O)


def central_differences(f: Callable[[np.ndarray], float], x, h: float = 1e-5):
    r"""The gradient of a scalar function ``f`` at ``x``, one entry at a time.

    .. math::
        \frac{\partial f}{\partial x_k}
        \approx \frac{f(x + h\,e_k) - f(x - h\,e_k)}{2h}

    :math:`e_k` is 1 at entry :math:`k` and 0 elsewhere. The error falls like
    :math:`h^2` until rounding takes over (about :math:`10^{-16}/h` in float64),
    so a step near :math:`10^{-5}` agrees with an exact gradient to about
    :math:`10^{-10}`. It costs two calls of ``f`` per entry: a check, not a way
    to train.

    Args:
        f: takes an array shaped like ``x`` and returns one number (a loss).
        x: where the gradient is taken, any shape; it is not changed.
        h: the step, a positive number.

    Returns:
        Array of the shape of ``x``.

    Raises:
        ValueError: if ``h`` is not positive, or ``f`` does not return one
            finite number.
    """
    x = as_real_array("x", x, min_ndim=0)
    h = as_positive_number("h", h)
    gradient = np.zeros_like(x)
    shifted = x.copy()
    for k in np.ndindex(x.shape):
        shifted[k] = x[k] + h
        above = _scalar(f(shifted))
        shifted[k] = x[k] - h
        below = _scalar(f(shifted))
        shifted[k] = x[k]
        gradient[k] = (above - below) / (2 * h)
    return gradient


def _scalar(value) -> float:
    value = np.asarray(value, dtype=float)
    if value.size != 1 or not np.isfinite(value).all():
        raise ValueError(f"central_differences: f must return one finite number, got {value!r}")
    return float(value.reshape(()))
