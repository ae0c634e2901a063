"""Hypothesis strategies for attention inputs: small shapes, moderate finite values."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import qkv

values = st.floats(min_value=-4, max_value=4, allow_nan=False, allow_infinity=False, width=64)
sizes = st.integers(min_value=1, max_value=5)


def matrices(shape) -> st.SearchStrategy[np.ndarray]:
    return arrays(np.float64, shape, elements=values)


@st.composite
def masks(draw, n_q: int, n_k: int) -> np.ndarray:
    """A boolean (n_q, n_k) mask with at least one True per row (True = may attend)."""
    mask = draw(arrays(np.bool_, (n_q, n_k)))
    keep = draw(st.lists(st.integers(0, n_k - 1), min_size=n_q, max_size=n_q))
    mask[np.arange(n_q), keep] = True
    return mask


@st.composite
def attention_inputs(draw, with_mask: bool = False, batch_shape: tuple[int, ...] = ()):
    """(Q, K, V, mask) with Q (..., n_q, d_k), K (..., n_k, d_k), V (..., n_k, d_v)."""
    n_q, n_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    Q = draw(matrices((*batch_shape, n_q, d_k)))
    K = draw(matrices((*batch_shape, n_k, d_k)))
    V = draw(matrices((*batch_shape, n_k, d_v)))
    mask = draw(masks(n_q, n_k)) if with_mask else None
    return Q, K, V, mask


@st.composite
def heads(draw, d_model: int, count: int, d_k: int, d_v: int, biases: bool = True) -> list[qkv.Head]:
    out = []
    for _ in range(count):
        bias = (lambda width: draw(st.none() | matrices((width,)))) if biases else (lambda width: None)
        out.append(qkv.Head(
            draw(matrices((d_model, d_k))), draw(matrices((d_model, d_k))), draw(matrices((d_model, d_v))),
            bias(d_k), bias(d_k), bias(d_v),
        ))
    return out


@st.composite
def multi_head_inputs(draw, uniform: bool = False):
    """(X, heads, W_O, b_O): X (n, d_model), h heads, W_O (sum of d_v, d_model).

    With ``uniform`` every head has the same d_k and d_v (what the fused form needs);
    otherwise each head draws its own.
    """
    n, d_model, h = draw(sizes), draw(sizes), draw(st.integers(1, 3))
    X = draw(matrices((n, d_model)))
    d_k, d_v = draw(sizes), draw(sizes)
    hs = []
    for _ in range(h):
        if not uniform:
            d_k, d_v = draw(sizes), draw(sizes)
        hs += draw(heads(d_model, 1, d_k, d_v))
    W_O = draw(matrices((sum(head.d_v for head in hs), d_model)))
    b_O = draw(st.none() | matrices((d_model,)))
    return X, hs, W_O, b_O
