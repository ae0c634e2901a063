"""The source notebooks of the problem sets keep nbgrader's conventions and the exercise loop's contract.

Fast checks on the committed files (no nbgrader run): no outputs; one notebook per problem
set named after it; a student-id cell, then a set-up cell that starts the problem set and only
shows its givens; every answer cell with a solution; every test cell a docstring and exactly
``ps.check("<grade_id>", <answer>)`` (hidden ones inside the hidden-test markers); the summary
last; and the notebook's graded cells, answers and points the same as its problem set's checks.
"""

from __future__ import annotations

import ast
import json
import re

import numpy as np
import pytest

from qkv import Head
from qkv_exercises.answers import decode, encode
from qkv_exercises.identity import student_variant
from qkv_exercises.notebook import Session
from qkv_exercises.problem_sets import get_problem_set, names, order

from .exercise_support import COURSE, PROBLEM_SETS, SOURCE, cell_source, nbgrader_meta, read_notebook

NOTEBOOKS = sorted(SOURCE.glob("*/*.ipynb"), key=lambda path: order(path.parent.name))
CELLS = [(path, cell) for path in NOTEBOOKS for cell in read_notebook(path)["cells"]]
TEST_CELLS = [(p, c) for p, c in CELLS if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*)\n### END HIDDEN TESTS", re.S)


def cell_name(path, cell) -> str:
    return f"{path.parent.name}/{nbgrader_meta(cell).get('grade_id', cell.get('id'))}"


def code_cells(path) -> list[dict]:
    return [c for c in read_notebook(path)["cells"] if c["cell_type"] == "code"]


def test_one_notebook_per_problem_set_named_after_it():
    assert PROBLEM_SETS == ["ps1_qkv", "ps2_scaled_dot_product", "ps3_sqrt_dk", "ps4_single_head",
                            "ps5_multi_head", "ps6_maps", "ps7_masks", "ps8_position", "ps9_block",
                            "ps10_online_softmax", "ps11_soft_lookup", "ps12_trained_model", "ps13_inference",
                            "ps14_training"]
    assert [p.relative_to(SOURCE).as_posix() for p in NOTEBOOKS] == [f"{ps}/{ps}.ipynb" for ps in PROBLEM_SETS]
    assert names() == PROBLEM_SETS, "each problem set has its module in qkv_exercises.problem_sets"


