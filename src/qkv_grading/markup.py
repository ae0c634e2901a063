"""A student's text made inert on the pages an instructor opens: formgrader and nbgrader's feedback.

Those pages are served by the instructor's Jupyter server (formgrader), or opened from the
course folder (``nbgrader generate_feedback``), so a script on them would act as the
instructor: call the Jupyter API, change grades. Two layers keep every student's markup
from running, so that neither has to be perfect alone:

1. the autograded notebook, written by the trusted grading process
   (:func:`qkv_grading.feedback.autograded_notebook`), holds each markdown cell of a
   student's as :func:`inert_markdown`: a fenced block that every markdown renderer shows
   as the literal text typed (no HTML, link, image, attachment or typeset math), and only
   the text outputs the sandbox hands back;
2. the course's templates (``exercises/templates/``: ``qkv_formgrade`` for formgrader,
   ``qkv_feedback`` for ``nbgrader generate_feedback``, both on ``qkv_base``) show any
   notebook safely, even one this course did not write: rendered markdown and HTML
   outputs go through :func:`sanitised_html` (bleach, with an allow-list of tags,
   attributes and URLs), JavaScript and widget outputs are left out, images are shown
   only from ``data:`` URLs, every value a template prints is escaped, and MathJax runs
   with its safe extension and without the TeX packages that load code or make links.
   Each page carries a Content-Security-Policy that allows no script but its own,
   listed by :func:`script_hash`.

``nbgrader_config.py`` registers :data:`FILTERS` for the templates. Nothing here reads or
writes files.
"""

from __future__ import annotations

import base64
import hashlib
import re

import bleach

# What rendered markdown may keep: text structure, code, tables, links and pictures.
# No forms, frames, media, SVG, MathML, style or script; a tag not listed is shown as text.
TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "q", "s", "samp", "span", "strong", "sub",
    "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
})
# Links only to the web or to mail: never javascript:, data:, or a path on the instructor's server.
LINK_SCHEMES = ("http", "https", "mailto")
# Pictures only as data, so that showing one sends no request anywhere (an SVG shown as a
# picture runs no script and loads nothing).
IMAGE_DATA = re.compile(r"data:image/(?:png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]+", re.ASCII)
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+", re.ASCII)
# Classes that pygments and nbconvert's markdown give code blocks; others (the page's own, such as
# formgrader's "score" or Bootstrap's "navbar-fixed-top") could dress a student's text as the page.
CODE_CLASS = re.compile(r"(?:highlight|hl-[\w+-]+|language-[\w+-]+|[a-z]{1,3}[0-9]?)", re.ASCII)


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if tag == "a":
        if name == "title":
            return True
        if name != "href":
            return False
        scheme = value.split(":", 1)[0].lower() if ":" in value else ""
        return scheme in LINK_SCHEMES
    if tag == "img":
        if name in ("alt", "title"):
            return True
        return name == "src" and IMAGE_DATA.fullmatch(value) is not None
    if name == "class" and tag in ("div", "span", "pre", "code"):
        return all(CODE_CLASS.fullmatch(part) for part in value.split())
    return tag in ("td", "th") and name in ("colspan", "rowspan") and value.isdigit()


_CLEANER = bleach.sanitizer.Cleaner(tags=TAGS, attributes=_allowed_attribute,
                                    protocols=("http", "https", "mailto", "data"), strip=False, strip_comments=True)


def sanitised_html(html) -> str:
    """``html`` (rendered markdown, an HTML output) with only the tags and attributes listed above.

    A tag not listed (``<script>``, ``<svg>``, ``<iframe>``, ``<style>``, ``<form>`` ...) is shown
    as text; an attribute not listed (``onerror``, ``style``, ``id``) is dropped, and so is a link
    to anything but http(s) or mail and a picture that is not a ``data:`` URL of an image. Not text
    (a list, a number from a hand-made notebook) is shown as its text.
    """
    if isinstance(html, (list, tuple)):
        html = "".join(map(str, html))
    return _CLEANER.clean(str(html))


def image_data(data) -> str:
    """``data`` if it is base64 (what a PNG or JPEG output holds), else ``""``: never an attribute's end."""
    text = "".join(map(str, data)) if isinstance(data, (list, tuple)) else str(data)
    return text if BASE64.fullmatch(text) else ""


def fence_for(text: str) -> str:
    """A code fence that ``text`` cannot close: backticks, one more than its longest run (at least three)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def inert_markdown(text: str) -> str:
    """A student's markdown as a markdown source that shows exactly ``text``, rendered by anyone.

    The text goes in a fenced block of plain text: CommonMark renderers (formgrader's, nbgrader's,
    JupyterLab's) show it verbatim, so no HTML, link, image or attachment in it is ever rendered,
    and MathJax never typesets inside ``<pre>``.
    """
    fence = fence_for(text)
    return f"{fence}\n{text}\n{fence}"


def script_hash(script: str) -> str:
    """The Content-Security-Policy source that allows exactly this inline script: ``'sha256-<base64>'``."""
    digest = hashlib.sha256(str(script).encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


# The Jinja filters of the course's templates (``c.HTMLExporter.filters`` in nbgrader_config.py).
FILTERS = {
    "sanitised_html": "qkv_grading.markup.sanitised_html",
    "script_hash": "qkv_grading.markup.script_hash",
    "image_data": "qkv_grading.markup.image_data",
}
