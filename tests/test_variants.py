"""Every student's variant is as workable by hand as the seed's, differs from it, and never changes.

For 1000 students of every problem set (the variants their ids give) and 50 practice
variants, the tests recompute what matters with plain numpy written here (a softmax,
dot products, lengths) and check the properties the exercises promise: the same story,
tokens and shapes as the seed; small numbers (integers, halves, a d_k with a whole
square root); one clear answer wherever a question asks for "the most" or "the least";
weights that are not all near 0 or 1; every value finite; and every answer different
from the seed's, so that the book's numbers copied into an exercise earn nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkv import examples
from qkv_exercises import variants
from qkv_exercises.identity import student_variant
from qkv_exercises.problem_sets import get_problem_set, names

from .notebook_support import givens_of, student_variants
from .seeds import SEED_000


def row_softmax(S) -> np.ndarray:
    """Softmax along the last axis, written out: e^s / sum e^s."""
    e = np.exp(np.asarray(S, dtype=float))
    return e / e.sum(axis=-1, keepdims=True)


def margin(values) -> float:
    """The largest value minus the second largest."""
    top, second = sorted(np.ravel(values))[::-1][:2]
    return top - second


def is_multiple(values, step: float) -> bool:
    values = np.asarray(values, dtype=float) / step
    return bool(np.all(np.abs(values - np.round(values)) < 1e-6))


def differs(a, b, by: float = 0.02) -> bool:
    """Whether ``a`` differs from ``b`` somewhere by more than ``by`` (so that b rounded to 2 decimals fails)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape != b.shape or float(np.abs(a - b).max()) > by


# ---------------------------------------------------------------- the examples of qkv


@pytest.fixture(scope="module")
def q1_variants():
    return [variants.q1_example(v) for v in student_variants("ps2_scaled_dot_product")]


def q1_steps(Q, K, V):
    scores = Q @ K.T
    weights = row_softmax(scores / math.sqrt(2))
    return [scores, scores / math.sqrt(2), weights, weights @ V]


def test_q1_variants_keep_the_seeds_form_and_are_workable(q1_variants):
    seed = examples.q1_example()
    seed_steps = q1_steps(seed.Q, seed.K, seed.V)
    for ex in q1_variants:
        assert ex.Q.shape == (1, 2) and ex.K.shape == (3, 2) and ex.V.shape == (3, 2)
        assert is_multiple(ex.Q, 1) and is_multiple(ex.K, 1) and is_multiple(ex.V, 1)
        assert ex.Q.min() >= -1 and ex.Q.max() <= 2 and ex.Q.any()
        assert ex.K.min() >= -1 and ex.K.max() <= 2 and ex.V.min() >= 0 and ex.V.max() <= 2
        assert len({tuple(k) for k in ex.K}) == 3 and len({tuple(v) for v in ex.V}) == 3
        steps = q1_steps(ex.Q, ex.K, ex.V)
        weights = steps[2][0]
        assert weights.min() >= 0.03 and weights.max() <= 0.85 and margin(weights) >= 0.05
        assert all(differs(a, b) for a, b in zip(steps, seed_steps)), ex


def test_q1_variants_are_many(q1_variants):
    distinct = {(ex.Q.tobytes(), ex.K.tobytes(), ex.V.tobytes()) for ex in q1_variants}
    assert len(distinct) >= 0.95 * len(q1_variants)


@pytest.fixture(scope="module")
def delivery_variants():
    return [variants.delivery_example(v) for v in student_variants("ps1_qkv")]


def head_by_hand(X, head):
    """Q, B_K, K, V, S_raw, S, A, O of one head, in plain numpy."""
    Q = X @ head.W_Q + head.b_Q
    B_K = np.tile(head.b_K, (len(X), 1))
    K = X @ head.W_K + B_K
    V = X @ head.W_V + head.b_V
    S_raw = Q @ K.T
    A = row_softmax(S_raw / math.sqrt(Q.shape[1]))
    return {"Q": Q, "B_K": B_K, "K": K, "V": V, "S_raw": S_raw, "S": S_raw / math.sqrt(Q.shape[1]), "A": A,
            "O": A @ V}


def test_the_delivery_seed_is_variant_zero():
    seed = variants.delivery_example(0)
    assert head_by_hand(seed.X, seed.heads[0])["K"] == pytest.approx(np.array(SEED_000[1]["K"]), abs=1e-6)