def test_the_course_config_sets_a_relative_root_and_a_time_limit():
    text = (COURSE / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))" in text
    assert re.search(r"^c\.Execute\.timeout = \d+$", text, re.M)
    assert not re.search(r"""["'](/|[A-Za-z]:\\)""", text), "no absolute path: the course folder can move"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_no_outputs_are_committed(path):
    for cell in code_cells(path):
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
            assert meta["locked"] and not meta["solution"], cell_name(path, cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_the_notebook_opens_with_its_story_then_the_student_id_then_the_set_up(path):
    ps = path.parent.name
    cells = read_notebook(path)["cells"]
    intro = cell_source(cells[0])
    assert cells[0]["cell_type"] == "markdown" and intro.startswith("# Problem set")
    for promise in ("**Your own numbers.**", "`PRACTICE = 0` gives the book's own", "not `qkv`",
                    "Each problem set draws its own numbers",
                    "It never prints the value expected", "Restart Kernel and Run All Cells"):
        assert promise in intro, f"{ps}: the introduction does not say {promise!r}"
    student = cells[1]
    assert student["metadata"] == {"tags": ["student-id"]} and "nbgrader" not in student["metadata"]
    assert re.search(r'^STUDENT_ID = ""', cell_source(student), re.M)
    assert re.search(r"^PRACTICE = 1\b", cell_source(student), re.M)
    assert re.search(r'^LANGUAGE = ""', cell_source(student), re.M)  # "": the language of the download
    setup = cells[2]
    assert nbgrader_meta(setup) == {"schema_version": 3, "grade_id": "setup", "task": False, "grade": False,
                                    "solution": False, "locked": True}
    assert "from qkv_exercises import start\n" in cell_source(setup)
    assert f'ps = start("{ps}", STUDENT_ID, PRACTICE, LANGUAGE)' in cell_source(setup)


PART = re.compile(r"\*\*[a-z]\.\*\*")
BY_ROOT_2 = re.compile(r"/\s*\\sqrt\s*\{?2\b")
BY_ROOT_D_K = re.compile(r"/\s*\\sqrt\{d_k\}")
D_K_IS_2 = re.compile(r"d_k\s*=\s*2\b")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_a_part_that_divides_by_the_root_of_2_gives_it(path):
    """The Exercises page promises that where d_k has no whole square root the notebook gives
    sqrt 2 = 1.414214: every part that divides by sqrt 2, or by sqrt(d_k) in a section where d_k = 2,
    says so itself, for a student working it by hand."""
    section_d_k_is_2, missing = False, []
    for cell in read_notebook(path)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = cell_source(cell)
        if text.startswith("#"):
            section_d_k_is_2 = False
        section_d_k_is_2 = section_d_k_is_2 or bool(D_K_IS_2.search(text))
        divides = BY_ROOT_2.search(text) or (BY_ROOT_D_K.search(text) and section_d_k_is_2)
        if PART.match(text) and divides and "1.414214" not in text:
            missing.append(text[:80])
    assert not missing, f"{path.parent.name}: parts that divide by sqrt 2 without giving 1.414214: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_no_cell_imports_qkv_and_given_cells_only_read_givens_and_show_them(path):
    """The answers are computed from the givens with numpy; qkv is not there when the notebook is graded."""
    for cell in code_cells(path):
        source = cell_source(cell)
        assert not re.search(r"^\s*(import qkv|from qkv[\s.])", source, re.M), cell_name(path, cell)
        assert "sys.path" not in source
        meta = nbgrader_meta(cell)
        if meta.get("locked") and not meta.get("grade") and meta.get("grade_id") not in ("setup", "summary"):
            for node in ast.parse(source).body:
                assert_reads_givens_or_shows(node, cell_name(path, cell))


def assert_reads_givens_or_shows(node, where: str):
    if isinstance(node, ast.Assign):
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for value in values:
            assert isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "ps", (
                f"{where}: a given cell binds only givens (ps.<name>)")
    else:
        assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Call), f"{where}: {ast.dump(node)[:80]}"
        func = node.value.func
        assert isinstance(func, ast.Attribute) and func.value.id == "ps" and func.attr in Session.DISPLAY_METHODS, (
            f"{where}: a given cell only shows givens (ps.{'/'.join(Session.DISPLAY_METHODS)})")


@pytest.mark.parametrize("path, cell", TEST_CELLS, ids=[cell_name(p, c) for p, c in TEST_CELLS])
def test_each_test_is_a_docstring_and_one_check(path, cell):
    source = cell_source(cell)
    grade_id = nbgrader_meta(cell)["grade_id"]
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring, f"{cell_name(path, cell)}: a test cell opens with a docstring saying what it checks"
    body = source.split('"""', 2)[2].strip()
    hidden = HIDDEN.fullmatch(body)
    call = hidden.group(1) if hidden else body
    check = get_problem_set(path.parent.name).check(grade_id)
    assert call == f'ps.check("{grade_id}", {check.answer})', cell_name(path, cell)
    assert bool(hidden) == check.hidden, f"{cell_name(path, cell)}: hidden in the notebook iff in the problem set"
    assert float(nbgrader_meta(cell)["points"]) == check.points


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_every_check_has_its_answer_cell_and_test_cell_and_the_summary_comes_last(path):
    ps = get_problem_set(path.parent.name)
    cells = code_cells(path)
    tests = [nbgrader_meta(c)["grade_id"] for c in cells if nbgrader_meta(c).get("grade")]
    assert tests == [c.grade_id for c in ps.checks], "the test cells, in the order of the problem set's checks"
    answers = "\n".join(cell_source(c) for c in cells if nbgrader_meta(c).get("solution"))
    for check in ps.checks:
        assert re.search(rf"^(def {check.answer}\(|{check.answer} = None$)", answers, re.M), (
            f"{ps.name}: no answer cell for {check.answer}")
    assert cell_source(cells[-1]) == "ps.summary()" and nbgrader_meta(cells[-1])["grade_id"] == "summary"


