"""qkv_book.inference_plots: each figure draws what it is given, where it belongs, and names bad input."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

import qkv
import qkv_book.inference_plots as plots


def test_times_against_n_draws_milliseconds_and_guides_through_the_last_points():
    n = np.array([128.0, 256.0, 512.0])
    fig = plots.times_against_n(n, {"fast": np.array([1.0, 2.0, 4.0]) / 1e3,
                                    "slow": np.array([1.0, 4.0, 16.0]) / 1e3})
    ax = fig.axes[0]
    fast, slow, linear, square = ax.lines
    np.testing.assert_allclose(fast.get_ydata(), [1.0, 2.0, 4.0])
    np.testing.assert_allclose(linear.get_ydata(), 4.0 * n / 512)  # through the first line's last point
    np.testing.assert_allclose(square.get_ydata(), 16.0 * (n / 512) ** 2)  # through the last line's
    assert ax.get_xscale() == ax.get_yscale() == "log"
    with pytest.raises(ValueError, match=r"seconds\['slow'\] has shape \(2,\), n has \(3,\)"):
        plots.times_against_n(n, {"slow": np.ones(2)})


def test_head_groups_points_each_query_head_at_its_key_value_head():
    fig = plots.head_groups(4, {"grouped": qkv.kv_head_of(4, 2)})
    FigureCanvasAgg(fig).draw()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert [f"Q {i}" for i in range(4)] == [t for t in texts if t.startswith("Q ")]
    assert texts.count("K, V 0") == texts.count("K, V 1") == 1
    with pytest.raises(ValueError, match=r"one key/value head per query head: \(4,\)"):
        plots.head_groups(4, {"wrong": [0, 1]})


def test_mask_grids_count_the_pairs_each_mask_keeps():
    mask = qkv.sliding_window_mask(6, 2) & qkv.causal_mask(6)
    fig = plots.mask_grids({"window": mask})
    assert "11 of 36 pairs" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="must be a boolean matrix"):
        plots.mask_grids({"numbers": np.ones((3, 3))})


def test_alibi_reach_draws_one_falling_curve_per_slope():
    distances = np.array([1.0, 2.0, 4.0])
    fig = plots.alibi_reach(distances, [0.5, 0.25])
    first, second = fig.axes[0].lines
    np.testing.assert_allclose(first.get_ydata(), np.exp(-0.5 * distances))
    np.testing.assert_allclose(second.get_ydata(), np.exp(-0.25 * distances))


def test_scores_past_training_shades_the_trained_distances():
    distances = np.arange(10.0)
    fig = plots.scores_past_training(distances, {"target": -distances, "other": distances}, 4)
    ax = fig.axes[0]
    FigureCanvasAgg(fig).draw()
    (span,) = ax.patches
    left, right = span.get_bbox().x0, span.get_bbox().x1
    assert (left, right) == (0.0, 3.0), "the shaded range is not the trained distances 0 .. 3"
    np.testing.assert_allclose(ax.lines[0].get_ydata(), -distances)
    with pytest.raises(ValueError, match=r"curve 'bad' has shape \(2,\)"):
        plots.scores_past_training(distances, {"bad": np.ones(2)}, 4)
