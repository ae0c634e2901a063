"""Other widths and positions for the position chapter's by-hand encoding: one variant per student.

``position_encoding_example(variant)`` returns :func:`qkv.examples.position_encoding_example`
for variant 0 (the book's numbers) and, for any other whole number, another width, position
and pair a student can work with a pencil. Problem set 8 calls it with the student's variant;
the book never does. Changing anything here changes students' numbers: tests pin a few variants.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from qkv import examples
from qkv.examples import PositionEncodingExample

from .draw import VariantDraw, all_differ


def position_encoding_example(variant: int) -> PositionEncodingExample:
    """Variant ``variant`` of the position chapter's by-hand encoding.

    Other variants keep a width whose frequencies ``10000^(-2i/d_model)`` are powers of 10
    (``d_model`` 4: 1 and 0.01; 8: 1, 0.1, 0.01 and 0.001), so that every angle ``p w_i`` is
    worked with a pencil and only its sine and cosine need a calculator. The position is
    2 to 9; the pair is ``(p, p + k)`` with p from 0 to 9 and offset k from 1 to 6. The angles,
    the encoding and the dot product differ from the seed's.
    """
    if variant != 0:
        return VariantDraw("position_encoding", variant).choice(_workable_positions())
    return examples.position_encoding_example()


def _position_steps(ex: PositionEncodingExample) -> list[np.ndarray]:
    """The angles and the encoding of the position, and the dot product of the pair's encodings, in plain numpy."""
    omega = 10000.0 ** (-np.arange(0, ex.d_model, 2) / ex.d_model)  # (d_model/2,)
    angles = ex.position * omega
    encoding = np.ravel(np.column_stack([np.sin(angles), np.cos(angles)]))  # sin, cos, sin, cos, ...
    p, q = ex.pair
    return [angles, encoding, np.array(np.cos((q - p) * omega).sum())]


@functools.cache
def _workable_positions() -> tuple[PositionEncodingExample, ...]:
    seed_steps = _position_steps(examples.position_encoding_example())
    found = []
    for d_model, position, p, k in itertools.product((4, 8), range(2, 10), range(10), range(1, 7)):
        ex = PositionEncodingExample(d_model=d_model, position=position, pair=(p, p + k))
        if all_differ(_position_steps(ex), seed_steps):
            found.append(ex)
    return tuple(found)
