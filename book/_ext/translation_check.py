"""Sphinx extension: catalogues hold the prose only, and a translated edition has all of it.

Two transforms, run on every page Sphinx reads:

- **Prose only** (before the i18n transform, and so also when ``make translations`` extracts the
  catalogues): display math, raw HTML and a page's front matter are not messages, nor is
  anything a cell printed or displayed. The kernel of each edition computes those in its own
  language (:mod:`qkv_book.language`), and their numbers change with every change to ``qkv``.
  What a cell's *metadata* says stays a message: a figure's caption and its image's alt text.
- **Nothing left untranslated** (just before it, in a translated edition): every message of the page
  that needs words (see :func:`needs_translation`) must have a translation in its catalogue,
  ``locales/<language>/LC_MESSAGES/<page>.po``, that is not fuzzy. Each one missing is a
  warning that names the page, the catalogue and the message (an error under ``-W``, as
  ``make site`` builds), unless the page is listed in ``locales/<language>/pending.txt``, the
  pages whose translation is still under way. A listed page that is complete is a warning
  too, so the list shows what is left.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain
from sphinx.util.nodes import extract_messages

logger = logging.getLogger(__name__)

PENDING = "pending.txt"  # in locales/<language>/: one catalogue per line, # starts a comment
# What carries no words of its own: inline code, math, a role's target, a link's address.
_NO_WORDS = re.compile(r"\{[\w:.-]+\}`[^`]*`|``[^`]*``|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)|https?://\S+",
                       re.DOTALL)


def needs_translation(message: str) -> bool:
    """Whether ``message`` has English words once its code, math, roles and link addresses are set aside.

    ``"$n_q$, $n_k$"`` or ``"`d_model`"`` read the same in every edition; ``"softmax"`` needs an
    entry, even if the translation keeps the word.
    """
    return re.search(r"[A-Za-z]{2,}", _NO_WORDS.sub(" ", message)) is not None


def read_pending(path: Path) -> list[str]:
    """The catalogues listed in a ``pending.txt`` (``book/reference``, ``qkv_book``, ...)."""
    if not path.is_file():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


@lru_cache(maxsize=None)
def _read_catalogue(po_path: str, modified: float) -> dict[str, tuple[str, bool]]:
    from babel.messages.pofile import read_po

    with open(po_path, "rb") as po:
        return {str(m.id): (str(m.string or ""), m.fuzzy) for m in read_po(po) if m.id and isinstance(m.id, str)}


def catalogue_entries(po_path: Path) -> dict[str, tuple[str, bool]]:
    """``{message: (translation, fuzzy)}`` of a ``.po`` file (empty when there is none yet)."""
    if not po_path.is_file():
        return {}
    return _read_catalogue(str(po_path), po_path.stat().st_mtime)


def translation_problem(message: str, entries: dict[str, tuple[str, bool]]) -> str | None:
    """Why ``message`` would show untranslated with these catalogue entries, or None if it would not."""
    if not needs_translation(message):
        return None
    translation, fuzzy = entries.get(message, ("", False))
    if not translation.strip():
        return "no translation"
    if fuzzy:
        return "only a fuzzy (stale) translation"
    return None


def _in_front_matter(node: nodes.Node) -> bool:
    """Inside the page's front matter: MyST's field list at the top of the document (docutils makes
    it the docinfo later, at priority 340)."""
    parent = node.parent
    while parent is not None and not isinstance(parent, (nodes.docinfo, nodes.field_list)):
        parent = parent.parent
    return parent is not None and (isinstance(parent, nodes.docinfo) or isinstance(parent.parent, nodes.document))


def _inside_cell_output(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.container) and parent.get("nb_element") == "cell_code_output":
            return True
        if isinstance(parent, nodes.caption):
            return False
        parent = parent.parent
    return False


class ProseOnly(SphinxTransform):
    """Mark display math, raw HTML and what cells print or display as not translatable."""

    default_priority = 15  # after Sphinx marks its extra targets (10), before the i18n transform (20)

    def apply(self, **kwargs) -> None:
        for node in self.document.findall(nodes.TextElement):
            if isinstance(node, (nodes.math_block, nodes.raw)) or _in_front_matter(node):
                node["translatable"] = False
            elif not isinstance(node, nodes.caption) and _inside_cell_output(node):
                node["translatable"] = False


def locale_folder(app) -> Path:
    """``locales/<language>/`` of the edition being built."""
    return Path(app.srcdir) / app.config.locale_dirs[0] / app.config.language


def is_pending(app, domain: str) -> bool:
    """Whether the catalogue ``domain`` (``book/reference``) is listed in the edition's ``pending.txt``."""
    return domain in read_pending(locale_folder(app) / PENDING)


def report_untranslated(app, docname: str, message: str, node, problem: str = "no translation") -> None:
    """Warn that ``message`` of ``docname`` shows untranslated, unless its page is pending."""
    domain = docname_to_domain(docname, app.config.gettext_compact)
    if is_pending(app, domain):
        return
    po_path = (locale_folder(app) / "LC_MESSAGES" / f"{domain}.po").relative_to(app.srcdir)
    logger.warning("%s: %s in %s for %r", docname, problem, po_path, _shorten(message),
                   location=node, type="i18n", subtype="untranslated")


class NothingUntranslated(SphinxTransform):
    """Warn about each message of a page of a translated edition that has no usable translation."""

    default_priority = 19  # on the source's messages, just before the i18n transform (20) replaces them

    def apply(self, **kwargs) -> None:
        language = self.config.language
        source = self.document.get("source", "")
        if language in (None, "en") or source.endswith("<translated>") or self.app.builder.name == "gettext":
            return
        docname = self.env.docname
        domain = docname_to_domain(docname, self.config.gettext_compact)
        entries = catalogue_entries(locale_folder(self.app) / "LC_MESSAGES" / f"{domain}.po")
        missing = 0
        for node, message in extract_messages(self.document):
            problem = translation_problem(message, entries)
            if problem is not None:
                missing += 1
                report_untranslated(self.app, docname, message, node, problem)
        if missing == 0 and is_pending(self.app, domain):
            logger.warning("%s is fully translated: remove it from %s", domain,
                           (locale_folder(self.app) / PENDING).relative_to(self.env.srcdir),
                           type="i18n", subtype="untranslated")


def _shorten(message: str, limit: int = 120) -> str:
    return message if len(message) <= limit else message[:limit - 1] + "…"


def setup(app):
    app.add_transform(ProseOnly)
    app.add_transform(NothingUntranslated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
