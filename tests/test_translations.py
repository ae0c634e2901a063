"""The 繁體中文 catalogues are complete, keep their sources' markup, and speak Taiwan's usage.

Checked on the ``.po`` files alone (no build): the pages' catalogues in ``locales/zh_TW/``, the
theme's and the extensions' there too, and the kernels' in ``src/qkv_book/locales/``. That each
page's messages all reach its catalogue is checked by the build itself (``translation_check``)
and by ``tests/test_book_editions.py``.
"""

from __future__ import annotations

import csv
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

from translation_check import PENDING, needs_translation, read_pending  # noqa: E402

LOCALE = ROOT / "locales" / "zh_TW"
CATALOGUE_FOLDERS = {"": LOCALE / "LC_MESSAGES", "qkv_book": ROOT / "src" / "qkv_book" / "locales" / "zh_TW"
                                                                           / "LC_MESSAGES"}
PENDING_CATALOGUES = read_pending(LOCALE / PENDING)


def catalogue_name(path: Path) -> str:
    """``book/qkv_roles`` for ``locales/zh_TW/LC_MESSAGES/book/qkv_roles.po``; ``qkv_book`` for the kernels'."""
    for folder in CATALOGUE_FOLDERS.values():
        if folder in path.parents:
            return path.relative_to(folder).with_suffix("").as_posix()
    raise ValueError(path)


CATALOGUES = sorted(path for folder in CATALOGUE_FOLDERS.values() for path in folder.rglob("*.po"))


def entries(path: Path):
    """The messages of a catalogue, header left out: (msgid, msgstr, fuzzy), plural forms joined."""
    with path.open("rb") as po:
        for message in read_po(po):
            if not message.id:
                continue
            source = message.id if isinstance(message.id, str) else "\n".join(message.id)
            target = message.string if isinstance(message.string, str) else "\n".join(message.string or ())
            yield source, target or "", message.fuzzy


def translated(path: Path):
    """The messages that have a translation: (msgid, msgstr)."""
    return [(source, target) for source, target, _fuzzy in entries(path) if target.strip()]


def test_the_catalogues_are_found():
    names = {catalogue_name(path) for path in CATALOGUES}
    assert {"book/index", "book/notation", "book/qkv_roles", "sphinx", "course", "qkv_book"} <= names, names


def test_every_pending_catalogue_exists():
    """A line of pending.txt that names no catalogue is a typo, and would hide nothing."""
    names = {catalogue_name(path) for path in CATALOGUES}
    assert not set(PENDING_CATALOGUES) - names, f"pending.txt lists catalogues that do not exist: " \
                                                f"{sorted(set(PENDING_CATALOGUES) - names)}"


def test_every_page_of_the_book_has_a_catalogue():
    sys.path.insert(0, str(ROOT / "tests"))
    from browser_support import toc_docnames

    missing = [name for name in toc_docnames(ROOT / "_toc.yml") if not (LOCALE / "LC_MESSAGES" / f"{name}.po").is_file()]
    assert not missing, f"no catalogue for {missing}: run `make translations`"


@pytest.mark.parametrize("path", [p for p in CATALOGUES if catalogue_name(p) not in PENDING_CATALOGUES],
                         ids=catalogue_name)
def test_a_finished_catalogue_translates_every_message_and_none_is_fuzzy(path):
    """Every message with words has a translation that is not fuzzy (a fuzzy one is stale: its source
    changed since, and the edition shows the English)."""
    problems = [("fuzzy" if fuzzy else "untranslated", source[:80]) for source, target, fuzzy in entries(path)
                if needs_translation(source) and (fuzzy or not target.strip())]
    assert not problems, f"{catalogue_name(path)} (listed as finished): {problems}"


# --------------------------------------------------------------------------- markup kept

# One scan, left to right, so that a role's backquotes are not read as code nor a $ in code as math.
_MARKUP = re.compile(r"(?P<eval>\{eval\}`[^`]*`)|(?P<role>\{[\w:.-]+\}`[^`]*`)|(?P<code>``[^`]*``|`[^`]*`)"
                     r"|(?P<display>\$\$.*?\$\$)|(?P<math>\$[^$]*\$)|\]\((?P<link>[^)]*)\)"
                     r"|(?P<field>\{[a-z_]*(?:![rs])?(?::[^{}]*)?\}|%\([a-z_]+\)s)", re.DOTALL)
KINDS = {"eval": "{eval} expression", "role": "role", "code": "inline code", "display": "display math",
         "math": "inline math", "link": "link target", "field": "format field"}


def markup(text: str) -> dict[str, Counter]:
    """The markup of a message, by kind: ``{"inline math": Counter({"$d_k$": 2}), ...}``."""
    found = {kind: Counter() for kind in KINDS.values()}
    for match in _MARKUP.finditer(text):
        kind = match.lastgroup
        found[KINDS[kind]][match.group(kind)] += 1
    return found


@pytest.mark.parametrize("path", CATALOGUES, ids=catalogue_name)
def test_a_translation_keeps_every_eval_math_role_code_and_link_of_its_source(path):
    """The numbers ({eval}), formulas, cross-references, code and links of a message are not the
    translator's to change: each appears in the translation exactly as often as in the source."""
    problems = []
    for source, target in translated(path):
        kept, made = markup(source), markup(target)
        for kind in KINDS.values():
            if kind == "format field" and catalogue_name(path).startswith("book/"):
                continue  # braces in a page's prose are prose
            if kept[kind] != made[kind]:
                problems.append(f"{kind}: {source[:70]!r} has {sorted(kept[kind].elements())}, "
                                f"its translation {sorted(made[kind].elements())}")
    assert not problems, "\n".join(problems)


