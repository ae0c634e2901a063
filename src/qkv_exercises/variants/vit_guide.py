"""Other numbers for seed 002's story, the ViT guide: one variant per student.

``q1_example(variant)`` and its siblings return :mod:`qkv.examples.vit_guide`'s example for
variant 0 (the book's numbers) and, for any other whole number, the same shapes and steps
with other small numbers that a student can work by hand. The problem sets call them with
the student's variant; the book never does. Changing anything here changes students'
numbers: tests pin a few variants.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from qkv import examples
from qkv.attention import scaled_dot_product_attention, softmax
from qkv.examples import BYTES_PER_NUMBER, AttentionMemoryExample, KernelLookupExample
from qkv.examples import OnlineSoftmaxExample, QueryExample, SoftmaxSaturationExample

from .draw import APART_FROM_SEED, VariantDraw, all_differ, apart_from_seed, clear_largest, margins

# ------------------------------------------------------------------ q1: one query over three keys


def q1_example(variant: int) -> QueryExample:
    """Variant ``variant`` of seed 002's single query over three keys (:func:`qkv.examples.q1_example`).

    Other variants: one query over three keys, d_k = 2, whole numbers from -1 to 2 in
    ``q1`` and the keys and from 0 to 2 in the values; the three keys and the three
    values differ from each other, one weight is clearly the largest (by 0.05 or
    more), none is below 0.03 or above 0.85, and no step equals the seed's.
    """
    if variant != 0:
        return _q1_variant(variant)
    return examples.q1_example()


def _attention_steps(Q, K, V) -> list[np.ndarray]:
    """Q K^T, the scaled scores, the weights and the output: the steps a student writes down."""
    output, weights = scaled_dot_product_attention(Q, K, V)
    scores = Q @ K.T  # (n_q, n_k)
    return [scores, scores / np.sqrt(Q.shape[-1]), weights, output]


@functools.cache
def _workable_queries_and_keys() -> tuple[np.ndarray, np.ndarray]:
    """Every ``q1`` ``(2,)`` and keys ``(3, 2)`` of whole numbers from -1 to 2 that make workable weights."""
    vectors = np.array(list(itertools.product(range(-1, 3), repeat=2)), dtype=float)  # (16, 2)
    queries = vectors[np.any(vectors != 0, axis=1)]  # (15, 2)
    keys = vectors[np.array(list(itertools.product(range(16), repeat=3)))]  # (4096, 3, 2)
    distinct = np.array([len({tuple(k) for k in K}) == 3 for K in keys])
    keys = keys[distinct]
    q_all = np.repeat(queries, len(keys), axis=0)  # (m, 2)
    k_all = np.tile(keys, (len(queries), 1, 1))  # (m, 3, 2)
    scores = np.einsum("md,mjd->mj", q_all, k_all)  # (m, 3)
    weights = softmax(scores / np.sqrt(2), axis=-1)
    seed = examples.q1_example()
    seed_steps = _attention_steps(seed.Q, seed.K, seed.V)
    workable = ((margins(weights) >= 0.05) & (weights.min(axis=1) >= 0.03) & (weights.max(axis=1) <= 0.85)
                & (np.abs(scores - seed_steps[0]).max(axis=1) > APART_FROM_SEED)
                & (np.abs(weights - seed_steps[2]).max(axis=1) > APART_FROM_SEED))
    return q_all[workable], k_all[workable]


def _q1_variant(variant: int) -> QueryExample:
    draw = VariantDraw("q1", variant)
    queries, keys = _workable_queries_and_keys()
    pick = draw.integer(0, len(queries) - 1)
    Q, K = queries[pick][None, :], keys[pick]  # (1, 2), (3, 2)
    seed = examples.q1_example()
    seed_output = _attention_steps(seed.Q, seed.K, seed.V)[3]

    def values(d: VariantDraw) -> np.ndarray:
        return np.array(d.integers(0, 2, (3, 2)), dtype=float)  # (3, 2)

    def workable(V: np.ndarray) -> bool:
        return len({tuple(v) for v in V}) == 3 and all_differ([_attention_steps(Q, K, V)[3]], [seed_output])

    return QueryExample(Q=Q.copy(), K=K.copy(), V=draw.until(values, workable, "values"))


# ------------------------------------------------------------------ softmax saturation


def softmax_saturation_example(variant: int) -> SoftmaxSaturationExample:
    """Variant ``variant`` of seed 002's softmax of [2, 1, 0] against [20, 10, 0]
    (:func:`qkv.examples.softmax_saturation_example`).

    Other variants: three different moderate scores, multiples of 0.5 from -2 to 3,
    whose softmax is a healthy mix (no weight below 0.02 or above 0.9, the largest
    clear by 0.05), scaled up by a whole factor from 4 to 10 (so ``d_k`` is its square,
    16 to 100) into a nearly one-hot softmax (largest weight 0.95 or more); neither
    softmax is the seed's.
    """
    if variant != 0:
        return _saturation_variant(variant)
    return examples.softmax_saturation_example()


@functools.cache
def _workable_saturations() -> tuple[tuple[tuple[float, ...], int], ...]:
    """Every (moderate scores, factor) that makes a workable saturation example, in a fixed order."""
    halves = [h / 2 for h in range(-4, 7)]  # -2, -1.5, ..., 3
    seed = examples.softmax_saturation_example()
    seed_moderate, seed_scaled = softmax(seed.moderate), softmax(seed.scaled_up)
    found = []
    for scores in itertools.permutations(halves, 3):
        moderate = softmax(np.array(scores))
        if (moderate.min() < 0.02 or moderate.max() > 0.9 or not clear_largest(moderate, 0.05)
                or not apart_from_seed(moderate, seed_moderate)):
            continue
        for factor in range(4, 11):
            scaled = softmax(factor * np.array(scores))
            if scaled.max() >= 0.95 and apart_from_seed(scaled, seed_scaled):
                found.append((scores, factor))
    return tuple(found)


def _saturation_variant(variant: int) -> SoftmaxSaturationExample:
    scores, factor = VariantDraw("softmax_saturation", variant).choice(_workable_saturations())
    moderate = np.array(scores)
    return SoftmaxSaturationExample(moderate=moderate, scaled_up=factor * moderate, d_k=factor**2)


# ------------------------------------------------------------------ the online softmax (problem set 10)


def online_softmax_example(variant: int) -> OnlineSoftmaxExample:
    """Variant ``variant`` of seed 002's scores read by the online softmax
    (:func:`qkv.examples.online_softmax_example`).

    Other variants: three different scores, multiples of 0.5 from -2 to 3, the first the largest
    (so that, read forwards, the second block's maximum is lower than the running maximum and,
    read backwards, higher); every exponent ``s_j - m`` a multiple of 0.5 from -3 to 0; the
    weights neither below 0.04 nor above 0.85; and every step (the running maximum and sum after
    each block, both ways, the rescaling factor, the weights) differs from the seed's.
    """
    if variant != 0:
        return OnlineSoftmaxExample(np.array(VariantDraw("online_softmax", variant).choice(_workable_online_rows())),
                                    split=2)
    return examples.online_softmax_example()


def online_softmax_steps(example: OnlineSoftmaxExample) -> dict[str, np.ndarray]:
    """Every number a student writes down for ``example``, in plain numpy.

    ``state_1``, ``state_2``: ``[m, l]`` after each block read forwards; ``weights``: the
    softmax; ``reversed_state_1``, ``rescale``, ``reversed_state_2``: the same read backwards,
    and the factor ``e^(m_1 - m_2)`` the running sum is multiplied by in the second block.
    """
    steps = {}
    for prefix, blocks in (("", example.blocks), ("reversed_", example.reversed_blocks)):
        m, l = -np.inf, 0.0
        for t, block in enumerate(blocks, start=1):
            new_m = max(m, float(block.max()))
            rescale = np.exp(m - new_m)
            m, l = new_m, l * rescale + float(np.exp(block - new_m).sum())
            steps[f"{prefix}state_{t}"] = np.array([m, l])
        if prefix:
            steps["rescale"] = np.array(rescale)
    steps["weights"] = np.exp(example.scores - m) / l
    return steps


@functools.cache
def _workable_online_rows() -> tuple[tuple[float, ...], ...]:
    seed = online_softmax_steps(examples.online_softmax_example())
    halves = [h / 2 for h in range(-4, 7)]  # -2, -1.5, ..., 3
    found = []
    for row in itertools.permutations(halves, 3):
        if row[0] <= max(row[1:]) or row[0] - min(row[1:]) > 3:
            continue
        steps = online_softmax_steps(OnlineSoftmaxExample(np.array(row), split=2))
        if (steps["weights"].min() >= 0.04 and steps["weights"].max() <= 0.85
                and all(apart_from_seed(steps[name], seed[name]) for name in seed)):
            found.append(row)
    return tuple(found)


# ------------------------------------------------------------------ what attention costs (problem set 10)


def attention_memory_example(variant: int) -> AttentionMemoryExample:
    """Variant ``variant`` of the chapter's counts of what attention's weights cost
    (:func:`qkv.examples.attention_memory_example`).

    Other variants: a ViT's token count for another grid of patches (g^2 + 1), 4 to 16 heads and
    float32 or float64; a long context of a power of two from 4,096 to 131,072 tokens, 8 to 64
    heads and float16 or float32, whose weights fill a whole number of GiB from 1 to 1024; a
    context grown 3 to 10-fold. Every count differs from the seed's.
    """
    if variant == 0:
        return examples.attention_memory_example()
    draw = VariantDraw("attention_memory", variant)
    n = draw.choice([g * g + 1 for g in (7, 8, 10, 12, 16, 20, 24)])  # 14 * 14 + 1 is the seed's
    heads, dtype = draw.choice((4, 6, 8, 12, 16)), draw.choice(("float32", "float64"))
    n_long, heads_long, dtype_long = draw.choice(_workable_long_contexts())
    return AttentionMemoryExample(n, heads, dtype, n_long, heads_long, dtype_long, draw.choice((3, 4, 5, 8, 10)))


@functools.cache
def _workable_long_contexts() -> tuple[tuple[int, int, str], ...]:
    """Every (tokens, heads, dtype) whose weights fill a whole number of GiB from 1 to 1024, not the seed's 64."""
    found = []
    for n, heads, dtype in itertools.product([2**k for k in range(12, 18)], (8, 16, 32, 64), ("float16", "float32")):
        gib, rest = divmod(heads * n * n * BYTES_PER_NUMBER[dtype], 2**30)
        if rest == 0 and 1 <= gib <= 1024 and gib != 64:
            found.append((n, heads, dtype))
    return tuple(found)


