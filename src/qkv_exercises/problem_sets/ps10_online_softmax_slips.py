"""The online softmax and what attention costs: the slips of problem set 10.

For the running maximum and sum (:func:`fold_with_slip`, :func:`online_steps`: a rescale forgotten,
flipped or not exponentiated, ...) and for counting the weights' numbers and bytes (n not squared,
bits for bytes, GB for GiB, ...).
"""

from __future__ import annotations

import numpy as np

from qkv.blockwise import online_softmax

from ..slips import BITS_NOT_BYTES, GB_NOT_GIB, MIB_NOT_GIB, Slip  # the units are shared with ps13


RESCALE_FORGOTTEN = Slip(
    "rescale_forgotten",
    "did you rescale the running sum? When a block brings a larger maximum, every term e^(s - m_old) already "
    "in the sum must become e^(s - m_new): multiply the sum so far by e^(m_old - m_new) before adding the "
    "block's terms.",
)

RESCALE_EXPONENT_FLIPPED = Slip(
    "rescale_exponent_flipped",
    "the rescaling factor is e^(m_old - m_new), at most 1 (the old terms shrink when the maximum grows); "
    "you used e^(m_new - m_old).",
)

RESCALE_NOT_EXPONENTIATED = Slip(
    "rescale_not_exponentiated",
    "the rescaling factor is e to the power m_old - m_new, not the difference itself.",
)

TERMS_FROM_BLOCK_MAX = Slip(
    "terms_from_block_max",
    "did you measure the block's exponentials from the block's own maximum? Every term of the running sum is "
    "e^(s_j - m), with m the RUNNING maximum: the largest score so far, which may lie in an earlier block.",
)

BLOCK_MAX_AS_RUNNING_MAX = Slip(
    "block_max_as_running_max",
    "the running maximum is the largest score so far, max(m_old, the block's maximum), not the block's "
    "maximum alone.",
)

MAX_NOT_SUBTRACTED = Slip(
    "max_not_subtracted",
    "did you add up e^(s_j) without subtracting the maximum? The running sum is the sum of e^(s_j - m), "
    "measured from the running maximum m.",
)

WEIGHTS_NOT_FINAL_SUM = Slip(
    "weights_not_final_sum",
    "divide by the running sum after the LAST block: only it holds the terms of every score.",
)

WEIGHTS_WITH_STALE_MAX = Slip(
    "weights_with_stale_max",
    "every weight is e^(s_j - m) / l with the FINAL m and l, after the last block; an earlier block's own "
    "running maximum is out of date once a later block brings a larger score.",
)

N_NOT_SQUARED = Slip(
    "n_not_squared",
    "each of the n queries has a score for each of the n keys: n x n = n^2 numbers per head.",
)

EVERY_HEAD_COUNTED = Slip(
    "every_head_counted",
    "that counts the scores of every head; the question asks for one head.",
)

HEADS_FORGOTTEN = Slip(
    "heads_forgotten",
    "each head has its own n x n weights: multiply by the number of heads h.",
)

BYTES_FORGOTTEN = Slip(
    "bytes_forgotten",
    "that is how many numbers there are; each takes 2 bytes in float16, 4 in float32 and 8 in float64.",
)

WRONG_BYTES_PER_NUMBER = Slip(
    "wrong_bytes_per_number",
    "check the bytes per number: float16 takes 2 bytes, float32 4 and float64 8.",
)

GROWTH_LINEAR = Slip(
    "growth_linear",
    "the weights are n x n: with r times the tokens there are r times as many rows AND r times as many "
    "columns.",
)


def fold_with_slip(m: float, l: float, block, slip: Slip | None = None) -> tuple[float, float, float]:
    """``(m', l', rescale)``: one block of scores folded into the running maximum ``m`` and sum ``l``,
    with ``slip`` made (without one, exactly :func:`qkv.online_softmax_update`)."""
    block = np.asarray(block, dtype=float)
    block_max = float(block.max())
    new_m = max(m, block_max)
    first = np.isneginf(m)  # nothing read yet: nothing to rescale
    with np.errstate(all="ignore"):
        factor = 0.0 if first else float(np.exp(m - new_m))
        terms_from = new_m
        if slip == RESCALE_FORGOTTEN:
            factor = 0.0 if first else 1.0
        elif slip == RESCALE_EXPONENT_FLIPPED:
            factor = 0.0 if first else float(np.exp(new_m - m))
        elif slip == RESCALE_NOT_EXPONENTIATED:
            factor = 0.0 if first else m - new_m
        elif slip == TERMS_FROM_BLOCK_MAX:
            terms_from = block_max
        elif slip == BLOCK_MAX_AS_RUNNING_MAX:
            new_m = terms_from = block_max
            factor = 0.0 if first else float(np.exp(m - block_max))
        elif slip == MAX_NOT_SUBTRACTED:
            factor, terms_from = (0.0 if first else 1.0), 0.0
        return new_m, l * factor + float(np.exp(block - terms_from).sum()), factor


ONLINE_SLIPS = (RESCALE_FORGOTTEN, RESCALE_EXPONENT_FLIPPED, RESCALE_NOT_EXPONENTIATED, TERMS_FROM_BLOCK_MAX,
                BLOCK_MAX_AS_RUNNING_MAX, MAX_NOT_SUBTRACTED, WEIGHTS_NOT_FINAL_SUM, WEIGHTS_WITH_STALE_MAX)


def online_steps(blocks, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """The online softmax of ``blocks`` with ``slip`` made: ``running`` ``(T, 2)``, the ``[m, l]`` after
    each block; ``rescale`` ``(T,)``, the factor the sum was multiplied by at each block; ``weights``.

    Without a slip every number is what :func:`qkv.online_softmax` computes.
    """
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    if slip is None:
        weights, steps = online_softmax(blocks)
        return {"running": np.array([[s.running_max, s.running_sum] for s in steps]),
                "rescale": np.array([s.rescale for s in steps]), "weights": weights}
    m, l, running, rescale, maxima = -np.inf, 0.0, [], [], []
    for block in blocks:
        m, l, factor = fold_with_slip(m, l, block, slip if slip in ONLINE_SLIPS[:6] else None)
        running.append([m, l])
        rescale.append(factor)
        maxima.append(np.full(len(block), m))
    scores = np.concatenate(blocks)
    with np.errstate(all="ignore"):
        if slip == WEIGHTS_NOT_FINAL_SUM:
            weights = np.exp(scores - m) / running[0][1] if len(blocks) > 1 else None
        elif slip == WEIGHTS_WITH_STALE_MAX:
            weights = np.exp(scores - np.concatenate(maxima)) / l
        elif slip == MAX_NOT_SUBTRACTED:
            weights = np.exp(scores) / l
        else:
            weights = np.exp(scores - m) / l
    found = {"running": np.array(running), "rescale": np.array(rescale)}
    return found if weights is None else {**found, "weights": weights}
