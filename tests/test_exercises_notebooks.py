"""The source notebooks of the problem sets keep nbgrader's and the course's conventions.

Fast checks on the committed files (no nbgrader run): no outputs, one notebook per problem
set named after it, every graded cell with a unique grade_id and its points, every test with
a docstring and a call to qkv_exercises.checking, solutions and hidden tests properly marked.
"""

from __future__ import annotations

import ast
import re

import pytest

from .exercise_support import COURSE, PROBLEM_SETS, SOURCE, cell_source, nbgrader_meta, read_notebook

NOTEBOOKS = sorted(SOURCE.glob("*/*.ipynb"))
CELLS = [(path, cell) for path in NOTEBOOKS for cell in read_notebook(path)["cells"]]
TEST_CELLS = [(p, c) for p, c in CELLS if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]


def cell_name(path, cell) -> str:
    return f"{path.parent.name}/{nbgrader_meta(cell).get('grade_id', cell.get('id'))}"


def test_one_notebook_per_problem_set_named_after_it():
    assert PROBLEM_SETS == ["ps1_qkv", "ps2_scaled_dot_product", "ps3_sqrt_dk", "ps4_single_head",
                            "ps5_multi_head", "ps6_maps"]
    assert [p.relative_to(SOURCE).as_posix() for p in NOTEBOOKS] == [f"{ps}/{ps}.ipynb" for ps in PROBLEM_SETS]


def test_the_course_config_sets_a_relative_root_and_a_time_limit():
    text = (COURSE / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))" in text
    assert re.search(r"^c\.Execute\.timeout = \d+$", text, re.M)
    assert not re.search(r"""["'](/|[A-Za-z]:\\)""", text), "no absolute path: the course folder can move"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_no_outputs_are_committed(path):
    for cell in read_notebook(path)["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, cell_name(path, cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_runs_on_the_python3_kernel(path):
    assert read_notebook(path)["metadata"]["kernelspec"]["name"] == "python3"


def test_grade_ids_are_unique_and_graded_cells_have_points():
    seen = {}
    for path, cell in CELLS:
        meta = nbgrader_meta(cell)
        if not meta:
            continue
        grade_id = meta["grade_id"]
        assert re.fullmatch(r"[a-z0-9_]+", grade_id), f"{path.parent.name}: grade_id {grade_id!r}"
        assert grade_id not in seen.get(path, set()), f"{path.parent.name}: grade_id {grade_id} twice"
        seen.setdefault(path, set()).add(grade_id)
        assert meta["schema_version"] == 3
        if meta["grade"]:
            assert isinstance(meta.get("points"), (int, float)) and meta["points"] > 0, cell_name(path, cell)
            assert meta["locked"] or meta["solution"], cell_name(path, cell)


@pytest.mark.parametrize("path, cell", TEST_CELLS, ids=[cell_name(p, c) for p, c in TEST_CELLS])
def test_each_test_has_a_docstring_and_calls_the_checks(path, cell):
    tree = ast.parse(cell_source(cell))
    docstring = ast.get_docstring(tree)
    assert docstring, f"{cell_name(path, cell)}: a test cell opens with a docstring saying what it checks"
    calls = {node.func.attr for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "check"}
    assert calls, f"{cell_name(path, cell)}: a test cell checks with qkv_exercises.checking (check.<...>)"
    assert "assert " not in cell_source(cell), f"{cell_name(path, cell)}: no bare assert, use the checks"


@pytest.mark.parametrize("path, cell", TEST_CELLS, ids=[cell_name(p, c) for p, c in TEST_CELLS])
def test_tests_type_in_no_expected_answer(path, cell):
    """A test passes the exercise's inputs to a check; it never holds a decimal the answer is compared to."""
    code = re.sub(r'"""[\s\S]*?"""', "", cell_source(cell))
    decimals = [n for n in re.findall(r"(?<![\w.])\d+\.\d+", code) if float(n) != int(float(n))]
    assert not decimals, f"{cell_name(path, cell)}: numbers typed into a test: {decimals}"


def test_solutions_and_hidden_tests_are_marked_in_the_right_cells():
    for path, cell in CELLS:
        source = cell_source(cell)
        meta = nbgrader_meta(cell)
        if "BEGIN SOLUTION" in source:
            assert meta.get("solution"), f"{cell_name(path, cell)}: a solution region outside an answer cell"
            assert source.count("### BEGIN SOLUTION") == source.count("### END SOLUTION")
        if meta.get("solution"):
            assert "### BEGIN SOLUTION" in source, f"{cell_name(path, cell)}: an answer cell without a solution"
        if "HIDDEN TESTS" in source:
            assert meta.get("grade") and not meta.get("solution"), cell_name(path, cell)
            assert source.count("### BEGIN HIDDEN TESTS") == source.count("### END HIDDEN TESTS") == 1


def test_every_problem_set_with_code_answers_has_hidden_tests():
    for ps in ("ps3_sqrt_dk", "ps4_single_head", "ps5_multi_head"):
        text = (SOURCE / ps / f"{ps}.ipynb").read_text(encoding="utf-8")
        assert "### BEGIN HIDDEN TESTS" in text, ps


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_inputs_come_from_qkv(path):
    """The first code cell imports qkv and its checks; no notebook pastes in helpers or edits sys.path."""
    cells = [c for c in read_notebook(path)["cells"] if c["cell_type"] == "code"]
    setup = cell_source(cells[0])
    assert "import qkv" in setup and "from qkv_exercises import checking as check" in setup
    assert nbgrader_meta(cells[0]).get("locked")
    everything = "\n".join(cell_source(c) for c in cells)
    assert "sys.path" not in everything
    assert "qkv.examples." in everything, "the worked examples come from qkv.examples"
