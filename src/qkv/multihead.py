"""Multi-head attention, in the per-head form of seed 000 and the fused form of seed 001."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .validate import (
    as_bias,
    as_matrix,
    as_real_array,
    check_head_params,
    check_num_heads,
    check_tokens,
    shape_str,
)
from .attention import linear, scaled_dot_product_attention, self_attention


@dataclass(frozen=True, eq=False)
class Head:
    """One attention head's parameters: ``W_Q, W_K, W_V`` and optional biases.

    Shapes: ``W_Q, W_K`` ``(d_model, d_k)``, ``W_V`` ``(d_model, d_v)``,
    ``b_Q, b_K`` ``(d_k,)``, ``b_V`` ``(d_v,)``. The arrays are stored read-only.
    A head unpacks in the order of :func:`qkv.self_attention`'s parameters:
    ``self_attention(X, *head)``.
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    b_Q: np.ndarray | None = None
    b_K: np.ndarray | None = None
    b_V: np.ndarray | None = None

    def __post_init__(self):
        params = check_head_params(self.W_Q, self.W_K, self.W_V, self.b_Q, self.b_K, self.b_V)
        for name, value in zip(("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"), params):
            if value is not None:
                value = value.copy()
                value.flags.writeable = False
            object.__setattr__(self, name, value)

    def __iter__(self):
        return iter((self.W_Q, self.W_K, self.W_V, self.b_Q, self.b_K, self.b_V))

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d_k(self) -> int:
        return self.W_Q.shape[1]

    @property
    def d_v(self) -> int:
        return self.W_V.shape[1]


def multi_head_attention(X, heads, W_O, b_O=None, mask=None):
    r"""Run every head on ``X``, concatenate their outputs and project with ``W_O``.

    .. math::
        Q^{(i)} = X W_Q^{(i)} + b_Q^{(i)},\ \text{likewise } K^{(i)}, V^{(i)}

        \mathrm{head}^{(i)} = \mathrm{Attention}(Q^{(i)}, K^{(i)}, V^{(i)})

        Y = \mathrm{Concat}(\mathrm{head}^{(1)}, \dots, \mathrm{head}^{(h)}) W_O + b_O

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        heads: sequence of ``h`` :class:`Head` (all with the same ``d_model``).
        W_O: output projection, shape ``(h * d_v, d_out)``
            (usually ``d_out = d_model``).
        b_O: output bias, shape ``(d_out,)`` or None.
        mask: optional boolean ``(..., n, n)``, True = may attend;
            shared by all heads.

    Returns:
        ``(Y, weights)``: ``Y`` of shape ``(..., n, d_out)`` and the heads'
        attention weights stacked to ``(..., h, n, n)``.

    Raises:
        ValueError: if ``heads`` is empty, the heads disagree on ``d_model``, or
            ``W_O`` does not have one row per concatenated output column.
    """
    heads, W_O, b_O = _check_multi_head(X, heads, W_O, b_O)
    # h pairs (output (..., n, d_v), weights (..., n, n))
    per_head = [self_attention(X, *head, mask=mask) for head in heads]
    concat = np.concatenate([o for o, _ in per_head], axis=-1)  # (..., n, h * d_v)
    Y = linear(concat, W_O, b_O)  # (..., n, d_out)
    weights = np.stack([w for _, w in per_head], axis=-3)  # (..., h, n, n)
    return Y, weights


def _check_multi_head(X, heads, W_O, b_O):
    """Validate heads, X and the output projection against each other."""
    heads, W_O, b_O = _check_heads_and_output(heads, W_O, b_O)
    check_tokens(X, heads[0].d_model, "W_Q")
    return heads, W_O, b_O


def _check_heads_and_output(heads, W_O, b_O):
    """Validate the heads against each other and the output projection against the heads."""
    heads = tuple(h if isinstance(h, Head) else Head(*h) for h in heads)
    if not heads:
        raise ValueError("multi_head_attention needs at least one head, got none")
    for i, head in enumerate(heads[1:], start=2):
        if head.d_model != heads[0].d_model:
            raise ValueError(
                f"head 1 reads d_model={heads[0].d_model} but head {i} reads d_model={head.d_model}; "
                "all heads must read the same tokens"
            )
    W_O, b_O = _check_output_projection(W_O, b_O, [head.d_v for head in heads])
    return heads, W_O, b_O


def _check_output_projection(W_O, b_O, widths):
    """W_O needs one row per column of the concatenated head outputs (``widths`` = each head's d_v)."""
    W_O = as_matrix("W_O", W_O)
    if W_O.shape[0] != sum(widths):
        raise ValueError(
            f"W_O has {W_O.shape[0]} rows but the {len(widths)} heads' outputs concatenate to "
            f"{sum(widths)} columns (d_v per head: {', '.join(map(str, widths))})"
        )
    return W_O, as_bias("b_O", b_O, W_O.shape[1], "W_O")


def split_heads(Z, num_heads):
    """Cut the last axis into ``num_heads`` equal slices, the head axis moved forward.

    ``(..., n, d_model) -> (..., h, n, d_k)`` with ``d_k = d_model / h``: the
    numpy form of seed 001's ``Z.view(batch, -1, h, d_k).transpose(1, 2)``.
    Head ``i`` gets columns ``i*d_k`` to ``(i+1)*d_k - 1``.

    Raises:
        ValueError: if ``d_model`` is not divisible by ``num_heads``.
    """
    Z = as_real_array("Z", Z, min_ndim=2)
    num_heads = check_num_heads(num_heads)
    *lead, n, d_model = Z.shape
    if d_model % num_heads:
        raise ValueError(
            f"split_heads: d_model={d_model} (shape {shape_str(Z.shape)}) "
            f"is not divisible by num_heads={num_heads}"
        )
    d_k = d_model // num_heads
    return Z.reshape(*lead, n, num_heads, d_k).swapaxes(-3, -2)  # (..., h, n, d_k)


