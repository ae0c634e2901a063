"""The built website: every chapter is there, nothing loads from another host, and what the
chapters show is the code that runs and the numbers the seed articles print.

All tests read one fresh build of the whole book (the ``built_site`` fixture of conftest.py).
The expected numbers are typed from the seed articles; nothing is copied from qkv's output.
"""

from __future__ import annotations

import base64
import inspect
import re
import textwrap
from html import unescape
from html.parser import HTMLParser
from importlib import import_module
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

import qkv

from .browser_support import toc_docnames
from .seeds import SEED_000, SEED_000_O_CONCAT, SEED_002_Q1_OUTPUT, SEED_002_Q1_WEIGHTS, SEED_002_SOFTMAX_MODERATE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


# ---------------------------------------------------------------- helpers


def chapter_sources() -> list[Path]:
    """The chapter sources of the table of contents that exist as MyST markdown."""
    return [ROOT / f"{page}.md" for page in toc_docnames(ROOT / "_toc.yml") if (ROOT / f"{page}.md").is_file()]


class _Collector(HTMLParser):
    """Collects (tag, attributes) of every start tag, and the page's visible text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def parse(html_file: Path) -> _Collector:
    collector = _Collector()
    collector.feed(html_file.read_text(encoding="utf-8"))
    return collector


def page_text(html_file: Path) -> str:
    """The visible text of a page, whitespace collapsed."""
    return " ".join("".join(parse(html_file).text).split())


def code_blocks(html_file: Path) -> list[str]:
    """The text of every highlighted code block (``<div class="highlight"><pre>``) of a page."""
    html = html_file.read_text(encoding="utf-8")
    blocks = re.findall(r'<div class="highlight"><pre>(.*?)</pre></div>', html, flags=re.S)
    return [unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]


def latex_matrix(text: str, label: str) -> np.ndarray:
    """The entries of the first bmatrix that follows ``label`` in the page's math text.

    An equation over several aligned lines writes ``&=``; the label matches either form.
    """
    text, label = text.replace("&=", "="), label.replace("&=", "=")
    start = text.find(label)
    assert start >= 0, f"{label!r} is not on the page"
    match = re.search(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", text[start:], flags=re.S)
    assert match, f"no matrix follows {label!r}"
    rows = [row for row in match.group(1).split(r"\\") if row.strip()]
    return np.array([[float(x) for x in row.split("&")] for row in rows])


def local_target(src: str) -> bool:
    """True if a URL stays on the site (relative, data:, or 127.0.0.1/localhost)."""
    src = src.strip()
    if src.startswith("//") or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", src):
        parts = urlsplit(src if not src.startswith("//") else "http:" + src)
        if parts.scheme in ("data", "blob", "mailto", "javascript", "about"):
            return True
        return parts.hostname in LOCAL_HOSTS
    return True


LOADING_ATTRIBUTES = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "track": ("src",),
}


# ---------------------------------------------------------------- the pages exist


def test_every_toc_page_is_built_with_its_title(built_site):
    """Each page of _toc.yml has an HTML page with a heading, and each chapter source is the one built."""
    missing, untitled = [], []
    for page in toc_docnames(ROOT / "_toc.yml"):
        html_file = built_site / f"{page}.html"
        if not html_file.is_file():
            missing.append(page)
        elif not any(tag == "h1" for tag, _ in parse(html_file).tags):
            untitled.append(page)
    assert not missing, f"pages of _toc.yml missing from the build: {missing}"
    assert not untitled, f"built pages without an <h1> title: {untitled}"


def test_no_figure_is_shown_as_text(built_site):
    """A matplotlib figure that failed to render leaves "<Figure size ...>" text; no page has it."""
    offenders = [page for page in toc_docnames(ROOT / "_toc.yml") if "Figure size" in page_text(built_site / f"{page}.html")]
    assert not offenders, f"pages showing a figure as text instead of a picture: {offenders}"


def test_no_page_shows_a_number_as_a_numpy_repr(built_site):
    """An {eval} of a numpy scalar shows np.int64(512) where the prose means 512; no page has one."""
    repr_of_a_number = r".{0,30}np\.(?:int|float)\d+\(-?[\d.]+(?:e[-+]?\d+)?\)"  # np.int64(512), not np.float32(x)
    shown = {page: re.findall(repr_of_a_number, page_text(built_site / f"{page}.html"))
             for page in toc_docnames(ROOT / "_toc.yml")}
    assert not any(shown.values()), f"numpy reprs in the prose: { {p: s for p, s in shown.items() if s} }"


def test_every_image_of_every_page_exists_in_the_build(built_site):
    """Each <img> of a chapter points to a file of the build that is not empty."""
    broken = []
    for page in toc_docnames(ROOT / "_toc.yml"):
        html_file = built_site / f"{page}.html"
        for tag, attributes in parse(html_file).tags:
            if tag == "img" and local_target(attributes.get("src", "")):
                src = attributes.get("src", "")
                if src.startswith("data:"):
                    continue
                target = (html_file.parent / src.split("#")[0].split("?")[0]).resolve()
                if not target.is_file() or target.stat().st_size == 0:
                    broken.append(f"{page}: {src}")
    assert not broken, "images missing from the build:\n" + "\n".join(broken)


# ---------------------------------------------------------------- offline


def test_no_page_loads_anything_from_another_host(built_site):
    """No script, stylesheet, image, frame or media of any built page points to another host."""
    offenders = []
    for html_file in sorted(built_site.rglob("*.html")):
        for tag, attributes in parse(html_file).tags:
            for name in LOADING_ATTRIBUTES.get(tag, ()):
                value = attributes.get(name, "")
                urls = [part.strip().split(" ")[0] for part in value.split(",")] if name == "srcset" else [value]
                for url in urls:
                    if url and not local_target(url):
                        offenders.append(f"{html_file.relative_to(built_site)}: <{tag} {name}={url!r}>")
    assert not offenders, "pages that load from another host:\n" + "\n".join(offenders[:40])


def test_no_stylesheet_loads_anything_from_another_host(built_site):
    """No CSS file of the build imports a stylesheet or a font from another host."""
    offenders = []
    for css in sorted(built_site.rglob("*.css")):
        text = css.read_text(encoding="utf-8", errors="replace")
        for url in re.findall(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", text):
            if not local_target(url):
                offenders.append(f"{css.relative_to(built_site)}: {url}")
    assert not offenders, "stylesheets that load from another host:\n" + "\n".join(offenders[:40])


def test_local_target_recognises_remote_urls():
    """The host check itself: remote and protocol-relative URLs count as remote, the rest as local."""
    assert not local_target("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js")
    assert not local_target("//fonts.googleapis.com/css")
    assert local_target("http://127.0.0.1:8000/x.js") and local_target("http://localhost/x.png")
    assert local_target("../_static/mathjax/tex-chtml.js") and local_target("data:image/png;base64,AAAA")


# ---------------------------------------------------------------- math typeset when the site is built

TYPESETTER = re.compile(r"mathjax|katex|tex-(?:chtml|svg|mml)", re.I)


def test_no_page_of_either_edition_loads_a_typesetting_script(built_site):
    """Every formula is typeset when the site is built: no page, English or 繁體中文, has a script
    of MathJax (or another typesetter), nor a MathJax configuration for one."""
    pages = sorted(built_site.rglob("*.html"))
    assert any("zh-TW" in page.parts for page in pages), "the 繁體中文 edition is not in the build"
    offenders = []
    for html_file in pages:
        scripts = [a.get("src", "") for tag, a in parse(html_file).tags if tag == "script"]
        offenders += [f"{html_file.relative_to(built_site)}: <script src={src!r}>"
                      for src in scripts if TYPESETTER.search(src)]
        if re.search(r"\bMathJax\s*=", html_file.read_text(encoding="utf-8")):
            offenders.append(f"{html_file.relative_to(built_site)}: configures MathJax")
    assert not offenders, "pages that typeset math in the browser:\n" + "\n".join(offenders[:40])


def formulas(html_file: Path) -> list:
    """The formulas of a page (``span.math`` and ``div.math``), as parsed elements."""
    from bs4 import BeautifulSoup

    html = BeautifulSoup(html_file.read_text(encoding="utf-8"), "html.parser")
    return html.select("span.math, div.math")


@pytest.mark.parametrize("edition", ["", "zh-TW"])
def test_every_formula_is_typeset_with_its_mathml_and_tex(built_site, edition):
    """Each formula of every chapter is MathJax's output, with the MathML that screen readers read,
    and its TeX kept in that MathML as an annotation (a reader's copy, and these tests, read it)."""
    problems, count = [], 0
    for docname in toc_docnames(ROOT / "_toc.yml"):
        for formula in formulas(built_site / edition / f"{docname}.html"):
            count += 1
            tex = formula.select_one('mjx-assistive-mml > math annotation[encoding="application/x-tex"]')
            where = f"{edition or 'en'}/{docname}: {formula.get_text()[:60]!r}"
            if formula.select_one("mjx-container > mjx-math") is None:
                problems.append(f"{where} is not typeset")
            elif tex is None or not tex.get_text().strip():
                problems.append(f"{where} has no MathML with its TeX")
            elif formula.select_one("mjx-merror") is not None:
                problems.append(f"{where}: MathJax could not typeset it")
    assert count > 100, f"only {count} formulas in the chapters of {edition or 'en'}"
    assert not problems, "\n".join(problems[:40])


# ---------------------------------------------------------------- the code shown is the code that runs


LITERALINCLUDE = re.compile(r"```\{literalinclude\}\s+(\S+)\s*\n((?::[\w-]+:.*\n)*)```")


def literal_includes(source: Path) -> list[tuple[str, str]]:
    """(module path, object name) of every literalinclude with :pyobject: in a chapter."""
    found = []
    for path, options in LITERALINCLUDE.findall(source.read_text(encoding="utf-8")):
        match = re.search(r"^:pyobject:\s*(\S+)", options, flags=re.M)
        assert match, f"{source.name}: literalinclude of {path} without :pyobject:"
        found.append((path, match.group(1)))
    return found


def source_of(module_path: str, name: str) -> str:
    """The current source of ``name`` in the module at ``module_path`` (e.g. ../src/qkv/attention.py)."""
    module_file = Path(module_path)
    assert "src" in module_file.parts, f"literalinclude of {module_path}: not a module of src/"
    package = module_file.parts[module_file.parts.index("src") + 1:-1]  # ("qkv",), ("qkv", "models"), ...
    module = import_module(".".join((*package, module_file.stem)))
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return textwrap.dedent(inspect.getsource(obj)).rstrip()


SHOW_SOURCE = re.compile(r"\bshow_source\((qkv(?:_book)?(?:\.\w+)+)\)")


def shown_sources(source: Path) -> list[str]:
    """The dotted names (``qkv.linear``) a chapter shows with ``show_source(...)``."""
    return SHOW_SOURCE.findall(source.read_text(encoding="utf-8"))


def source_of_name(dotted: str) -> str:
    """The current source of ``qkv.linear`` or ``qkv_book.widgets.ScalingExplorer.weights``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return textwrap.dedent(inspect.getsource(obj)).rstrip()
    raise AssertionError(f"show_source({dotted}): no such module")


def test_chapters_include_qkv_functions():
    """The chapters show the reference code, with literalinclude or show_source (formula, then code)."""
    counts = {source.stem: len(literal_includes(source)) + len(shown_sources(source)) for source in chapter_sources()}
    for chapter in ("qkv_roles", "scaled_dot_product", "why_sqrt_dk", "single_head", "multi_head", "attention_maps",
                    "masks_cross_attention", "position", "trained_model"):
        assert counts.get(chapter, 0) > 0, f"{chapter} shows no qkv function with literalinclude"


def test_each_literalinclude_shows_the_current_source_of_its_function(built_site):
    """The code block built for each :pyobject: is exactly that function's source in src/ today."""
    problems = []
    for source in chapter_sources():
        page = source.relative_to(ROOT).with_suffix(".html")
        blocks = [block.rstrip() for block in code_blocks(built_site / page)]
        for module_path, name in literal_includes(source):
            expected = source_of(module_path, name)
            if expected not in blocks:
                problems.append(f"{source.name}: the block for {name} is not the source of qkv's {name}")
        for dotted in shown_sources(source):
            if source_of_name(dotted) not in blocks:
                problems.append(f"{source.name}: no code block on the page is the source of {dotted}")
    assert not problems, "\n".join(problems)


def test_no_chapter_pastes_a_qkv_function():
    """No chapter defines a function or class that qkv defines: they are shown with literalinclude."""
    qkv_names = set()
    for module_file in (ROOT / "src" / "qkv").rglob("*.py"):
        qkv_names.update(re.findall(r"^(?:def|class)\s+(\w+)", module_file.read_text(encoding="utf-8"), flags=re.M))
    pasted = []
    for source in chapter_sources():
        for name in re.findall(r"^\s*(?:def|class)\s+(\w+)", source.read_text(encoding="utf-8"), flags=re.M):
            if name in qkv_names:
                pasted.append(f"{source.name}: {name}")
    assert not pasted, f"chapters that paste code qkv already has: {pasted}"


def test_reference_documents_every_public_name(built_site):
    """The reference page has an entry for every name qkv exports, and for the worked examples."""
    ids = {attributes.get("id", "") for _, attributes in parse(built_site / "book" / "reference.html").tags}
    expected = [f"qkv.{name}" for name in qkv.__all__ if not inspect.ismodule(getattr(qkv, name))]
    expected += [f"qkv.examples.{name}" for name in ("delivery_example", "q1_example",
                                                     "softmax_saturation_example", "zhonghe_example")]
    missing = [name for name in expected if name not in ids]
    assert not missing, f"the reference page does not document: {missing}"


# ---------------------------------------------------------------- the numbers agree with the seeds


def math_text(html_file: Path) -> str:
    """The math of a page as its TeX, which each typeset formula keeps in its MathML (an annotation)."""
    return unescape(html_file.read_text(encoding="utf-8"))


@pytest.mark.parametrize("head", [1, 2])
def test_multi_head_page_shows_seed_000_per_head(built_site, head):
    """The page's S_raw, A and O of each head equal seed 000's printed tables (six decimals)."""
    text = math_text(built_site / "book" / "multi_head.html")
    shown = {
        "S_raw": latex_matrix(text, rf"S_{{\mathrm{{raw}}}}^{{({head})}}\ (3\times 3) ="),
        "A": latex_matrix(text, rf"A^{{({head})}}\ (3\times 3) ="),
        "O": latex_matrix(text, rf"O^{{({head})}}\ (3\times 2) ="),
    }
    printed = {step: SEED_000[head][step] for step in ("S_raw", "A", "O")}
    for name, matrix in shown.items():
        np.testing.assert_allclose(matrix, printed[name], atol=1e-6,
                                   err_msg=f"head {head}: {name} on the page differs from seed 000")


def test_multi_head_page_shows_seed_000_concatenation_and_output(built_site):
    """O_concat and Y on the page equal the seed's (W_O = I, so Y = O_concat)."""
    text = math_text(built_site / "book" / "multi_head.html")
    np.testing.assert_allclose(latex_matrix(text, r"O_{\mathrm{concat}}\ (3\times 4) &="), SEED_000_O_CONCAT,
                               atol=1e-6, err_msg="O_concat on the page differs from seed 000")
    y_start = text.find(r"Y\ (3\times 4) &=")
    assert y_start >= 0, "Y is not on the page"
    last_matrix = re.findall(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", text[y_start:], flags=re.S)[2]
    rows = [[float(x) for x in row.split("&")] for row in last_matrix.split(r"\\") if row.strip()]
    np.testing.assert_allclose(rows, SEED_000_O_CONCAT, atol=1e-6, err_msg="Y on the page differs from seed 000")


def test_multi_head_page_says_which_token_each_head_links_to(built_site):
    """Seed 000: in head 1 補償 attends most to 晚到, in head 2 to 外送, both with weight 0.665241."""
    text = page_text(built_site / "book" / "multi_head.html")
    assert "In head 1 its largest weight, 0.665241, goes to 晚到" in text
    assert "In head 2 the largest weight, 0.665241, goes to 外送" in text


def test_scaled_dot_product_page_agrees_with_seed_002_by_hand(built_site):
    """The qkv column of the q1 table rounds to the seed's hand results: 0.40, 0.20, 0.40 and [0.80, 0.60]."""
    text = page_text(built_site / "book" / "scaled_dot_product.html")
    weights = re.search(r"weights 0\.40, 0\.20, 0\.40 (\d\.\d+), (\d\.\d+), (\d\.\d+)", text)
    output = re.search(r"output \[0\.80, 0\.60\] \[ ?(\d\.\d+), (\d\.\d+) ?\]", text)
    assert weights and output, "the table comparing the seed with qkv is not on the page"
    np.testing.assert_allclose([float(x) for x in weights.groups()], SEED_002_Q1_WEIGHTS, atol=0.005)
    np.testing.assert_allclose([float(x) for x in output.groups()], SEED_002_Q1_OUTPUT, atol=0.005)


def test_why_sqrt_dk_page_agrees_with_seed_002_softmax(built_site):
    """The softmax of [2, 1, 0] shown on the page rounds to the seed's [0.67, 0.24, 0.09]."""
    text = page_text(built_site / "book" / "why_sqrt_dk.html")
    match = re.search(r"healthy mix, (\d\.\d+), (\d\.\d+), (\d\.\d+)", text)
    assert match, "the softmax of [2, 1, 0] is not in the text"
    np.testing.assert_allclose([float(x) for x in match.groups()], SEED_002_SOFTMAX_MODERATE, atol=0.005)


# ---------------------------------------------------------------- the explorer on the website


def test_explorer_has_a_static_picture_on_the_website(built_site):
    """The explorer's cell shows a PNG on the page, and no widget area that needs a kernel or JS."""
    html_file = built_site / "book" / "why_sqrt_dk.html"
    html = html_file.read_text(encoding="utf-8")
    assert 'type="application/vnd.jupyter.widget-view+json"' not in html, "an empty widget area is on the page"
    start = html.find('ScalingExplorer</span><span class="p">(')
    assert start >= 0, "the explorer's cell is not on the page"
    cell = html[start:]
    image = re.search(r'<img[^>]+src="([^"]+\.png)"', cell)
    assert image, "the explorer's cell has no picture"
    png = (html_file.parent / image.group(1)).resolve().read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000, "the explorer's picture is not a real PNG"


def test_widget_fallback_bundle_decodes_like_the_page_expects():
    """The mime bundle the page is built from carries a base64 PNG (what myst-nb writes to a file)."""
    import qkv_book.widgets

    bundle, metadata = qkv_book.widgets.ScalingExplorer(d_k=4)._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert metadata["image/png"]["width"] > 0
