"""qkv_book.model_plots: the figures of trained models keep their labels apart and inside the picture."""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

import qkv_book.model_plots

TOKENS = ["[CLS]", "the", "delivery", "was", "late", ",", "so", "i", "want", "compensation", ".", "[SEP]"]


def text_boxes(fig):
    """The drawn extent, in pixels, of every non-empty text of ``fig``'s axes, with the text."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    return [(text.get_text(), text.get_window_extent(renderer)) for ax in fig.axes for text in ax.texts
            if text.get_text()]


def test_no_label_of_a_head_view_runs_into_another_or_out_of_the_figure():
    """The head view of "compensation" in 12 heads: every token label, query label and title is drawn
    apart from every other one and inside the figure, even with the longest token at both ends."""
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(len(TOKENS)), size=(12, len(TOKENS)))  # (h, n, n), rows sum to 1
    fig = qkv_book.model_plots.head_view(weights, TOKENS, TOKENS.index("compensation"))
    boxes = text_boxes(fig)
    width, height = fig.canvas.get_width_height()
    outside = [text for text, box in boxes if box.x0 < 0 or box.y0 < 0 or box.x1 > width or box.y1 > height]
    assert not outside, f"labels cut off at the figure's edge: {outside[:5]}"
    touching = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]
    assert not touching, f"labels that run into each other: {touching[:5]}"
