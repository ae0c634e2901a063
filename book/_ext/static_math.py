"""Sphinx extension: every formula is typeset when the site is built, and no page loads MathJax.

Sphinx's HTML math renderer ``mathjax`` writes TeX into the pages for MathJax to typeset in the
reader's browser, which made every chapter wait for it. This extension is the renderer
``static_math`` instead: each formula (``$...$`` and ``{math}`` roles, ``$$...$$`` and ``{math}``
blocks, amsmath environments, notebook outputs in ``text/latex``) is typeset while its page is
written, by MathJax 3.2.2 in node (``static_math.js``; MathJax from the pip package
django-static-mathjax, node from Debian's ``nodejs``). A page carries MathJax's CommonHTML output
and, for screen readers, its MathML with the TeX kept as an annotation.

The TeX MathJax reads is the TeX it read in the browser: display math is wrapped as
``sphinx.ext.mathjax`` wraps it (blocks split at blank lines, ``split`` around a line break),
amsmath blocks as myst-parser's amsmath override does, and labelled equations get Sphinx's
number and link beside the formula, exactly as before.

When the build finishes, ``_static/mathjax/`` gets what the pages need, and nothing else of
MathJax: ``chtml.css``, the stylesheet of MathJax's CommonHTML output for the characters that the
pages draw (one file for every page, the search page's summaries included, which show the pages'
own formulas; see ``_static/search-math.js``) and ``fonts/``, the woff fonts that the pages draw in.

A browser asks for a web font only once its layout meets a character drawn in it, and for the
fonts a formula falls back on (a stretchy bracket: MathJax's size fonts, one after the other) only
after the one before has arrived: the math of a long page waited for a chain of font requests that
started late. Each page instead names the fonts its own math is drawn in, in its head, as
``<link rel="preload">``, so that they load beside the stylesheets; a page without math preloads
none. The fonts keep ``font-display: block`` (the browser's default): a formula drawn in a fallback
font for a moment would show other glyphs at other widths.

A formula MathJax cannot typeset (an undefined control sequence, a missing brace) is a warning
that names its page and line; ``make site`` turns warnings into errors.

Each Sphinx process starts one node process at the first formula it has to typeset and sends it
one formula at a time over a pipe. Sphinx writes pages in forked processes, so a process never uses
the node process of the one it was forked from. Every formula typeset is kept in the build folder
(``static-math/``), and the 繁體中文 edition, built after the English one, has the same formulas:
it reads them there and starts no node at all (:class:`SharedTypesetter`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

import mathjax  # from django-static-mathjax
from fontTools.ttLib import TTFont

RENDERER = "static_math"
MATHJAX_ES5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
MATHJAX_VERSION = importlib.metadata.version("django-static-mathjax")  # MathJax 3.2.2
MATHJAX_FONTS = MATHJAX_ES5 / "output" / "chtml" / "fonts" / "woff-v2"
TYPESETTER = Path(__file__).with_name("static_math.js")
KEPT_FOLDER = "static-math"  # in the build folder that both editions share (SharedTypesetter)
STYLESHEET = "mathjax/chtml.css"  # under _static/; its fonts in mathjax/fonts/
NODE_MISSING = (
    "the site's math is typeset when it is built, by MathJax in node, and `node` is not on PATH: "
    "run `make node` (as root it installs Debian's nodejs) or `sudo apt-get install nodejs`"
)

# What MathJax in the browser measures, the stylesheet computes (appended to MathJax's own):
# - matchFontHeight: MathJax draws a formula so that its x-height is the x-height of the text
#   around it. In a font-size, 1ex is the x-height of the text around, and 0.442 em the x-height
#   of MathJax's TeX fonts: the same scale, for whatever fonts the reader's browser has.
# - text in the page's fonts (Chinese in \text{外送}) is drawn at the size of the text around,
#   times the size of its script (static_math.js writes that as --qkv-text-scale), with the
#   padding MathJax gives it, 0.75 em and 0.2 em of the math around it. Registered properties
#   carry those sizes into the formula as lengths.
MATCH_THE_TEXT_AROUND = """
/* As MathJax's matchFontHeight: a formula's x-height is the x-height of the text around it. */
mjx-container[jax="CHTML"] {
  font-size: calc(1ex / 0.442);
}

