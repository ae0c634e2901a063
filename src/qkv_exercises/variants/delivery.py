"""Other numbers for seed 000's story, 外送 晚到 補償: one variant per student.

``delivery_example(variant)`` and its siblings return :mod:`qkv.examples.delivery`'s
example for variant 0 (the book's numbers) and, for any other whole number, the same
story, tokens and shapes with other small numbers that a student can work by hand. The
problem sets (:mod:`qkv_exercises.problem_sets`) call them with the student's variant
(:mod:`qkv_exercises.identity`); the book never does.

Each variant is drawn in stages from its own stream (:class:`VariantDraw`). Where a stage
has few enough possibilities, every workable one is listed once (in a fixed order) and the
stream picks one; otherwise the stream draws until the stage is workable. Changing anything
here changes students' numbers: tests pin a few variants.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from qkv import examples
from qkv.attention import softmax
from qkv.examples import (
    BlockRowExample,
    CrossAttentionExample,
    GroupedHeadsExample,
    MultiHeadExample,
    SelfAttentionExample,
)
from qkv.examples.delivery import COMPENSATION, LATE, ROOT_HALF
from qkv.multihead import Head

from .draw import VariantDraw, all_differ, apart_from_seed, first_apart_from_seed, margins


def delivery_example(variant: int) -> MultiHeadExample:
    """Variant ``variant`` of seed 000's two heads (:func:`qkv.examples.delivery_example`).

    Other variants keep that story and the seed's shapes and form: ``X`` of 0s and 1s,
    ``W_Q`` and ``W_V`` that pick columns of ``X``, and keys in multiples of 0.707107
    (1/sqrt(2), rounded as the seed rounds it), so that the scaled scores come out in
    halves. Every question the problem sets ask of it has one clear answer, and never
    the seed's:

    - in head 1, 補償 attends most to 晚到; in head 2, most to 外送 and least to 晚到
      (each by a margin of 0.05 or more in its weights);
    - one token's query is the longest (外送 or 晚到), so that it attends most sharply,
      and attends most to 晚到 in head 1 (by 0.05 or more);
    - one key of head 2 is the longest, and it is not 外送's;
    - the key bias of head 1 is neither zero nor the seed's;
    - no weight is below 0.02 or above 0.9, and every step of both heads differs
      from the seed's by more than 0.01 somewhere.
    """
    if variant == 0:
        return examples.delivery_example()
    return first_apart_from_seed("delivery", variant, _delivery_candidate, _delivery_steps, _seed_delivery_steps(),
                                 "delivery example")


_COLUMN_PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (1, 0), (2, 0), (3, 2))
_HALF_SCALE = ROOT_HALF / np.sqrt(2)  # a score q . k / sqrt(2) with keys in steps of 0.707107: 0.5 per step
# Head 1 links 補償 to 晚到 (index 1), head 2 to 外送 (index 0).


def _pick_columns(columns: tuple[int, int], d_model: int = 4) -> np.ndarray:
    """A (d_model, 2) matrix of 0s and 1s whose product with X keeps two of X's columns."""
    W = np.zeros((d_model, 2))
    W[columns[0], 0] = W[columns[1], 1] = 1.0
    return W


@functools.cache
def _key_choices() -> tuple[np.ndarray, np.ndarray]:
    """Every key direction k (whole numbers from -2 to 2 per dimension of X) and key bias c (-1 to 3).

    A head's keys are ``(X k + c) * 0.707107`` in both of their columns: ``W_K`` has
    ``k * 0.707107`` in each column and ``b_K = c * 0.707107``.
    """
    pairs = list(itertools.product(itertools.product(range(-2, 3), repeat=4), range(-1, 4)))
    return (np.array([k for k, _ in pairs], dtype=float),  # (3125, 4)
            np.array([c for _, c in pairs], dtype=float))  # (3125,)


