"""The chapters' sources, read as a reader of the website and of JupyterLab would meet them.

Every chapter of the table of contents that is a notebook is checked, so chapters added later are
held to the same rules:

- display plumbing (calls into ``qkv_book.display``, figures from ``qkv_book.plots`` and
  ``qkv_book.model_plots``) has its input hidden on the website, while the ``qkv`` calls and the
  numbers stay visible;
- the prose shows numbers with ``{eval}`` and code with ``show_source(...)``: JupyterLab's MyST
  renderer (jupyterlab-myst) evaluates ``{eval}`` but shows a ``{glue}`` role as its bare key and
  drops a ``{literalinclude}``;
- every chapter of the "Learn" part ends with a summary that names its problem set and, once
  that problem set is in ``exercises/source/``, links to the Exercises page that offers it;
- random projections are drawn the way a layer's weights are before training (``qkv.lecun_normal``).
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
import yaml

from .browser_support import toc_docnames

ROOT = Path(__file__).resolve().parents[1]
HIDDEN_INPUT = {"remove-input", "remove-cell", "hide-input"}


def notebook_chapters() -> list[Path]:
    """The table of contents' pages that are MyST notebooks (they have a kernel)."""
    chapters = []
    for page in toc_docnames(ROOT / "_toc.yml"):
        source = ROOT / f"{page}.md"
        if source.is_file() and "kernelspec:" in source.read_text(encoding="utf-8").split("\n---", 1)[0]:
            chapters.append(source)
    return chapters


def learn_chapters() -> list[Path]:
    """The notebook chapters listed under the "Learn" caption of ``_toc.yml``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names = [entry["file"] for part in toc.get("parts", []) if part.get("caption") == "Learn"
             for entry in part.get("chapters", []) if "file" in entry]
    return [source for source in notebook_chapters() if str(source.relative_to(ROOT).with_suffix("")) in names]


CHAPTERS = notebook_chapters()
LEARN = learn_chapters()


def test_the_chapters_are_found():
    """The lists below are not empty (or every check would pass on nothing)."""
    names = {source.stem for source in CHAPTERS}
    assert {"qkv_roles", "single_head", "attention_maps"} <= names, names
    assert {source.stem for source in LEARN} >= {"qkv_roles", "multi_head"}, LEARN


def display_names(notebook) -> set[str]:
    """The names a notebook imports from qkv_book.display, plus display() and the module names."""
    names = {"display", "qkv_book.display", "qkv_book.plots", "qkv_book.model_plots"}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            for imported in re.findall(r"from qkv_book\.display import ([\w, ]+)", cell.source):
                names.update(name.strip() for name in imported.split(","))
    return names


def plumbing_calls(source: str, names: set[str]) -> list[str]:
    calls = []
    for name in sorted(names):
        if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", source) or (
            "." in name and re.search(rf"(?<![\w.]){re.escape(name)}\.\w+\s*\(", source)
        ):
            calls.append(name)
    return calls


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_display_plumbing_is_hidden_on_the_website(source):
    """A cell that calls into qkv_book.display or qkv_book.plots has its input removed on the page."""
    notebook = jupytext.read(source)
    names = display_names(notebook)
    shown = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        calls = plumbing_calls(cell.source, names)
        if calls and not tags & HIDDEN_INPUT:
            first_line = cell.source.strip().splitlines()[0]
            shown.append(f"cell {index} ({first_line!r}) calls {calls} but is not tagged remove-input")
    assert not shown, f"{source.name}:\n  " + "\n  ".join(shown)


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_prose_and_code_render_in_jupyterlab_too(source):
    text = source.read_text(encoding="utf-8")
    problems = []
    for role in sorted(set(re.findall(r"\{glue(?::\w+)?\}`[^`]*`", text))):
        problems.append(f"{role}: JupyterLab shows a glue role as its key; write {{eval}}`...` instead")
    for include in re.findall(r"```\{literalinclude\}[^\n]*", text):
        problems.append(f"{include}: JupyterLab drops it; show the code with show_source(...) instead")
    assert not problems, f"{source.name}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("source", LEARN, ids=lambda p: p.stem)
def test_every_chapter_ends_with_a_summary_and_its_problem_set(source):
    text = source.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)
    last = sections[-1] if len(sections) > 1 else ""
    assert last.startswith("Summary"), f"{source.name}: the last section is {last.splitlines()[0]!r}, not a Summary"
    links = bool(re.search(r"\]\(exercises\.md\)|\{doc\}`[^`]*exercises>?`", last))
    named = re.findall(r"`(ps\d+_\w+)`", last)
    titled = re.findall(r"Problem set (\d+): ", last)
    assert named or titled, (f"{source.name}: the summary does not name its problem set "
                             "(for example `ps1_qkv`, or by its title: \"Problem set 7: ...\")")
    for problem_set in named:
        assert (ROOT / "exercises" / "source" / problem_set).is_dir(), \
            f"{source.name}: the summary names {problem_set}, which is not in exercises/source/"
        assert links, f"{source.name}: the summary names {problem_set} but does not link to the Exercises page"
    for number in titled:
        # A problem set named by its title only may be still unwritten; once it is written,
        # the chapter names its folder and sends the reader to the page that offers it.
        written = sorted(path.name for path in (ROOT / "exercises" / "source").glob(f"ps{number}_*"))
        for problem_set in written:
            assert f"`{problem_set}`" in last and links, (
                f"{source.name}: problem set {number} is now exercises/source/{problem_set}; "
                f"name `{problem_set}` in the summary and link to the Exercises page")


def test_random_heads_are_initialised_like_a_layer_before_training():
    """Chapters that draw random projections use qkv.lecun_normal, so their maps agree."""
    drawn = []
    for source in CHAPTERS:
        for cell in jupytext.read(source).cells:
            if cell.cell_type == "code" and re.search(r"\bW_\w*\s*(?:,\s*W_\w*\s*)*=.*standard_normal", cell.source):
                drawn.append(source.name)
    assert not drawn, f"chapters that draw W from standard_normal instead of qkv.lecun_normal: {drawn}"
    users = {source.stem for source in CHAPTERS if "qkv.lecun_normal(" in source.read_text(encoding="utf-8")}
    assert {"single_head", "attention_maps"} <= users, users
