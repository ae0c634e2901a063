"""Order and position: permutation equivariance, sinusoidal encodings, learned tables, RoPE.

The encodings are checked against loops with math.sin and math.cos written here, the rotary
embedding also against the complex-number form used by LLaMA's reference code (multiply each
pair, read as x_2i + i x_2i+1, by e^(i m w_i)), and both against the properties the position
chapter states: dot products and scores that depend on the offset only, lengths kept.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import matrices, sizes
from .test_errors import raises

even_widths = st.integers(1, 8).map(lambda half: 2 * half)
bases = st.sampled_from([10000.0, 100.0, 2.0])
positions = st.integers(0, 500)

# ---------------------------------------------------------------- permutation equivariance
# (the general property, for random tokens and heads, is in test_properties.py)


def test_positions_break_the_equivariance_of_the_zhonghe_example():
    """The chapter's example: swapping 中和 and 永和路 only permutes the output, until the
    sinusoidal encodings are added; then 中和 at position 3 gets another vector than at 0."""
    ex = qkv.examples.zhonghe_vectors_example()
    order = [3, 1, 2, 0]
    O, _ = qkv.self_attention(ex.X, *ex.head)
    O_swapped, _ = qkv.self_attention(ex.X[order], *ex.head)
    np.testing.assert_allclose(O_swapped, O[order], rtol=0, atol=1e-15)
    PE = qkv.sinusoidal_position_encoding(4, 4)
    O_pos, _ = qkv.self_attention(ex.X + PE, *ex.head)
    O_pos_swapped, _ = qkv.self_attention(ex.X[order] + PE, *ex.head)
    assert np.abs(O_pos_swapped - O_pos[order]).max() > 0.5


def test_zhonghe_vectors_attend_as_seed_001_describes():
    """The place names attend mostly to themselves and each other, 有 and 一個 to themselves."""
    ex = qkv.examples.zhonghe_vectors_example()
    _, A = qkv.self_attention(ex.X, *ex.head)
    index = {token: i for i, token in enumerate(ex.tokens)}
    places = [index["中和"], index["永和路"]]
    for place in places:
        assert sorted(np.argsort(A[place])[-2:].tolist()) == sorted(places)
        assert A[place, places].sum() > 0.8
    for filler in ("有", "一個"):
        assert A[index[filler]].argmax() == index[filler]


# ---------------------------------------------------------------- sinusoidal encodings


def loop_sinusoidal(n, d_model, base):
    """The Transformer paper's formula, one entry at a time."""
    table = []
    for p in range(n):
        row = []
        for c in range(d_model):
            i = c // 2
            angle = p / base ** (2 * i / d_model)
            row.append(math.sin(angle) if c % 2 == 0 else math.cos(angle))
        table.append(row)
    return table


@settings(max_examples=40, deadline=None)
@given(sizes, even_widths, bases)
def test_sinusoidal_encoding_matches_the_formula_entry_by_entry(n, d_model, base):
    PE = qkv.sinusoidal_position_encoding(n, d_model, base=base)
    np.testing.assert_allclose(PE, loop_sinusoidal(n, d_model, base), rtol=1e-12, atol=1e-12)


def test_encoding_of_position_1_by_hand():
    """d_model = 4: w_0 = 1, w_1 = 10000^(-1/2) = 1/100, so PE_1 = [sin 1, cos 1, sin 0.01, cos 0.01]."""
    PE = qkv.sinusoidal_position_encoding(4, 4)
    np.testing.assert_allclose(PE[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], rtol=1e-12)
    np.testing.assert_allclose(PE[0], [0, 1, 0, 1], atol=0)