@functools.cache
def _workable_tokens() -> tuple[np.ndarray, tuple[tuple[int, int], ...]]:
    """Every ``X`` (3 x 4, of 0s and 1s) and query columns that can tell the story, in a fixed order.

    The three tokens differ and none is empty; 補償's query is not zero, and 外送's or
    晚到's query is the one longest (so that one token clearly attends most sharply).
    """
    bits = (np.arange(2**12)[:, None] >> np.arange(11, -1, -1)[None, :]) & 1  # (4096, 12)
    X_all = bits.reshape(-1, 3, 4).astype(float)
    rows = X_all @ (2.0 ** np.arange(4))  # (4096, 3): each row as a whole number
    usable = (rows > 0).all(axis=1) & (rows[:, 0] != rows[:, 1]) & (rows[:, 0] != rows[:, 2]) & (
        rows[:, 1] != rows[:, 2])
    found_X, found_columns = [], []
    for columns in _COLUMN_PAIRS:
        q = X_all[:, :, list(columns)].sum(axis=2)  # (4096, 3): each query's length squared
        ordered = np.sort(q, axis=1)
        ok = usable & (q[:, 2] >= 1) & (np.argmax(q, axis=1) != 2) & (ordered[:, 2] > ordered[:, 1])
        found_X.extend(X_all[ok])
        found_columns.extend([columns] * int(ok.sum()))
    return np.array(found_X), tuple(found_columns)


_KEY_LENGTHS = range(-9, 12)  # every m_j = X_j . k + c that the key choices can make


@functools.cache
def _workable_key_steps(q: tuple[int, ...], head: int) -> np.ndarray:
    """Which keys ``m_j * 0.707107 * [1, 1]`` (m_j in :data:`_KEY_LENGTHS`) make head ``head`` tell the story.

    ``q`` holds each token's query length squared (its entries' sum); the result is a
    boolean table indexed by ``(m_0, m_1, m_2)`` minus the smallest ``m``.
    """
    m = np.array(list(itertools.product(_KEY_LENGTHS, repeat=3)), dtype=float)  # (9261, 3)
    scores = np.array(q, dtype=float)[None, :, None] * m[:, None, :] * _HALF_SCALE  # (9261, n, n)
    weights = softmax(scores, axis=-1)
    row = weights[:, COMPENSATION]  # 補償's row, (9261, n)
    ok = (weights.min(axis=(1, 2)) >= 0.02) & (weights.max(axis=(1, 2)) <= 0.9) & (margins(row) >= 0.05)
    if head == 0:  # 補償 attends most to 晚到, and one token attends most to 晚到
        ok &= (np.argmax(row, axis=1) == 1) & (margins(weights[:, :, 1]) >= 0.05)
    else:  # 補償 attends most to 外送 and least to 晚到; the longest key is not 外送's
        length = np.abs(m)
        ok &= ((np.argmax(row, axis=1) == 0) & (np.argmin(row, axis=1) == 1) & (margins(-row) >= 0.05)
               & (margins(length) >= 1) & (np.argmax(length, axis=1) != 0))
    size = len(_KEY_LENGTHS)
    return ok.reshape(size, size, size)


@functools.cache
def _key_steps_by_token() -> np.ndarray:
    """``m = x . k + c`` of every key choice (:func:`_key_choices`) for every token ``x`` (4 bits), as
    indices into the tables of :func:`_workable_key_steps`: (16, 3125)."""
    k, c = _key_choices()
    x = ((np.arange(16)[:, None] >> np.arange(3, -1, -1)[None, :]) & 1).astype(float)  # (16, 4)
    return (x @ k.T + c[None, :]).astype(int) - _KEY_LENGTHS[0]


def _workable_keys(X: np.ndarray, q: np.ndarray, head: int) -> np.ndarray:
    """The indices into :func:`_key_choices` that make head ``head`` (0 or 1) tell the story."""
    tokens = (X @ (2 ** np.arange(3, -1, -1))).astype(int)  # each token's 4 bits as a whole number
    m = _key_steps_by_token()[tokens]  # (3, 3125)
    ok = _workable_key_steps(tuple(int(v) for v in q), head)[m[0], m[1], m[2]]
    if head == 0:
        ok &= (_key_choices()[1] != 0) & (_key_choices()[1] != 1)  # a key bias to broadcast, not the seed's
    return np.flatnonzero(ok)


