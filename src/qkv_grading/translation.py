"""The problem sets in the course's other languages: their markdown, translated through catalogues.

A problem set has one source notebook (``source/<problem set>/<problem set>.ipynb``, in English)
and, for each other language, a gettext catalogue in the course folder:
``locales/zh_TW/LC_MESSAGES/<problem set>.po``. A catalogue holds the notebook's markdown only,
one message per block (a heading, a paragraph, a list, a display equation with words around it:
the text between blank lines). Code cells and every cell's metadata are never in it, so a
translated notebook has the source's code cells and nbgrader metadata byte for byte, and one
gradebook grades every language the same way.

- :func:`markdown_messages`: the messages of a notebook (``make translations`` writes them into
  ``<problem set>.pot``, ``locales/extract_messages.py``);
- :func:`translated_notebook`: the notebook in a language, its markdown translated (a block without
  a translation, or with only a fuzzy one, stays English), its metadata saying the language
  (:data:`qkv_exercises.language.METADATA_KEY`), which the checks then speak;
- :func:`problem_set_gettext`: the translations of one problem set, for the feedback pages, which
  show the instructor's markdown in the language of the submission.

Called by the release of each edition of the website (``book/_ext/problem_sets.py``,
:func:`qkv_grading.pipeline.release_zips`) and by the feedback pages (:mod:`qkv_grading.feedback`).
Never reads a student's markdown: what it translates comes from the source notebook.
"""

from __future__ import annotations

import copy
import gettext
import re
from pathlib import Path

from qkv_book.language import ENGLISH, language_tag, translations
from qkv_book.language import catalogue_path as package_catalogue
from qkv_exercises.language import METADATA_KEY

_BLANK_LINES = re.compile(r"(\n[ \t]*\n\s*)")
_WORDS = re.compile(r"[A-Za-z]{2,}")
_NO_WORDS = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)|https?://\S+", re.DOTALL)


def needs_translation(block: str) -> bool:
    """Whether a block of markdown has English words once its code, math and link addresses are set aside."""
    return _WORDS.search(_NO_WORDS.sub(" ", block)) is not None


def blocks(text: str) -> list[str]:
    """``text`` cut at its blank lines, the separators kept: ``"".join(blocks(text)) == text``."""
    return _BLANK_LINES.split(text)


def markdown_messages(notebook: dict) -> list[str]:
    """The messages of a notebook's markdown cells, in order, each once: the blocks that have words."""
    found: dict[str, None] = {}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for index, block in enumerate(blocks(cell_text(cell))):
                if index % 2 == 0 and needs_translation(block):
                    found.setdefault(block.strip("\n"), None)
    return list(found)


def cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def translate_markdown(text: str, catalogue: gettext.NullTranslations) -> str:
    """``text`` with each block replaced by its translation (the separators between blocks kept)."""
    parts = blocks(text)
    for index in range(0, len(parts), 2):
        block = parts[index]
        core = block.strip("\n")
        if core and needs_translation(core):
            translated = catalogue.gettext(core)
            parts[index] = block.replace(core, translated, 1)
    return "".join(parts)


def catalogue_path(course_root: Path, problem_set: str, language: str) -> Path:
    """``<course>/locales/zh_TW/LC_MESSAGES/<problem set>.po``: the catalogue of ``problem_set`` in ``language``."""
    return package_catalogue(Path(course_root), problem_set, language)


def problem_set_gettext(course_root: Path, problem_set: str, language: str) -> gettext.NullTranslations:
    """The translations of ``problem_set``'s markdown into ``language`` (English, or none yet: the source's words)."""
    return translations(str(Path(course_root)), problem_set, language_tag(language))


def translated_notebook(notebook: dict, course_root: Path, problem_set: str, language: str) -> dict:
    """A copy of ``notebook`` in ``language``: markdown translated, code cells and metadata of the cells as
    they are, and the notebook's metadata saying its language (``{"qkv_exercises": {"language": "zh-TW"}}``)."""
    tag = language_tag(language)
    catalogue = problem_set_gettext(course_root, problem_set, tag)
    translated = copy.deepcopy(notebook)
    for cell in translated.get("cells", []):
        if cell.get("cell_type") == "markdown" and tag != ENGLISH:
            cell["source"] = translate_markdown(cell_text(cell), catalogue)
    translated.setdefault("metadata", {})[METADATA_KEY] = {"language": tag}
    return translated
