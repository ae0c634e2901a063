"""qkv reproduces every table the seed articles print.

The expected values are typed from the articles (seeds.py, and seed 001's small matrix below),
digit for digit; they are the external truth the reference implementation is held to.
"""

from __future__ import annotations

import numpy as np
import pytest

import qkv

from .seeds import (
    SEED_000,
    SEED_000_O_CONCAT,
    SEED_000_SQRT_DK,
    SEED_000_Y,
    SEED_002_Q1_EXP_SUM,
    SEED_002_Q1_EXPS,
    SEED_002_Q1_OUTPUT,
    SEED_002_Q1_RAW_SCORES,
    SEED_002_Q1_SCALED_SCORES,
    SEED_002_Q1_WEIGHTS,
    SEED_002_SOFTMAX_MODERATE,
    SEED_002_SOFTMAX_SATURATED,
)

# The seed prints six decimals; its inputs are themselves rounded (0.707107 for 1/sqrt(2)),
# which moves S[2, 1] by 6e-7. 1e-6 is the tolerance that six printed decimals allow.
ATOL = 1e-6


def assert_table(name: str, actual, expected, atol: float = ATOL) -> None:
    """Compare with a message that names the table and the worst entry."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape}, the seed prints {expected.shape}"
    diff = np.abs(actual - expected)
    worst = np.unravel_index(np.argmax(diff), diff.shape)
    assert diff[worst] <= atol, (
        f"{name}{list(worst)} is {actual[worst]:.7f}, the seed prints {expected[worst]} (tolerance {atol})"
    )


@pytest.fixture(scope="module")
def delivery_trace():
    ex = qkv.examples.delivery_example()
    return qkv.trace_multi_head(ex.X, ex.heads, ex.W_O, ex.b_O)


def test_delivery_example_holds_the_seed_inputs():
    ex = qkv.examples.delivery_example()
    assert ex.tokens == ("外送", "晚到", "補償")
    assert_table("X", ex.X, [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], atol=0)
    assert_table("W_O", ex.W_O, np.eye(4), atol=0)
    assert len(ex.heads) == 2


@pytest.mark.parametrize("head", [1, 2])
@pytest.mark.parametrize("step", list(SEED_000[1]))
def test_seed_000_every_head_table(delivery_trace, head, step):
    steps = dict(delivery_trace.heads[head - 1].steps())
    assert_table(f"head {head} {step}", steps[step], SEED_000[head][step])


@pytest.mark.parametrize("head", [1, 2])
def test_seed_000_scale_is_sqrt_2(delivery_trace, head):
    assert abs(delivery_trace.heads[head - 1].scale - SEED_000_SQRT_DK) <= ATOL


def test_seed_000_concat_and_output(delivery_trace):
    assert_table("O_concat", delivery_trace.O_concat, SEED_000_O_CONCAT)
    assert_table("Y_raw", delivery_trace.Y.raw, SEED_000_Y)
    assert_table("B_O", delivery_trace.Y.B, np.zeros((3, 4)))
    assert_table("Y", delivery_trace.Y.Z, SEED_000_Y)


def test_seed_000_through_the_public_functions():
    """The plain API (not the trace) gives the seed's Y, A^(1) and A^(2)."""
    ex = qkv.examples.delivery_example()
    Y, weights = qkv.multi_head_attention(ex.X, ex.heads, ex.W_O, ex.b_O)
    assert_table("Y", Y, SEED_000_Y)
    assert_table("A^(1)", weights[0], SEED_000[1]["A"])
    assert_table("A^(2)", weights[1], SEED_000[2]["A"])
    for i, head in enumerate(ex.heads, start=1):
        O, A = qkv.self_attention(ex.X, *head)
        assert_table(f"O^({i})", O, SEED_000[i]["O"])
        Q = qkv.linear(ex.X, head.W_Q, head.b_Q)
        K = qkv.linear(ex.X, head.W_K, head.b_K)
        V = qkv.linear(ex.X, head.W_V, head.b_V)
        assert_table(f"K^({i})", K, SEED_000[i]["K"])
        O2, A2 = qkv.scaled_dot_product_attention(Q, K, V)
        assert_table(f"A^({i}) from Q, K, V", A2, SEED_000[i]["A"])


