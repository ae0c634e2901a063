"""The language in which the book's figures, printed lines and widgets speak to a reader.

The website is built once per language from the same chapters (``make site``: English, and
繁體中文 for readers in Taiwan). Everything a chapter's kernel shows in words goes through
:func:`_`: the labels and titles that :mod:`qkv_book.plots` draws, a chapter's printed lines,
a widget's labels. The prose around the code is translated by Sphinx from the catalogues in
``locales/``; this module is the kernel's side of the same edition.

The language is chosen, first match wins, by

1. :func:`set_language` in the notebook (``set_language("zh-TW")``; a problem set's ``start()``
   calls it with the notebook's language), or :func:`speaking` for a ``with`` block;
2. the environment variable ``QKV_LANGUAGE`` (the Chinese build of the website sets it before
   its chapter kernels start);
3. English.

Translations are gettext catalogues, one ``.po`` file per package and language, shipped in the
course package's wheel: ``qkv_book/locales/zh_TW/LC_MESSAGES/qkv_book.po``. Babel reads them;
a message without a translation, or with only a fuzzy (stale) one, is shown in English.
Other packages of the course (the problem sets' checks) read their own catalogues through
:func:`translations`. Nothing here reaches the internet, and English needs no catalogue at all.
"""

from __future__ import annotations

import contextlib
import gettext
import io
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

ENVIRONMENT_VARIABLE = "QKV_LANGUAGE"
ENGLISH = "en"
# Language tags (BCP 47, as in HTML's lang) and the gettext locale that holds each one's catalogues.
LOCALES = {"en": "en", "zh-TW": "zh_TW"}

_chosen: str | None = None
_PACKAGE_DIR = str(Path(__file__).parent)  # where locales/ lives; computed once, a message is looked up often


def language_tag(value: str) -> str:
    """The course's tag for ``value``: ``"en"`` or ``"zh-TW"`` (``zh_TW`` and ``zh-Hant-TW`` are accepted).

    Raises:
        ValueError: for a language the course does not speak, naming the ones it does.
    """
    spelled = str(value).strip().replace("_", "-")
    aliases = {tag.lower(): tag for tag in LOCALES} | {"zh-hant-tw": "zh-TW", "zh-hant": "zh-TW"}
    try:
        return aliases[spelled.lower()]
    except KeyError:
        raise ValueError(f"the course speaks {' and '.join(map(repr, LOCALES))}, not {value!r}") from None


def set_language(value: str | None) -> str:
    """Speak ``value`` from now on in this process (``None``: back to ``QKV_LANGUAGE`` or English); return it."""
    global _chosen
    _chosen = None if value is None else language_tag(value)
    return current_language()


@contextlib.contextmanager
def speaking(value: str | None) -> Iterator[str]:
    """Speak ``value`` inside the ``with`` block only (``None``: as outside it), then what was chosen before.

    The grader judges each submission in its own language this way (one submission at a time, in
    one thread: the choice is the process's).
    """
    global _chosen
    before = _chosen
    try:
        if value is not None:
            _chosen = language_tag(value)
        yield current_language()
    finally:
        _chosen = before


def current_language() -> str:
    """The language tag in force: :func:`set_language`, else ``QKV_LANGUAGE``, else ``"en"``.

    Raises:
        ValueError: when ``QKV_LANGUAGE`` names a language the course does not speak.
    """
    if _chosen is not None:
        return _chosen
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    return language_tag(value) if value else ENGLISH


def catalogue_path(package_dir: Path, domain: str, language: str) -> Path:
    """Where ``domain``'s catalogue in ``language`` lives inside a package: ``locales/zh_TW/LC_MESSAGES/<domain>.po``."""
    return Path(package_dir) / "locales" / LOCALES[language_tag(language)] / "LC_MESSAGES" / f"{domain}.po"


@lru_cache(maxsize=None)
def translations(package_dir: str, domain: str, language: str) -> gettext.NullTranslations:
    """The translations of ``domain`` (a package's catalogue, see :func:`catalogue_path`) into ``language``.

    English, or a language without a catalogue, gives ``gettext.NullTranslations`` (every
    message as written). Fuzzy entries are left out, as ``msgfmt`` leaves them out.
    """
    path = catalogue_path(Path(package_dir), domain, language)
    if language_tag(language) == ENGLISH or not path.is_file():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from babel.support import Translations

    with path.open("rb") as po:
        catalog = read_po(po, locale=LOCALES[language_tag(language)], domain=domain)
    compiled = io.BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    return Translations(compiled, domain=domain)


def _(message: str) -> str:
    """``message`` in the current language (see :func:`current_language`); English as written."""
    return translations(_PACKAGE_DIR, "qkv_book", current_language()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    """``singular`` or ``plural`` for ``count``, in the current language."""
    return translations(_PACKAGE_DIR, "qkv_book", current_language()).ngettext(
        singular, plural, count)


def N_(message: str) -> str:
    """Mark ``message`` for the catalogue and return it unchanged: for a word a chapter passes
    in English to a function that translates it where it draws it (a block diagram's boxes)."""
    return message
