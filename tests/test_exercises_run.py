"""Problem-set notebooks run the way students run them: Restart & Run All, and nbgrader's Validate.

(a) *Restart Kernel and Run All Cells* on a notebook with three wrong answers (run with
nbclient, as Jupyter runs it) shows three failed checks, every other check passed, and the
summary; nothing stops the run and nothing reaches stderr.
(b) ``nbgrader validate`` (what JupyterLab's Validate button runs) is truthful: it reports
success for the student version with right answers, even when the student's functions warn
and print; it fails, naming the cell, for a wrong answer, and for a softmax that ignores
``axis`` (a behaviour that only hidden tests used to try).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from qkv_grading.pipeline import nbgrader_env

from .exercise_support import (
    cell_source,
    nbgrader_meta,
    read_notebook,
    source_notebook,
    with_answer,
    write_notebook,
)

pytestmark = pytest.mark.slow

WRONG = {  # three wrong answers to problem set 2, each caught by its own check
    "answer_scores_q1": "scores_q1 = None",
    "answer_weights_q1": "weights_q1 = [0.5, 0.5, 0.5]",
    "answer_weights_head1": "A1 = np.round(np.exp(Q1 @ K1.T) / np.exp(Q1 @ K1.T).sum(axis=1, keepdims=True), 2)",
}


def run_all(nb: dict) -> nbformat.NotebookNode:
    notebook = nbformat.reads(json.dumps(nb), as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()  # raises if a cell raises
    return notebook


def outputs_of(notebook) -> dict[str, str]:
    """Each code cell's stdout, by grade_id (or cell id), with the colours taken out."""
    found = {}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
            found[nbgrader_meta(cell).get("grade_id", cell.get("id"))] = text.replace("\x1b[31m", "").replace(
                "\x1b[32m", "").replace("\x1b[0m", "")
    return found


def test_run_all_with_three_wrong_answers_shows_three_failures_and_the_summary():
    nb = source_notebook("ps2_scaled_dot_product")
    for grade_id, answer in WRONG.items():
        nb = with_answer(nb, grade_id, answer)
    notebook = run_all(nb)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", cell_source(cell)
            assert not (output.output_type == "stream" and output.name == "stderr"), output.text
    shown = outputs_of(notebook)
    tests = [nbgrader_meta(c)["grade_id"] for c in notebook.cells if nbgrader_meta(c).get("grade")]
    failed = [grade_id for grade_id in tests if shown[grade_id].startswith("\u2717")]
    assert failed == ["scores_q1", "weights_q1", "weights_head1"], shown
    assert all(shown[grade_id].startswith("\u2713") for grade_id in tests if grade_id not in failed)
    assert "Likely slip: did you divide the scores by sqrt(d_k)?" in shown["weights_head1"]
    summary = shown["summary"]
    assert summary.count("\u2717") == 3 and summary.count("\u2713") == len(tests) - 3
    assert f"{len(tests) - 3:g} of {len(tests):g} points from the checks above." in summary


# ---------------------------------------------------------------- nbgrader validate


@pytest.fixture(scope="module")
def released(released_course):
    """The course with every problem set released (shared by the run: only read here)."""
    return released_course


def students_notebook(course, problem_set: str, answers: dict[str, str] | None = None) -> dict:
    """The released notebook with the solution's answers typed in (and ``answers`` instead, by grade_id)."""
    nb = read_notebook(course / "release" / problem_set / f"{problem_set}.ipynb")
    solutions = {nbgrader_meta(c)["grade_id"]: cell_source(c) for c in source_notebook(problem_set)["cells"]
                 if nbgrader_meta(c).get("solution")}
    for grade_id, source in {**solutions, **(answers or {})}.items():
        nb = with_answer(nb, grade_id, re.sub(r"^ *### (BEGIN|END) SOLUTION\n?", "", source, flags=re.M))
    return nb


def validate(nb: dict, folder) -> str:
    path = folder / "notebook.ipynb"
    write_notebook(path, nb)
    result = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)], cwd=folder,
                            env=nbgrader_env(), capture_output=True, text=True, timeout=600)
    return result.stdout + result.stderr


