"""qkv.lecun_normal: random weights as a layer has them before training, and what they do to attention.

The expected values come from the definition (variance 1/d_in), not from the function:
the sample variance of many draws, the variance of the projected tokens, and the spread of
the softmax over the scores those projections give.
"""

from __future__ import annotations

import numpy as np
import pytest

import qkv


@pytest.mark.parametrize("d_in", [4, 64, 768])
def test_entries_have_mean_zero_and_variance_one_over_d_in(d_in):
    rng = np.random.default_rng(0)
    W = qkv.lecun_normal(d_in, 512, rng)
    assert W.shape == (d_in, 512)
    n = W.size
    # the sample mean has standard error sqrt(1/d_in / n); the sample variance, sqrt(2/n) / d_in
    assert abs(W.mean()) < 5 * np.sqrt(1 / d_in / n), f"mean {W.mean():.4g} is not near 0"
    assert abs(W.var() * d_in - 1) < 5 * np.sqrt(2 / n), f"variance x d_in is {W.var() * d_in:.4f}, expected 1"


def test_projected_tokens_keep_variance_one_at_every_width():
    """The reason for 1/d_in: X W has variance about 1 when X has, whatever d_in is."""
    rng = np.random.default_rng(1)
    for d_in in (8, 128, 2048):
        X = rng.standard_normal((400, d_in))
        Z = X @ qkv.lecun_normal(d_in, 64, rng)
        assert 0.85 < Z.var() < 1.15, f"d_in={d_in}: Var(XW) = {Z.var():.3f}, expected about 1"


def test_initialised_heads_give_flatter_maps_than_unscaled_weights():
    """At initialisation a head spreads its weight; unscaled N(0, 1) weights saturate the softmax."""
    rng = np.random.default_rng(2)
    n, d_model = 8, 64
    X = rng.standard_normal((n, d_model))
    flat, sharp = [], []
    for _ in range(20):
        W_Q, W_K = (qkv.lecun_normal(d_model, d_model, rng) for _ in range(2))
        W_V = np.eye(d_model)
        flat.append(qkv.self_attention(X, W_Q, W_K, W_V)[1].max())
        unscaled = np.sqrt(d_model)  # lecun_normal times sqrt(d_model) has entries of variance 1
        sharp.append(qkv.self_attention(X, W_Q * unscaled, W_K * unscaled, W_V)[1].max())
    assert np.median(flat) < 0.5, f"initialised heads: median largest weight {np.median(flat):.3f}"
    assert np.median(sharp) > 0.99, f"unscaled heads: median largest weight {np.median(sharp):.3f}"


@pytest.mark.parametrize("d_in, d_out", [(0, 3), (3, 0), (-1, 2), (2.5, 2), (True, 2)])
def test_bad_sizes_are_rejected_by_name(d_in, d_out):
    with pytest.raises(ValueError, match="must be a positive whole number"):
        qkv.lecun_normal(d_in, d_out, np.random.default_rng(0))


def test_a_seed_instead_of_a_generator_is_rejected():
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        qkv.lecun_normal(3, 3, 0)
