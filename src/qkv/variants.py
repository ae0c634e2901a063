"""Stable random draws for the variants of the worked examples.

Every worked example of :mod:`qkv.examples` has variants: the same story, tokens,
shapes and steps, with other numbers, so that each student computes their own.
Variant 0 is always the seed article's own numbers. A variant's numbers must be the
same on every machine and in every later release of the course, so they are not
drawn with numpy's generators (whose streams may change between numpy releases) but
from SHAKE-256 in counter mode: :class:`VariantDraw` turns ``(example, variant)`` into a
stream of whole numbers that depends on nothing else.

The examples draw small numbers (integers and halves) and retry, with the next
``attempt``, until the variant is as workable by hand as the seed (no ties where a
question asks for the largest weight, weights neither all near 0 or 1, ...).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from fractions import Fraction

MAX_ATTEMPTS = 10_000
_BLOCK_BYTES = 512  # 64 draws per hash


class VariantDraw:
    """Whole numbers, choices and halves for variant ``variant`` of example ``example``.

    ``attempt`` numbers the retries of one variant: attempt 0 first, then 1, 2, ...
    until the example accepts what was drawn.
    """

    def __init__(self, example: str, variant: int, attempt: int = 0):
        if isinstance(variant, bool) or not isinstance(variant, int) or variant < 0:
            raise ValueError(f"a variant is a whole number >= 0, got {variant!r}")
        self._prefix = f"{example}/{variant}/{attempt}/".encode()
        self._block = 0
        self._bytes = b""

    def _next(self) -> int:
        """The next 8 bytes of SHAKE-256 of ``example/variant/attempt/block``, as a whole number."""
        if not self._bytes:
            self._bytes = hashlib.shake_256(self._prefix + str(self._block).encode()).digest(_BLOCK_BYTES)
            self._block += 1
        value, self._bytes = int.from_bytes(self._bytes[:8], "big"), self._bytes[8:]
        return value

    def integer(self, low: int, high: int) -> int:
        """A whole number from ``low`` to ``high``, both included."""
        if high < low:
            raise ValueError(f"empty range [{low}, {high}]")
        return low + self._next() % (high - low + 1)

    def choice(self, options: Sequence):
        """One of ``options``."""
        return options[self.integer(0, len(options) - 1)]

    def halves(self, low: float, high: float) -> float:
        """A multiple of 0.5 from ``low`` to ``high``, both included."""
        return self.integer(int(Fraction(low) * 2), int(Fraction(high) * 2)) / 2

    def integers(self, low: int, high: int, shape: tuple[int, ...]) -> list:
        """Nested lists of whole numbers from ``low`` to ``high`` with the given shape."""
        if not shape:
            return self.integer(low, high)
        return [self.integers(low, high, shape[1:]) for _ in range(shape[0])]


def first_accepted(example: str, variant: int, draw_once, accept):
    """The first ``draw_once(VariantDraw(example, variant, attempt))`` that ``accept`` takes.

    Raises RuntimeError if no attempt of :data:`MAX_ATTEMPTS` is accepted (an example
    whose conditions cannot be met: a bug in the example, caught by its tests).
    """
    for attempt in range(MAX_ATTEMPTS):
        candidate = draw_once(VariantDraw(example, variant, attempt))
        if accept(candidate):
            return candidate
    raise RuntimeError(f"no acceptable variant {variant} of {example} in {MAX_ATTEMPTS} attempts")
