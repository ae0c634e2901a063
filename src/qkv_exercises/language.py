"""The language in which a problem set speaks to a student: its checks, hints, options and summary.

Every message a student reads goes through :func:`_` (or :func:`ngettext`), written with named
fields, never as an f-string, so that a translation can put the fields where its language wants
them::

    _("{name} is None: replace None with {what}.").format(name=name, what=what)

Words defined once and shown later (a slip's advice, an option's text, a problem set's title) are
marked with :func:`N_` where they are defined and translated where they are shown (``Slip.advice``,
``Session.show_options``). The translations are one gettext catalogue per language, shipped in
the course package's wheel: ``qkv_exercises/locales/zh_TW/LC_MESSAGES/qkv_exercises.po``
(``make translations`` extracts it; ``locales/README.md``). A message without a translation, or
with only a fuzzy one, is shown in English.

The language is that of :mod:`qkv_book.language` (one per process: figures and checks speak the
same). A notebook chooses it when it starts its problem set (:func:`notebook_language`):

1. ``LANGUAGE`` in the notebook's first code cell, passed to ``start()`` (``"en"``, ``"zh-TW"``);
2. the notebook's own metadata, ``{"qkv_exercises": {"language": "zh-TW"}}``: each download of the
   website sets it (the 繁體中文 edition's problem sets carry ``"zh-TW"``);
3. English.

The grader asks the same of a submission (the ``LANGUAGE`` its first cell passed, then its
metadata) and judges it inside :func:`qkv_book.language.speaking`, so that its feedback speaks
the student's language.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from qkv_book.language import ENGLISH, N_, current_language, language_tag, translations

__all__ = ["N_", "_", "metadata_language", "ngettext", "notebook_language", "METADATA_KEY"]

DOMAIN = "qkv_exercises"
METADATA_KEY = "qkv_exercises"  # notebook metadata: {"qkv_exercises": {"language": "zh-TW"}}
SESSION_VARIABLE = "JPY_SESSION_NAME"  # the path of the notebook a Jupyter server started this kernel for
MAX_NOTEBOOK_BYTES = 20 << 20
_PACKAGE_DIR = str(Path(__file__).parent)  # where locales/ lives; computed once, a message is looked up often


def _catalogue():
    return translations(_PACKAGE_DIR, DOMAIN, current_language())


def _(message: str) -> str:
    """``message`` in the current language; English as written."""
    return _catalogue().gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    """``singular`` or ``plural`` for ``count``, in the current language."""
    return _catalogue().ngettext(singular, plural, count)


def metadata_language(metadata) -> str | None:
    """The language a notebook's metadata gives (``metadata["qkv_exercises"]["language"]``), or None when it
    gives none the course speaks. Reads anything without raising: a submission's metadata is the student's."""
    entry = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    value = entry.get("language") if isinstance(entry, dict) else None
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        return language_tag(value)
    except ValueError:
        return None


def typed_language(value) -> str | None:
    """The language typed as ``LANGUAGE`` in the first cell, or None when it is empty.

    Raises:
        ValueError: for a language the course does not speak, naming the ones it does.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ValueError(f'LANGUAGE must be text in quotes, "en" or "zh-TW"; got {value!r}')
    return language_tag(value)


def notebook_language(problem_set: str, typed="", environ=None) -> str:
    """The language of the notebook solving ``problem_set``: ``typed`` (its ``LANGUAGE``), else its metadata,
    else English.

    The kernel finds its notebook where Jupyter put it: the path a Jupyter server gives
    (``JPY_SESSION_NAME``), else ``<problem set>.ipynb`` in the working folder (a kernel starts
    in its notebook's folder, in JupyterLab as under ``nbgrader validate``).
    """
    chosen = typed_language(typed)
    if chosen is not None:
        return chosen
    environ = os.environ if environ is None else environ
    for path in (environ.get(SESSION_VARIABLE, ""), f"{problem_set}.ipynb"):
        if path and Path(path).suffix == ".ipynb" and Path(path).is_file():
            found = metadata_language(_read_metadata(Path(path)))
            if found is not None:
                return found
    return ENGLISH


def _read_metadata(path: Path) -> dict:
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return {}
        return json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError, AttributeError):
        return {}
