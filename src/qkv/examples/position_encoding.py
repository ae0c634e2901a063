"""The position chapter's by-hand sinusoidal encoding: one position, and a pair of positions.

The course's own example (no seed encodes positions): a width ``d_model``, one position
whose encoding is worked with a pencil, and a pair whose encodings' dot product is worked
from their offset. Chapters and tests reach it through :mod:`qkv.examples`; the problem
sets' other widths and positions are drawn by :mod:`qkv_exercises.variants.position_encoding`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PositionEncodingExample:
    """A width ``d_model``, one ``position`` whose encoding is worked by hand, and a ``pair`` of
    positions ``(p, q)`` whose encodings' dot product is worked from their offset ``q - p``."""

    d_model: int
    position: int
    pair: tuple[int, int]


def position_encoding_example() -> PositionEncodingExample:
    """The position chapter's by-hand encoding: position 1 with ``d_model = 4``, and positions 0 and 3."""
    return PositionEncodingExample(d_model=4, position=1, pair=(0, 3))
