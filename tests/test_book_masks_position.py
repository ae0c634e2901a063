"""The built pages of the masks and position chapters: their hand-computed numbers, their figures
and their ending.

The expected numbers are computed here with math from the seeds' printed scores and the
formulas the chapters state; nothing is copied from qkv's output. The pages come from the one
book build of the session (the ``built_site`` fixture).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from .seeds import SEED_000
from .test_book import page_text, parse

pytestmark = pytest.mark.slow

CHAPTERS = ("book/masks_cross_attention", "book/position")


def numbers_after(text: str, pattern: str) -> list[float]:
    """The numbers that the groups of ``pattern`` capture in the page's text."""
    match = re.search(pattern, text)
    assert match, f"the page has no text matching {pattern!r}"
    return [float(x) for x in match.groups()]


def softmax(scores):
    exps = [math.exp(s) for s in scores]
    return [e / sum(exps) for e in exps]


def test_masks_page_works_the_causal_row_of_wandao_by_hand(built_site):
    """晚到 may attend to 外送 and itself: the softmax of seed 000's scores 0 and 1."""
    text = page_text(built_site / "book" / "masks_cross_attention.html")
    total, w_waisong, w_itself = numbers_after(
        text, r"weights are \S*1/\S* ([\d.]+) \S*=\S* ([\d.]+) for 外送 and ([\d.]+) for itself")
    scores = SEED_000[1]["S"][1][:2]  # [0, 1]
    assert total == pytest.approx(sum(math.exp(s) for s in scores), abs=2e-6)
    np.testing.assert_allclose([w_waisong, w_itself], softmax(scores), atol=1e-6)


def test_masks_page_works_the_2x3_cross_attention_by_hand(built_site):
    """late's scaled scores over 外送 晚到 補償 are [0, 2, 1]; its weights are their softmax."""
    text = page_text(built_site / "book" / "masks_cross_attention.html")
    scores = numbers_after(text, r"For late, the scaled scores over 外送, 晚到, 補償 are (\d+), (\d+), (\d+)")
    assert scores == [0, 2, 1]
    weights = numbers_after(text, r"and the weights are ([\d.]+), ([\d.]+), ([\d.]+)\. Late reads")
    np.testing.assert_allclose(weights, softmax(scores), atol=1e-6)


def test_position_page_works_the_encoding_of_position_1_by_hand(built_site):
    """d_model = 4: PE_1 = [sin 1, cos 1, sin 0.01, cos 0.01]."""
    text = page_text(built_site / "book" / "position.html")
    shown = numbers_after(
        text, r"gives as \[ ?([\d.]+), ([\d.]+), ([\d.]+), ([\d.]+) ?\]")
    np.testing.assert_allclose(shown, [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-6)


@pytest.mark.parametrize("page", CHAPTERS)
def test_every_figure_has_alt_text_and_a_caption(built_site, page):
    """Each picture of the chapter sits in a <figure> with a caption and has alt text."""
    html = (built_site / f"{page}.html").read_text(encoding="utf-8")
    article = html[html.find("<article"): html.find("</article>")]
    figures = re.findall(r"<figure[^>]*>(.*?)</figure>", article, flags=re.S)
    images = re.findall(r"<img\b[^>]*>", article)
    assert images, f"{page} has no figure"
    assert len(figures) == len(images), f"{page}: {len(images)} images but {len(figures)} figures"
    for figure in figures:
        alt = re.search(r'<img[^>]*\balt="([^"]*)"', figure)
        assert alt and len(alt.group(1)) > 40, f"{page}: a figure without a real alt text"
        caption = re.search(r"<figcaption>(.*?)</figcaption>", figure, flags=re.S)
        assert caption and len(re.sub(r"<[^>]+>", "", caption.group(1)).strip()) > 40, \
            f"{page}: a figure without a caption"


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_ends_with_a_summary_and_a_link_to_the_exercises(built_site, page):
    html_file = built_site / f"{page}.html"
    html = html_file.read_text(encoding="utf-8")
    article = html[html.find("<article"): html.find("</article>")]
    headings = re.findall(r"<h2>(.*?)<a class=\"headerlink\"", article)
    assert headings and headings[-1] == "Summary", f"{page}: the last section is {headings[-1:]}"
    last_section = article[article.rfind("<h2>"):]
    links = [attributes.get("href", "") for tag, attributes in parse(html_file).tags if tag == "a"]
    assert "exercises.html" in last_section and "exercises.html" in links
