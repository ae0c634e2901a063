"""The length-extrapolation toy: each fitted head follows its target on the trained distances.

The fitted RoPE head's scores are recomputed here from its definition (pairs turned by hand with
cos and sin), the sinusoidal head's from the encodings' formula, ALiBi's slope against numpy's
least-squares line, and T5's table against the mean of each bucket's targets.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkv
from qkv import extrapolation

from .test_errors import raises

N_TRAIN = 32
TARGET = -2 * np.log1p(np.arange(N_TRAIN))


def rotated_score(q, k, m, n, base=10000.0):
    """q at position m, k at position n, each pair turned by its angle with cos and sin."""
    total = 0.0
    for i in range(len(q) // 2):
        w = base ** (-2 * i / len(q))
        c_m, s_m, c_n, s_n = math.cos(m * w), math.sin(m * w), math.cos(n * w), math.sin(n * w)
        qx, qy = q[2 * i] * c_m - q[2 * i + 1] * s_m, q[2 * i] * s_m + q[2 * i + 1] * c_m
        kx, ky = k[2 * i] * c_n - k[2 * i + 1] * s_n, k[2 * i] * s_n + k[2 * i + 1] * c_n
        total += qx * kx + qy * ky
    return total


def test_the_rope_head_follows_the_target_on_every_trained_distance():
    q, k = extrapolation.fit_rope_head(TARGET, 64)
    for r in (0, 1, 7, 31):
        for p in (r, 31):  # the same distance at two query positions
            assert rotated_score(q, k, p, p - r) == pytest.approx(TARGET[r], abs=0.1)
    scores = extrapolation.rope_scores(q, k, 40)
    assert scores[39, 39 - 5] == pytest.approx(rotated_score(q, k, 39, 34), abs=1e-9)


def test_position_interpolation_scales_the_positions():
    q, k = extrapolation.fit_rope_head(TARGET, 16)
    scores = extrapolation.rope_scores(q, k, 64, scale=0.5)
    assert scores[63, 0] == pytest.approx(rotated_score(q, k, 31.5, 0.0), abs=1e-9)


def test_the_sinusoidal_head_follows_the_target_inside_the_trained_range():
    M = extrapolation.fit_sinusoidal_head(TARGET, 16)
    PE = [[math.sin(p * 10000 ** (-(c // 2 * 2) / 16)) if c % 2 == 0 else
           math.cos(p * 10000 ** (-(c // 2 * 2) / 16)) for c in range(16)] for p in range(40)]
    PE = np.array(PE)
    scores = extrapolation.sinusoidal_scores(M, 40)
    np.testing.assert_allclose(scores, PE @ M @ PE.T, atol=1e-9)
    errors = [abs(scores[i, j] - TARGET[i - j]) for i in range(N_TRAIN) for j in range(i + 1)]
    assert max(errors) < 0.5


def test_the_alibi_slope_is_the_least_squares_line_through_the_origin():
    r = np.arange(N_TRAIN)
    slope = extrapolation.fit_alibi_slope(TARGET)
    expected, *_ = np.linalg.lstsq(-r[:, None].astype(float), TARGET, rcond=None)
    assert slope == pytest.approx(float(expected[0]), rel=1e-12)


def test_t5s_table_holds_each_buckets_mean_target_and_0_where_nothing_was_trained():
    table = extrapolation.fit_t5_table(TARGET, num_buckets=32, max_distance=128)
    buckets = qkv.relative_position_bucket(-np.arange(N_TRAIN), bidirectional=False)
    for bucket in range(32):
        inside = TARGET[buckets == bucket]
        assert table[bucket, 0] == pytest.approx(inside.mean() if inside.size else 0.0)
    assert (table[buckets.max() + 1:] == 0).all()


def test_a_target_that_is_not_a_vector_is_named():
    with raises(ValueError, "target_scores must be a vector"):
        extrapolation.fit_alibi_slope(np.zeros((2, 2)))
    with raises(ValueError, "ridge must be a number >= 0"):
        extrapolation.fit_rope_head(TARGET, 8, ridge=-1.0)