def test_seed_000_reading_of_the_heads():
    """Section 1-8: for 補償, head 1 attends most to 晚到 and head 2 most to 外送 (0.665241 each)."""
    ex = qkv.examples.delivery_example()
    _, weights = qkv.multi_head_attention(ex.X, ex.heads, ex.W_O, ex.b_O)
    row = ex.tokens.index("補償")
    assert ex.tokens[int(np.argmax(weights[0, row]))] == "晚到"
    assert ex.tokens[int(np.argmax(weights[1, row]))] == "外送"
    assert_table("A^(1)_補償", weights[0, row], [0.090031, 0.665241, 0.244728])
    assert_table("A^(2)_補償", weights[1, row], [0.665241, 0.244728, 0.090031])


def test_seed_002_q1_example_to_the_printed_digits():
    """Seed 002: raw scores 1, 0, 1; scaled 0.707, 0, 0.707; exp 2.03, 1, 2.03, sum 5.06;
    weights 0.40, 0.20, 0.40; output [0.80, 0.60]."""
    ex = qkv.examples.q1_example()
    output, weights = qkv.scaled_dot_product_attention(ex.Q, ex.K, ex.V)
    raw_scores = ex.Q @ ex.K.T
    np.testing.assert_array_equal(np.round(raw_scores, 0), [SEED_002_Q1_RAW_SCORES])
    np.testing.assert_array_equal(np.round(raw_scores / np.sqrt(2), 3), [SEED_002_Q1_SCALED_SCORES])
    exps = np.exp(raw_scores / np.sqrt(2))
    np.testing.assert_array_equal(np.round(exps, 2), [SEED_002_Q1_EXPS])
    assert round(float(exps.sum()), 2) == SEED_002_Q1_EXP_SUM
    np.testing.assert_array_equal(np.round(weights, 2), [SEED_002_Q1_WEIGHTS])
    np.testing.assert_array_equal(np.round(output, 2), [SEED_002_Q1_OUTPUT])


def test_seed_002_softmax_figures_to_the_printed_digits():
    """Seed 002: softmax([2, 1, 0]) ≈ [0.67, 0.24, 0.09];
    softmax([20, 10, 0]) ≈ [0.99995, 0.000045, 0.000000002]; dividing by sqrt(100) restores the first."""
    ex = qkv.examples.softmax_saturation_example()
    moderate = qkv.softmax(ex.moderate)
    saturated = qkv.softmax(ex.scaled_up)
    np.testing.assert_array_equal(np.round(moderate, 2), SEED_002_SOFTMAX_MODERATE)
    for value, printed, digits in zip(saturated, SEED_002_SOFTMAX_SATURATED, (5, 6, 9)):
        assert round(float(value), digits) == printed, f"{value} does not round to the printed {printed}"
    np.testing.assert_allclose(qkv.softmax(ex.scaled_up / np.sqrt(ex.d_k)), moderate, rtol=0, atol=1e-15)


def test_seed_001_zhonghe_matrix_mixes_as_printed():
    """Seed 001: 中和 = 0.5×中和 + 0.5×永和路; 有 and 一個 keep themselves; 永和路 like 中和."""
    ex = qkv.examples.zhonghe_example()
    assert ex.tokens == ("中和", "有", "一個", "永和路")
    np.testing.assert_array_equal(ex.weights.sum(axis=1), np.ones(4))
    one_hot = np.eye(4)  # each token's value is its own indicator, so the output shows the mix
    mixed = ex.weights @ one_hot
    np.testing.assert_array_equal(mixed[0], [0.5, 0, 0, 0.5])
    np.testing.assert_array_equal(mixed[1], [0, 1, 0, 0])
    np.testing.assert_array_equal(mixed[2], [0, 0, 1, 0])
    np.testing.assert_array_equal(mixed[3], [0.5, 0, 0, 0.5])


def test_examples_are_fresh_copies():
    """Changing an example in one cell never changes it for the next."""
    first = qkv.examples.delivery_example()
    first.X[0, 0] = 99.0
    assert qkv.examples.delivery_example().X[0, 0] == 1.0
    with pytest.raises(ValueError):
        first.heads[0].W_Q[0, 0] = 5.0  # a Head's parameters are read-only
