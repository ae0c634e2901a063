"""Order and position: the slips of problem set 8, for reordered outputs and sinusoidal encodings.

:func:`reordered` moves rows with or against their tokens, and :func:`encoding_with_slip` computes
an encoding with one slip (sine and cosine swapped, degrees, positions from 1, ...), both for
:mod:`qkv_exercises.problem_sets.ps8_position`'s hand answers and its
``sinusoidal_position_encoding`` check.
"""

from __future__ import annotations

import numpy as np

from ..slips import Slip


NOT_REORDERED = Slip(
    "not_reordered",
    "the outputs move with their tokens: row i of the reordered output is the output of the token that now "
    "stands at place i.",
)

REORDERED_BY_INVERSE = Slip(
    "reordered_by_inverse",
    "you sent row i to place order[i]; the reordered sentence has token order[i] at place i, so its row i is "
    "row order[i] of the original: P = I[order], and O' = P O.",
)

SIN_COS_SWAPPED = Slip(
    "sin_cos_swapped",
    "the even dimensions 2i take the sine and the odd dimensions 2i + 1 the cosine: PE = [sin, cos, sin, cos, ...].",
)

EXPONENT_I_NOT_2I = Slip(
    "exponent_i_not_2i",
    "the frequency of pair i is w_i = 10000^(-2i/d_model), with 2i (the pair's even dimension) in the exponent, "
    "not i.",
)

EXPONENT_SIGN = Slip(
    "exponent_sign",
    "the exponent is negative: w_i = 10000^(-2i/d_model) = 1 / 10000^(2i/d_model), so the frequencies get smaller.",
)

DEGREES_NOT_RADIANS = Slip(
    "degrees_not_radians",
    "your sines and cosines are of angles in degrees; the angles p w_i are in radians (set your calculator "
    "to radians; np.sin and np.cos use radians).",
)

SINES_THEN_COSINES = Slip(
    "sines_then_cosines",
    "sines and cosines alternate, pair by pair: [sin(p w_0), cos(p w_0), sin(p w_1), cos(p w_1), ...], not every "
    "sine first.",
)

POSITIONS_FROM_ONE = Slip(
    "positions_from_one",
    "positions count from 0: the first token is at position 0, whose encoding is [0, 1, 0, 1, ...].",
)

FIRST_PAIR_ONLY = Slip(
    "first_pair_only",
    "every pair of dimensions adds its own cos((q - p) w_i): sum over all d_model / 2 pairs, not only the first.",
)

SINE_OF_OFFSET = Slip(
    "sine_of_offset",
    "each pair gives sin(p w) sin(q w) + cos(p w) cos(q w) = cos((q - p) w): a cosine of the offset, not a sine.",
)


def reordered(values, order, slip: Slip | None = None) -> np.ndarray:
    """The rows of ``values`` moved with their tokens, ``P values`` (row i <- row order[i]), made with
    ``slip``. The permutation matrix itself is ``reordered(I, order)``."""
    values, order = np.asarray(values, dtype=float), np.asarray(order)
    if slip == NOT_REORDERED:
        return values
    if slip == REORDERED_BY_INVERSE:
        order = np.argsort(order)
    return values[order]


def encoding_with_slip(positions, d_model: int, slip: Slip | None = None) -> np.ndarray:
    """The sinusoidal encodings ``(n, d_model)`` of ``positions`` computed with ``slip`` (None: right)."""
    positions = np.asarray(positions, dtype=float)
    i = np.arange(d_model // 2)
    exponent = {EXPONENT_I_NOT_2I: i / d_model, EXPONENT_SIGN: -2 * i / d_model}.get(slip, 2 * i / d_model)
    omega = 10000.0 ** (-exponent)  # (d_model/2,)
    if slip == POSITIONS_FROM_ONE:
        positions = positions + 1
    angles = positions[:, None] * omega[None, :]  # (n, d_model/2)
    if slip == DEGREES_NOT_RADIANS:
        angles = np.radians(angles)
    first, second = np.sin(angles), np.cos(angles)
    if slip == SIN_COS_SWAPPED:
        first, second = second, first
    if slip == SINES_THEN_COSINES:
        return np.concatenate([first, second], axis=1)
    encoding = np.empty((len(positions), d_model))
    encoding[:, 0::2], encoding[:, 1::2] = first, second
    return encoding
