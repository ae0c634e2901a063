"""Sphinx extension: myst-parser makes docutils' default settings once, not for every paragraph it renders.

Sphinx translates a page paragraph by paragraph: for each of the 繁體中文 edition's 4,000 or so
translated messages, it renders the message's Markdown on its own (``sphinx.transforms.i18n``'s
``publish_msgstr``) into the document it gives myst-parser. myst-parser 3.0.1's renderer starts
each rendering with ``options.get("document", make_document())``, which makes a new document, and
so docutils' default settings (an ``OptionParser`` of every docutils option, 0.7 ms), only to drop
it when a document was given; an ``{eval-rst}`` block does the same and then replaces the settings.

This extension gives myst-parser a ``make_document`` that makes the default settings once per
parser class and gives every new document a deep copy of them: the same values, its own objects,
so a document that changes its settings changes no other's. It does so for the version read only
(:data:`REVIEWED`); another version keeps its own ``make_document``.
"""

from __future__ import annotations

import copy
import functools

import myst_parser
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser as RSTParser
from docutils.utils import new_document
from myst_parser.mdit_to_docutils import base

REVIEWED = "3.0.1"  # myst-parser


@functools.cache
def default_settings(parser_cls):
    """docutils' default settings for ``parser_cls``, made once (never handed out: see make_document)."""
    return get_default_settings(parser_cls)


def make_document(source_path: str = "notset", parser_cls=RSTParser) -> nodes.document:
    """A new docutils document with the parser class's default settings, as myst-parser's own makes."""
    return new_document(source_path, settings=copy.deepcopy(default_settings(parser_cls)))


def setup(app):
    if myst_parser.__version__ == REVIEWED:
        base.make_document = make_document
    return {"parallel_read_safe": True, "parallel_write_safe": True}
