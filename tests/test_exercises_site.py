"""The Exercises page of the built website offers every released problem set as a zip.

The zips are made by the Sphinx extension ``book/_ext/problem_sets.py`` with nbgrader
generate_assignment, in a temporary copy of the course, while the book is built. The 繁體中文
edition's Exercises page offers its own zips, the same notebooks with their markdown translated,
and the English site's wheel.
"""

from __future__ import annotations

import json
import posixpath
import re
import zipfile
from pathlib import Path

import pytest

from .exercise_support import COURSE, PROBLEM_SETS, hidden_test_lines, points, solution_lines, source_notebook

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exercises_page(built_site) -> tuple[Path, str]:
    page = built_site / "book" / "exercises.html"
    assert page.is_file(), "the build has no book/exercises.html"
    return page, page.read_text(encoding="utf-8")


def test_the_page_links_every_problem_set_zip(built_site, exercises_page):
    page, text = exercises_page
    links = re.findall(r'href="([^"]+\.zip)"', text)
    # each once, in the order of their chapters (tests/test_chapter_order.py checks that order)
    assert sorted(posixpath.basename(link) for link in links) == sorted(f"{ps}.zip" for ps in PROBLEM_SETS)
    for link in links:
        target = (page.parent / link).resolve()
        assert target.is_file(), f"{link} on the Exercises page leads nowhere"
        assert target.parent == (built_site / "exercises").resolve()


def test_the_table_shows_each_problem_sets_points(exercises_page):
    _, text = exercises_page
    for ps in PROBLEM_SETS:
        row = re.search(rf"<tr[^>]*>((?:(?!</tr>).)*{ps}\.zip(?:(?!</tr>).)*)</tr>", text, re.S)
        assert row, f"no table row for {ps}"
        assert f"<p>{points(source_notebook(ps)):g}</p>" in row.group(1)


@pytest.mark.parametrize("ps", PROBLEM_SETS)
def test_each_zip_holds_the_student_version(built_site, ps):
    with zipfile.ZipFile(built_site / "exercises" / f"{ps}.zip") as archive:
        assert archive.namelist() == [f"{ps}/{ps}.ipynb"]
        text = archive.read(f"{ps}/{ps}.ipynb").decode("utf-8")
    nb = json.loads(text)
    source = source_notebook(ps)
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "SOLUTION" not in text and "HIDDEN TESTS" not in text
    assert not [line for line in solution_lines(source) if line in code]
    assert not [line for line in hidden_test_lines(source) if line in text]
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
    assert len(nb["cells"]) == len(source["cells"])


def test_the_build_leaves_the_course_folder_alone(built_site):
    """The release ran in a temporary copy: the build wrote no gradebook or release into exercises/."""
    manifest = json.loads((built_site / "exercises" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["zips"] == [f"{ps}.zip" for ps in PROBLEM_SETS]
    for made in ("release", "gradebook.db"):
        path = COURSE / made
        assert not path.exists() or path.stat().st_mtime < (built_site / "exercises" / "manifest.json").stat().st_mtime - 1


def test_the_zh_tw_page_offers_the_zh_tw_zips_and_the_same_wheel(built_site):
    """The Chinese page links its own zips, whose notebooks have the English release's code cells and
    nbgrader metadata byte for byte and say zh-TW; its install line is the English site's wheel."""
    page = built_site / "zh-TW" / "book" / "exercises.html"
    text = page.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]+\.zip)"', text)
    english_links = re.findall(r'href="([^"]+\.zip)"', (built_site / "book" / "exercises.html").read_text(encoding="utf-8"))
    # the same sets in the same (chapter) order as the English page
    assert [posixpath.basename(link) for link in links] == [posixpath.basename(link) for link in english_links]
    assert sorted(posixpath.basename(link) for link in links) == sorted(f"{ps}.zip" for ps in PROBLEM_SETS)
    assert all((page.parent / link).resolve().parent == (built_site / "zh-TW" / "exercises").resolve()
               for link in links), links
    wheel = re.search(r"pip install ([^\s<]+\.whl)", text).group(1)
    assert (page.parent / wheel).resolve().is_file() and (page.parent / wheel).resolve().parent == (
        built_site / "exercises").resolve(), wheel
    for ps in PROBLEM_SETS:
        notebooks = []
        for edition in (built_site, built_site / "zh-TW"):
            with zipfile.ZipFile(edition / "exercises" / f"{ps}.zip") as archive:
                notebooks.append(json.loads(archive.read(f"{ps}/{ps}.ipynb").decode("utf-8")))
        english, chinese = notebooks
        assert chinese["metadata"]["qkv_exercises"] == {"language": "zh-TW"}, ps
        code = [[(c["source"], c["metadata"]) for c in nb["cells"] if c["cell_type"] == "code"] for nb in notebooks]
        assert code[0] == code[1], f"{ps}: the zh-TW release's code cells differ from the English"
        assert [c["metadata"] for c in english["cells"]] == [c["metadata"] for c in chinese["cells"]], ps
    with zipfile.ZipFile(built_site / "zh-TW" / "exercises" / "ps1_qkv.zip") as archive:
        assert "# 習題 1" in archive.read("ps1_qkv/ps1_qkv.ipynb").decode("utf-8")
