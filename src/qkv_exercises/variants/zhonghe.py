"""Other numbers for seed 001's story, 中和 有 一個 永和路: one variant per student.

``zhonghe_vectors_example(variant)`` and ``zhonghe_reordered_example(variant)`` return
:mod:`qkv.examples.zhonghe`'s example for variant 0 (the book's numbers) and, for any other
whole number, the same tokens and story with other weights and another reordering. The
problem sets call them with the student's variant; the book never does. Changing anything
here changes students' numbers: tests pin a few variants.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from qkv import examples
from qkv.attention import softmax
from qkv.examples import BiasedRowExample, ReorderedExample, SelfAttentionExample
from qkv.examples.zhonghe import SEED_ORDER
from qkv.multihead import Head
from qkv.relative_position import alibi_slopes

from .draw import VariantDraw, apart_from_seed, margins


def zhonghe_vectors_example(variant: int) -> SelfAttentionExample:
    """Variant ``variant`` of the course's vectors and head for 中和 / 有 / 一個 / 永和路
    (:func:`qkv.examples.zhonghe_vectors_example`).

    Other variants keep the vectors and ``W_V = I`` and weigh the coordinates differently:
    ``W_Q = W_K = diag(w)`` with whole numbers ``w`` from 1 to 3, chosen so that the story
    holds (by 0.05 or more in the weights) and no weight is below 0.02 or above 0.9.
    """
    if variant != 0:
        return _zhonghe_vectors_variant(variant)
    return examples.zhonghe_vectors_example()


@functools.cache
def _workable_zhonghe_weights() -> tuple[tuple[float, ...], ...]:
    """Every diagonal ``w`` (whole numbers 1 to 3) of ``W_Q = W_K`` that tells seed 001's story, in a fixed order.

    The place names attend most to themselves, then to each other; 有 and 一個 most to
    themselves (each by 0.05 or more); no weight is below 0.02 or above 0.9.
    """
    X = examples.zhonghe_vectors_example().X
    places, fillers = (0, 3), (1, 2)
    found = []
    for w in itertools.product((1.0, 2.0, 3.0), repeat=4):
        Z = X * np.array(w)  # X diag(w): the queries, and the keys
        weights = softmax(Z @ Z.T / 2, axis=-1)  # (4, 4), sqrt(d_k) = 2
        ordered = np.argsort(-weights, axis=1)
        story = (all(ordered[i, 0] == i and ordered[i, 1] == places[1 - places.index(i)] for i in places)
                 and all(ordered[i, 0] == i for i in fillers))
        if (story and (margins(weights) >= 0.05).all() and weights.min() >= 0.02 and weights.max() <= 0.9
                and w != (2.0, 2.0, 2.0, 1.0)):
            found.append(w)
    return tuple(found)


def _zhonghe_vectors_variant(variant: int) -> SelfAttentionExample:
    seed = examples.zhonghe_vectors_example()
    w = VariantDraw("zhonghe_vectors", variant).choice(_workable_zhonghe_weights())
    W_QK = np.diag(w)  # (d_model, d_k) = (4, 4)
    return SelfAttentionExample(tokens=seed.tokens, X=seed.X, head=Head(W_Q=W_QK, W_K=W_QK.copy(), W_V=np.eye(4)))


def zhonghe_reordered_example(variant: int) -> ReorderedExample:
    """Variant ``variant`` of 中和 有 一個 永和路 and a reordering of its tokens
    (:func:`qkv.examples.zhonghe_reordered_example`).

    Other variants take the vectors of the same variant of :func:`zhonghe_vectors_example` and
    another reordering than the seed's, chosen so that the reordered outputs ``P O`` differ from
    the seed's and from the outputs before reordering.
    """
    if variant == 0:
        return examples.zhonghe_reordered_example()
    example = zhonghe_vectors_example(variant)
    orders = _workable_orders(tuple(np.diag(example.head.W_Q)))
    return ReorderedExample(example=example, order=np.array(VariantDraw("zhonghe_order", variant).choice(orders)))


@functools.cache
def _workable_orders(w: tuple[float, ...]) -> tuple[tuple[int, ...], ...]:
    """The reorderings of 中和 有 一個 永和路, weighed by ``W_Q = W_K = diag(w)``, other than the seed's,
    whose ``P O`` differs from the seed's and from ``O``, in a fixed order."""
    W_QK = np.diag(w)
    seed = examples.zhonghe_vectors_example()
    O = _self_attention_output(seed.X, Head(W_Q=W_QK, W_K=W_QK, W_V=np.eye(4)))
    seed_O = _self_attention_output(seed.X, seed.head)[list(SEED_ORDER)]
    return tuple(order for order in itertools.permutations(range(4)) if order != SEED_ORDER
                 and apart_from_seed(O[list(order)], seed_O) and apart_from_seed(O[list(order)], O))