# ------------------------------------------------------------------ attention as soft lookup (problem set 11)


def kernel_lookup_example(variant: int) -> KernelLookupExample:
    """Variant ``variant`` of seed 002's query weighed by a Gaussian kernel
    (:func:`qkv.examples.kernel_lookup_example`).

    Other variants: sigma is 0.5, 1 or 2, and the query and keys have coordinates that are whole
    multiples of sigma from -sigma to 2 sigma, so that every exponent ``-|q - k_j|^2 / (2 sigma^2)`` is a
    multiple of 0.5 (and so is every extended score ``(q . k_j - |k_j|^2 / 2) / sigma^2``); the values
    are whole numbers from 0 to 2. The three keys differ and one is clearly the nearest (its weight
    larger by 0.05 or more), and it is not k1 (the seed's); no weight is below 0.03 or above 0.85;
    the three values differ and every step differs from the seed's.
    """
    if variant != 0:
        return _kernel_lookup_variant(variant)
    return examples.kernel_lookup_example()


def kernel_lookup_steps(example: KernelLookupExample) -> dict[str, np.ndarray]:
    """Every number a student writes down for ``example``, in plain numpy (one query)."""
    q, K, V, sigma = example.Q[0], example.K, example.V, example.sigma
    distances = ((K - q) ** 2).sum(axis=1)  # (n_k,)
    exponents = -distances / (2 * sigma**2)
    weights = softmax(exponents)
    extended = (K @ q - 0.5 * (K**2).sum(axis=1)) / sigma**2  # (n_k,): exponents + |q|^2 / 2 sigma^2
    return {"distances": distances, "exponents": exponents, "weights": weights, "prediction": weights @ V,
            "extended_scores": extended}


