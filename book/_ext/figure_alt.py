"""Sphinx extension: a figure that carries its own description gets it as the alt text of its <img>.

A chapter's figure that says something about its numbers (which column is lighter, how many
keys there are) describes itself with :func:`qkv_book.plots.with_alt_text`, computed from those
numbers when the chapter runs; the PNG carries the text. When a page is read, each image whose
PNG carries one gets it as its ``alt``. A figure that also has an alt text written in its cell
(``mystnb: image: alt:``) is reported: one of the two would be stale.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from PIL import Image
from sphinx.util import logging

from qkv_book.plots import ALT_TEXT_KEY

logger = logging.getLogger(__name__)


def carried_alt_text(path: Path) -> str | None:
    """The description a PNG file carries, or None (not a PNG, or none carried)."""
    if path.suffix.lower() != ".png" or not path.is_file():
        return None
    with Image.open(path) as picture:
        return picture.text.get(ALT_TEXT_KEY)


def set_alt_texts(app, doctree) -> None:
    env = app.env
    for image in doctree.findall(nodes.image):
        uri = image.get("uri", "")
        if "://" in uri or uri.startswith("data:"):
            continue
        candidates = image.get("candidates") or {}  # Sphinx's image collector: paths from the source folder
        found = candidates.get("image/png") or candidates.get("*")
        path = Path(env.srcdir, found) if found else Path(env.relfn2path(uri, env.docname)[1])
        carried = carried_alt_text(path)
        if carried is None:
            continue
        if image.get("alt"):
            logger.warning("a figure describes itself (qkv_book.plots.with_alt_text) and its cell gives an alt "
                           f"text too; keep one: {image['alt'][:80]!r}", location=image)
        image["alt"] = carried


def setup(app):
    app.connect("doctree-read", set_alt_texts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