def test_delivery_variants_keep_the_seeds_form(delivery_variants):
    for ex in delivery_variants:
        assert ex.tokens == ("外送", "晚到", "補償")
        assert ex.X.shape == (3, 4) and set(np.unique(ex.X)) <= {0.0, 1.0}
        assert len({tuple(x) for x in ex.X}) == 3 and ex.X.any(axis=1).all()
        assert np.array_equal(ex.W_O, np.eye(4)) and not ex.b_O.any()
        for head in ex.heads:
            for W in (head.W_Q, head.W_V):  # each picks two columns of X
                assert set(np.unique(W)) <= {0.0, 1.0} and np.array_equal(W.sum(axis=0), [1, 1])
            assert np.array_equal(head.W_K[:, 0], head.W_K[:, 1]) and is_multiple(head.W_K, 0.707107)
            assert head.b_K[0] == head.b_K[1] and is_multiple(head.b_K, 0.707107)
            assert not head.b_Q.any() and not head.b_V.any()
            assert is_multiple(np.round(head_by_hand(ex.X, head)["S"], 4), 0.5), "scaled scores in halves"


def test_delivery_variants_tell_the_seeds_story_with_one_clear_answer_each(delivery_variants):
    for ex in delivery_variants:
        one, two = (head_by_hand(ex.X, head) for head in ex.heads)
        # 補償 attends most to 晚到 in head 1, to 外送 in head 2, and least to 晚到 in head 2
        assert np.argmax(one["A"][2]) == 1 and margin(one["A"][2]) >= 0.05
        assert np.argmax(two["A"][2]) == 0 and margin(two["A"][2]) >= 0.05
        assert np.argmin(two["A"][2]) == 1 and margin(-two["A"][2]) >= 0.05
        # one token attends most to 晚到 in head 1: the one whose query is the longest
        lengths = np.linalg.norm(one["Q"], axis=1)
        assert np.argmax(one["A"][:, 1]) == np.argmax(lengths) and margin(one["A"][:, 1]) >= 0.05
        # the longest key of head 2 is one clear token
        assert margin(np.linalg.norm(two["K"], axis=1)) >= 0.5
        for head in (one, two):
            assert head["A"].min() >= 0.02 and head["A"].max() <= 0.9, "weights neither near 0 nor near 1"
            assert all(np.isfinite(step).all() for step in head.values())


def test_every_answer_of_a_delivery_variant_differs_from_the_seeds(delivery_variants):
    seed = examples.delivery_example()
    seed_heads = [head_by_hand(seed.X, head) for head in seed.heads]
    seed_longest = np.argmax(np.linalg.norm(seed_heads[1]["K"], axis=1))
    seed_column = np.argmax(seed_heads[0]["A"][:, 1])
    seed_least = np.argmin(seed_heads[1]["A"][2])
    for ex in delivery_variants:
        heads = [head_by_hand(ex.X, head) for head in ex.heads]
        for head, seed_head in zip(heads, seed_heads):
            for step in head:
                assert differs(head[step], seed_head[step]), (step, ex)
        assert np.abs(ex.heads[0].b_K).max() > 0.5, "a key bias to broadcast"
        assert np.argmax(np.linalg.norm(heads[1]["K"], axis=1)) != seed_longest
        assert np.argmax(heads[0]["A"][:, 1]) != seed_column
        assert np.argmin(heads[1]["A"][2]) != seed_least


def test_delivery_variants_are_many(delivery_variants):
    distinct = {ex.X.tobytes() + b"".join(np.concatenate([h.W_K.ravel(), h.b_K, h.W_V.ravel(), h.W_Q.ravel()])
                                          .tobytes() for h in ex.heads) for ex in delivery_variants}
    assert len(distinct) >= 0.95 * len(delivery_variants)


def test_softmax_saturation_variants_saturate_and_scale_back():
    seed = examples.softmax_saturation_example()
    for v in student_variants("ps3_sqrt_dk"):
        ex = variants.softmax_saturation_example(v)
        assert ex.moderate.shape == (3,) and is_multiple(ex.moderate, 0.5) and len(set(ex.moderate)) == 3
        assert ex.moderate.min() >= -2 and ex.moderate.max() <= 3
        root = math.isqrt(ex.d_k)
        assert root * root == ex.d_k and 4 <= root <= 10, "d_k with a whole square root"
        assert ex.scaled_up == pytest.approx(root * ex.moderate)
        moderate, scaled_up = row_softmax(ex.moderate), row_softmax(ex.scaled_up - ex.scaled_up.max())
        assert moderate.min() >= 0.02 and moderate.max() <= 0.9 and margin(moderate) >= 0.05
        assert scaled_up.max() >= 0.95, "the scaled-up scores' softmax is nearly one-hot"
        assert differs(moderate, row_softmax(seed.moderate))
        assert differs(scaled_up, row_softmax(seed.scaled_up - seed.scaled_up.max()))