def _self_attention_output(X: np.ndarray, head: Head) -> np.ndarray:
    """The output of one head on ``X`` (no biases), in plain numpy."""
    Q, K, V = X @ head.W_Q, X @ head.W_K, X @ head.W_V
    return softmax(Q @ K.T / np.sqrt(Q.shape[1]), axis=-1) @ V


# (h, head) of every ALiBi head whose slope is at least 1/16 (head counted from 1); with h = 6 and 12,
# some heads lie past the largest power of two below h, where the paper's rule for other h applies
ALIBI_HEADS = tuple((h, k) for h in (4, 6, 8, 12, 16) for k in range(1, h + 1) if alibi_slopes(h)[k - 1] >= 0.0625)
DISTINCT = 0.03  # another reading of the example changes an answer by more than this


def zhonghe_alibi_example(variant: int) -> BiasedRowExample:
    """Variant ``variant`` of :func:`qkv.examples.zhonghe_alibi_example`: 永和路's scaled scores and
    one ALiBi head.

    Other variants: the four scores are multiples of 0.5 from -1 to 3, and ``(h, head)`` is one of
    :data:`ALIBI_HEADS`. The biased row's weights lie between 0.02 and 0.9 and differ by more than
    0.03 from the unbiased ones; adding the bias instead of subtracting it, measuring the distance
    from the first token, or taking the slope as ``2^(-8k/h)`` (or, for ``h`` a power of two, with
    ``k`` counted from 0) changes the slope, the biased row or the weights, where it changes them at
    all, by more than 0.03. The slope, the biased row and the weights differ from the seed's.
    """
    if variant == 0:
        return examples.zhonghe_alibi_example()
    return VariantDraw("zhonghe_alibi", variant).until(_alibi_candidate, _alibi_workable, "ALiBi row")


def alibi_readings(ex: BiasedRowExample) -> dict[str, dict[str, np.ndarray]]:
    """The slope, biased row and weights of ``ex`` as ALiBi means them (``right``), and read in the
    other ways a variant must tell apart."""
    n = len(ex.scores)
    slope = float(alibi_slopes(ex.h)[ex.head - 1])
    back = np.arange(n)[::-1].astype(float)  # (n,): how far each key stands before the last query
    rows = {"right": (slope, ex.scores - slope * back), "added": (slope, ex.scores + slope * back),
            "from_first": (slope, ex.scores - slope * np.arange(n)), "unbiased": (slope, ex.scores)}
    power_rule = 2.0 ** (-8.0 * ex.head / ex.h)
    rows["power_rule"] = (power_rule, ex.scores - power_rule * back)
    if ex.h & (ex.h - 1) == 0:
        from_zero = 2.0 ** (-8.0 * (ex.head - 1) / ex.h)
        rows["from_zero"] = (from_zero, ex.scores - from_zero * back)
    return {name: {"slope": np.array(m), "biased_row": row, "weights": softmax(row)} for name, (m, row) in rows.items()}


def _alibi_candidate(draw: VariantDraw) -> BiasedRowExample:
    h, head = draw.choice(ALIBI_HEADS)
    scores = np.array([draw.halves(-1, 3) for _ in range(4)])
    return BiasedRowExample(tokens=examples.zhonghe_alibi_example().tokens, scores=scores, h=h, head=head)


@functools.cache
def _seed_alibi_answers() -> dict[str, np.ndarray]:
    return alibi_readings(examples.zhonghe_alibi_example())["right"]


def _alibi_workable(ex: BiasedRowExample) -> bool:
    readings = alibi_readings(ex)
    right = readings.pop("right")
    weights = right["weights"]
    if weights.min() < 0.02 or weights.max() > 0.9:
        return False
    if np.abs(readings["unbiased"]["weights"] - weights).max() <= DISTINCT:
        return False
    for other in readings.values():
        for name, value in other.items():
            if 1e-12 < np.abs(value - right[name]).max() <= DISTINCT:
                return False
    return all(apart_from_seed(value, _seed_alibi_answers()[name]) for name, value in right.items())