def _delivery_candidate(draw: VariantDraw) -> MultiHeadExample | None:
    X_all, column_pairs = _workable_tokens()
    pick = draw.integer(0, len(X_all) - 1)
    X, columns = X_all[pick].copy(), column_pairs[pick]
    q = X[:, list(columns)].sum(axis=1)
    k, c = _key_choices()
    heads = []
    for head in (0, 1):
        workable = _workable_keys(X, q, head)
        if not len(workable):
            return None
        pick = workable[draw.integer(0, len(workable) - 1)]
        heads.append(Head(
            W_Q=_pick_columns(columns),
            W_K=np.round(np.outer(k[pick], np.ones(2)) * ROOT_HALF, 6),  # (4, 2), multiples of 0.707107
            W_V=_pick_columns(draw.choice(_COLUMN_PAIRS)),
            b_Q=np.zeros(2),
            b_K=np.round(np.full(2, c[pick]) * ROOT_HALF, 6),
            b_V=np.zeros(2),
        ))
    tokens = ("外送", "晚到", "補償")
    return MultiHeadExample(tokens=tokens, X=X, heads=tuple(heads), W_O=np.eye(4), b_O=np.zeros(4))


def _delivery_steps(ex: MultiHeadExample) -> list[np.ndarray]:
    """Every step a student writes down, in plain numpy (tests check them against qkv's trace)."""
    steps, outputs = [], []
    for head in ex.heads:
        Q, B_K, V = ex.X @ head.W_Q + head.b_Q, np.tile(head.b_K, (len(ex.X), 1)), ex.X @ head.W_V + head.b_V
        K = ex.X @ head.W_K + B_K
        S_raw = Q @ K.T
        A = softmax(S_raw / np.sqrt(Q.shape[1]), axis=-1)
        outputs.append(A @ V)
        steps += [Q, B_K, K, V, S_raw, S_raw / np.sqrt(Q.shape[1]), A, outputs[-1]]
    O_concat = np.concatenate(outputs, axis=1)
    return steps + [O_concat, O_concat @ ex.W_O + ex.b_O]


@functools.cache
def _seed_delivery_steps() -> tuple[np.ndarray, ...]:
    return tuple(_delivery_steps(examples.delivery_example()))


# ------------------------------------------------------------------ under a causal mask (problem set 7)


def causal_delivery_example(variant: int) -> SelfAttentionExample:
    """Variant ``variant`` of head 1 of seed 000 under a causal mask
    (:func:`qkv.examples.causal_delivery_example`).

    Other variants are drawn like :func:`delivery_example`'s (the same form, and head 1's
    story: 補償 attends most to 晚到), and make 晚到's masked row workable: its two allowed
    scaled scores lie between -2 and 2 and differ by 0.5 to 2, so its two weights lie between
    0.11 and 0.89; the row's exponentials and weights and the whole masked weight matrix differ
    from the seed's.
    """
    if variant == 0:
        return examples.causal_delivery_example()
    return first_apart_from_seed("causal_delivery", variant, _causal_candidate, _causal_steps, _seed_causal_steps(),
                                 "causal delivery example")


def _causal_steps(ex: SelfAttentionExample) -> list[np.ndarray]:
    """What a student writes down, in plain numpy: the exponentials and the weights of 晚到's
    masked row, and the whole masked weight matrix."""
    head = ex.head
    Q, K = ex.X @ head.W_Q + head.b_Q, ex.X @ head.W_K + head.b_K
    S = Q @ K.T / np.sqrt(Q.shape[1])  # (n, n)
    allowed = np.tril(np.ones(S.shape, dtype=bool))  # j <= i
    exponentials = np.where(allowed, np.exp(S), 0.0)  # e^(-inf) = 0 for the blocked keys
    weights = exponentials / exponentials.sum(axis=1, keepdims=True)
    return [exponentials[LATE], weights[LATE], weights]


@functools.cache
def _seed_causal_steps() -> tuple[np.ndarray, ...]:
    return tuple(_causal_steps(examples.causal_delivery_example()))