# ---------------------------------------------------------------- the problem sets' own givens


def test_ps3_widths_have_whole_square_roots_and_answers_not_the_seeds():
    for _, g in givens_of("ps3_sqrt_dk"):
        root = math.isqrt(g["d_k"])
        assert root * root == g["d_k"] and g["variance"] in (0.5, 2.0, 3.0, 4.0)
        variance = g["d_k"] * g["variance"] ** 2  # Var(q.k): d_k products of variance sigma^2 * sigma^2
        assert is_multiple(math.sqrt(variance), 0.5), "a typical size in halves"
        assert variance != 64 and g["variance"] ** 2 != 1


def test_ps4_values_are_small_whole_numbers_mixed_into_a_new_output():
    seed = get_problem_set("ps4_single_head").givens(0)
    for _, g in givens_of("ps4_single_head"):
        V = g["V_zhonghe"]
        assert V.shape == (4, 2) and is_multiple(V, 1) and V.min() >= 0 and V.max() <= 4
        assert len({tuple(row) for row in V}) == 4
        assert np.array_equal(g["A_zhonghe"], seed["A_zhonghe"]), "the seed's attention matrix"
        assert differs(g["A_zhonghe"] @ V, seed["A_zhonghe"] @ seed["V_zhonghe"])


def test_ps5_mixing_averages_or_copies_columns_of_both_heads():
    for _, g in givens_of("ps5_multi_head"):
        W = g["W_O_mixing"]
        assert W.shape == (4, 4) and set(np.unique(W)) <= {0.0, 0.5, 1.0}
        assert np.allclose(W.sum(axis=0), 1), "each output column is an average of two or a copy of one"
        for column in W.T:
            if 0.5 in column:  # an average takes one column of each head
                assert column[:2].sum() == 0.5 and column[2:].sum() == 0.5
        assert W[:2].any() and W[2:].any(), "both heads reach the output"


def test_ps6_images_give_one_brightest_patch_and_workable_weights():
    seed = get_problem_set("ps6_maps").givens(0)
    seed_patches = patches_by_hand(seed["image"])
    seed_weights = row_softmax(seed_patches @ seed_patches[seed["query_patch"]] / 2)
    for _, g in givens_of("ps6_maps"):
        assert g["image"].shape == (4, 6) and set(np.unique(g["image"])) <= {0.0, 1.0, 2.0}
        assert 0 <= g["query_patch"] <= 5 and g["patch_size"] == 2
        patches = patches_by_hand(g["image"])
        weights = row_softmax(patches @ patches[g["query_patch"]] / 2)  # sqrt(d) = sqrt(4) = 2
        assert margin(weights) >= 0.05 and weights.max() <= 0.9 and weights.min() >= 0.01
        assert np.argmax(weights) != np.argmax(seed_weights) and differs(weights, seed_weights)


def patches_by_hand(image) -> np.ndarray:
    """The six 2 x 2 patches of a 4 x 6 image, numbered row by row, each read row by row: (6, 4)."""
    return np.array([image[r:r + 2, c:c + 2].ravel() for r in (0, 2) for c in (0, 2, 4)])


def test_ps6_options_come_in_new_orders_never_with_the_right_one_where_the_seed_has_it():
    seed = get_problem_set("ps6_maps").givens(0)
    orders = set()
    for _, g in givens_of("ps6_maps"):
        for given in ("why_options", "not_shown_options"):
            assert sorted(g[given]) == sorted(seed[given])
            orders.add(g[given])
    assert len(orders) >= 20


def online_by_hand(blocks):
    """The online softmax written out: ``[m, l]`` after each block, each block's rescaling factor, the weights."""
    m, l, states, factors = -math.inf, 0.0, [], []
    for block in blocks:
        new_m = max([m, *block])
        factor = math.exp(m - new_m)
        l = l * factor + sum(math.exp(s - new_m) for s in block)
        m = new_m
        states.append([m, l])
        factors.append(factor)
    return np.array(states), factors, np.array([math.exp(s - m) / l for block in blocks for s in block])