def merge_heads(Z):
    """Inverse of :func:`split_heads`: ``(..., h, n, d_k) -> (..., n, h * d_k)``.

    Row ``t`` of the result is the concatenation of every head's row ``t``,
    head 1 first.
    """
    Z = as_real_array("Z", Z, min_ndim=3)
    *lead, h, n, d_k = Z.shape
    return Z.swapaxes(-3, -2).reshape(*lead, n, h * d_k)  # (..., n, h * d_k)


def fuse_heads(heads):
    """Stack the heads' projections side by side into one :class:`Head` of width ``h * d_k``.

    ``W_Q = [W_Q^(1) | W_Q^(2) | ...]`` (likewise ``W_K``, ``W_V`` and the biases; a
    missing bias counts as zeros). This is the single ``d_model x d_model`` matrix
    of seed 001's ``query_linear``; :func:`split_heads` undoes the stacking.

    Raises:
        ValueError: if the heads differ in ``d_k`` or ``d_v`` (an equal split is needed).
    """
    heads = tuple(h if isinstance(h, Head) else Head(*h) for h in heads)
    if not heads:
        raise ValueError("fuse_heads needs at least one head, got none")
    for i, head in enumerate(heads[1:], start=2):
        if (head.d_model, head.d_k, head.d_v) != (heads[0].d_model, heads[0].d_k, heads[0].d_v):
            raise ValueError(
                f"head 1 has (d_model, d_k, d_v)={(heads[0].d_model, heads[0].d_k, heads[0].d_v)} but head {i} "
                f"has {(head.d_model, head.d_k, head.d_v)}; fused heads must all have the same sizes"
            )

    d_k, d_v = heads[0].d_k, heads[0].d_v

    def side_by_side(field, width):
        """One parameter of every head, concatenated along its columns; a missing bias is zeros."""
        parts = [getattr(head, field) for head in heads]
        if all(part is None for part in parts):
            return None
        return np.concatenate([np.zeros(width) if part is None else part for part in parts], axis=-1)

    widths = {"W_Q": d_k, "W_K": d_k, "W_V": d_v, "b_Q": d_k, "b_K": d_k, "b_V": d_v}
    return Head(*(side_by_side(field, width) for field, width in widths.items()))


def fused_multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads,
                               b_Q=None, b_K=None, b_V=None, b_O=None, mask=None):
    r"""Multi-head attention with one wide projection per role (seed 001's code).

    .. math::
        Q = X W_Q + b_Q \;\to\; \mathrm{split\_heads}(Q),\ \text{likewise } K, V

        Y = \mathrm{merge\_heads}(\mathrm{Attention}(Q, K, V))\, W_O + b_O

    Equal to :func:`multi_head_attention` with the heads that :func:`fuse_heads`
    stacks.

    Args:
        X: ``(..., n, d_model)``.
        W_Q, W_K: ``(d_model, h * d_k)``.  W_V: ``(d_model, h * d_v)``.
        W_O: ``(h * d_v, d_out)``.  num_heads: ``h``.
        b_Q, b_K, b_V, b_O: rows matching their matrix, or None.
        mask: optional boolean ``(..., n, n)``, True = may attend.

    Returns:
        ``(Y, weights)`` with shapes ``(..., n, d_out)`` and ``(..., h, n, n)``.
    """
    X, num_heads, W_O, b_O = _check_fused(
        X, W_Q, W_K, W_V, W_O, num_heads, b_Q, b_K, b_V, b_O)
    Q = split_heads(linear(X, W_Q, b_Q), num_heads)  # (..., h, n, d_k)
    K = split_heads(linear(X, W_K, b_K), num_heads)  # (..., h, n, d_k)
    V = split_heads(linear(X, W_V, b_V), num_heads)  # (..., h, n, d_v)
    if mask is not None:
        mask = np.expand_dims(mask, -3)  # (..., 1, n, n): one mask for every head
    # (..., h, n, d_v) and (..., h, n, n)
    heads_output, weights = scaled_dot_product_attention(Q, K, V, mask)
    Y = linear(merge_heads(heads_output), W_O, b_O)  # (..., n, d_out)
    return Y, weights


def _check_fused(X, W_Q, W_K, W_V, W_O, num_heads, b_Q, b_K, b_V, b_O):
    """Validate the fused parameters against X, each other and the number of heads."""
    W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V, b_Q, b_K, b_V)
    X = check_tokens(X, W_Q.shape[0], "W_Q")
    num_heads = check_equal_slices(W_Q, W_V, num_heads)
    W_O, b_O = _check_output_projection(W_O, b_O, [W_V.shape[1] // num_heads] * num_heads)
    return X, num_heads, W_O, b_O


def check_equal_slices(W_Q, W_V, num_heads) -> int:
    """The columns of the fused ``W_Q`` (and ``W_K``) and ``W_V`` must cut into ``num_heads`` equal slices."""
    num_heads = check_num_heads(num_heads)
    for name, W in (("W_Q", W_Q), ("W_V", W_V)):
        if W.shape[1] % num_heads:
            raise ValueError(
                f"{name} has {W.shape[1]} columns (shape {shape_str(W.shape)}), "
                f"not divisible by num_heads={num_heads}: every head needs an equal slice"
            )
    return num_heads
