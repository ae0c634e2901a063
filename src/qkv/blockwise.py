"""Attention that never holds the n x n matrix: the online softmax and blockwise attention.

:func:`qkv.scaled_dot_product_attention` builds the whole ``(n_q, n_k)`` matrix of scores and of
weights. Here the keys are read one block at a time; each query keeps three running quantities
(the largest score so far ``m``, the sum of exponentials so far ``l``, and the unnormalised
output so far), and rescales them whenever a later block brings a larger score. This is the idea
behind FlashAttention (Dao et al., 2022), written in numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .attention import _check_qkv
from .validate import as_mask, as_real_array, check_positive_int, shape_str


class OnlineSoftmaxStep(NamedTuple):
    """The state of the online softmax after one block of scores.

    ``block_max``: the largest score of the block; ``running_max``: the largest score so far
    (``m``); ``rescale``: the factor ``e^(m_old - m)`` that the sum so far was multiplied by;
    ``running_sum``: the sum of ``e^(s - m)`` over every score so far (``l``).
    """

    block: np.ndarray
    block_max: float
    running_max: float
    rescale: float
    running_sum: float


def online_softmax_update(running_max, running_sum, block_scores):
    r"""Fold one block of scores into the running maximum and running sum.

    .. math::
        m' = \max\big(m,\ \max_j s_j\big), \qquad
        l' = l\, e^{m - m'} + \sum_j e^{s_j - m'}

    Starting from ``m = -inf`` and ``l = 0`` and folding in every block,
    ``l`` ends as :math:`\sum_j e^{s_j - \max s}`, the softmax's denominator,
    however the scores were cut into blocks.

    Args:
        running_max: ``m``, shape ``(..., 1)``; ``-inf`` before any block.
        running_sum: ``l``, shape ``(..., 1)``; ``0`` before the first block.
        block_scores: the block's scores ``(..., b)``; ``-inf`` where masked.

    Returns:
        ``(m', l', rescale, exponentials)``: the new maximum and sum
        ``(..., 1)``; the factor :math:`e^{m - m'}` ``(..., 1)`` by which
        everything accumulated so far must be multiplied; and
        :math:`e^{s_j - m'}` ``(..., b)``.

    Raises:
        ValueError: if ``m`` or ``l`` does not have one entry per row of the
            block, shape ``(..., 1)``.
    """
    _check_running(running_max, running_sum, block_scores)
    block_max = block_scores.max(axis=-1, keepdims=True)  # (..., 1)
    new_max = np.maximum(running_max, block_max)  # (..., 1)
    # A row whose scores so far are all -inf (masked) has nothing to rescale.
    shift = np.where(np.isneginf(new_max), 0.0, new_max)  # (..., 1)
    rescale = np.exp(running_max - shift)  # (..., 1): 1 if the max stayed
    exponentials = np.exp(block_scores - shift)  # (..., b), each <= 1
    block_sum = exponentials.sum(axis=-1, keepdims=True)  # (..., 1)
    new_sum = running_sum * rescale + block_sum  # (..., 1)
    return new_max, new_sum, rescale, exponentials


def _check_running(running_max, running_sum, block_scores) -> None:
    """The running max and sum hold one number per row of the block: shape (..., 1)."""
    expected = (*np.shape(block_scores)[:-1], 1)
    for name, value in (("running_max", running_max), ("running_sum", running_sum)):
        if np.shape(value) != expected:
            raise ValueError(
                f"{name} has shape {shape_str(np.shape(value))} but the block of scores has shape "
                f"{shape_str(np.shape(block_scores))}; {name} needs one entry per row: {shape_str(expected)}"
            )


def online_softmax(blocks):
    r"""The softmax of a row of scores that arrives in blocks, read once.

    .. math::
        m_0 = -\infty,\quad l_0 = 0; \qquad
        m_t = \max\big(m_{t-1}, \max_{j \in t} s_j\big),

        l_t = l_{t-1}\, e^{m_{t-1} - m_t} + \sum_{j \in t} e^{s_j - m_t};
        \qquad \mathrm{softmax}(s)_j = e^{s_j - m_T} / l_T

    The last step needs the scores again; attention avoids that by carrying
    the weighted sum of the values along (see :func:`blockwise_attention`).

    Args:
        blocks: a sequence of 1-D arrays, consecutive pieces of one row.

    Returns:
        ``(weights, steps)``: the softmax of the whole row, shape ``(n,)``,
        and one :class:`OnlineSoftmaxStep` per block.

    Raises:
        ValueError: if there are no blocks, a block is not 1-D, or every
            score is ``-inf``.
    """
    blocks = _check_blocks(blocks)
    running_max, running_sum = np.array([-np.inf]), np.array([0.0])  # (1,)
    steps = []
    for block in blocks:
        running_max, running_sum, rescale, _ = online_softmax_update(
            running_max, running_sum, block)
        steps.append(OnlineSoftmaxStep(
            block, float(block.max()), float(running_max[0]),
            float(rescale[0]), float(running_sum[0])))
    scores = np.concatenate(blocks)  # (n,)
    weights = np.exp(scores - running_max) / running_sum  # (n,)
    return weights, steps


def _check_blocks(blocks):
    if isinstance(blocks, np.ndarray) and blocks.ndim == 1:
        raise ValueError(
            f"online_softmax needs a sequence of blocks, got one array of shape "
            f"{shape_str(blocks.shape)}; split it, e.g. [scores[:2], scores[2:]]"
        )
    blocks = [as_real_array(f"block {t}", block, allow_neg_inf=True)
              for t, block in enumerate(blocks)]
    if not blocks:
        raise ValueError("online_softmax needs at least one block of scores, got none")
    for t, block in enumerate(blocks):
        if block.ndim != 1:
            raise ValueError(
                f"block {t} must be a vector of scores, got shape {shape_str(block.shape)}")
    if all(np.isneginf(block).all() for block in blocks):
        raise ValueError("online_softmax: every score is -inf (fully masked); nothing to normalise")
    return blocks


def blockwise_attention(Q, K, V, block_size, mask=None):
    r"""Scaled dot-product attention, block by block, never holding n x n.

    For each block of queries the keys and values are read one block at a
    time. Per query the running maximum ``m``, the running sum ``l`` and the
    unnormalised output ``u`` are updated (:func:`online_softmax_update`),
    and ``u / l`` is the output:

    .. math::
        m' = \max(m, \max_j s_j), \quad
        l' = l\, e^{m - m'} + \textstyle\sum_j e^{s_j - m'},

        u' = u\, e^{m - m'} + \textstyle\sum_j e^{s_j - m'} v_j

    The largest array it holds is one block of scores, ``block_size`` by
    ``block_size`` per leading index. It cannot return the weights: they are
    the ``n_q x n_k`` matrix it avoids. It returns their log-normaliser
    :math:`\mathrm{lse}_i = m_i + \log l_i` instead, from which any weight
    can be recomputed as :math:`A_{ij} = e^{s_{ij} - \mathrm{lse}_i}` (what
    FlashAttention keeps for the backward pass).

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        block_size: queries and keys per block, a positive integer.
        mask: optional boolean array broadcastable to ``(..., n_q, n_k)``,
            True = may attend; a broadcast view costs no memory.

    Returns:
        ``(output, logsumexp)`` with shapes ``(..., n_q, d_v)`` and
        ``(..., n_q)``.

    Raises:
        ValueError: as :func:`qkv.scaled_dot_product_attention`, or if
            ``block_size`` is not a positive integer.
        TypeError: if ``mask`` is not boolean.
    """
    Q, K, V = _check_qkv(Q, K, V)
    block_size = check_positive_int("block_size", block_size)
    n_q, n_k = Q.shape[-2], K.shape[-2]
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    if mask is not None:
        mask = as_mask(mask, (*lead, n_q, n_k))  # a broadcast view, no copy
    output = np.empty((*lead, n_q, V.shape[-1]))  # (..., n_q, d_v)
    logsumexp = np.empty((*lead, n_q))  # (..., n_q)
    for start in range(0, n_q, block_size):
        rows = slice(start, start + block_size)
        rows_mask = None if mask is None else mask[..., rows, :]
        output[..., rows, :], logsumexp[..., rows] = _query_block(
            Q[..., rows, :], K, V, block_size, rows_mask)
    return output, logsumexp


def _query_block(Q_block, K, V, block_size, mask):
    """Attention of one block of queries, reading the keys block by block."""
    scale = 1.0 / np.sqrt(Q_block.shape[-1])
    b_q = Q_block.shape[-2]
    lead = np.broadcast_shapes(Q_block.shape[:-2], K.shape[:-2],
                               V.shape[:-2])
    running_max = np.full((*lead, b_q, 1), -np.inf)  # (..., b_q, 1): m
    running_sum = np.zeros((*lead, b_q, 1))  # (..., b_q, 1): l
    unnormalised = np.zeros((*lead, b_q, V.shape[-1]))  # (..., b_q, d_v): u
    for start in range(0, K.shape[-2], block_size):
        cols = slice(start, start + block_size)
        K_T = K[..., cols, :].swapaxes(-1, -2)  # (..., d_k, b_k)
        scores = Q_block @ K_T * scale  # (..., b_q, b_k)
        if mask is not None:
            scores = np.where(mask[..., cols], scores, -np.inf)
        running_max, running_sum, rescale, exponentials = (
            online_softmax_update(running_max, running_sum, scores))
        weighted = exponentials @ V[..., cols, :]  # (..., b_q, d_v)
        unnormalised = unnormalised * rescale + weighted
    logsumexp = (running_max + np.log(running_sum))[..., 0]  # (..., b_q)
    return unnormalised / running_sum, logsumexp