def test_ps10_scores_are_halves_whose_maximum_comes_first_then_last():
    seed = get_problem_set("ps10_online_softmax").givens(0)
    seed_forwards, _, seed_weights = online_by_hand(seed["blocks"])
    seed_backwards, seed_factors, _ = online_by_hand(seed["reversed_blocks"])
    assert seed["scores"].tolist() == [2, 1, 0] and seed_factors[1] == pytest.approx(math.exp(-1))
    for _, g in givens_of("ps10_online_softmax"):
        s = g["scores"]
        assert s.shape == (3,) and is_multiple(s, 0.5) and len(set(s)) == 3 and s.min() >= -2 and s.max() <= 3
        assert [b.tolist() for b in g["blocks"]] == [s[:2].tolist(), s[2:].tolist()]
        assert [b.tolist() for b in g["reversed_blocks"]] == [s[::-1][:2].tolist(), s[::-1][2:].tolist()]
        assert s[0] > s[1:].max(), "read forwards block 2's maximum is lower than m, read backwards higher"
        assert (s - s[0]).min() >= -3, "exponents s_j - m in halves from -3 to 0"
        forwards, _, weights = online_by_hand(g["blocks"])
        backwards, factors, _ = online_by_hand(g["reversed_blocks"])
        assert factors[1] < 1 and forwards[1] == pytest.approx(backwards[1]), "rescaled, to the same sum"
        assert weights.min() >= 0.04 and weights.max() <= 0.85
        for value, seed_value in ((forwards, seed_forwards), (backwards, seed_backwards), (weights, seed_weights),
                                  (factors[1], seed_factors[1])):
            assert differs(value, seed_value)


def test_ps10_sizes_are_a_vit_and_a_long_context_of_whole_gib():
    seen = set()
    for _, g in givens_of("ps10_online_softmax"):
        grid = math.isqrt(g["n"] - 1)
        assert grid * grid == g["n"] - 1 and grid != 14, "a ViT's patches and its class token, not ViT-Base's"
        assert g["heads"] in (4, 6, 8, 12, 16) and g["dtype"] in ("float32", "float64")
        assert g["n_long"] in [2**k for k in range(12, 18)] and g["heads_long"] in (8, 16, 32, 64)
        gib = g["heads_long"] * g["n_long"] ** 2 * {"float16": 2, "float32": 4}[g["dtype_long"]] / 2**30
        assert gib == int(gib) and 1 <= gib <= 1024 and gib != 64
        assert g["growth"] in (3, 4, 5, 8, 10)
        seen |= {g["dtype"], g["dtype_long"]}
    assert seen == {"float16", "float32", "float64"}


def test_ps11_kernels_have_exponents_in_halves_and_one_clear_nearest_key():
    seed = get_problem_set("ps11_soft_lookup").givens(0)

    def steps(g):
        q, K, V, sigma = g["q"][0], g["K"], g["V"], g["sigma"]
        distances = ((K - q) ** 2).sum(axis=1)
        exponents = -distances / (2 * sigma**2)
        weights = row_softmax(exponents)
        extended = (K @ q - 0.5 * (K**2).sum(axis=1)) / sigma**2
        return distances, exponents, weights, weights @ V, extended

    seed_steps = steps(seed)
    assert seed_steps[0].tolist() == [0, 2, 1] and seed["sigma"] == 1
    widths = set()
    for _, g in givens_of("ps11_soft_lookup"):
        q, K, V, sigma = g["q"], g["K"], g["V"], g["sigma"]
        assert q.shape == (1, 2) and K.shape == (3, 2) and V.shape == (3, 2) and sigma in (0.5, 1.0, 2.0)
        for coordinates in (q / sigma, K / sigma):
            assert is_multiple(coordinates, 1) and coordinates.min() >= -1 and coordinates.max() <= 2
        assert is_multiple(V, 1) and V.min() >= 0 and V.max() <= 2
        assert len({tuple(k) for k in K}) == 3 and len({tuple(v) for v in V}) == 3
        distances, exponents, weights, prediction, extended = steps(g)
        assert is_multiple(exponents, 0.5) and is_multiple(extended, 0.5)
        assert row_softmax(extended) == pytest.approx(weights), "the extended scores give the same weights"
        assert weights.min() >= 0.03 and weights.max() <= 0.85 and margin(weights) >= 0.05
        assert np.argmax(weights) == np.argmin(distances) != 0, "one nearest key, not the seed's k1"
        for value, seed_value in zip((distances, exponents, weights, prediction, extended), seed_steps):
            assert differs(value, seed_value)
        widths.add(sigma)
    assert widths == {0.5, 1.0, 2.0}


