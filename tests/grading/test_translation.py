"""A problem set's other editions differ from its source in their markdown only.

Every problem set of the course (one added later included) is translated from its own source
notebook: the code cells and every cell's metadata stay byte for byte (so one gradebook grades
every language), the markdown takes each block's translation from the catalogue (a fuzzy or
missing one stays English), and the notebook's metadata names its language, which the checks
then speak (:func:`qkv_exercises.language.notebook_language`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from qkv_exercises.language import metadata_language, notebook_language
from qkv_exercises.problem_sets import names
from qkv_grading.translation import blocks, markdown_messages, translated_notebook

COURSE = Path(__file__).resolve().parents[2] / "exercises"


def source(problem_set: str) -> dict:
    return json.loads((COURSE / "source" / problem_set / f"{problem_set}.ipynb").read_text(encoding="utf-8"))


def without_markdown(notebook: dict) -> list:
    return [cell if cell["cell_type"] != "markdown" else {**cell, "source": None} for cell in notebook["cells"]]


@pytest.mark.parametrize("problem_set", names())
def test_the_zh_tw_notebook_has_the_sources_code_cells_and_metadata_byte_for_byte(problem_set):
    english = source(problem_set)
    chinese = translated_notebook(english, COURSE, problem_set, "zh-TW")
    assert json.dumps(without_markdown(chinese)) == json.dumps(without_markdown(english))
    assert metadata_language(chinese["metadata"]) == "zh-TW"
    assert {k: v for k, v in chinese["metadata"].items() if k != "qkv_exercises"} == english["metadata"]


def test_a_block_takes_its_translation_and_a_fuzzy_or_missing_one_stays_english(tmp_path):
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# Scores\n\nCompute $S = Q K^T$ "
                           "by hand.\n\nEach row is a query.\n\nNo translation here."}], "metadata": {}}
    found = markdown_messages(notebook)
    assert found == ["# Scores", "Compute $S = Q K^T$ by hand.", "Each row is a query.", "No translation here."]
    catalogue = Catalog(locale="zh_TW")
    catalogue.add("# Scores", "# 分數")
    catalogue.add("Compute $S = Q K^T$ by hand.", "手算 $S = Q K^T$。")
    catalogue.add("Each row is a query.", "每一列是一個查詢。", flags=["fuzzy"])
    path = tmp_path / "locales" / "zh_TW" / "LC_MESSAGES" / "ps_demo.po"
    path.parent.mkdir(parents=True)
    with path.open("wb") as po:
        write_po(po, catalogue)
    chinese = translated_notebook(notebook, tmp_path, "ps_demo", "zh-TW")
    assert chinese["cells"][0]["source"] == ("# 分數\n\n手算 $S = Q K^T$。\n\nEach row is a query.\n\n"
                                             "No translation here.")
    assert "".join(blocks(notebook["cells"][0]["source"])) == notebook["cells"][0]["source"]


def test_a_notebook_speaks_what_its_first_cell_says_else_its_metadata_else_english(tmp_path):
    path = tmp_path / "ps_demo.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {"qkv_exercises": {"language": "zh-TW"}}}), encoding="utf-8")
    environ = {"JPY_SESSION_NAME": str(path)}
    assert notebook_language("ps_demo", "", environ) == "zh-TW"
    assert notebook_language("ps_demo", "en", environ) == "en"
    assert notebook_language("ps_demo", "", {}) == "en"  # the working folder has no ps_demo.ipynb
    with pytest.raises(ValueError, match="LANGUAGE"):
        notebook_language("ps_demo", 3, environ)
    assert metadata_language({"qkv_exercises": {"language": "klingon"}}) is None
    assert metadata_language({"qkv_exercises": "zh-TW"}) is None
