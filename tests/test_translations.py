"""The 繁體中文 catalogues are complete, keep their sources' markup, and speak Taiwan's usage.

Checked on the ``.po`` files alone (no build): the pages' catalogues in ``locales/zh_TW/``, the
theme's and the extensions' there too, and the kernels' in ``src/qkv_book/locales/``. That each
page's messages all reach its catalogue is checked by the build itself (``translation_check``)
and by ``tests/test_book_editions.py``.
"""

from __future__ import annotations

import csv
import functools
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
# Where each kind of catalogue lives, and the prefix of its name (as pending.txt writes it): the pages',
# the theme's and the extensions' (book/<page>, sphinx, course), the kernels' (qkv_book), the checks'
# (qkv_exercises), and each problem set's markdown (exercises/<problem set>).
CATALOGUE_FOLDERS = {"": LOCALE / "LC_MESSAGES",
                     "qkv_book/": ROOT / "src" / "qkv_book" / "locales" / "zh_TW" / "LC_MESSAGES",
                     "qkv_exercises/": ROOT / "src" / "qkv_exercises" / "locales" / "zh_TW" / "LC_MESSAGES",
                     "exercises/": ROOT / "exercises" / "locales" / "zh_TW" / "LC_MESSAGES"}
PENDING_CATALOGUES = read_pending(LOCALE / PENDING)


def catalogue_name(path: Path) -> str:
    """``book/qkv_roles`` for ``locales/zh_TW/LC_MESSAGES/book/qkv_roles.po``; ``qkv_book`` for the kernels';
    ``exercises/ps1_qkv`` for ``exercises/locales/zh_TW/LC_MESSAGES/ps1_qkv.po``."""
    for prefix, folder in CATALOGUE_FOLDERS.items():
        if folder in path.parents:
            name = path.relative_to(folder).with_suffix("").as_posix()
            return name if prefix in ("", f"{name}/") else prefix + name
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


def written_alt_texts(chapter: Path) -> list[str]:
    """The alt texts that a chapter's code cells give their figures (``mystnb: image: alt:``)."""
    import yaml

    found = []
    for options in re.findall(r"^```\{code-cell\}[^\n]*\n---\n(.*?)\n---\n", chapter.read_text(encoding="utf-8"),
                              re.DOTALL | re.MULTILINE):
        image = (yaml.safe_load(options).get("mystnb") or {}).get("image") or {}
        if image.get("alt"):
            found.append(image["alt"])
    return found


def test_every_alt_text_a_cell_gives_its_figure_is_in_the_pages_catalogue():
    """A figure's alt text is read aloud in the reader's language: the catalogues must hold it (the
    gettext builder sees a figure only if it is told to prefer the image to its text)."""
    missing = {}
    for chapter in sorted((ROOT / "book").glob("*.md")):
        catalogue = LOCALE / "LC_MESSAGES" / "book" / f"{chapter.stem}.po"
        messages = {source for source, _target, _fuzzy in entries(catalogue)} if catalogue.is_file() else set()
        lost = [alt[:60] for alt in written_alt_texts(chapter) if alt not in messages]
        if lost:
            missing[chapter.stem] = lost
    assert sum(len(written_alt_texts(c)) for c in (ROOT / "book").glob("*.md")) > 0
    assert not missing, f"alt texts not in their page's catalogue (run `make translations`): {missing}"


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
# A reST role, as the reference page's docstrings write them: :func:`qkv.softmax`, :math:`e^x`.
_REST_ROLE = re.compile(r"(?<![\w`{]):([a-z]+(?::[a-z]+)?):`")


def markup(text: str) -> dict[str, Counter]:
    """The markup of a message, by kind: ``{"inline math": Counter({"$d_k$": 2}), ...}``.

    A role's title is prose, and is translated: a role counts by its name and target, so
    ``{doc}`why √d_k chapter <why_sqrt_dk>``` counts as ``{doc}`<why_sqrt_dk>```."""
    found = {kind: Counter() for kind in KINDS.values()}
    text = _REST_ROLE.sub(r"{\1}`", text)  # a docstring's :func:`x` is translated as MyST's {func}`x`
    for match in _MARKUP.finditer(text):
        kind = match.lastgroup
        kept = match.group(kind)
        if kind == "role":
            kept = re.sub(r"`[^`<]*<([^<>`]*)>`$", r"`<\1>`", kept)
        found[KINDS[kind]][kept] += 1
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
            if kind == "format field" and set(kept[kind]) == set(made[kind]):
                continue  # a field may be named more or less often (plural forms: one in Chinese)
            if kept[kind] != made[kind]:
                problems.append(f"{kind}: {source[:70]!r} has {sorted(kept[kind].elements())}, "
                                f"its translation {sorted(made[kind].elements())}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", [p for p in CATALOGUES if catalogue_name(p).startswith("book/")], ids=catalogue_name)
def test_a_pages_translation_writes_its_roles_as_myst_does(path):
    """Sphinx parses a translation with its page's parser, and every page is MyST: a docstring's
    :func:`qkv.softmax` (reST) is written {func}`qkv.softmax` in its translation, or the reader
    sees ":func:" and no link."""
    found = [(source[:50], _REST_ROLE.findall(target)) for source, target in translated(path)
             if _REST_ROLE.search(target)]
    assert not found, f"{catalogue_name(path)}: reST roles in translations, write {{func}}`x`: {found}"