@pytest.mark.parametrize("problem_set", names())
def test_every_answer_differs_from_the_seeds_and_everything_is_finite(problem_set):
    """The expected value of every hand-computed answer (and the right choice) differs from the seed's."""
    ps = get_problem_set(problem_set)
    seed_givens = ps.givens(0)
    value_checks = [c for c in ps.checks if c.kind == "value"]
    choice_checks = [c for c in ps.checks if c.kind == "choice"]
    seed_values = {c.grade_id: c.expect(seed_givens).expected for c in value_checks}
    seed_choices = {c.grade_id: c.expect(seed_givens).right for c in choice_checks}
    for v, givens in givens_of(problem_set)[:300]:
        for name, value in givens.items():
            if isinstance(value, np.ndarray):
                assert np.isfinite(value).all(), name
        for check in value_checks:
            expected = check.expect(givens).expected
            assert np.isfinite(expected).all()
            assert differs(expected, seed_values[check.grade_id]), (problem_set, check.grade_id, v)
        for check in choice_checks:
            assert check.expect(givens).right != seed_choices[check.grade_id], (problem_set, check.grade_id, v)


# ---------------------------------------------------------------- stable forever


PINNED = {
    # (problem set, student id): {given: the numbers that student was given}
    ("ps1_qkv", "ab1234"): {"X": [[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 0, 1]]},
    ("ps2_scaled_dot_product", "ab1234"): {"q1": [[1, 0]], "K": [[-1, 1], [2, -1], [0, 1]]},
    ("ps3_sqrt_dk", "ab1234"): {"moderate": [-1.5, -0.5, 0.5], "d_k": 36},
    ("ps4_single_head", "zoë.chen"): {"V_zhonghe": [[0, 1], [3, 3], [1, 4], [4, 1]]},
    ("ps5_multi_head", "s0123456"): {"W_O_mixing": [[0.5, 0, 1, 0], [0, 0.5, 0, 0], [0, 0.5, 0, 0],
                                                    [0.5, 0, 0, 1]]},
    ("ps6_maps", "s0123456"): {"image": [[2, 1, 1, 1, 2, 0], [0, 1, 2, 2, 2, 0], [2, 0, 2, 0, 1, 2],
                                         [1, 0, 1, 0, 0, 0]], "query_patch": 3},
    ("ps10_online_softmax", "ab1234"): {"scores": [3.0, 2.5, 0.5], "n": 101, "heads": 4, "dtype": "float64",
                                        "n_long": 32768, "heads_long": 8, "dtype_long": "float16", "growth": 3},
    ("ps11_soft_lookup", "zoë.chen"): {"q": [[2, 0]], "K": [[4, -2], [2, 2], [2, 0]], "V": [[2, 2], [0, 0], [1, 0]],
                                       "sigma": 2.0},
    ("ps7_masks", "ab1234"): {"X_kv": [[0, 1, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]],
                              "W_Q": [[1, 0, 0, 0], [0, 1, 1, -1], [0, -1, 2, -1], [0, 0, 0, 0]]},
    ("ps8_position", "zoë.chen"): {"order": [3, 1, 0, 2], "d_model": 8, "position": 9, "pair": [9, 12]},
    ("ps9_block", "ab1234"): {"x": [1, 0, 1, 0], "a": [1, -4, -7, -4], "gamma": [1.5, 1.5, 1, 1],
                              "beta": [-0.5, 0.5, 1, 0.5]},
    ("ps12_trained_model", "ab1234"): {"sentence": "After two late orders the driver promised compensation.",
                                       "layer": 2, "head": 1},
    ("ps13_inference", "ab1234"): {"x_3": [1, 0, 1, 1], "query_head": 2,
                                   "Q_gqa": [[0, 1], [-1, -1], [1, 0], [1, 1], [1, -1], [0, -1]],
                                   "n_window": 10, "window": 4, "token": 8, "scores_row": [3, 0, 2.5, -0.5],
                                   "h_alibi": 8, "alibi_head": 3, "layers": 48, "kv_heads": 1, "dtype": "float16"},
    ("ps14_training", "ab1234"): {"V": [[1, 0], [0, 1], [0, 0]], "dO": [[-1, 0.5], [-1, 0], [0.5, 1]],
                                  "key": 1, "column": 1},
}


@pytest.mark.parametrize("problem_set, student", sorted(PINNED), ids=lambda x: str(x))
def test_a_students_numbers_never_change(problem_set, student):
    """Guards the numbers of students in the middle of a course.

    A student who starts a problem set today and reopens it next month, after the
    course has been updated, must find the same numbers, or their half-finished work
    no longer fits and their grade is computed on numbers they never saw. These pins
    were written down from the course as released; a change to the variant draws, to
    the acceptance rules or to identity.student_variant breaks them. Only change a pin
    between courses, never during one.
    """
    givens = get_problem_set(problem_set).givens(student_variant(problem_set, student))
    for name, expected in PINNED[(problem_set, student)].items():
        assert np.asarray(givens[name]).tolist() == expected, name
