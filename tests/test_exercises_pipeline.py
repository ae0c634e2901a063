"""The nbgrader pipeline of every problem set, run with the real nbgrader command line.

One temporary copy of the course is released, and three students hand in every problem set:
``solution`` (the instructor version), ``untouched`` (the student version as released) and
``slip`` (the solution with one answer replaced by a typical mistake). Then nbgrader
autogrades them all, writes the feedback and exports the grades. The tests check, for each
problem set:

(a) the release holds no solution and no hidden-test text;
(b) the solution gets full marks;
(c) the untouched release gets 0, graded without error, each failed check explaining itself;
(d) the slip costs exactly the points of the checks it breaks, and the feedback names the slip;
and that no feedback page shows a hidden test.
"""

from __future__ import annotations

import html
import re

import pytest

from .exercise_support import (
    PROBLEM_SETS,
    copy_course,
    error_outputs,
    hidden_test_lines,
    nbgrader,
    nbgrader_meta,
    points,
    read_grades,
    read_notebook,
    solution_lines,
    source_notebook,
    with_answer,
    write_notebook,
)

pytestmark = pytest.mark.slow

# One typical slip per problem set: the answer cell it replaces, the student's code (computed by
# hand or from the seeds' printed tables, not by qkv), the points it must cost, and the words
# the feedback must show.
SLIPS = {
    "ps1_qkv": (
        "answer_k_head1",
        "# X W_K without the bias: seed 000's K_raw of head 1\n"
        "K1 = [[-0.71, -0.71], [0.71, 0.71], [0.00, 0.00]]",
        1, "Likely slip: did you forget the bias?",
    ),
    "ps2_scaled_dot_product": (
        "answer_weights_head1",
        "S_raw = np.array([[0, 1.414214, 0.707107], [0, 1.414214, 0.707107], [0, 2.828428, 1.414214]])\n"
        "A1 = np.exp(S_raw) / np.exp(S_raw).sum(axis=1, keepdims=True)  # softmax of the unscaled scores",
        1, "Likely slip: did you divide the scores by sqrt(d_k)?",
    ),
    "ps3_sqrt_dk": (
        "answer_variance_of_dot_product",
        "variance_of_dot_product = 8  # the square root of 64",
        1, "Likely slip: that is the standard deviation",
    ),
    "ps4_single_head": (
        "answer_scaled_dot_product_attention",
        "def scaled_dot_product_attention(Q, K, V):\n"
        "    Q, K, V = np.asarray(Q, dtype=float), np.asarray(K, dtype=float), np.asarray(V, dtype=float)\n"
        "    weights = softmax(Q @ K.T, axis=-1)  # not divided by sqrt(d_k)\n"
        "    return weights @ V, weights\n",
        3,  # attention_seed_q1, attention_seed_head1, attention_random_inputs
        "Likely slip: did you divide the scores by sqrt(d_k)?",
    ),
    "ps5_multi_head": (
        "answer_concatenation",
        "# head 2's output first: seed 000's O^(2), then O^(1)\n"
        "O_concat = [[0.307196, 0.506480, 0.493520, 0.813676],\n"
        "            [0.307196, 0.506480, 0.493520, 0.813676],\n"
        "            [0.244728, 0.665241, 0.334759, 0.909969]]",
        1, "Likely slip: did you concatenate the heads in the wrong order?",
    ),
    "ps6_maps": (
        "answer_patch_grid",
        "patch_grid = np.round(patch_weights[query_patch], 2).reshape(3, 2).T  # filled column by column",
        1, "Likely slip: did you fill the grid column by column?",
    ),
    "ps7_masks": (
        "answer_weights_late",
        "row = S1[1].copy()\n"
        "row[2] = 0.0  # the blocked score of 補償 set to 0, not -inf\n"
        "A_late = np.exp(row) / np.exp(row).sum()",
        1, "Likely slip: did you set the blocked scores to 0?",
    ),
    "ps8_position": (
        "answer_position_encoding",
        "angles_p = position * 10000.0 ** (-np.arange(0, d_model, 2) / d_model)\n"
        "PE_p = np.ravel(np.column_stack([np.cos(angles_p), np.sin(angles_p)]))  # cosine first",
        1, "Likely slip: the even dimensions 2i take the sine",
    ),
}

STUDENTS = ("solution", "untouched", "slip")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """Release, hand in, autograde, feed back and export, once for every problem set."""
    course = copy_course(tmp_path_factory.mktemp("pipeline"))
    released = nbgrader(course, "generate_assignment", "*", "--force")
    for ps in PROBLEM_SETS:
        source = source_notebook(ps)
        grade_id, answer, _, _ = SLIPS[ps]
        write_notebook(course / "submitted" / "solution" / ps / f"{ps}.ipynb", source)
        write_notebook(course / "submitted" / "untouched" / ps / f"{ps}.ipynb",
                       read_notebook(course / "release" / ps / f"{ps}.ipynb"))
        write_notebook(course / "submitted" / "slip" / ps / f"{ps}.ipynb", with_answer(source, grade_id, answer))
    autograded = nbgrader(course, "autograde", "*", "--force")
    nbgrader(course, "generate_feedback", "*", "--force")
    nbgrader(course, "export", "--to=grades.csv")
    return {"course": course, "grades": read_grades(course / "grades.csv"),
            "release_log": released.stderr + released.stdout, "autograde_log": autograded.stderr + autograded.stdout}


