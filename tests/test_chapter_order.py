"""The chapters' order is the sidebar's (the Learn part of _toc.yml), and the home page's reading list and
the Exercises page's problem sets follow it: the build's check (book/_ext/chapter_order.py) finds a list
that does not, and the built pages do.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from docutils import nodes
from sphinx import addnodes

from qkv_grading.pipeline import Course

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import chapter_order  # noqa: E402  (a Sphinx extension of the book, in book/_ext)


def learn_chapters() -> list[str]:
    """The Learn part of _toc.yml, read here with yaml (the extension reads Sphinx's site map)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    (learn,) = [part for part in toc["parts"] if part["caption"] == "Learn"]
    return [entry["file"] for entry in learn["chapters"]]


def section_with_list(items: list[str], *, start: int | None = 1) -> nodes.section:
    """A section holding one list, each item opening with a {doc} link to ``items[i]`` (as MyST reads it)."""
    section = nodes.section(ids=["reading-list"], names=["reading-list"])
    listing = nodes.enumerated_list(start=start) if start is not None else nodes.bullet_list()
    for target in items:
        reference = addnodes.pending_xref("", nodes.inline("", target), reftype="doc", refdomain="std",
                                          reftarget=target)
        listing += nodes.list_item("", nodes.paragraph("", "", reference, nodes.Text(": what it teaches")))
    section += listing
    return section


def test_a_list_in_the_sidebars_order_has_no_problem():
    listed = chapter_order.list_chapters(section_with_list(["notation", "qkv_roles"]), "book/index")
    assert listed == [("book/notation", 1), ("book/qkv_roles", 2)]
    assert chapter_order.list_problems(listed, ["book/notation", "book/qkv_roles"], numbered=True) == []


@pytest.mark.parametrize("items, start, expected", [
    (["notation"], 1, "book/qkv_roles is missing"),
    (["notation", "qkv_roles", "soft_lookup"], 1, "book/soft_lookup is not expected here"),
    (["qkv_roles", "notation"], 1, "item 1 is book/qkv_roles, but the sidebar has book/notation there"),
    (["notation", "qkv_roles"], 2, "book/notation is numbered 2, but it is chapter 1"),
    (["notation", "notation", "qkv_roles"], 1, "book/notation is listed 2 times"),
])
def test_a_list_that_strays_from_the_sidebar_is_named_for_what_is_wrong(items, start, expected):
    listed = chapter_order.list_chapters(section_with_list(items, start=start), "book/index")
    problems = chapter_order.list_problems(listed, ["book/notation", "book/qkv_roles"], numbered=True)
    assert any(expected == problem for problem in problems), problems


def test_a_chapter_names_its_problem_set_in_its_practise_paragraph():
    source = "## Summary\n\n- a point\n\n**Practise:** problem set 2 (`ps2_scaled_dot_product`), by hand.\n"
    assert chapter_order.practised_problem_set(source) == "ps2_scaled_dot_product"
    assert chapter_order.practised_problem_set("**Practise:** problem set 13, still being written.\n") is None
    assert chapter_order.practised_problem_set("# Notation\n\nNo exercises here.\n") is chapter_order.NO_PRACTISE
    with pytest.raises(ValueError, match="names 2 problem sets"):
        chapter_order.practised_problem_set("**Practise:** (`ps1_qkv`) and (`ps2_scaled_dot_product`).\n")


def practised_in_sources() -> dict[str, str]:
    """``{problem set: its first chapter}``, read here from the chapters' sources in the sidebar's order."""
    practised = {}
    for place, chapter in enumerate(learn_chapters()):
        name = chapter_order.practised_problem_set((ROOT / f"{chapter}.md").read_text(encoding="utf-8"))
        assert (name is chapter_order.NO_PRACTISE) == (place == 0), f"{chapter}: practises {name!r}"
        if isinstance(name, str):
            practised.setdefault(name, chapter)
    return practised


def test_every_chapter_after_the_first_ends_with_practise_and_every_set_has_its_chapter():
    """What the home page promises and the downloads table's order relies on, read from the sources."""
    assert sorted(practised_in_sources()) == sorted(Course(ROOT / "exercises").problem_sets())


def internal_links(html: str) -> list[str]:
    return [href.split("#")[0].removesuffix(".html")
            for href in re.findall(r'<a class="reference internal" href="([^"]+)"', html)]


@pytest.mark.slow
def test_the_home_page_lists_every_chapter_in_the_sidebars_order(built_site):
    html = (built_site / "book" / "index.html").read_text(encoding="utf-8")
    section = re.search(r'<section id="how-to-read-it">(.*?)</section>', html, flags=re.S)
    assert section, "the home page has no section 'How to read it'"
    items = re.findall(r"<li>(.*?)</li>", section.group(1), flags=re.S)
    firsts = [internal_links(item)[0] for item in items]
    assert [f"book/{name}" for name in firsts] == learn_chapters()


@pytest.mark.slow
def test_the_downloads_table_lists_the_problem_sets_in_the_order_of_their_chapters(built_site):
    html = (built_site / "book" / "exercises.html").read_text(encoding="utf-8")
    table = re.search(r'<table class="[^"]*problem-sets.*?</table>', html, flags=re.S)
    assert table, "the Exercises page has no downloads table"
    listed = re.findall(r"exercises/(ps\d+_\w+)\.zip", table.group(0))
    assert list(dict.fromkeys(listed)) == list(practised_in_sources())