def _causal_candidate(draw: VariantDraw) -> SelfAttentionExample | None:
    X_all, column_pairs = _workable_tokens()
    pick = draw.integer(0, len(X_all) - 1)
    X, columns = X_all[pick].copy(), column_pairs[pick]
    q = X[:, list(columns)].sum(axis=1)  # each token's query length squared
    workable = _workable_keys(X, q, 0)  # head 1's story
    k, c = _key_choices()
    m = X @ k[workable].T + c[workable]  # (3, W): each token's key step m_j, for every workable choice
    allowed = q[LATE] * m[:2] * 0.5  # (2, W): 晚到's scaled scores for 外送 and itself, in halves
    difference = np.abs(allowed[1] - allowed[0])
    workable = workable[(difference >= 0.5) & (difference <= 2) & (np.abs(allowed).max(axis=0) <= 2)]
    if not len(workable):
        return None
    choice = workable[draw.integer(0, len(workable) - 1)]
    head = Head(W_Q=_pick_columns(columns),
                W_K=np.round(np.outer(k[choice], np.ones(2)) * ROOT_HALF, 6),  # (4, 2), multiples of 0.707107
                W_V=_pick_columns(draw.choice(_COLUMN_PAIRS)),
                b_Q=np.zeros(2), b_K=np.round(np.full(2, c[choice]) * ROOT_HALF, 6), b_V=np.zeros(2))
    return SelfAttentionExample(tokens=("外送", "晚到", "補償"), X=X, head=head)


# ------------------------------------------------------------------ translation: late delivery compensation (ps7)

_COUNTERPARTS = (LATE, 0, 2)  # late -> 晚到, delivery -> 外送, compensation -> 補償


def delivery_translation_example(variant: int) -> CrossAttentionExample:
    """Variant ``variant`` of the cross-attention "late delivery compensation" over 外送 晚到 補償
    (:func:`qkv.examples.delivery_translation_example`).

    Other variants keep that form: Chinese token vectors of 0s and 1s (three different ones,
    none zero), rows of ``W_Q`` of whole numbers from -2 to 2 (so the scaled scores come out
    in halves), each word's query pointing at its counterpart (a positive score) and attending
    most to it by 0.05 or more in its weights,
    no weight of "late" or "delivery" below 0.03 or above 0.85 (none of "compensation" below
    0.02 or above 0.9), and the scores, weights and output of "late delivery" (2 x 3) differ
    from the seed's.
    """
    if variant == 0:
        return examples.delivery_translation_example()
    return first_apart_from_seed("delivery_translation", variant, _translation_candidate, _translation_steps,
                                 _seed_translation_steps(), "translation example")


@functools.cache
def _translation_tables() -> tuple[np.ndarray, np.ndarray]:
    """Every Chinese side ``X_kv`` (3 x 4, 0s and 1s, three different non-zero rows) and every query
    row (4 whole numbers from -2 to 2, not all zero), in a fixed order."""
    bits = (np.arange(2**12)[:, None] >> np.arange(11, -1, -1)[None, :]) & 1  # (4096, 12)
    X_all = bits.reshape(-1, 3, 4).astype(float)
    rows = X_all @ (2.0 ** np.arange(4))  # (4096, 3): each row as a whole number
    usable = (rows > 0).all(axis=1) & (rows[:, 0] != rows[:, 1]) & (rows[:, 0] != rows[:, 2]) & (
        rows[:, 1] != rows[:, 2])
    queries = np.array(list(itertools.product(range(-2, 3), repeat=4)), dtype=float)  # (625, 4)
    return X_all[usable], queries[np.any(queries != 0, axis=1)]


def _translation_steps(ex: CrossAttentionExample) -> list[np.ndarray]:
    """The scaled scores, weights and output of "late delivery" (the first two words), in plain numpy."""
    Q = ex.X_q[:2] @ ex.head.W_Q  # (2, d_k)
    K, V = ex.X_kv @ ex.head.W_K, ex.X_kv @ ex.head.W_V  # (3, d_k), (3, d_v)
    S = Q @ K.T / np.sqrt(Q.shape[1])
    A = softmax(S, axis=-1)
    return [S, A, A @ V]


@functools.cache
def _seed_translation_steps() -> tuple[np.ndarray, ...]:
    return tuple(_translation_steps(examples.delivery_translation_example()))


