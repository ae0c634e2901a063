"""Sphinx extension: the chapters' order, as ``_toc.yml`` gives it, and the lists that must follow it.

The "Learn" part of ``_toc.yml`` is the order in which a reader meets the chapters (the sidebar).
Two pages list chapters in prose, with a line each, and the build checks both against it when
it reads them:

- the home page's reading list, the section labelled ``(reading-list)=`` in ``book/index.md``:
  one item per Learn chapter, in the sidebar's order, each opening with a link to its chapter
  and numbered by the chapter's place;
- the Exercises page's list of problem sets, the section labelled ``(problem-set-list)=``: one
  item per chapter that has a problem set, in the same order.

A chapter's problem set is the one its closing ``**Practise:**`` paragraph names (for example
``(`ps2_scaled_dot_product`)``). :func:`practised_problem_sets` reads them from the chapters'
sources; ``problem_sets.py`` orders the downloads table by them, a set shared by several chapters
at the first of them. Every Learn chapter after the first (the notation page) ends with such a
paragraph, as the home page says; one that names no set yet (a set still being written) is
listed nowhere, and every problem set of the course must be named by a chapter.

A list that does not match is a warning that names the chapter missing, extra or out of place;
``make site`` turns warnings into errors, so the lists cannot go stale.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util import docname_join

LEARN_CAPTION = "Learn"
READING_LIST = "reading-list"  # the label of the home page's section
PROBLEM_SET_LIST = "problem-set-list"  # the label of the Exercises page's section
PRACTISE = re.compile(r"\*\*Practise:\*\*(.*?)(?:\n\s*\n|\Z)", flags=re.S)
PROBLEM_SET_NAME = re.compile(r"`(ps\d+_\w+)`")

logger = logging.getLogger(__name__)


def learn_chapters(env) -> list[str]:
    """The docnames of the "Learn" part of the table of contents, in reading order."""
    site_map = env.external_site_map
    for tree in site_map.root.subtrees:
        if tree.caption == LEARN_CAPTION:
            return list(tree.files())
    raise ValueError(f"_toc.yml has no part with the caption {LEARN_CAPTION!r}")


NO_PRACTISE = object()  # a chapter without a **Practise:** paragraph


def practised_problem_set(source: str):
    """The problem set a chapter's ``**Practise:**`` paragraph names; None if the paragraph names none
    yet, :data:`NO_PRACTISE` if the chapter has no such paragraph.

    Raises ``ValueError`` when the paragraph names more than one problem set.
    """
    paragraphs = PRACTISE.findall(source)
    if not paragraphs:
        return NO_PRACTISE
    names = list(dict.fromkeys(name for paragraph in paragraphs for name in PROBLEM_SET_NAME.findall(paragraph)))
    if len(names) > 1:
        raise ValueError(f"its **Practise:** paragraph names {len(names)} problem sets ({', '.join(names)}); "
                         "it names one, as (`ps1_qkv`)")
    return names[0] if names else None


def practised_problem_sets(env) -> dict[str, str]:
    """``{problem set: the first chapter that practises it}``, in reading order.

    Raises ``ValueError`` for a Learn chapter after the first that has no **Practise:** paragraph.
    """
    found: dict[str, str] = {}
    for place, docname in enumerate(learn_chapters(env)):
        try:
            name = practised_problem_set(Path(env.doc2path(docname)).read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{docname}: {error}") from None
        if name is NO_PRACTISE:
            if place > 0:
                raise ValueError(f"{docname} has no **Practise:** paragraph; every Learn chapter after the "
                                 "first ends with one (the home page says so)")
            continue
        if name is not None:
            found.setdefault(name, docname)
    return found


def list_chapters(section: nodes.section, docname: str) -> list[tuple[str, int | None]]:
    """``(chapter, its number)`` for each item of the numbered or bulleted lists of ``section``:
    the first document an item links to, and the item's number (None in a bulleted list)."""
    found = []
    for listing in section.findall(lambda node: isinstance(node, (nodes.enumerated_list, nodes.bullet_list))):
        start = int(listing.get("start", 1)) if isinstance(listing, nodes.enumerated_list) else None
        for index, item in enumerate(child for child in listing.children if isinstance(child, nodes.list_item)):
            links = [ref for ref in item.findall(addnodes.pending_xref) if ref.get("reftype") in ("doc", "myst")]
            if not links:
                found.append(("", None if start is None else start + index))
                continue
            target = links[0]["reftarget"]
            chapter = target.lstrip("/") if target.startswith("/") else docname_join(docname, target)
            found.append((chapter.removesuffix(".md"), None if start is None else start + index))
    return found


def labelled_section(doctree, label: str) -> nodes.section | None:
    for section in doctree.findall(nodes.section):
        if label in section["ids"] or label in section["names"]:
            return section
    return None


def list_problems(listed: list[tuple[str, int | None]], expected: list[str], *, numbered: bool) -> list[str]:
    """What is wrong with a list of chapters ``listed`` that should be ``expected``, in order."""
    chapters = [chapter for chapter, _ in listed]
    problems = [f"{chapter} is missing" for chapter in expected if chapter not in chapters]
    problems += [f"{chapter or 'an item without a chapter link'} is not expected here"
                 for chapter in chapters if chapter not in expected]
    problems += [f"{chapter} is listed {chapters.count(chapter)} times" for chapter in dict.fromkeys(chapters)
                 if chapters.count(chapter) > 1]
    if not problems and chapters != expected:
        first = next(i for i, (a, b) in enumerate(zip(chapters, expected)) if a != b)
        problems.append(f"item {first + 1} is {chapters[first]}, but the sidebar has {expected[first]} there")
    if numbered and not problems:
        problems += [f"{chapter} is numbered {number}, but it is chapter {place}"
                     for place, (chapter, number) in enumerate(listed, start=1) if number != place]
    return problems


def check_lists(app, doctree) -> None:
    """On reading the home page or the Exercises page, compare its chapter list with the sidebar's order."""
    env = app.env
    docname = env.docname
    checks = []
    if docname == env.config.root_doc:
        checks.append((READING_LIST, learn_chapters(env), True, "the home page's reading list"))
    section = labelled_section(doctree, PROBLEM_SET_LIST)
    if section is not None:
        try:
            with_sets = list(practised_problem_sets(env).values())
        except ValueError as error:
            logger.warning(f"the chapters' problem sets: {error}", location=docname)
            return
        checks.append((PROBLEM_SET_LIST, with_sets, False, "the Exercises page's list of problem sets"))
    for label, expected, numbered, what in checks:
        section = labelled_section(doctree, label)
        if section is None:
            logger.warning(f"{what}: no section labelled ({label})= on this page", location=docname)
            continue
        problems = list_problems(list_chapters(section, docname), expected, numbered=numbered)
        if problems:
            logger.warning(f"{what} does not follow the Learn part of _toc.yml: " + "; ".join(problems)
                           + f". The sidebar's order is {', '.join(expected)}.", location=docname)


def setup(app):
    app.connect("doctree-read", check_lists)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