def test_solutions_and_hidden_tests_are_marked_in_the_right_cells():
    for path, cell in CELLS:
        source = cell_source(cell)
        meta = nbgrader_meta(cell)
        if "BEGIN SOLUTION" in source:
            assert meta.get("solution"), f"{cell_name(path, cell)}: a solution region outside an answer cell"
            assert source.count("### BEGIN SOLUTION") == source.count("### END SOLUTION")
        if meta.get("solution"):
            assert "### BEGIN SOLUTION" in source, f"{cell_name(path, cell)}: an answer cell without a solution"
            assert meta["grade_id"].startswith("answer_") and not meta["grade"]
        if "HIDDEN TESTS" in source:
            assert meta.get("grade") and not meta.get("solution"), cell_name(path, cell)


def test_every_problem_set_with_code_answers_has_hidden_tests_each_seen_in_a_visible_check():
    """A hidden check tries only behaviours that a visible check of the same function tries too."""
    for name in names():
        checks = get_problem_set(name).checks
        functions = {c.answer for c in checks if c.kind == "function"}
        assert bool(functions) == any(c.hidden for c in checks), name
        for function in functions:
            givens = get_problem_set(name).givens(0)
            rng = np.random.default_rng(0)
            seen = {call.behaviour for c in checks if c.answer == function and not c.hidden
                    for call in c.calls(givens, rng)}
            tried = {call.behaviour for c in checks if c.answer == function and c.hidden
                     for call in c.calls(givens, rng)}
            assert "" not in seen | tried, f"{name}/{function}: every call names its behaviour"
            assert tried <= seen, f"{name}/{function}: hidden checks try {sorted(tried - seen)}, no visible one does"


@pytest.mark.parametrize("problem_set", PROBLEM_SETS)
def test_no_given_is_an_answer(problem_set):
    """A problem set never shows a value it then asks for (as problem set 6 once printed its weights)."""
    ps = get_problem_set(problem_set)
    for variant in (0, 1, 2, 3):
        givens = ps.givens(variant)
        arrays = [np.asarray(v, dtype=float) for v in givens.values() if isinstance(v, (np.ndarray, int, float))]
        for check in ps.checks:
            if check.kind != "value":
                continue
            expected = np.asarray(check.expect(givens).expected, dtype=float)
            for given in arrays:
                if given.size == expected.size and given.size > 1:
                    assert not np.allclose(given.reshape(expected.shape), expected, atol=0.01), (
                        f"{problem_set}: a given is the answer to {check.grade_id}")


def test_problem_set_3_promises_only_what_it_asks():
    """Its introduction once promised a gradient and a 1e-6 check that no question asked for."""
    intro = cell_source(read_notebook(SOURCE / "ps3_sqrt_dk" / "ps3_sqrt_dk.ipynb")["cells"][0])
    assert "gradient" not in intro and "10^{-6}" not in intro and "1e-6" not in intro


@pytest.mark.parametrize("problem_set", PROBLEM_SETS)
def test_every_given_crosses_the_sandbox_wall(problem_set):
    """At grading the givens reach the student's cells as JSON (answers.encode): arrays, numbers, text,
    tuples and heads (records: ``head.W_Q`` and ``W_Q, W_K, W_V, b_Q, b_K, b_V = head`` both work)."""
    givens = get_problem_set(problem_set).givens(student_variant(problem_set, "ab1234"))
    for name, value in givens.items():
        back = decode(json.loads(json.dumps(encode(value))))
        assert_same(back, value, f"{problem_set}.{name}")


def assert_same(back, value, where: str):
    if isinstance(value, np.ndarray):
        assert isinstance(back, np.ndarray) and np.array_equal(back, value), where
    elif isinstance(value, Head):
        assert back._fields == ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"), where
        for got, expected in zip(back, value):
            assert_same(got, expected, where)
    elif isinstance(value, tuple):
        assert isinstance(back, tuple) and len(back) == len(value), where
        for got, expected in zip(back, value):
            assert_same(got, expected, where)
    else:
        assert back == value and type(back) is type(value), where
