"""Grouped-query attention (GQA) and multi-query attention (MQA): query heads that share keys and values.

Multi-head attention gives each of its ``h`` heads its own queries, keys and values. At decoding
time the keys and values are what the cache keeps (:mod:`qkv.decoding`), so sharing them saves
memory: with ``g`` key/value heads, each serving ``h / g`` query heads, the cache is ``h / g``
times smaller. ``g = h`` is multi-head attention, ``g = 1`` multi-query attention (Shazeer
2019), and ``1 < g < h`` grouped-query attention (Ainslie et al. 2023), as in Llama 2 70B and
Mistral 7B. Query head ``i`` reads key/value head ``i // (h / g)``: the heads ``0 .. h/g - 1``
share the first, the next ``h/g`` the second, and so on (the grouping of PyTorch's
``scaled_dot_product_attention(..., enable_gqa=True)``).
"""

from __future__ import annotations

import numpy as np

from .attention import linear, scaled_dot_product_attention
from .multihead import merge_heads, split_heads
from .validate import (
    as_matrix,
    as_real_array,
    check_broadcast,
    check_num_heads,
    check_qkv_widths,
    check_tokens,
    shape_str,
)


def kv_head_of(h, g):
    r"""The key/value head that each query head reads: ``i // (h / g)``.

    .. math:: \mathrm{kv}(i) = \left\lfloor \frac{i}{h / g} \right\rfloor,
              \qquad i = 0, \dots, h - 1

    Args:
        h: the number of query heads.
        g: the number of key/value heads; ``h`` must be a multiple of ``g``.

    Returns:
        Integer array of shape ``(h,)``: entry ``i`` is the key/value head of query
        head ``i``.

    Raises:
        ValueError: if ``h`` or ``g`` is not a positive integer, or ``h`` is not a
            multiple of ``g``.
    """
    h, g = _check_group_sizes(h, g)
    return np.arange(h) // (h // g)  # (h,): h/g query heads per key/value head


def grouped_query_attention(Q, K, V, mask=None):
    r"""Attention of ``h`` query heads over ``g`` shared key/value heads.

    .. math::
        O^{(i)} = \mathrm{softmax}\!\left(
            \frac{Q^{(i)} K^{(\mathrm{kv}(i))\top}}{\sqrt{d_k}}\right)
            V^{(\mathrm{kv}(i))},
        \qquad \mathrm{kv}(i) = \left\lfloor \frac{i}{h / g} \right\rfloor

    ``g = h`` is multi-head attention (each head its own keys and values), ``g = 1``
    multi-query attention (one set of keys and values for every head).

    Args:
        Q: queries, shape ``(..., h, n, d_k)``.
        K: keys, shape ``(..., g, m, d_k)``, with ``h`` a multiple of ``g``.
        V: values, shape ``(..., g, m, d_v)``.
        mask: optional boolean array broadcastable to ``(..., h, n, m)``, True = may
            attend (for example :func:`qkv.causal_mask`, shared by every head).

    Returns:
        ``(output, weights)`` with shapes ``(..., h, n, d_v)`` and ``(..., h, n, m)``.

    Raises:
        ValueError: if an array has fewer than three axes, ``K`` and ``V`` differ in
            ``g``, ``h`` is not a multiple of ``g``, or the shapes do not fit as in
            :func:`qkv.scaled_dot_product_attention`.
        TypeError: if ``mask`` is not boolean.
    """
    Q, K, V = _check_grouped(Q, K, V)
    h, g = Q.shape[-3], K.shape[-3]
    shared = kv_head_of(h, g)  # (h,)
    K_per_head = K[..., shared, :, :]  # (..., h, m, d_k): a group's keys, h/g times
    V_per_head = V[..., shared, :, :]  # (..., h, m, d_v)
    return scaled_dot_product_attention(Q, K_per_head, V_per_head, mask)