def test_every_problem_set_has_a_slip_case():
    assert sorted(SLIPS) == PROBLEM_SETS, "add a typical slip to SLIPS for every problem set"


@pytest.mark.parametrize("ps", PROBLEM_SETS)
def test_release_holds_no_solution_and_no_hidden_test(graded, ps):
    """(a) generate_assignment wrote the student version, without solutions and hidden tests."""
    released = graded["course"] / "release" / ps / f"{ps}.ipynb"
    assert released.is_file(), f"generate_assignment wrote no {released.name}:\n{graded['release_log'][-3000:]}"
    text = released.read_text(encoding="utf-8")
    nb = read_notebook(released)
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"{ps}: the release still holds '{marker}'"
    source = source_notebook(ps)
    leaked = [line for line in solution_lines(source) if line in code]
    assert not leaked, f"{ps}: solution lines left in the release: {leaked}"
    leaked = [line for line in hidden_test_lines(source) if line in text]
    assert not leaked, f"{ps}: hidden test lines left in the release: {leaked}"
    assert "# YOUR ANSWER HERE" in code, f"{ps}: the release has no answer cell for the student"
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), f"{ps}: outputs in release"


@pytest.mark.parametrize("ps", PROBLEM_SETS)
def test_solution_gets_full_marks(graded, ps):
    """(b) the instructor's solution autogrades to every point of the problem set."""
    total = points(source_notebook(ps))
    assert total > 0
    score = graded["grades"][("solution", ps)]
    nb = read_notebook(graded["course"] / "autograded" / "solution" / ps / f"{ps}.ipynb")
    errors = [(gid, out["ename"], out["evalue"][:300]) for gid, out in error_outputs(nb)]
    assert score == total, f"{ps}: the solution scored {score} of {total}; errors: {errors}"
    assert not errors, f"{ps}: cells of the solution raised: {errors}"


@pytest.mark.parametrize("ps", PROBLEM_SETS)
def test_untouched_release_gets_zero_and_clear_messages(graded, ps):
    """(c) the release as handed out scores 0, is graded without error, and every check says why."""
    assert graded["grades"][("untouched", ps)] == 0
    notebook = graded["course"] / "autograded" / "untouched" / ps / f"{ps}.ipynb"
    assert notebook.is_file(), f"{ps}: the untouched release was not autograded:\n{graded['autograde_log'][-3000:]}"
    nb = read_notebook(notebook)
    failed = {gid: out for gid, out in error_outputs(nb)}
    tests = [nbgrader_meta(c)["grade_id"] for c in nb["cells"] if nbgrader_meta(c).get("grade")]
    assert sorted(failed) == sorted(tests), f"{ps}: cells other than the tests raised, or a test passed: {sorted(failed)}"
    unclear = {gid: f"{out['ename']}: {out['evalue']}" for gid, out in failed.items() if out["ename"] != "AnswerMismatch"}
    assert not unclear, f"{ps}: checks that fail on an unfilled answer without an AnswerMismatch message: {unclear}"
    for gid, out in failed.items():
        assert re.search(r"is None|returned None", out["evalue"]), f"{ps}/{gid}: {out['evalue']!r}"


@pytest.mark.parametrize("ps", PROBLEM_SETS)
def test_typical_slip_gets_partial_score_and_named_in_feedback(graded, ps):
    """(d) one typical slip costs the points of the checks it breaks, and the feedback names the slip."""
    _, _, lost, message = SLIPS[ps]
    total = points(source_notebook(ps))
    assert graded["grades"][("slip", ps)] == total - lost
    page = graded["course"] / "feedback" / "slip" / ps / f"{ps}.html"
    assert page.is_file(), f"{ps}: no feedback for the slip submission"
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert message in text, f"{ps}: the feedback does not say {message!r}"
    assert f"{ps} (Score: {total - lost:.1f} / {total:.1f})" in text, f"{ps}: the feedback shows another score"


@pytest.mark.parametrize("student", STUDENTS)
@pytest.mark.parametrize("ps", PROBLEM_SETS)
def test_feedback_shows_no_hidden_test(graded, ps, student):
    """No feedback page holds the text of a hidden test, even where a hidden test failed."""
    page = graded["course"] / "feedback" / student / ps / f"{ps}.html"
    assert page.is_file(), f"{ps}: no feedback for {student}"
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert "HIDDEN TESTS" not in text
    leaked = [line for line in hidden_test_lines(source_notebook(ps)) if line in text]
    assert not leaked, f"{ps}/{student}: hidden test lines in the feedback: {leaked}"


def test_a_failed_hidden_test_shows_only_its_message(graded):
    """The slip in ps4 fails a hidden test; its feedback keeps the message but no traceback."""
    text = html.unescape((graded["course"] / "feedback" / "slip" / "ps4_single_head" /
                          "ps4_single_head.html").read_text(encoding="utf-8"))
    assert "AnswerMismatch: the weights of scaled_dot_product_attention(Q (3, 4)" in text
    assert "most recent call last" not in text, "a traceback (which quotes the test's lines) is in the feedback"
    assert "check.attention_function_on_random_inputs" not in text