/* Text in the page's fonts inside a formula: the size of the text around, times its script's size. */
@property --qkv-text-size {
  syntax: "<length>";
  inherits: true;
  initial-value: 16px;
}
@property --qkv-math-em {
  syntax: "<length>";
  inherits: true;
  initial-value: 16px;
}
.math {
  --qkv-text-size: 1em;
}
mjx-mi, mjx-mo, mjx-mn, mjx-ms, mjx-mtext {
  --qkv-math-em: 1em;
}
mjx-utext {
  font-size: calc(var(--qkv-text-size) * var(--qkv-text-scale, 1));
  padding: calc(0.75 * var(--qkv-math-em)) 0 calc(0.2 * var(--qkv-math-em)) 0;
}
"""

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Typeset:
    """One formula as MathJax typeset it: its HTML and what MathJax could not typeset in it."""

    html: str
    errors: tuple[str, ...]


class MathJaxProcess:
    """MathJax in a node process (``static_math.js``), answering one request per line over a pipe."""

    def __init__(self, tex_options: dict):
        node = shutil.which("node")
        if node is None:
            raise ExtensionError(NODE_MISSING)
        self.pid = os.getpid()
        self._process = subprocess.Popen(
            [node, str(TYPESETTER), str(MATHJAX_ES5), json.dumps(tex_options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._answer()  # {"ready": version} once MathJax has loaded

    def _answer(self) -> dict:
        line = self._process.stdout.readline()
        if not line:
            self._process.wait()
            raise ExtensionError(
                f"MathJax in node stopped (exit status {self._process.returncode}): "
                f"{self._process.stderr.read().strip()[-2000:]}"
            )
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        """``static_math.js``'s answer to one request (see :class:`SharedTypesetter`)."""
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=30)


class SharedTypesetter:
    """What MathJax typesets for a build folder: each formula typeset once, whichever edition asks first.

    The two editions have the same formulas (a translation keeps every formula of its source), so
    the 繁體中文 edition's build, which comes second, reads what the English one typeset instead of
    typesetting it again. Each answer is kept in ``folder`` (``static-math/`` in the build folder the
    editions share, beside ``measurements/``), in a file named after a hash of the request and of
    what typesets it: MathJax's version, ``static_math.js`` and the TeX options. Another of any of
    them is another file, so a kept answer is never stale. ``folder=None`` keeps nothing on disk.

    MathJax in node starts at the first request that no file answers: a build whose formulas are
    all kept starts none.
    """

    def __init__(self, tex_options: dict, folder: Path | None):
        self.tex_options = tex_options
        self.folder = folder
        self.pid = os.getpid()
        self._typeset: dict[tuple[str, bool], Typeset] = {}
        self._process: MathJaxProcess | None = None
        typesetter = hashlib.sha256(TYPESETTER.read_bytes()).hexdigest()
        self._identity = json.dumps([MATHJAX_VERSION, typesetter, tex_options], sort_keys=True)

    def _kept(self, request: dict) -> dict:
        """The answer to ``request``: from its file, or from MathJax (and then kept in its file)."""
        if self.folder is None:
            return self.mathjax().ask(request)
        key = hashlib.sha256(f"{self._identity}\n{json.dumps(request, sort_keys=True)}".encode()).hexdigest()
        path = self.folder / f"{key}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass  # not kept yet (or cut short by a build stopped while writing: typeset it again)
        answer = self.mathjax().ask(request)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(answer), encoding="utf-8")
        partial.replace(path)  # a reading process never sees half a file
        return answer

    def mathjax(self) -> MathJaxProcess:
        if self._process is None:
            self._process = MathJaxProcess(self.tex_options)
        return self._process

    def typeset(self, tex: str, display: bool) -> Typeset:
        """``tex`` as CommonHTML with its assistive MathML; each formula is asked for once."""
        key = (tex, display)
        if key not in self._typeset:
            answer = self._kept({"tex": tex, "display": display})
            self._typeset[key] = Typeset(answer["html"], tuple(answer["errors"]))
        return self._typeset[key]

    def stylesheet(self) -> str:
        """The CSS of MathJax's CommonHTML output, for every character of its TeX fonts."""
        return self._kept({"stylesheet": True})["css"]

    def close(self) -> None:
        if self._process is not None:
            self._process.close()


_typesetter: SharedTypesetter | None = None


def typesetter(app) -> SharedTypesetter:
    """This Sphinx process's typesetter (a forked process makes its own: it starts its own node)."""
    global _typesetter
    if _typesetter is None or _typesetter.pid != os.getpid():
        mathjax3_config = getattr(app.config, "mathjax3_config", None) or {}
        folder = Path(app.doctreedir).parent / KEPT_FOLDER
        _typesetter = SharedTypesetter(mathjax3_config.get("tex", {}), folder)
    return _typesetter


def typeset(translator, node: nodes.Element, tex: str, display: bool) -> str:
    """The HTML of one formula; what MathJax could not typeset is a warning at the formula's line."""
    result = typesetter(translator.builder.app).typeset(tex, display)
    for error in result.errors:
        logger.warning(f"MathJax cannot typeset {tex!r}: {error}", location=node)
    return result.html