def grouped_query_self_attention(X, W_Q, W_K, W_V, W_O, num_heads, num_kv_heads,
                                 mask=None):
    r"""Self-attention of ``h`` query heads over ``g`` key/value heads, fused form.

    .. math::
        Q = \mathrm{split}_h(X W_Q),\quad K = \mathrm{split}_g(X W_K),\quad
        V = \mathrm{split}_g(X W_V)

        Y = \mathrm{merge}(\mathrm{GQA}(Q, K, V))\, W_O

    :func:`qkv.fused_multi_head_attention` with the key and value projections narrowed
    from ``h * d_k`` to ``g * d_k`` columns; ``num_kv_heads = num_heads`` is that
    function exactly.

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        W_Q: ``(d_model, h * d_k)``.  W_K: ``(d_model, g * d_k)``.  W_V:
            ``(d_model, g * d_v)``.
        W_O: ``(h * d_v, d_out)``.
        num_heads: ``h``, the query heads.  num_kv_heads: ``g``, a divisor of ``h``.
        mask: optional boolean ``(..., n, n)``, True = may attend; shared by all
            heads.

    Returns:
        ``(Y, weights)`` with shapes ``(..., n, d_out)`` and ``(..., h, n, n)``.

    Raises:
        ValueError: naming the projection whose columns do not cut into its heads, or
            the argument whose shape does not fit the others.
    """
    h, g = _check_group_sizes(num_heads, num_kv_heads)
    W_Q, W_K, W_V, W_O = (as_matrix(name, W) for name, W in
                          (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V), ("W_O", W_O)))
    X = check_tokens(X, W_Q.shape[0], "W_Q")
    _check_fused_widths(W_Q, W_K, W_V, W_O, h, g)
    Q = split_heads(linear(X, W_Q), h)  # (..., h, n, d_k)
    K = split_heads(linear(X, W_K), g)  # (..., g, n, d_k)
    V = split_heads(linear(X, W_V), g)  # (..., g, n, d_v)
    if mask is not None:
        mask = np.expand_dims(mask, -3)  # (..., 1, n, n): one mask for every head
    heads_output, weights = grouped_query_attention(Q, K, V, mask)  # (..., h, n, d_v)
    Y = linear(merge_heads(heads_output), W_O)  # (..., n, d_out)
    return Y, weights  # weights: (..., h, n, n)


def _check_group_sizes(h, g) -> tuple[int, int]:
    """h query heads in groups over g key/value heads: g must divide h."""
    h, g = check_num_heads(h), check_num_heads(g)
    if h % g:
        raise ValueError(
            f"{h} query heads do not share {g} key/value heads evenly: h must be a multiple of g "
            f"(each key/value head serves h / g query heads)"
        )
    return h, g


def _check_grouped(Q, K, V):
    """Q (..., h, n, d_k), K (..., g, m, d_k), V (..., g, m, d_v) with g dividing h."""
    arrays = {name: as_real_array(name, x, min_ndim=3) for name, x in (("Q", Q), ("K", K), ("V", V))}
    Q, K, V = arrays["Q"], arrays["K"], arrays["V"]
    if K.shape[-3] != V.shape[-3]:
        raise ValueError(
            f"K has {K.shape[-3]} key heads but V has {V.shape[-3]} value heads "
            f"(K {shape_str(K.shape)}, V {shape_str(V.shape)}); each key head has one value head"
        )
    h, g = Q.shape[-3], K.shape[-3]
    if h % g:
        raise ValueError(
            f"Q has h={h} query heads (shape {shape_str(Q.shape)}) but K has g={g} key/value heads "
            f"(shape {shape_str(K.shape)}); h must be a multiple of g, axis -3 of each"
        )
    check_qkv_widths(Q, K, V)
    check_broadcast("leading (batch) axes", "Q", Q.shape[:-3], "K", K.shape[:-3])
    check_broadcast("leading (batch) axes", "K", K.shape[:-3], "V", V.shape[:-3])
    return Q, K, V


def _check_fused_widths(W_Q, W_K, W_V, W_O, h: int, g: int) -> None:
    """The fused projections' columns cut into h query slices and g key/value slices."""
    for name, W in (("W_K", W_K), ("W_V", W_V)):
        if W.shape[0] != W_Q.shape[0]:
            raise ValueError(f"W_Q has d_model={W_Q.shape[0]} rows but {name} has {W.shape[0]}; "
                             "every projection reads the same tokens")
    for name, W, heads in (("W_Q", W_Q, h), ("W_K", W_K, g), ("W_V", W_V, g)):
        if W.shape[1] % heads:
            raise ValueError(f"{name} has {W.shape[1]} columns (shape {shape_str(W.shape)}), "
                             f"not divisible by its {heads} heads")
    d_k, d_k_kv, d_v = W_Q.shape[1] // h, W_K.shape[1] // g, W_V.shape[1] // g
    if d_k != d_k_kv:
        raise ValueError(f"W_Q cuts into {h} query heads of width {d_k} but W_K into {g} key heads "
                         f"of width {d_k_kv}; queries and keys need the same d_k")
    if W_O.shape[0] != h * d_v:
        raise ValueError(f"W_O has {W_O.shape[0]} rows but the {h} heads' outputs concatenate to "
                         f"{h} x {d_v} = {h * d_v} columns")