def test_the_markup_check_sees_a_dropped_eval_and_a_changed_formula():
    source = markup("Head 1 has {eval}`n` numbers, $d_k =$ {eval}`d`, see {doc}`notation` and `qkv`.")
    assert source["{eval} expression"] != markup("第 1 個頭有 {eval}`n` 個數。")["{eval} expression"]
    assert source["inline math"] != markup("$d_v =$")["inline math"]
    assert source["role"] == markup("見 {doc}`notation`")["role"]
    titled = markup("the {doc}`why √d_k chapter <why_sqrt_dk>`")["role"]
    assert titled == markup("{doc}`為什麼除以 √d_k 那一章 <why_sqrt_dk>`")["role"]
    assert titled != markup("{doc}`為什麼除以 √d_k 那一章 <notation>`")["role"]
    assert source["inline code"] == Counter({"`qkv`": 1})
    docstring = markup("Inverse of :func:`split_heads`, with :math:`e^x`.")["role"]
    assert docstring == markup("{func}`split_heads` 的逆運算，含 {math}`e^x`。")["role"]
    assert docstring != markup("{func}`merge_heads` 的逆運算，含 {math}`e^x`。")["role"]


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
    """``text`` without its code, math, roles, link targets and format fields (``{value}``): the words a
    reader reads."""
    # MyST and reST roles ({doc}`x`, :data:`x`), code (``literal`` too), math, link targets, fields
    text = re.sub(r"\{[\w:.-]+\}`[^`]*`|:[\w:.-]+:`[^`]*`|``[^`]*``|`[^`]*`|\$[^$]*\$|\]\([^)]*\)|\{[a-z_]+\}",
                  " ", text)
    return text.lower()


def term_pattern(english: str) -> str:
    stem = re.escape(english.lower())
    plural = {"y": stem[:-1] + "ies", "x": stem[:-1] + "ces"}.get(english[-1], "")
    return rf"(?<![\w-])(?:{stem}(?:s|es)?{'|' + plural if plural else ''})(?![\w-])"


def uses_term(text: str, english: str, longer=()) -> bool:
    """Whether ``text`` uses the term ``english`` outside the ``longer`` terms that contain it (the
    "code" of "exit code" is that term's)."""
    words = english_words(text)
    for other in longer:
        words = re.sub(term_pattern(other), " ", words)
    return re.search(term_pattern(english), words) is not None


@functools.lru_cache(maxsize=None)
def longer_terms(english: str) -> tuple[str, ...]:
    """The terms of the table that contain ``english`` as a word ("exit code" for "code")."""
    return tuple(t["english"] for t in TERMS if t["english"] != english and uses_term(t["english"], english))


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
            english = term["english"]
            if not (uses_term(source, english) and uses_term(source, english, longer_terms(english))):
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
    first_sense = {t["english"]: t["zh_TW"].split("|")[0] for t in TERMS}  # key: 鍵 in attention, 金鑰 in grading
    assert {"query": "查詢", "key": "鍵", "value": "值"}.items() <= first_sense.items()


def test_the_term_check_sees_plurals_and_not_code():
    assert uses_term("Three learned matrices turn each row into a query", "matrix")
    assert uses_term("the queries of head 1", "query")
    assert not uses_term("`qkv.project` records the steps", "project")
    assert not uses_term("$K$ and `key_mask`", "key")
    assert not uses_term("when ``mask`` is not boolean (a docstring's literal)", "mask")
    assert not uses_term("one of :data:`HEAD_PATTERNS`", "data")
    assert not uses_term("the process ended (exit code 1)", "code", longer_terms("code"))
    assert uses_term("the process ended (exit code 1) in code cell 2", "code", longer_terms("code"))


def extract_messages():
    sys.path.insert(0, str(ROOT / "locales"))
    import extract_messages

    return extract_messages


@pytest.mark.parametrize("name", ["sphinx", "course", "qkv_book", "qkv_exercises"])
def test_every_message_of_the_theme_the_extensions_the_kernels_and_the_checks_is_in_its_catalogue(name):
    """What `make translations` would extract (locales/extract_messages.py) is all in the catalogue,
    so a new `_()` in a chapter, in qkv_book or in a problem set's checks cannot reach the site or a
    student untranslated."""
    found = extract_messages()
    template = {"sphinx": found.theme_catalogue, "course": found.course_catalogue,
                "qkv_book": found.kernel_catalogue, "qkv_exercises": found.exercises_catalogue}[name]()
    path = next(path for path in CATALOGUES if catalogue_name(path) == name)
    have = {source for source, _target in translated(path)}
    wanted = {m.id if isinstance(m.id, str) else "\n".join(m.id) for m in template if m.id}
    missing = sorted(message for message in wanted - have if needs_translation(message))
    assert not missing or name in PENDING_CATALOGUES, f"{name}: not translated (run `make translations`): {missing}"


def test_a_problem_sets_catalogue_holds_every_block_of_its_markdown():
    """A problem set's catalogue holds every block of the set's markdown (a finished one translates
    each; the build checks that too). A set without a catalogue yet, one just added, is released with
    its English markdown until `make translations` makes one, and is named here."""
    problems, without = [], []
    for name, template in extract_messages().problem_set_catalogues().items():
        path = CATALOGUE_FOLDERS["exercises/"] / f"{name}.po"
        if not path.is_file():
            without.append(name)
            continue
        have = {source for source, _target, _fuzzy in entries(path)}
        missing = [m.id[:60] for m in template if m.id and m.id not in have]
        if missing:
            problems.append(f"exercises/{name}: not in its catalogue (run `make translations`): {missing}")
    assert not problems, "\n".join(problems)
    assert len(without) < len(extract_messages().problem_set_catalogues()), "no problem set has a catalogue"