def test_the_markup_check_sees_a_dropped_eval_and_a_changed_formula():
    source = markup("Head 1 has {eval}`n` numbers, $d_k =$ {eval}`d`, see {doc}`notation` and `qkv`.")
    assert source["{eval} expression"] != markup("第 1 個頭有 {eval}`n` 個數。")["{eval} expression"]
    assert source["inline math"] != markup("$d_v =$")["inline math"]
    assert source["role"] == markup("見 {doc}`notation`")["role"]
    assert source["inline code"] == Counter({"`qkv`": 1})


# --------------------------------------------------------------------------- Taiwan usage


def simplified_only() -> set[str]:
    """Characters used in Simplified Chinese and never in Traditional (CC-CEDICT's lists, via zhon)."""
    from zhon import cedict

    return set(cedict.simplified) - set(cedict.traditional)


SIMPLIFIED = simplified_only()


def table(path: Path) -> list[dict]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


MAINLAND = table(LOCALE / "mainland_vocabulary.tsv")
TERMS = table(LOCALE / "terminology.tsv")


def test_the_simplified_list_knows_the_usual_suspects():
    assert {"页", "信", "码", "认", "络"} & SIMPLIFIED == {"页", "码", "认", "络"}
    assert not {"頁", "資", "訊", "碼", "網", "路", "鍵", "值", "查", "詢"} & SIMPLIFIED


@pytest.mark.parametrize("path", CATALOGUES, ids=catalogue_name)
def test_no_translation_has_a_simplified_character(path):
    found = [(source[:50], sorted(set(target) & SIMPLIFIED)) for source, target in translated(path)
             if set(target) & SIMPLIFIED]
    assert not found, f"Simplified characters in {catalogue_name(path)}: {found}"


@pytest.mark.parametrize("path", CATALOGUES, ids=catalogue_name)
def test_no_translation_uses_mainland_vocabulary(path):
    found = [(row["mainland"], row["taiwan"], target[:60]) for source, target in translated(path)
             for row in MAINLAND if row["mainland"] in target]
    assert not found, f"{catalogue_name(path)}: mainland words (mainland, Taiwan, translation): {found}"


def english_words(text: str) -> str:
    """``text`` without its code, math, roles and link targets: the words a reader reads."""
    text = re.sub(r"\{[\w:.-]+\}`[^`]*`|`[^`]*`|\$[^$]*\$|\]\([^)]*\)", " ", text)
    return text.lower()


def uses_term(text: str, english: str) -> bool:
    stem = re.escape(english.lower())
    plural = {"y": stem[:-1] + "ies", "x": stem[:-1] + "ces"}.get(english[-1], "")
    return re.search(rf"(?<![\w-])(?:{stem}(?:s|es)?{'|' + plural if plural else ''})(?![\w-])",
                     english_words(text)) is not None


@pytest.mark.parametrize("path", CATALOGUES, ids=catalogue_name)
def test_every_term_has_its_one_translation(path):
    """A message whose English uses a term of terminology.tsv is translated with that term's
    translation, and with none of the translations it avoids. (A message kept as it is, such as
    the glossary's English column, is left alone.)"""
    problems = []
    for source, target in translated(path):
        if source == target:
            continue
        for term in TERMS:
            if not uses_term(source, term["english"]):
                continue
            wanted = term["zh_TW"].split("|")
            avoided = [word for word in (term.get("avoid") or "").split(",") if word]
            if not any(word in target for word in wanted):
                problems.append(f"{term['english']!r} is {' or '.join(wanted)}: {target[:70]!r}")
            problems += [f"{term['english']!r} is not {word}: {target[:70]!r}" for word in avoided if word in target]
    assert not problems, f"{catalogue_name(path)}:\n" + "\n".join(problems)


def test_the_terminology_table_gives_each_term_once():
    english = [term["english"] for term in TERMS]
    assert len(english) == len(set(english)), [e for e, n in Counter(english).items() if n > 1]
    assert {"query": "查詢", "key": "鍵", "value": "值"}.items() <= {t["english"]: t["zh_TW"] for t in TERMS}.items()


def test_the_term_check_sees_plurals_and_not_code():
    assert uses_term("Three learned matrices turn each row into a query", "matrix")
    assert uses_term("the queries of head 1", "query")
    assert not uses_term("`qkv.project` records the steps", "project")
    assert not uses_term("$K$ and `key_mask`", "key")


@pytest.mark.parametrize("name", ["sphinx", "course", "qkv_book"])
def test_every_message_of_the_theme_the_extensions_and_the_kernels_is_in_its_catalogue(name):
    """What `make translations` would extract (locales/extract_messages.py) is all in the catalogue,
    so a new `_()` in a chapter or in qkv_book cannot reach the site untranslated."""
    sys.path.insert(0, str(ROOT / "locales"))
    import extract_messages

    template = {"sphinx": extract_messages.theme_catalogue, "course": extract_messages.course_catalogue,
                "qkv_book": extract_messages.kernel_catalogue}[name]()
    path = next(path for path in CATALOGUES if catalogue_name(path) == name)
    have = {source for source, _target in translated(path)}
    wanted = {m.id if isinstance(m.id, str) else "\n".join(m.id) for m in template if m.id}
    missing = sorted(message for message in wanted - have if needs_translation(message))
    assert not missing or name in PENDING_CATALOGUES, f"{name}: not translated (run `make translations`): {missing}"