def display_tex(node: nodes.math_block) -> str:
    """The TeX of a display formula as Sphinx's MathJax renderer hands it to MathJax, without ``\\[ \\]``.

    Paragraphs (parts between blank lines) become the lines of one ``aligned`` block, and a part
    with a line break ``\\\\`` is a ``split``; amsmath blocks and ``nowrap`` ones are left as written.
    """
    text = node.astext()
    if node["nowrap"] or "amsmath" in node.get("classes", []):
        return text
    parts = [part for part in text.split("\n\n") if part.strip()]
    body = r"\\".join(rf"\begin{{split}}{part}\end{{split}}" if r"\\" in part else part for part in parts)
    if len(parts) > 1:
        body = rf" \begin{{align}}\begin{{aligned}}{body}\end{{aligned}}\end{{align}} "
    return body


def visit_math(self, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(typeset(self, node, node.astext(), display=False))
    self.body.append("</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node: nodes.math_block) -> None:
    amsmath = "amsmath" in node.get("classes", [])
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight" + (" amsmath" if amsmath else "")))
    if node["number"] and (amsmath or not node["nowrap"]):
        # Sphinx numbers the labelled equations, beside the formula (MathJax numbers none).
        self.body.append(f'<span class="eqno">({get_node_equation_number(self, node)})')
        self.add_permalink_ref(node, _("Permalink to this equation") if amsmath else _("Link to this equation"))
        self.body.append("</span>")
    self.body.append(typeset(self, node, display_tex(node), display=True))
    self.body.append("</div>\n")
    raise nodes.SkipNode


# MathJax's font families: @font-face { font-family: MJXTEX-I; src: url("fonts/...") } in chtml.css
FONT_FACE = re.compile(r'@font-face[^{]*\{\s*font-family: ([\w-]+);'
                       r'\s*src: url\("fonts/([\w.-]+)"\)')
# A character drawn in a variant has its class (mjx-c class="mjx-c1D456 TEX-I", and
# .TEX-I { font-family: MJXZERO, MJXTEX-I }); one without (mjx-c class="mjx-c3D") is drawn in
# the formula's MJXTEX.
DRAWN_CHARACTER = re.compile(r'<mjx-c class="([^"]*)"')
# A stretchy bracket or bar (<mjx-stretchy-v class="mjx-c5B">) is drawn from pieces whose
# characters the stylesheet gives (mjx-stretchy-v.mjx-c5B mjx-ext mjx-c::before { content: "\23A2" })
# in a list of fonts (mjx-stretchy-v mjx-c { font-family: MJXZERO, MJXTEX-S1, MJXTEX-S4, ... }):
# the browser loads each font of the list in turn until one has the piece.
STRETCHY = re.compile(r'<mjx-stretchy-([vh])\b[^>]*\bclass="mjx-c([0-9A-F]+)"')
PIECE = re.compile(r'mjx-stretchy-([vh])\.mjx-c([0-9A-F]+) mjx-(?:beg|ext|end|mid) mjx-c::before\s*$')
CONTENT = re.compile(r'content: "\\([0-9A-F]+)"')
STRETCHY_FONTS = re.compile(r"mjx-stretchy-v mjx-c, mjx-stretchy-h mjx-c \{\s*font-family: ([^;!]+)")


class MathFonts:
    """Which of MathJax's font families a page's math is drawn in, from MathJax's stylesheet and fonts."""

    def __init__(self, css: str):
        self.files = font_files(css)
        self.stretchy_fonts = [name.strip() for name in STRETCHY_FONTS.search(css).group(1).split(",")]
        self.pieces: dict[tuple[str, str], set[int]] = {}
        for rule in css.split("\n}\n"):
            selectors, _, body = rule.partition("{")
            content = CONTENT.search(body)
            for selector in selectors.split(","):
                piece = PIECE.search(selector.strip())
                if piece and content:
                    self.pieces.setdefault(piece.groups(), set()).add(int(content.group(1), 16))
        self._characters: dict[str, set[int]] = {}

    def characters(self, family: str) -> set[int]:
        """The code points that the font of ``family`` has glyphs for."""
        if family not in self._characters:
            with TTFont(MATHJAX_FONTS / self.files[family]) as font:
                self._characters[family] = set(font.getBestCmap())
        return self._characters[family]

    def stretchy(self, direction: str, character: str) -> set[str]:
        """The fonts the browser loads to draw the pieces of one stretchy character."""
        loaded = set()
        for piece in self.pieces.get((direction, character), ()):
            for index, family in enumerate(self.stretchy_fonts):
                if piece in self.characters(family):
                    loaded.update(self.stretchy_fonts[: index + 1])
                    break
        return loaded

    def drawn(self, html: str) -> set[str]:
        """The font families (``MJXTEX-I``) that the MathJax output in ``html`` is drawn in."""
        if "<mjx-container" not in html:
            return set()
        families = {"MJXZERO"}  # first in every list of fonts: the browser loads it before any other
        for classes in DRAWN_CHARACTER.findall(html):
            variants = {f"MJX{name}" for name in classes.split() if name.startswith("TEX-")}
            families |= variants or {"MJXTEX"}
        for direction, character in set(STRETCHY.findall(html)):
            families |= self.stretchy(direction, character)
        return families


def font_files(css: str) -> dict[str, str]:
    """MathJax's font families and their files, from its stylesheet: ``MJXTEX-I`` is in
    ``MathJax_Math-Italic.woff``."""
    return dict(FONT_FACE.findall(css))


_math_fonts: MathFonts | None = None


def math_fonts(app) -> MathFonts:
    """This process's :class:`MathFonts`, from its MathJax's stylesheet."""
    global _math_fonts
    if _math_fonts is None:
        _math_fonts = MathFonts(typesetter(app).stylesheet())
    return _math_fonts


def preload_fonts(app, pagename, templatename, context, doctree) -> None:
    """Preload, in the page's head, the MathJax fonts its math is drawn in (see the module docstring)."""
    body = context.get("body", "")
    if "<mjx-container" not in body:
        return
    fonts = math_fonts(app)
    hrefs = [context["pathto"](f"_static/mathjax/fonts/{fonts.files[family]}", 1)
             for family in sorted(fonts.drawn(body))]
    links = "".join(
        f'<link rel="preload" href="{href}" as="font" type="font/woff" crossorigin="anonymous" />\n'
        for href in hrefs
    )
    context["metatags"] = context.get("metatags", "") + links


def use_static_math(app, config) -> None:
    config.html_math_renderer = RENDERER


# A character's rules name it by its code point: mjx-c.mjx-c1D456.TEX-I::before { content: ... }
CHARACTER = re.compile(r"\bmjx-c([0-9A-F]+)\b")


@dataclasses.dataclass
class Drawn:
    """What the pages of a build draw in MathJax's fonts: characters (``1D456``) and font families."""

    characters: set[str] = dataclasses.field(default_factory=set)
    families: set[str] = dataclasses.field(default_factory=set)


def drawn_in_pages(app, fonts: MathFonts) -> Drawn:
    """The characters and font families that the pages of this build draw (their HTML as written)."""
    drawn = Drawn()
    for docname in app.env.found_docs:
        page = Path(app.outdir) / app.builder.get_target_uri(docname)
        if page.suffix == ".html" and page.is_file():
            html = page.read_text(encoding="utf-8")
            drawn.characters.update(CHARACTER.findall(html))
            drawn.families |= fonts.drawn(html)
    return drawn


def only_what_is_drawn(css: str, drawn: Drawn) -> str:
    """MathJax's stylesheet without the rules of characters (2,300 of them, most) and of font
    families that no page draws."""
    kept = []
    for rule in css.split("\n}\n"):
        face = FONT_FACE.search(rule + "\n}")
        if face and face.group(1) not in drawn.families:
            continue
        selectors = rule.split("{", 1)[0].split(",")
        characters = [CHARACTER.findall(selector) for selector in selectors]
        if all(found and not set(found) <= drawn.characters for found in characters):
            continue
        kept.append(rule)
    return "\n}\n".join(kept)


def write_stylesheet_and_fonts(app, exception) -> None:
    """``_static/mathjax/chtml.css`` and ``_static/mathjax/fonts/``, once every page is written.

    The stylesheet has the rules of MathJax's CommonHTML output for the characters the pages
    draw, and ``fonts/`` the fonts they draw them in; a search result shows a formula of a page,
    so it needs no other.
    """
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / STYLESHEET
    target.parent.mkdir(parents=True, exist_ok=True)
    full_css = typesetter(app).stylesheet()
    drawn = drawn_in_pages(app, math_fonts(app))
    css = only_what_is_drawn(full_css, drawn) + MATCH_THE_TEXT_AROUND
    if not target.is_file() or target.read_text(encoding="utf-8") != css:
        target.write_text(css, encoding="utf-8")
    fonts = target.parent / "fonts"
    fonts.mkdir(exist_ok=True)
    wanted = {math_fonts(app).files[family] for family in drawn.families}
    for old in fonts.glob("*.woff"):
        if old.name not in wanted:
            old.unlink()
    for name in wanted:
        if not (fonts / name).is_file():
            shutil.copyfile(MATHJAX_FONTS / name, fonts / name)


def typeset_search_results(app, pagename, templatename, context, doctree) -> None:
    if pagename == "search":
        app.add_js_file("search-math.js")


def setup(app):
    app.add_html_math_renderer(RENDERER, (visit_math, None), (visit_displaymath, None))
    app.connect("config-inited", use_static_math)
    app.connect("build-finished", write_stylesheet_and_fonts)
    app.add_css_file(STYLESHEET)
    app.connect("html-page-context", typeset_search_results)
    app.connect("html-page-context", preload_fonts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