@settings(max_examples=60, deadline=None)
@given(even_widths, positions, positions, st.integers(0, 300))
def test_dot_product_of_encodings_depends_on_the_offset_only(d_model, p, q, shift):
    """PE_p . PE_q = PE_(p+s) . PE_(q+s) = sum_i cos((p - q) w_i)."""
    PE = qkv.sinusoidal_position_encoding(max(p, q) + shift + 1, d_model)
    formula = sum(math.cos((p - q) * 10000 ** (-2 * i / d_model)) for i in range(d_model // 2))
    assert PE[p] @ PE[q] == pytest.approx(formula, abs=1e-9)
    assert PE[p + shift] @ PE[q + shift] == pytest.approx(formula, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(even_widths, positions, st.integers(0, 100))
def test_encoding_k_positions_later_is_a_rotation_of_this_one(d_model, p, k):
    """Each pair (sin, cos) of PE_(p+k) is the pair of PE_p turned by k w_i (angle addition)."""
    PE = qkv.sinusoidal_position_encoding(p + k + 1, d_model)
    for i in range(d_model // 2):
        turn = k * 10000 ** (-2 * i / d_model)
        rotation = np.array([[math.cos(turn), math.sin(turn)], [-math.sin(turn), math.cos(turn)]])
        np.testing.assert_allclose(rotation @ PE[p, 2 * i: 2 * i + 2], PE[p + k, 2 * i: 2 * i + 2], atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=6), even_widths, bases)
def test_position_angles_match_a_loop(pos, d, base):
    angles = qkv.position_angles(pos, d, base)
    expected = [[p * base ** (-2 * i / d) for i in range(d // 2)] for p in pos]
    np.testing.assert_allclose(angles, expected, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- learned tables


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_add_positions_adds_row_p_to_the_token_at_p(data):
    n, d_model = data.draw(sizes), data.draw(sizes)
    n_max = n + data.draw(st.integers(0, 3))
    X = data.draw(matrices((2, n, d_model)))
    P = data.draw(matrices((n_max, d_model)))
    result = qkv.add_positions(X, P)
    for b in range(2):
        for t in range(n):
            np.testing.assert_array_equal(result[b, t], [X[b, t, c] + P[t, c] for c in range(d_model)])


# ---------------------------------------------------------------- rotary embeddings


def loop_rotary(x, m, base=10000.0):
    """Turn each pair (x_2i, x_2i+1) of one row by the angle m w_i, with a 2 x 2 rotation."""
    d = len(x)
    out = []
    for i in range(d // 2):
        angle = m * base ** (-2 * i / d)
        a, b = x[2 * i], x[2 * i + 1]
        out += [a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle)]
    return out


def complex_rotary(X, pos, base=10000.0):
    """LLaMA's form: the pairs as complex numbers, multiplied by e^(i m w_i)."""
    d = X.shape[-1]
    z = X[..., 0::2] + 1j * X[..., 1::2]
    freqs = base ** (-np.arange(0, d, 2) / d)
    z = z * np.exp(1j * np.outer(pos, freqs))
    return np.stack([z.real, z.imag], axis=-1).reshape(X.shape)


@st.composite
def rotary_inputs(draw):
    n, d = draw(sizes), draw(even_widths)
    X = draw(matrices((n, d)))
    pos = draw(st.lists(positions, min_size=n, max_size=n))
    return X, np.array(pos), draw(bases)


@settings(max_examples=50, deadline=None)
@given(rotary_inputs())
def test_rotary_embedding_matches_a_loop_of_2x2_rotations(inputs):
    X, pos, base = inputs
    rotated = qkv.rotary_embedding(X, positions=pos, base=base)
    expected = [loop_rotary(list(x), m, base) for x, m in zip(X, pos)]
    np.testing.assert_allclose(rotated, expected, rtol=1e-9, atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(rotary_inputs())
def test_rotary_embedding_matches_the_complex_number_form(inputs):
    X, pos, base = inputs
    np.testing.assert_allclose(qkv.rotary_embedding(X, pos, base), complex_rotary(X, pos, base),
                               rtol=1e-9, atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(rotary_inputs())
def test_rotary_embedding_keeps_every_length(inputs):
    X, pos, base = inputs
    rotated = qkv.rotary_embedding(X, pos, base)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(X, axis=-1),
                               rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(even_widths, positions, positions, st.integers(-200, 200), st.data())
def test_rotary_score_depends_on_the_offset_only(d, m, n, shift, data):
    """R_m q . R_n k = R_(m+s) q . R_(n+s) k = q . R_(n-m) k."""
    q, k = data.draw(matrices((d,))), data.draw(matrices((d,)))

    def score(m, n):
        return qkv.rotary_embedding(q[None], [m])[0] @ qkv.rotary_embedding(k[None], [n])[0]

    k_turned_by_offset = loop_rotary(list(k), n - m)
    expected = sum(a * b for a, b in zip(q, k_turned_by_offset))
    assert score(m, n) == pytest.approx(expected, abs=1e-8)
    assert score(m + shift, n + shift) == pytest.approx(expected, abs=1e-8)


def test_rotary_embedding_defaults_to_positions_0_to_n_and_keeps_leading_axes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 3, 5, 4))  # (batch, h, n, d)
    rotated = qkv.rotary_embedding(X)
    np.testing.assert_allclose(rotated, complex_rotary(X, np.arange(5)), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(rotated[..., 0, :], X[..., 0, :])  # position 0 does not turn


def test_rotary_scores_differ_before_and_after():
    """Unlike PE_p . PE_q, a rotary score is not even in the offset: (0, 2) and (2, 0) differ."""
    q, k = np.array([1.0, 0.0, 1.0, 0.0]), np.array([0.5, 1.0, -1.0, 2.0])
    after = qkv.rotary_embedding(q[None], [0])[0] @ qkv.rotary_embedding(k[None], [2])[0]
    before = qkv.rotary_embedding(q[None], [2])[0] @ qkv.rotary_embedding(k[None], [0])[0]
    assert abs(after - before) > 0.5


# ---------------------------------------------------------------- errors


def test_position_angles_need_a_vector_of_positions():
    with raises(ValueError, "positions must be a vector (n,)", "(2, 2)"):
        qkv.position_angles([[0, 1], [2, 3]], 4)
    with raises(ValueError, "positions[1] is nan", "finite numbers"):
        qkv.position_angles([0.0, np.nan], 4)


@pytest.mark.parametrize("d, message", [(3, "d must be even (sines and cosines come in pairs), got d=3"),
                                        (0, "d must be a positive integer, got 0"),
                                        (4.0, "d must be a positive integer, got 4.0")])
def test_position_angles_need_a_positive_even_width(d, message):
    with raises(ValueError, message):
        qkv.position_angles([0, 1], d)


@pytest.mark.parametrize("base", [1, 0.5, -3.0, np.inf, np.nan, "10000", True])
def test_the_base_must_be_a_finite_number_above_1(base):
    with raises(ValueError, "base must be a finite number greater than 1", f"got {base!r}"):
        qkv.sinusoidal_position_encoding(3, 4, base=base)


def test_sinusoidal_encoding_needs_positive_n_and_even_d_model():
    with raises(ValueError, "n (the number of positions) must be a positive integer, got 0"):
        qkv.sinusoidal_position_encoding(0, 4)
    with raises(ValueError, "d_model must be even (sines and cosines come in pairs), got d_model=5"):
        qkv.sinusoidal_position_encoding(3, 5)


def test_add_positions_needs_a_table_of_the_token_width():
    with raises(ValueError, "P has shape (8, 3) but X has d_model=4", "(2, 4)", "P must be (n_max, 4)"):
        qkv.add_positions(np.ones((2, 4)), np.ones((8, 3)))
    with raises(ValueError, "P has shape (2, 8, 4)", "P must be (n_max, 4)"):
        qkv.add_positions(np.ones((2, 4)), np.ones((2, 8, 4)))


def test_add_positions_has_no_row_beyond_the_table():
    with raises(ValueError, "P has rows for 8 positions but X has n=10 tokens", "positions 8 to 9"):
        qkv.add_positions(np.zeros((10, 4)), np.ones((8, 4)))


def test_rotary_embedding_needs_an_even_width():
    with raises(ValueError, "rotary_embedding needs an even d", "got d=3", "(2, 3)"):
        qkv.rotary_embedding(np.ones((2, 3)))


def test_rotary_embedding_needs_one_position_per_row():
    with raises(ValueError, "positions has shape (2,) but X has n=3 rows", "(3, 4)", "(3,)"):
        qkv.rotary_embedding(np.ones((3, 4)), positions=[0, 1])


def test_rotary_embedding_refuses_an_infinite_position():
    with raises(ValueError, "positions[0] is inf", "finite numbers"):
        qkv.rotary_embedding(np.ones((1, 4)), positions=[np.inf])
