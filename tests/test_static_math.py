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
    """MathJax in node, keeping nothing on disk."""
    typesetter = static_math.SharedTypesetter({}, None)
    yield typesetter
    typesetter.close()


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


def test_the_second_edition_reads_each_formula_the_first_typeset_and_starts_no_mathjax(mathjax, tmp_path):
    """Both editions share a build folder: what the English build typeset (its errors too) is read back
    by the 繁體中文 one, the same as MathJax gives it; other TeX options are another typesetting."""
    formulas = [(r"\frac{QK^\top}{\sqrt{d_k}}", False), (r"A^{(1)}_{\text{補償}}", True), (r"\softmaks(x)", False)]
    english = static_math.SharedTypesetter({}, tmp_path)
    typeset = [english.typeset(tex, display) for tex, display in formulas]
    css = english.stylesheet()
    english.close()
    assert typeset == [mathjax.typeset(tex, display) for tex, display in formulas]
    assert typeset[2].errors and not typeset[0].errors

    chinese = static_math.SharedTypesetter({}, tmp_path)
    assert [chinese.typeset(tex, display) for tex, display in formulas] == typeset
    assert chinese.stylesheet() == css
    assert chinese._process is None, "a formula kept in the build folder was typeset again"
    other_options = static_math.SharedTypesetter({"macros": {"softmaks": r"\mathrm{softmax}"}}, tmp_path)
    assert not other_options.typeset(r"\softmaks(x)", display=False).errors
    assert other_options._process is not None
    other_options.close()


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


def test_the_stylesheet_keeps_the_rules_of_the_characters_and_fonts_drawn():
    css = "\n}\n".join([
        "mjx-container [space=\"1\"] {\n  margin-left: .111em;",
        "mjx-c.mjx-c1D444.TEX-I::before {\n  content: \"Q\";",
        "mjx-c.mjx-c1D43E.TEX-I::before {\n  content: \"K\";",
        "mjx-stretchy-v.mjx-c28 mjx-beg mjx-c::before, mjx-stretchy-v.mjx-c29 mjx-beg mjx-c::before {\n  x: 1;",
        "@font-face /* 3 */ {\n  font-family: MJXTEX-I;\n  src: url(\"fonts/MathJax_Math-Italic.woff\") format(\"woff\");",
        "@font-face /* 6 */ {\n  font-family: MJXTEX-S2;\n  src: url(\"fonts/MathJax_Size2-Regular.woff\") format(\"woff\");",
        "",
    ])
    kept = static_math.only_what_is_drawn(css, static_math.Drawn({"1D444", "29"}, {"MJXZERO", "MJXTEX-I"}))
    assert "margin-left" in kept and 'content: "Q"' in kept and "x: 1" in kept, kept
    assert "Math-Italic.woff" in kept and "Size2" not in kept, kept
    assert 'content: "K"' not in kept, kept


@pytest.fixture(scope="module")
def math_fonts(mathjax):
    return static_math.MathFonts(mathjax.stylesheet())


def test_mathjax_names_a_file_for_every_font_family_it_draws_in(math_fonts):
    files = math_fonts.files
    assert files["MJXZERO"] == "MathJax_Zero.woff" and files["MJXTEX-I"] == "MathJax_Math-Italic.woff", files
    assert all((static_math.MATHJAX_FONTS / name).is_file() for name in files.values()), files


def test_a_formula_is_drawn_in_the_fonts_of_its_characters_variants(mathjax, math_fonts):
    """x is in the math italic, = and 2 in the main font, W in bold; and a page without math in none."""
    plain = mathjax.typeset("x = 2", display=False).html
    assert math_fonts.drawn(plain) == {"MJXZERO", "MJXTEX", "MJXTEX-I"}, plain
    bold = mathjax.typeset(r"\mathbf{W}", display=False).html
    assert math_fonts.drawn(bold) == {"MJXZERO", "MJXTEX-B"}, bold
    assert math_fonts.drawn("<p>No math here: x = 2</p>") == set()


def test_a_stretchy_bracket_loads_the_size_fonts_up_to_the_one_that_has_its_pieces(mathjax, math_fonts):
    """The browser tries MJXTEX-S1, then MJXTEX-S4: a tall [ has pieces only S4 has (checked in
    the font files themselves, not in the stylesheet), a tall double bar is all in S1."""
    assert 0x23A1 in math_fonts.characters("MJXTEX-S4") and 0x23A1 not in math_fonts.characters("MJXTEX-S1")
    bracket = mathjax.typeset(r"\left[\begin{matrix}a\\b\\c\\d\\e\end{matrix}\right]", display=True).html
    assert math_fonts.drawn(bracket) == {"MJXZERO", "MJXTEX-I", "MJXTEX-S1", "MJXTEX-S4"}, bracket
    bars = mathjax.typeset(r"\left\|\begin{matrix}a\\b\end{matrix}\right\|", display=True).html
    assert "<mjx-stretchy-v" in bars and math_fonts.drawn(bars) == {"MJXZERO", "MJXTEX-I", "MJXTEX-S1"}, bars


def test_a_page_names_the_characters_and_fonts_it_draws(tmp_path, math_fonts):
    (tmp_path / "page.html").write_text(
        '<mjx-container><mjx-c class="mjx-c1D444 TEX-I"></mjx-c><mjx-c class="mjx-c28"></mjx-c></mjx-container>',
        encoding="utf-8")
    app = SimpleNamespace(outdir=str(tmp_path), env=SimpleNamespace(found_docs={"page", "gone"}),
                          builder=SimpleNamespace(get_target_uri=lambda docname: f"{docname}.html"))
    drawn = static_math.drawn_in_pages(app, math_fonts)
    assert drawn.characters == {"1D444", "28"}
    assert drawn.families == {"MJXZERO", "MJXTEX-I", "MJXTEX"}