def test_validate_passes_the_right_answers(released, tmp_path):
    printed = validate(students_notebook(released, "ps2_scaled_dot_product"), tmp_path)
    assert "Success! Your notebook passes all the tests." in printed, printed


def test_hidden_test_cells_of_the_release_show_nothing(released, tmp_path):
    """A released hidden test keeps only its docstring, which must not show as the cell's result (a score)."""
    printed = validate(students_notebook(released, "ps4_single_head"), tmp_path)
    assert "Success! Your notebook passes all the tests." in printed, printed
    assert "cannot be converted to" not in printed, printed


def test_validate_passes_right_functions_that_warn_and_print(released, tmp_path):
    chatty = '''def softmax(x, axis=-1):
    """Softmax of x along axis: positive weights that sum to 1 along that axis."""
    import sys
    import warnings
    warnings.warn("still experimenting")
    print("softmax of", np.shape(x), file=sys.stderr)
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)'''
    printed = validate(students_notebook(released, "ps4_single_head", {"answer_softmax": chatty}), tmp_path)
    assert "Success! Your notebook passes all the tests." in printed, printed


def test_validate_fails_a_wrong_answer_and_names_its_cell(released, tmp_path):
    nb = students_notebook(released, "ps2_scaled_dot_product", {"answer_weights_head1": WRONG["answer_weights_head1"]})
    printed = validate(nb, tmp_path)
    assert "VALIDATION FAILED" in printed and "Success!" not in printed
    assert 'ps.check("weights_head1", A1)' in printed
    assert "did you divide the scores by sqrt(d_k)?" in printed


def test_validate_fails_a_softmax_that_ignores_its_axis(released, tmp_path):
    """Validate once said "Success!" for this notebook, which then lost the hidden tests' points."""
    ignores_axis = '''def softmax(x, axis=-1):
    """Softmax of x along axis: positive weights that sum to 1 along that axis."""
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)'''
    printed = validate(students_notebook(released, "ps4_single_head", {"answer_softmax": ignores_axis}), tmp_path)
    assert "VALIDATION FAILED" in printed and 'ps.check("softmax_along_axis", softmax)' in printed
    assert "did you normalise along the wrong axis?" in printed


def test_validate_fails_a_fold_block_that_never_rescales(released, tmp_path):
    """The rescaling, which only a block with a higher maximum needs, is tried by a visible check."""
    never_rescales = '''def fold_block(m, l, block):
    """Fold one block of scores into the running maximum m and running sum l: returns (m_new, l_new)."""
    m_new = max(m, np.max(block))
    return m_new, l + np.exp(np.asarray(block) - m_new).sum()'''
    nb = students_notebook(released, "ps10_online_softmax", {"answer_fold_block": never_rescales})
    printed = validate(nb, tmp_path)
    assert "VALIDATION FAILED" in printed and 'ps.check("fold_your_blocks", fold_block)' in printed
    assert "did you rescale the running sum?" in printed


def test_validate_fails_a_kernel_that_underflows_far_from_every_key(released, tmp_path):
    """nbgrader validate shows the first line of the error, cut short: the call and its entry that is nan
    (the advice to subtract the largest exponent, further on, is checked in test_exercises_checks)."""
    underflows = '''def gaussian_kernel_weights(Q, K, sigma):
    """The Gaussian kernel's weights of every key for every query: shape (n_q, n_k), each row summing to 1."""
    Q, K = np.asarray(Q, dtype=float), np.asarray(K, dtype=float)
    e = np.exp(-((Q[:, None, :] - K[None, :, :]) ** 2).sum(axis=-1) / (2 * sigma**2))
    return e / e.sum(axis=-1, keepdims=True)'''
    nb = students_notebook(released, "ps11_soft_lookup", {"answer_gaussian_kernel_weights": underflows})
    printed = validate(nb, tmp_path)
    assert "VALIDATION FAILED" in printed
    assert 'ps.check("kernel_far_from_every_key", gaussian_kernel_weights)' in printed
    assert "AnswerMismatch: gaussian_kernel_weights(" in printed and "[0, 0] is na" in printed, printed
