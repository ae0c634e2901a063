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
from qkv.examples import ReorderedExample, SelfAttentionExample
from qkv.examples.zhonghe import SEED_ORDER
from qkv.multihead import Head

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
