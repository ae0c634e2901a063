"""Masks and cross-attention: the slips problem set 7 recognises, and the steps each one gives.

A mask applied too late, inverted or on the wrong triangle, padding off by one, and keys taken from
the wrong sequence. :func:`masked_softmax_steps` and :func:`cross_attention_steps` compute them for
the hand answers; :mod:`qkv_exercises.functions` names them in the students' functions.
"""

from __future__ import annotations

import numpy as np

from qkv.attention import linear, scaled_dot_product_attention, softmax
from qkv.multihead import Head

from ..slips import ATTENTION_SLIPS, Slip, attention_steps


MASK_ZERO_NOT_NEG_INF = Slip(
    "mask_zero_not_neg_inf",
    "did you set the blocked scores to 0? A blocked score becomes -inf: e^0 = 1 still hands the blocked key a "
    "share of the weight, e^(-inf) = 0 hands it none.",
)

MASK_AFTER_SOFTMAX = Slip(
    "mask_after_softmax",
    "did you mask after the softmax? Zeroing the blocked weights afterwards leaves the row adding up to less "
    "than 1. Mask the scores (blocked ones to -inf) before the softmax, so the allowed keys share all the weight.",
)

MASK_WRONG_TRIANGLE = Slip(
    "mask_wrong_triangle",
    "you masked the wrong triangle: the causal mask lets token i attend to tokens 0 .. i (on and below the "
    "diagonal) and blocks the later ones (above it).",
)

MASK_NOT_APPLIED = Slip(
    "mask_not_applied",
    "your answer is the unmasked one: under the mask, the blocked keys get weight 0 and the allowed keys share "
    "all of it.",
)

MASK_INVERTED = Slip(
    "mask_inverted",
    "True means MAY attend (the convention of qkv and of PyTorch's scaled_dot_product_attention); your mask is "
    "True where the key is blocked.",
)

DIAGONAL_BLOCKED = Slip(
    "diagonal_blocked",
    "a token may attend to itself: the causal mask keeps the diagonal (j <= i), and blocks only later tokens.",
)

PADDING_QUERY_AXIS_MISSING = Slip(
    "padding_query_axis_missing",
    "a padding mask has shape (batch, 1, n): the middle axis of size 1 stands for the queries, so that the "
    "mask broadcasts over the scores (batch, n, n) and blocks the same keys for every query.",
)

PADDING_OFF_BY_ONE = Slip(
    "padding_off_by_one",
    "a sentence of length l holds the real tokens 0 .. l - 1: key j is real when j < l, and [PAD] starts at key l.",
)

CROSS_SOURCES_SWAPPED = Slip(
    "cross_sources_swapped",
    "the queries come from the decoder (the English words) and the keys and values from the encoder "
    "(外送 晚到 補償): one row per English word, one column per Chinese token.",
)

DECODER_KEYS = Slip(
    "decoder_keys",
    "did you take the keys and values from the decoder too? That is the decoder's self-attention; "
    "cross-attention reads the encoder's tokens: one column per Chinese token.",
)

MASK_SLIPS = (MASK_ZERO_NOT_NEG_INF, MASK_AFTER_SOFTMAX, MASK_WRONG_TRIANGLE, MASK_NOT_APPLIED)


def masked_softmax_steps(scores, mask, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``E`` (the exponentials of the masked scores, 0 where blocked) and ``A`` (the weights) of
    ``scores`` ``(..., n_q, n_k)`` under the boolean ``mask`` (True = may attend), with ``slip`` made.

    Without a slip, ``A`` is :func:`qkv.softmax` of the scores with the blocked ones at -inf.
    :data:`MASK_WRONG_TRIANGLE` transposes a square mask; a slip that cannot give a step
    (a row left with no key, a mask that is not square) leaves it out.
    """
    S = np.asarray(scores, dtype=float)
    M = np.broadcast_to(np.asarray(mask, dtype=bool), S.shape)
    with np.errstate(over="ignore"):  # e^S of large scores: E is asked of hand-sized scores only
        return _masked_softmax_steps(S, M, slip)


def _masked_softmax_steps(S: np.ndarray, M: np.ndarray, slip: Slip | None) -> dict[str, np.ndarray]:
    if slip is None:
        return {"E": np.where(M, np.exp(S), 0.0), "A": softmax(np.where(M, S, -np.inf))}
    if slip == MASK_ZERO_NOT_NEG_INF:
        zeroed = np.where(M, S, 0.0)
        return {"E": np.exp(zeroed), "A": softmax(zeroed)}
    if slip == MASK_AFTER_SOFTMAX:
        return {"A": softmax(S) * M}
    if slip in (MASK_WRONG_TRIANGLE, MASK_INVERTED):
        other = M.swapaxes(-1, -2) if slip == MASK_WRONG_TRIANGLE else ~M
        if other.shape != S.shape or not other.any(axis=-1).all():
            return {}
        return {"E": np.where(other, np.exp(S), 0.0), "A": softmax(np.where(other, S, -np.inf))}
    if slip == MASK_NOT_APPLIED:
        return {"E": np.exp(S), "A": softmax(S)}
    return {}


def cross_attention_steps(X_q, X_kv, head: Head, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``Q``, ``S_raw``, ``S``, ``A`` and ``O`` of cross-attention (queries from ``X_q``, keys and
    values from ``X_kv``), with ``slip`` made: one of :data:`ATTENTION_SLIPS`, or
    :data:`CROSS_SOURCES_SWAPPED` (queries from ``X_kv``, keys and values from ``X_q``) or
    :data:`DECODER_KEYS` (keys and values from ``X_q`` too)."""
    head = head if isinstance(head, Head) else Head(*head)
    X_q, X_kv = np.asarray(X_q, dtype=float), np.asarray(X_kv, dtype=float)
    if slip == CROSS_SOURCES_SWAPPED:
        X_q, X_kv = X_kv, X_q
    elif slip == DECODER_KEYS:
        X_kv = X_q
    Q = linear(X_q, head.W_Q, head.b_Q)  # (n_q, d_k)
    K = linear(X_kv, head.W_K, head.b_K)  # (n_k, d_k)
    V = linear(X_kv, head.W_V, head.b_V)  # (n_k, d_v)
    within = slip if slip in ATTENTION_SLIPS else None
    steps = attention_steps(Q, K, V, within)
    return {"Q": Q, **steps} if slip is None or slip in (CROSS_SOURCES_SWAPPED, DECODER_KEYS) else steps