@functools.cache
def _workable_kernel_geometries() -> tuple[np.ndarray, np.ndarray]:
    """Every query (2,) and keys (3, 2) of whole numbers from -1 to 2 (in units of sigma) that make
    workable weights, with the nearest key not the first."""
    vectors = np.array(list(itertools.product(range(-1, 3), repeat=2)), dtype=float)  # (16, 2)
    keys = vectors[np.array(list(itertools.product(range(16), repeat=3)))]  # (4096, 3, 2)
    keys = keys[np.array([len({tuple(k) for k in K}) == 3 for K in keys])]
    q_all = np.repeat(vectors, len(keys), axis=0)  # (m, 2)
    k_all = np.tile(keys, (len(vectors), 1, 1))  # (m, 3, 2)
    weights = softmax(-((k_all - q_all[:, None, :]) ** 2).sum(axis=2) / 2, axis=-1)  # (m, 3), sigma = 1
    workable = ((margins(weights) >= 0.05) & (np.argmax(weights, axis=1) != 0)
                & (weights.min(axis=1) >= 0.03) & (weights.max(axis=1) <= 0.85))
    return q_all[workable], k_all[workable]


def _kernel_lookup_variant(variant: int) -> KernelLookupExample:
    draw = VariantDraw("kernel_lookup", variant)
    queries, keys = _workable_kernel_geometries()
    seed_steps = kernel_lookup_steps(examples.kernel_lookup_example())

    def draw_once(d: VariantDraw) -> KernelLookupExample:
        pick, sigma = d.integer(0, len(queries) - 1), d.choice((0.5, 1.0, 2.0))
        return KernelLookupExample(Q=sigma * queries[pick][None, :], K=sigma * keys[pick],
                                   V=np.array(d.integers(0, 2, (3, 2)), dtype=float), sigma=sigma)

    def workable(ex: KernelLookupExample) -> bool:
        steps = kernel_lookup_steps(ex)
        return (len({tuple(v) for v in ex.V}) == 3 and apart_from_seed(steps["prediction"], ex.Q[0])
                and all(apart_from_seed(steps[name], seed_steps[name]) for name in seed_steps))

    return draw.until(draw_once, workable, "kernel lookup")