def _translation_candidate(draw: VariantDraw) -> CrossAttentionExample | None:
    X_all, queries = _translation_tables()
    X_kv = X_all[draw.integer(0, len(X_all) - 1)]
    weights = softmax(queries @ X_kv.T / 2, axis=-1)  # (625, 3): each query row's weights, sqrt(d_k) = 2
    clear = margins(weights) >= 0.05
    moderate = (weights.min(axis=1) >= 0.03) & (weights.max(axis=1) <= 0.85)
    loose = (weights.min(axis=1) >= 0.02) & (weights.max(axis=1) <= 0.9)
    W_Q = np.zeros((4, 4))  # (d_model, d_k); the fourth row stays 0: no English word uses it
    pointing = queries @ X_kv.T > 0  # (625, 3): the query points towards that token (a positive score)
    for word, counterpart in enumerate(_COUNTERPARTS):
        ok = (clear & (np.argmax(weights, axis=1) == counterpart) & pointing[:, counterpart]
              & (moderate if word < 2 else loose))
        if not ok.any():
            return None
        W_Q[word] = queries[np.flatnonzero(ok)[draw.integer(0, int(ok.sum()) - 1)]]
    seed = examples.delivery_translation_example()
    return CrossAttentionExample(query_tokens=seed.query_tokens, X_q=seed.X_q, key_tokens=seed.key_tokens,
                                 X_kv=X_kv.copy(), head=Head(W_Q=W_Q, W_K=np.eye(4), W_V=np.eye(4)))


# ------------------------------------------------------------------ 補償's row through the block (problem set 9)


def delivery_block_row_example(variant: int) -> BlockRowExample:
    """Variant ``variant`` of 補償's residual sum and layer norm
    (:func:`qkv.examples.delivery_block_row_example`).

    Other variants keep the token, the shapes and the steps, with numbers a student can
    follow by hand: ``x`` of 0s and 1s, ``attended`` of whole numbers, so that the residual
    sum is 4 whole numbers with a whole mean and a whole standard deviation (1 to 5; mostly
    rows whose normalised entries are not all +-1); ``gamma`` in halves from 0.5 to 2 and
    ``beta`` in halves from -1 to 1, neither the identity. Every step (the sum, its mean and
    variance, the normalised row, the scaled and shifted row) differs from the chapter's by
    more than 0.01, and neither the sum nor the final row is one of the given rows.
    """
    if variant != 0:
        return _block_row_variant(variant)
    return examples.delivery_block_row_example()


def block_row_steps(example: BlockRowExample) -> list[np.ndarray]:
    """The residual sum, its mean and variance, the normalised row and gamma * it + beta, in plain numpy."""
    r = example.x + example.attended  # (d_model,)
    mean = r.mean()
    variance = ((r - mean) ** 2).mean()
    normalised = (r - mean) / np.sqrt(variance + example.eps)
    return [r, np.array(mean), np.array(variance), normalised, example.gamma * normalised + example.beta]


@functools.cache
def _workable_residual_rows() -> tuple[np.ndarray, np.ndarray]:
    """Rows of 4 whole numbers from -6 to 8 with a whole mean and a whole standard deviation from 1 to 5:
    ``(interesting, plain)``, the plain ones those whose normalised entries are all +-1."""
    values = np.arange(-6, 9)
    rows = np.array(list(itertools.product(values, repeat=4)), dtype=float)  # (50625, 4)
    total = rows.sum(axis=1)
    rows = rows[total % 4 == 0]
    deviations = rows - rows.mean(axis=1, keepdims=True)
    squares = (deviations ** 2).sum(axis=1)  # 4 * variance
    root = np.round(np.sqrt(squares / 4))
    whole = (root >= 1) & (root <= 5) & np.isclose(root ** 2 * 4, squares)
    rows, deviations, root = rows[whole], deviations[whole], root[whole]
    plain = np.all(np.isclose(np.abs(deviations), root[:, None]), axis=1)
    return rows[~plain], rows[plain]


def _block_row_candidate(draw: VariantDraw) -> BlockRowExample:
    interesting, plain = _workable_residual_rows()
    rows = draw.choice((interesting, interesting, interesting, plain))
    r = rows[draw.integer(0, len(rows) - 1)]
    x = np.array(draw.until(lambda d: d.integers(0, 1, (4,)), any, "token vector"), dtype=float)
    gamma = np.array([draw.halves(0.5, 2) for _ in range(4)])
    beta = np.array([draw.halves(-1, 1) for _ in range(4)])
    return BlockRowExample(token="補償", x=x, attended=r - x, gamma=gamma, beta=beta, eps=1e-5)


@functools.cache
def _seed_block_row_steps() -> tuple[np.ndarray, ...]:
    return tuple(block_row_steps(examples.delivery_block_row_example()))


