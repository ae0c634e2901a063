"""The math typeset when the site is built (``book/_ext/static_math.py``): MathJax in node gives
each formula its CommonHTML, its MathML for screen readers and its TeX, names what it cannot
typeset, and the stylesheet keeps the rules of the characters the pages draw.

These tests start MathJax in node once (a second or two); the whole site's math is checked by
tests/test_book.py and, in a browser, by tests/test_site_browser.py.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from docutils import nodes

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))

import static_math  # noqa: E402


@pytest.fixture(scope="module")
def mathjax():
    process = static_math.MathJaxProcess({})
    yield process
    process.close()


def parsed(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def test_a_formula_comes_with_its_mathml_and_its_tex(mathjax):
    """What a reader sees is hidden from screen readers, which read the MathML; the TeX is kept."""
    html = parsed(mathjax.typeset(r"\frac{QK^\top}{\sqrt{d_k}}", display=False).html)
    assert html.select_one("mjx-container > mjx-math")["aria-hidden"] == "true"
    math = html.select_one("mjx-container > mjx-assistive-mml > math")
    assert math.select_one("mfrac msqrt") is not None, math
    assert [mi.get_text() for mi in math.select("mi")][:2] == ["Q", "K"], math
    tex = math.select_one('semantics > annotation[encoding="application/x-tex"]')
    assert tex.get_text() == r"\frac{QK^\top}{\sqrt{d_k}}"


def test_display_math_is_typeset_as_a_block(mathjax):
    html = parsed(mathjax.typeset(r"A = \mathrm{softmax}(S)", display=True).html)
    assert html.select_one("mjx-container")["display"] == "true"
    assert html.select_one("mjx-assistive-mml")["display"] == "block"


def test_chinese_text_in_math_is_drawn_in_the_pages_fonts_at_its_scripts_size(mathjax):
    """``\\text{補償}`` in a subscript: the characters are there as text, scaled as a subscript."""
    html = parsed(mathjax.typeset(r"A^{(1)}_{\text{補償}}", display=False).html)
    texts = html.select("mjx-math mjx-utext")
    assert "".join(t.get_text() for t in texts) == "補償", html
    assert all("--qkv-text-scale: 0.707" in t.get("style", "") for t in texts), texts
    assert html.select_one("mjx-assistive-mml mtext").get_text() == "補償"


def test_what_mathjax_cannot_typeset_is_named(mathjax):
    """An undefined control sequence and a missing brace are errors, not red text left on a page."""
    assert any(r"\softmaks" in error for error in mathjax.typeset(r"\softmaks(x)", display=False).errors)
    assert mathjax.typeset(r"\frac{a}{b", display=False).errors
    assert not mathjax.typeset(r"\frac{a}{b}", display=False).errors


def test_an_equation_label_belongs_to_its_own_formula(mathjax):
    """A ``\\label`` seen in one formula does not make the same label in the next one a duplicate."""
    first = mathjax.typeset(r"\begin{equation}x\label{eq:one}\end{equation}", display=True)
    again = mathjax.typeset(r"\begin{equation}y\label{eq:one}\end{equation}", display=True)
    assert not first.errors and not again.errors, (first.errors, again.errors)


def math_block(text: str, *, nowrap: bool = False, classes: tuple[str, ...] = ()) -> nodes.math_block:
    return nodes.math_block(text, text, nowrap=nowrap, classes=list(classes))


def test_display_math_is_wrapped_as_sphinx_wraps_it_for_mathjax():
    """As ``sphinx.ext.mathjax`` does: paragraphs are aligned lines, a line break makes a ``split``."""
    assert static_math.display_tex(math_block("a = b")) == "a = b"
    assert static_math.display_tex(math_block(r"a \\ b")) == r"\begin{split}a \\ b\end{split}"
    assert static_math.display_tex(math_block("a = b\n\nc = d")) == (
        r" \begin{align}\begin{aligned}a = b\\c = d\end{aligned}\end{align} ")
    amsmath = r"\begin{align}a \\ b\end{align}"
    assert static_math.display_tex(math_block(amsmath, classes=("amsmath",))) == amsmath


def test_the_stylesheet_keeps_the_rules_of_the_characters_drawn():
    css = "\n}\n".join([
        "mjx-container [space=\"1\"] {\n  margin-left: .111em;",
        "mjx-c.mjx-c1D444.TEX-I::before {\n  content: \"Q\";",
        "mjx-c.mjx-c1D43E.TEX-I::before {\n  content: \"K\";",
        "mjx-stretchy-v.mjx-c28 mjx-beg mjx-c::before, mjx-stretchy-v.mjx-c29 mjx-beg mjx-c::before {\n  x: 1;",
        "",
    ])
    kept = static_math.only_used_characters(css, {"1D444", "29"})
    assert "margin-left" in kept and 'content: "Q"' in kept and "x: 1" in kept, kept
    assert 'content: "K"' not in kept, kept


def test_a_page_names_the_characters_it_draws(tmp_path):
    (tmp_path / "page.html").write_text('<mjx-c class="mjx-c1D444 TEX-I"></mjx-c><mjx-c class="mjx-c28"></mjx-c>',
                                        encoding="utf-8")
    app = SimpleNamespace(outdir=str(tmp_path), env=SimpleNamespace(found_docs={"page", "gone"}),
                          builder=SimpleNamespace(get_target_uri=lambda docname: f"{docname}.html"))
    assert static_math.used_characters(app) == {"1D444", "28"}
