"""Stable random draws for the variants of the worked examples, and the tests a draw must pass.

Every worked example of :mod:`qkv.examples` that students compute has variants: the same
story, tokens, shapes and steps, with other numbers, so that each student computes their
own. Variant 0 is always the seed article's own numbers. A variant's numbers must be the
same on every machine and in every later release of the course, so they are not drawn
with numpy's generators (whose streams may change between numpy releases) but from
SHAKE-256 in counter mode: :class:`VariantDraw` turns ``(example, variant)`` into a stream
of whole numbers that depends on nothing else.

The story modules of :mod:`qkv_exercises.variants` and the problem sets draw small
numbers (integers and halves) in stages: each stage draws from the stream until its part
is as workable by hand as the seed's (no ties where a question asks for the largest
weight, weights neither all near 0 nor near 1, ...), or picks directly from the list of
every workable choice, so that a variant costs about a millisecond, not thousands of
whole retries. Changing a draw changes students' numbers: tests pin a few variants.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TypeVar

import numpy as np

MAX_ATTEMPTS = 10_000
_BLOCK_BYTES = 512  # 64 draws per hash

# A variant's answers differ from the seed's by more than this somewhere: the seed's answer
# written to 2 decimals (off by at most 0.005) is then more than 0.01 (a hand answer's
# tolerance) from the variant's, so copying the book's numbers earns nothing.
APART_FROM_SEED = 0.021

T = TypeVar("T")


class VariantDraw:
    """Whole numbers, choices and halves for variant ``variant`` of example ``example``."""

    def __init__(self, example: str, variant: int):
        if isinstance(variant, bool) or not isinstance(variant, int) or variant < 0:
            raise ValueError(f"a variant is a whole number >= 0, got {variant!r}")
        self.example = example
        self.variant = variant
        self._prefix = f"{example}/{variant}/".encode()
        self._block = 0
        self._bytes = b""

    def _next(self) -> int:
        """The next 8 bytes of SHAKE-256 of ``example/variant/block``, as a whole number."""
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

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``."""
        if not options:
            raise ValueError(f"nothing to choose from in variant {self.variant} of {self.example}")
        return options[self.integer(0, len(options) - 1)]

    def halves(self, low: float, high: float) -> float:
        """A multiple of 0.5 from ``low`` to ``high``, both included."""
        return self.integer(int(Fraction(low) * 2), int(Fraction(high) * 2)) / 2

    def integers(self, low: int, high: int, shape: tuple[int, ...]) -> list:
        """Nested lists of whole numbers from ``low`` to ``high`` with the given shape."""
        if not shape:
            return self.integer(low, high)
        return [self.integers(low, high, shape[1:]) for _ in range(shape[0])]

    def permutation(self, n: int) -> list[int]:
        """The numbers 0 to n - 1 in a random order (Fisher-Yates)."""
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.integer(0, i)
            order[i], order[j] = order[j], order[i]
        return order

    def until(self, draw_once: Callable[[VariantDraw], T], accept: Callable[[T], bool], what: str) -> T:
        """The first ``draw_once(self)`` that ``accept`` takes, drawing on from this stream.

        Raises RuntimeError if none of :data:`MAX_ATTEMPTS` is accepted (conditions that
        cannot be met: a bug in the example, caught by its tests).
        """
        for _ in range(MAX_ATTEMPTS):
            candidate = draw_once(self)
            if accept(candidate):
                return candidate
        raise RuntimeError(f"no acceptable {what} for variant {self.variant} of {self.example} "
                           f"in {MAX_ATTEMPTS} draws")


def apart_from_seed(value, seed_value) -> bool:
    """Whether ``value`` differs from ``seed_value`` by more than :data:`APART_FROM_SEED` somewhere
    (or has another shape)."""
    value, seed_value = np.asarray(value, dtype=float), np.asarray(seed_value, dtype=float)
    return value.shape != seed_value.shape or float(np.abs(value - seed_value).max()) > APART_FROM_SEED


def all_differ(steps, seed_steps) -> bool:
    """Whether every step differs from the seed's same step (:func:`apart_from_seed`)."""
    return all(apart_from_seed(a, b) for a, b in zip(steps, seed_steps))


def first_apart_from_seed(example: str, variant: int, draw_once: Callable[[VariantDraw], T | None],
                          steps: Callable[[T], Sequence], seed_steps: Sequence, what: str) -> T:
    """The first candidate ``draw_once`` draws for variant ``variant`` of ``example`` that is not None
    and whose ``steps`` all differ from ``seed_steps`` (:func:`all_differ`).

    Raises RuntimeError as :meth:`VariantDraw.until` does.
    """
    return VariantDraw(example, variant).until(
        draw_once, lambda candidate: candidate is not None and all_differ(steps(candidate), seed_steps), what)


def margins(values: np.ndarray) -> np.ndarray:
    """The largest minus the second largest along the last axis: how clearly the largest stands out."""
    ordered = np.sort(values, axis=-1)
    return ordered[..., -1] - ordered[..., -2]


def clear_largest(row: np.ndarray, margin: float) -> bool:
    """Whether the largest entry of ``row`` exceeds the second largest by ``margin`` or more."""
    top, second = np.sort(row)[::-1][:2]
    return top - second >= margin
