"""qkv_book.widgets: the d_k explorer redraws when the slider moves and always carries a static picture."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

import qkv_book.widgets


def softmax_by_hand(scores: np.ndarray) -> np.ndarray:
    """An independent softmax (no qkv): shift by the max, exponentiate, normalise."""
    e = np.exp(scores - scores.max())
    return e / e.sum()


def test_moving_the_slider_redraws_the_picture():
    explorer = qkv_book.widgets.ScalingExplorer(d_k=1)
    before = explorer.picture.value
    explorer.slider.value = 512
    after = explorer.picture.value
    assert before != after, "the picture did not change when d_k moved from 1 to 512"
    assert after == explorer.png(), "the picture does not show the slider's current d_k"


def test_display_data_carries_the_live_widget_and_a_png_of_its_state():
    """Jupyter gets the widget view; a page without a kernel gets the PNG of the current state."""
    explorer = qkv_book.widgets.ScalingExplorer(d_k=16)
    explorer.slider.value = 256
    bundle, metadata = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png == explorer.picture.value
    assert bundle["text/plain"] == "ScalingExplorer(d_k=256)"


def test_the_picture_has_two_pixels_per_css_pixel_and_is_shown_at_its_css_width():
    """Sharp on a high-DPI screen, the same size on the page: the PNG is twice the width it is shown at."""
    explorer = qkv_book.widgets.ScalingExplorer(d_k=16)
    _, metadata = explorer._repr_mimebundle_()
    width = Image.open(io.BytesIO(explorer.picture.value)).size[0]
    assert metadata["image/png"]["width"] == round(width / 2) and explorer.picture.width == str(round(width / 2))
    assert 300 < width / 2 < 800, f"the explorer is shown {width / 2:.0f} CSS pixels wide"


@pytest.mark.parametrize("d_k", [1, 8, 64, 1024])
def test_weights_are_the_softmax_of_the_raw_and_the_scaled_scores(d_k):
    explorer = qkv_book.widgets.ScalingExplorer(d_k=d_k, n_keys=5)
    unscaled, scaled = explorer.weights()
    scores = explorer.scores()
    assert scores.shape == (5,)
    np.testing.assert_allclose(unscaled, softmax_by_hand(scores), atol=1e-12)
    np.testing.assert_allclose(scaled, softmax_by_hand(scores / np.sqrt(d_k)), atol=1e-12)


def test_scaling_keeps_a_wide_query_from_collapsing_onto_one_key():
    """The point of the chapter, on the explorer's own vectors: at d_k = 1024 the unscaled softmax is
    (nearly) one-hot, the scaled one is not."""
    explorer = qkv_book.widgets.ScalingExplorer(d_k=1024)
    unscaled, scaled = explorer.weights()
    assert unscaled.max() > 0.99
    assert scaled.max() < 0.9


def test_slider_adds_dimensions_to_the_same_vectors():
    """Scores at d_k and 2 d_k differ by the dot product of the added components only."""
    explorer = qkv_book.widgets.ScalingExplorer(d_k=8)
    at_8 = explorer.scores()
    explorer.slider.value = 16
    at_16 = explorer.scores()
    added = explorer._query[0, 8:16] @ explorer._keys[:, 8:16].T
    np.testing.assert_allclose(at_16, at_8 + added)


@pytest.mark.parametrize("kwargs, message", [
    ({"d_k": 3}, "d_k must be one of 1, 2, 4"),
    ({"n_keys": 1}, "n_keys must be a whole number >= 2"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qkv_book.widgets.ScalingExplorer(**kwargs)


@pytest.mark.parametrize("n_keys", [5, 6])
def test_the_title_and_the_alt_text_count_the_keys_the_picture_draws(n_keys):
    """The title says how many raw scores its spread is measured on and what it is expected to be; the
    alt text names as many keys as there are bars, and each panel's largest bar."""
    explorer = qkv_book.widgets.ScalingExplorer(d_k=64, n_keys=n_keys)
    fig = explorer.figure()
    names = [f"k{j + 1}" for j in range(n_keys)]
    panels = [ax for ax in fig.axes if ax.patches]
    assert len(panels) == 2
    for ax in panels:
        assert [t.get_text() for t in ax.get_xticklabels()] == names
        assert len(ax.patches) == n_keys
    scores = explorer.scores()
    title = fig.get_suptitle()
    assert f"these {n_keys} raw scores have standard deviation {np.std(scores):.1f}" in title, title
    assert "= 8" in title, title  # sqrt(64)
    alt = qkv_book.plots.alt_text(explorer.png())
    assert f"{n_keys} keys, k1 to k{n_keys}," in alt, alt
    for weights in (softmax_by_hand(scores), softmax_by_hand(scores / 8)):
        assert f"{weights.max():.2f}, on k{int(np.argmax(weights)) + 1}" in alt, alt
