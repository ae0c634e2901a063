"""The chapters on the block around attention, on cost and online softmax, on attention as lookup and
on training attention: what the built pages show agrees with the seeds and with computations done
here, and every figure (of these chapters and of the two on attention at inference) has a caption and
alt text, and each ends with a summary that sends the reader to its problem set.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from .seeds import SEED_000_O_CONCAT, SEED_002_Q1_WEIGHTS, SEED_002_SOFTMAX_MODERATE
from .test_book import math_text, page_text, parse

pytestmark = pytest.mark.slow

CHAPTERS = ["transformer_block", "attention_cost", "soft_lookup", "training_attention", "decoding", "long_context"]


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


def test_block_page_shows_the_residual_sum_of_seed_000(built_site):
    """r(補償) = its token [1, 1, 0, 0] plus seed 000's O_concat row for 補償."""
    text = math_text(built_site / "book" / "transformer_block.html")
    start = text.find(r"r_{\text{補償}}")
    assert start >= 0, "the residual sum of 補償 is not on the page"
    token, attended, total = re.findall(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", text[start:], flags=re.S)[:3]
    np.testing.assert_allclose([float(x) for x in token.split("&")], [1, 1, 0, 0])
    np.testing.assert_allclose([float(x) for x in attended.split("&")], SEED_000_O_CONCAT[2], atol=1e-6)
    np.testing.assert_allclose([float(x) for x in total.split("&")], np.add([1, 1, 0, 0], SEED_000_O_CONCAT[2]),
                               atol=1e-6)


def test_block_page_normalises_that_row_as_computed_here(built_site):
    text = page_text(built_site / "book" / "transformer_block.html")
    match = re.search(r"by hand: \[([^\]]+)\] layer_norm: \[([^\]]+)\]", text)
    assert match, "the LayerNorm row by hand is not on the page"
    r = np.add([1, 1, 0, 0], SEED_000_O_CONCAT[2])
    expected = (r - r.mean()) / math.sqrt(r.var() + 1e-5)
    for group in match.groups():
        np.testing.assert_allclose([float(x) for x in group.split()], expected, atol=2e-6)


def test_cost_page_shows_the_online_softmax_of_seed_002(built_site):
    """[2, 1, 0] in two blocks: l = 1 + e^-1, then 1 + e^-1 + e^-2; the weights are seed 002's."""
    text = page_text(built_site / "book" / "attention_cost.html")
    match = re.search(r"online softmax: \[([^\]]+)\]", text)
    assert match, "the online softmax of [2, 1, 0] is not on the page"
    np.testing.assert_allclose([float(x) for x in match.group(1).split()], SEED_002_SOFTMAX_MODERATE, atol=0.005)
    for running_sum in (1 + math.exp(-1), 1 + math.exp(-1) + math.exp(-2)):
        assert f"l = {running_sum:.6f}" in text, f"the running sum {running_sum:.6f} is not on the page"


def test_cost_page_checks_blockwise_against_full_attention(built_site):
    text = page_text(built_site / "book" / "attention_cost.html")
    found = re.findall(r"outputs differ by (\S+), weights from lse by (\S+)", text)
    assert len(found) == 2, "the blockwise check (with and without a mask) is not on the page"
    assert all(float(a.rstrip(",")) < 1e-12 and float(b) < 1e-12 for a, b in found)


def test_lookup_page_weighs_seed_002_keys_three_ways(built_site):
    """Dot product: seed 002's 0.40, 0.20, 0.40; Gaussian (sigma = 1): 1, e^-1, e^-1/2 normalised."""
    text = page_text(built_site / "book" / "soft_lookup.html")
    dot = re.search(r"dot-product weights: \[([^\]]+)\]", text)
    gaussian = re.search(r"Gaussian weights: \[([^\]]+)\]", text)
    assert dot and gaussian, "the weights over seed 002's keys are not on the page"
    np.testing.assert_allclose(numbers(dot.group(1)), SEED_002_Q1_WEIGHTS, atol=0.005)
    kernel = np.array([1.0, math.exp(-1), math.exp(-0.5)])
    np.testing.assert_allclose(numbers(gaussian.group(1)), kernel / kernel.sum(), atol=1e-6)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_has_a_caption_and_alt_text(built_site, chapter):
    collector = parse(built_site / "book" / f"{chapter}.html")
    images = [attrs for tag, attrs in collector.tags if tag == "img"]
    figures = [attrs for tag, attrs in collector.tags if tag == "figure"]
    captions = [attrs for tag, attrs in collector.tags if tag == "figcaption"]
    assert images, f"{chapter} has no figure"
    assert len(figures) == len(captions) == len(images), (
        f"{chapter}: {len(images)} images, {len(figures)} figures, {len(captions)} captions")
    assert all(len(attrs.get("alt", "")) > 40 for attrs in images), f"{chapter}: an image without alt text"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_ends_with_a_summary_and_a_link_to_the_exercises(built_site, chapter):
    html = (built_site / "book" / f"{chapter}.html").read_text(encoding="utf-8")
    summary = html.rfind('id="summary"')
    assert summary >= 0, f"{chapter} has no Summary section"
    assert 'href="exercises.html"' in html[summary:], f"{chapter}: the summary does not link to the exercises"
