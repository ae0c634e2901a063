"""Every intermediate matrix of an attention forward pass, named as in seed 000.

The book and the exercises show these steps one by one (``Q_raw``, ``B_Q``, ``Q``,
..., ``K_T``, ``S_raw``, ``S``, ``A``, ``O``); a trace records them in one pass so
that nothing has to be recomputed by hand. The final numbers of a trace are the
ones :func:`qkv.self_attention` and :func:`qkv.multi_head_attention` return
(the tests check this).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .validate import as_mask, check_head_params, check_tokens
from .attention import linear, softmax
from .multihead import _check_multi_head


@dataclass(frozen=True)
class Projection:
    """``Z = X W + B``: the product ``raw = X W``, the bias broadcast to a matrix ``B``, and ``Z``."""

    raw: np.ndarray  # (n, d)
    B: np.ndarray  # (n, d), the bias row repeated on every row (zeros if there is none)
    Z: np.ndarray  # (n, d)


def project(X, W, b=None) -> Projection:
    """Record :func:`qkv.linear` in its two visible steps, ``X W`` and ``+ B``."""
    raw = linear(X, W)  # (..., n, d)
    bias = np.zeros(raw.shape[-1]) if b is None else np.reshape(b, -1)  # (d,)
    B = np.broadcast_to(bias, raw.shape)  # (..., n, d): b copied onto every row
    return Projection(raw=raw, B=np.array(B), Z=raw + B)


@dataclass(frozen=True)
class HeadTrace:
    """One head, step by step. Shapes for ``n`` tokens: Q, K ``(n, d_k)``, V ``(n, d_v)``,
    ``K_T`` ``(d_k, n)``, ``S_raw``, ``S``, ``A`` ``(n, n)``, ``O`` ``(n, d_v)``."""

    Q: Projection
    K: Projection
    V: Projection
    K_T: np.ndarray  # (d_k, n)
    scale: float  # sqrt(d_k)
    S_raw: np.ndarray  # (n, n) = Q K^T
    S: np.ndarray  # (n, n) = S_raw / sqrt(d_k)
    A: np.ndarray  # (n, n) = softmax(S) by rows: the attention weights
    O: np.ndarray  # (n, d_v) = A V

    def steps(self) -> list[tuple[str, np.ndarray]]:
        """The matrices in the order seed 000 prints them, with their names."""
        return [
            ("Q_raw", self.Q.raw), ("B_Q", self.Q.B), ("Q", self.Q.Z),
            ("K_raw", self.K.raw), ("B_K", self.K.B), ("K", self.K.Z),
            ("V_raw", self.V.raw), ("B_V", self.V.B), ("V", self.V.Z),
            ("K_T", self.K_T), ("S_raw", self.S_raw), ("S", self.S), ("A", self.A), ("O", self.O),
        ]


def trace_head(X, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None, mask=None) -> HeadTrace:
    """Self-attention of one head on ``X`` ``(..., n, d_model)``, keeping every step.

    Same arguments as :func:`qkv.self_attention`.
    """
    W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V, b_Q, b_K, b_V)
    X = check_tokens(X, W_Q.shape[0], "W_Q")
    Q, K, V = project(X, W_Q, b_Q), project(X, W_K, b_K), project(X, W_V, b_V)
    K_T = K.Z.swapaxes(-1, -2)  # (..., d_k, n)
    scale = float(np.sqrt(Q.Z.shape[-1]))
    S_raw = Q.Z @ K_T  # (..., n, n)
    S = S_raw / scale  # (..., n, n)
    masked = S if mask is None else np.where(as_mask(mask, S.shape), S, -np.inf)
    A = softmax(masked, axis=-1)  # (..., n, n)
    return HeadTrace(Q=Q, K=K, V=V, K_T=K_T, scale=scale, S_raw=S_raw, S=S, A=A, O=A @ V.Z)


@dataclass(frozen=True)
class MultiHeadTrace:
    """Every head's :class:`HeadTrace`, their concatenation and the projected output ``Y``."""

    heads: tuple[HeadTrace, ...]
    O_concat: np.ndarray  # (n, h * d_v)
    Y: Projection  # Y.raw = O_concat W_O, Y.B = the broadcast b_O, Y.Z = Y

    @property
    def weights(self) -> np.ndarray:
        """The heads' attention weights stacked to ``(h, n, n)``."""
        return np.stack([head.A for head in self.heads], axis=-3)


def trace_multi_head(X, heads, W_O, b_O=None, mask=None) -> MultiHeadTrace:
    """Multi-head attention on ``X``, keeping every step. Same arguments as
    :func:`qkv.multi_head_attention`."""
    heads, W_O, b_O = _check_multi_head(X, heads, W_O, b_O)
    traces = tuple(trace_head(X, *head, mask=mask) for head in heads)
    O_concat = np.concatenate([t.O for t in traces], axis=-1)  # (..., n, h * d_v)
    Y = project(O_concat, W_O, b_O)  # (..., n, d_out)
    return MultiHeadTrace(heads=traces, O_concat=O_concat, Y=Y)
