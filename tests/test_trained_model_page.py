"""The chapter "Attention in a trained model" as built: the accuracy it states is the one measured
here, its figures carry captions and alt text, and its explorer shows as a picture.

The accuracy is measured independently of the page: scikit-learn's own loader, qkv's forward pass.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_digits

import qkv.models

from .test_book import page_text, parse

pytestmark = pytest.mark.slow

PAGE = "book/trained_model.html"


def test_the_stated_accuracy_is_the_measured_one_and_at_least_95_percent(built_site):
    text = page_text(built_site / PAGE)
    match = re.search(r"classifies (\d+\.\d)% of the (\d+) held-out digits correctly", text)
    assert match, "the chapter does not state the ViT's held-out accuracy"
    stated, count = float(match.group(1)) / 100, int(match.group(2))
    vit = qkv.models.load_vit_digits()
    digits = load_digits()
    held_out = vit.held_out_indices
    measured = np.mean(qkv.models.classify(vit, digits.images[held_out]).predicted == digits.target[held_out])
    assert count == len(held_out)
    assert stated == pytest.approx(measured, abs=0.0005), f"the page says {stated:.1%}, measured {measured:.2%}"
    assert stated >= 0.95


def test_every_figure_has_a_caption_and_alt_text(built_site):
    html = (built_site / PAGE).read_text(encoding="utf-8")
    figures = re.findall(r"<figure.*?</figure>", html, flags=re.S)
    assert len(figures) >= 7, f"expected the chapter's figures, found {len(figures)}"
    for figure in figures:
        alt = re.search(r'<img[^>]*\salt="([^"]*)"', figure)
        assert alt and len(alt.group(1)) > 30, f"a figure without real alt text: {figure[:300]}"
        assert "<figcaption" in figure, f"a figure without a caption: {figure[:300]}"


def test_the_explorer_is_a_picture_on_the_website(built_site):
    html_file = built_site / PAGE
    html = html_file.read_text(encoding="utf-8")
    assert 'type="application/vnd.jupyter.widget-view+json"' not in html, "an empty widget area is on the page"
    start = html.find("TrainedModelExplorer")
    assert start >= 0, "the explorer's cell is not on the page"
    image = re.search(r'<img[^>]+src="([^"]+\.png)"', html[start:])
    assert image, "the explorer's cell has no picture"
    png = (html_file.parent / image.group(1)).resolve().read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_the_chapter_names_the_heads_it_found(built_site):
    """The pattern list printed on the page names the previous-token head of layer 1 that the
    weights show (score near 1), and no chapter text is left unfilled."""
    text = page_text(built_site / PAGE)
    assert re.search(r"Previous token: layer 1, head 3 scores (0\.9\d|1\.00)", text), "previous-token head not named"
    assert "glue" not in text.lower() and "{" not in text.split("Summary")[-1]
    assert any(tag == "h1" for tag, _ in parse(built_site / PAGE).tags)