def _block_row_workable(example: BlockRowExample) -> bool:
    steps = block_row_steps(example)
    givens = (example.x, example.attended, example.gamma, example.beta)
    return (not np.all(example.gamma == 1) and not np.all(example.beta == 0)
            and all_differ(steps, _seed_block_row_steps())
            and all(apart_from_seed(steps[i], given) for i in (0, 3, 4) for given in givens))


def _block_row_variant(variant: int) -> BlockRowExample:
    return VariantDraw("delivery_block_row", variant).until(_block_row_candidate, _block_row_workable,
                                                            "block row")


GROUPINGS = ((4, 2), (6, 2), (6, 3), (8, 2), (8, 4))  # (h, g) with 1 < g < h
DISTINCT = 0.03  # another reading of the example changes an answer by more than this


def grouped_delivery_example(variant: int) -> GroupedHeadsExample:
    """Variant ``variant`` of :func:`qkv.examples.grouped_delivery_example`: 補償's query in ``h``
    query heads over the keys and values of 外送 晚到 補償 in ``g`` key/value heads.

    Other variants: ``(h, g)`` is one of :data:`GROUPINGS`; the queries are whole numbers from -1
    to 1, the keys multiples of 0.707107 from -1.414214 to 1.414214 (so that the scaled scores come
    out in halves, as seed 000's do), the values whole numbers from 0 to 2; no key/value head has
    two equal keys. The query head asked about reads another key/value head under ``i // (h / g)``
    than under ``i % g``; its query is not zero, its weights lie between 0.03 and 0.9, and reading
    the keys of key/value head ``i % g`` or ``i // g``, or leaving out the ``sqrt(d_k)``, changes
    them by more than 0.03. Its key/value head and weights differ from the seed's.
    """
    if variant == 0:
        return examples.grouped_delivery_example()
    return VariantDraw("grouped_delivery", variant).until(_grouped_candidate, _grouped_workable, "grouped heads")


def grouped_readings(ex: GroupedHeadsExample) -> dict[str, np.ndarray]:
    """The asked query head's weights for 補償, read as the example means (``right``) and in the other
    ways a variant must tell apart: the groups ``i % g`` and ``i // g``, and the unscaled scores."""
    h, g, i = len(ex.Q), len(ex.K), ex.query_head
    readings = {"right": (i // (h // g), True), "modulo": (i % g, True), "over_g": (i // g, True),
                "unscaled": (i // (h // g), False)}
    found = {}
    for name, (group, scaled) in readings.items():
        if group < g:
            scores = ex.K[group] @ ex.Q[i] / (np.sqrt(ex.Q.shape[1]) if scaled else 1.0)  # (n,)
            found[name] = softmax(scores)
    return found


def _grouped_candidate(draw: VariantDraw) -> GroupedHeadsExample:
    h, g = draw.choice(GROUPINGS)
    heads = [i for i in range(h) if i // (h // g) != i % g]
    return GroupedHeadsExample(
        tokens=examples.grouped_delivery_example().tokens,
        Q=np.array(draw.integers(-1, 1, (h, 2)), dtype=float),
        K=ROOT_HALF * np.array(draw.integers(-2, 2, (g, 3, 2)), dtype=float),
        V=np.array(draw.integers(0, 2, (g, 3, 2)), dtype=float), query_head=draw.choice(heads))


@functools.cache
def _seed_grouped_answers() -> tuple[int, np.ndarray]:
    seed = examples.grouped_delivery_example()
    return seed.query_head // (len(seed.Q) // len(seed.K)), grouped_readings(seed)["right"]


def _grouped_workable(ex: GroupedHeadsExample) -> bool:
    h, g, i = len(ex.Q), len(ex.K), ex.query_head
    if not ex.Q[i].any() or any(len({tuple(k) for k in group}) < 3 for group in ex.K):
        return False
    readings = grouped_readings(ex)
    right = readings.pop("right")
    if right.min() < 0.03 or right.max() > 0.9:
        return False
    if any(np.abs(other - right).max() <= DISTINCT for other in readings.values()):
        return False
    seed_group, seed_weights = _seed_grouped_answers()
    return i // (h // g) != seed_group and apart_from_seed(right, seed_weights)
