"""The problem sets, released by nbgrader and graded by the course's command.

One temporary copy of the course (with the grading tests' probe problem set, which has hidden
checks), released with nbgrader's own command line: three students hand in every problem
set the grader can grade (those with a module in ``qkv_exercises.problem_sets``): ``solution``
(the instructor version), ``untouched`` (the release as handed out) and ``slip`` (one answer
replaced by a typical mistake, computed from the student's own numbers). ``python -m qkv_grading
grade`` grades them. The tests check:

(a) the release holds no solution and no hidden-test text (every problem set);
(b) the solution gets full marks, and no cell of it raised;
(c) the untouched release gets 0, every check saying why;
(d) the slip costs exactly the points of the checks it breaks, and the feedback names the slip;
(e) nbgrader's own ``nbgrader export`` reads the same grades from the gradebook;
and that no feedback page shows a hidden test.
"""

from __future__ import annotations

import html
import re
import shutil

import pytest

from qkv_exercises import problem_sets

from .exercise_support import (
    PROBLEM_SETS,
    error_outputs,
    hidden_test_lines,
    nbgrader,
    nbgrader_meta,
    points,
    read_notebook,
    solution_lines,
    with_answer,
    write_notebook,
)
from .grading_support import PROBE, grading, probe_notebook, read_grades, source_of

pytestmark = pytest.mark.slow

GRADED = [ps for ps in PROBLEM_SETS if ps in problem_sets.names()] + [PROBE]

# One typical slip per graded problem set: the answer cell it replaces, the student's code (from the
# givens, as a student would compute it), the points it must cost, and the words the feedback must show.
SLIPS = {
    "ps1_qkv": (
        "answer_k_head1",
        "K1 = np.round(X @ head_1.W_K, 2)  # X W_K without the bias",
        1, "Likely slip: did you forget the bias?",
    ),
    "ps2_scaled_dot_product": (
        "answer_weights_head1",
        "S_raw = Q1 @ K1.T\nA1 = np.round(np.exp(S_raw) / np.exp(S_raw).sum(axis=1, keepdims=True), 2)"
        "  # softmax of the unscaled scores",
        1, "Likely slip: did you divide the scores by sqrt(d_k)?",
    ),
    "ps3_sqrt_dk": (
        "answer_variance_of_dot_product",
        "variance_of_dot_product = np.sqrt(d_k * variance * variance)  # the standard deviation",
        1, "Likely slip: that is the standard deviation",
    ),
    "ps4_single_head": (
        "answer_scaled_dot_product_attention",
        "def scaled_dot_product_attention(Q, K, V):\n"
        "    Q, K, V = np.asarray(Q, dtype=float), np.asarray(K, dtype=float), np.asarray(V, dtype=float)\n"
        "    weights = softmax(Q @ K.T, axis=-1)  # not divided by sqrt(d_k)\n"
        "    return weights @ V, weights\n",
        4,  # attention_q1, attention_head1, attention_cross and the hidden attention_random_inputs
        "Likely slip: did you divide the scores by sqrt(d_k)?",
    ),
    "ps5_multi_head": (
        "answer_concatenation",
        "O_concat = np.round(np.concatenate([O2_exact, O1], axis=1), 2)  # head 2's output first",
        1, "Likely slip: did you concatenate the heads in the wrong order?",
    ),
    "ps6_maps": (
        "answer_patch_grid",
        "patches = image.reshape(2, 2, 3, 2).swapaxes(1, 2).reshape(6, 4)\n"
        "exponentials = np.exp(patches @ patches[query_patch] / np.sqrt(4))\n"
        "patch_grid = np.round(exponentials / exponentials.sum(), 2).reshape(3, 2).T  # filled column by column",
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
    "ps9_block": (
        "answer_variance",
        "variance = np.round(np.var(x + a, ddof=1), 2)  # divided by d - 1",
        1, "Likely slip: layer norm divides the sum of squared deviations by d, not by d - 1",
    ),
    "ps10_online_softmax": (
        "answer_reversed_state_2",
        "# the running sum not rescaled when the maximum grows in block 2\n"
        "m_1, m_2 = reversed_blocks[0].max(), reversed_blocks[1].max()\n"
        "reversed_state_2 = [m_2, np.exp(reversed_blocks[0] - m_1).sum() + np.exp(reversed_blocks[1] - m_2).sum()]",
        1, "Likely slip: did you rescale the running sum?",
    ),
    "ps11_soft_lookup": (
        "answer_exponents",
        "exponents = ((K - q) ** 2).sum(axis=1) / (2 * sigma**2)  # the minus sign left out",
        1, "Likely slip: did you forget the minus sign?",
    ),
    "ps12_trained_model": (
        "answer_a_head",
        "_, weights = layer_attention(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads)\n"
        "A_head = weights[head]  # heads counted from 0",
        1, "Likely slip: heads are numbered from 1 in the question and Python counts from 0",
    ),
    "ps13_inference": (
        "answer_decode",
        "def decode(X, W_Q, W_K, W_V):\n"
        "    keys, values, outputs = [], [], []\n"
        "    for x in np.asarray(X, dtype=float):\n"
        "        q, k, v = x @ W_Q, x @ W_K, x @ W_V\n"
        "        if keys:\n"
        "            s = np.array(keys) @ q / np.sqrt(len(q))\n"
        "            a = np.exp(s - s.max())\n"
        "            outputs.append(a / a.sum() @ np.array(values))\n"
        "        else:\n"
        "            outputs.append(v)  # nothing cached yet\n"
        "        keys.append(k)  # the cache appended after its query read it\n"
        "        values.append(v)\n"
        "    return np.array(outputs)\n",
        3,  # decode_yours, decode_other_sequences and the hidden decode_random
        "Likely slip: did the query read the cache before the new token's key and value joined it?",
    ),
    "ps14_training": (
        "answer_dv_entry",
        "dV_entry = np.round((A @ dO)[key, column], 2)  # A not transposed",
        1, "Likely slip: did you forget to transpose A?",
    ),
    PROBE: (
        "answer_softmax",
        "def softmax(x):\n    return np.exp(x)  # not divided by the sum",
        2, "softmax(q1 K^T)[0, 0] is",
    ),
}

STUDENTS = ("solution", "untouched", "slip")


@pytest.fixture(scope="module")
def graded(released_course, tmp_path_factory) -> dict:
    """Hand in, and grade with the course's command, once for every problem set: a copy of the course
    that nbgrader released for the whole run (``released_course``), with the probe problem set added
    and released by nbgrader the same way."""
    course = tmp_path_factory.mktemp("pipeline") / "course"
    shutil.copytree(released_course, course)
    write_notebook(course / "source" / PROBE / f"{PROBE}.ipynb", probe_notebook())
    released = nbgrader(course, "generate_assignment", PROBE, "--force")
    folder = course.parent / "hand-ins"
    for ps in GRADED:
        source = source_of(ps)
        grade_id, answer, _, _ = SLIPS[ps]
        write_notebook(folder / "solution" / ps / f"{ps}.ipynb", source)
        write_notebook(folder / "untouched" / ps / f"{ps}.ipynb", read_notebook(course / "release" / ps / f"{ps}.ipynb"))
        write_notebook(folder / "slip" / ps / f"{ps}.ipynb", with_answer(source, grade_id, answer))
    result = grading(course, "grade", str(folder))
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return {"course": course, "grades": read_grades(course / "grades.csv"), "log": result.stdout,
            "release_log": released.stderr + released.stdout}


def test_every_graded_problem_set_has_a_slip_case():
    assert sorted(SLIPS) == sorted(GRADED), "add a typical slip to SLIPS for every problem set the grader grades"


@pytest.mark.parametrize("ps", PROBLEM_SETS + [PROBE])
def test_release_holds_no_solution_and_no_hidden_test(graded, ps):
    """(a) generate_assignment wrote the student version, without solutions and hidden tests."""
    released = graded["course"] / "release" / ps / f"{ps}.ipynb"
    assert released.is_file(), f"generate_assignment wrote no {released.name}:\n{graded['release_log'][-3000:]}"
    text = released.read_text(encoding="utf-8")
    nb = read_notebook(released)
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"{ps}: the release still holds '{marker}'"
    source = source_of(ps)
    leaked = [line for line in solution_lines(source) if line in code]
    assert not leaked, f"{ps}: solution lines left in the release: {leaked}"
    leaked = [line for line in hidden_test_lines(source) if line in text]
    assert not leaked, f"{ps}: hidden test lines left in the release: {leaked}"
    assert "# YOUR ANSWER HERE" in code, f"{ps}: the release has no answer cell for the student"
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), f"{ps}: outputs in release"


def _autograded(graded, student, ps) -> dict:
    return read_notebook(graded["course"] / "autograded" / student / ps / f"{ps}.ipynb")


@pytest.mark.parametrize("ps", GRADED)
def test_solution_gets_full_marks(graded, ps):
    """(b) the instructor's solution gets every point of the problem set."""
    total = points(source_of(ps))
    assert total > 0
    errors = [(gid, out["ename"], out["evalue"][:300]) for gid, out in error_outputs(_autograded(graded, "solution", ps))]
    assert graded["grades"][("solution", ps)] == total, f"{ps}: errors: {errors}\n{graded['log'][-3000:]}"
    assert not errors, f"{ps}: cells of the solution raised: {errors}"


@pytest.mark.parametrize("ps", GRADED)
def test_untouched_release_gets_zero_and_clear_messages(graded, ps):
    """(c) the release as handed out scores 0, and every check says what is missing."""
    assert graded["grades"][("untouched", ps)] == 0
    nb = _autograded(graded, "untouched", ps)
    failed = dict(error_outputs(nb))
    tests = [nbgrader_meta(c)["grade_id"] for c in nb["cells"] if nbgrader_meta(c).get("grade")]
    assert sorted(failed) == sorted(tests), f"{ps}: cells other than the tests raised, or a test passed: {sorted(failed)}"
    for gid, out in failed.items():
        assert out["ename"] == "AnswerMismatch"
        assert re.search(r"is None|returned None|raised NotImplementedError", out["evalue"]), f"{ps}/{gid}: {out}"


@pytest.mark.parametrize("ps", GRADED)
def test_typical_slip_gets_partial_score_and_named_in_feedback(graded, ps):
    """(d) one typical slip costs the points of the checks it breaks, and the feedback names the slip."""
    _, _, lost, message = SLIPS[ps]
    total = points(source_of(ps))
    assert graded["grades"][("slip", ps)] == total - lost
    page = graded["course"] / "feedback" / "slip" / ps / f"{ps}.html"
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert message in text, f"{ps}: the feedback does not say {message!r}"
    assert f"{ps} (Score: {total - lost:.1f} / {total:.1f})" in text, f"{ps}: the feedback shows another score"


def test_a_visible_check_states_its_expected_value_after_grading(graded):
    text = html.unescape((graded["course"] / "feedback" / "slip" / PROBE / f"{PROBE}.html").read_text(encoding="utf-8"))
    assert re.search(r"softmax\(q1 K\^T\)\[0, 0\] is [-\d.e]+, expected [\d.]+", text), text[:3000]


def test_nbgrader_export_reads_the_same_grades(graded):
    """(e) the gradebook is nbgrader's: its own export command lists the same scores."""
    nbgrader(graded["course"], "export", "--to=nbgrader-export.csv")
    theirs = read_grades(graded["course"] / "nbgrader-export.csv")  # every problem set, 0 where none handed in
    assert {k: v for k, v in theirs.items() if k[1] in GRADED} == graded["grades"]


@pytest.mark.parametrize("student", STUDENTS)
@pytest.mark.parametrize("ps", GRADED)
def test_feedback_shows_no_hidden_test(graded, ps, student):
    """No feedback page holds the text of a hidden test, even where a hidden test failed."""
    page = graded["course"] / "feedback" / student / ps / f"{ps}.html"
    assert page.is_file(), f"{ps}: no feedback for {student}"
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert "HIDDEN TESTS" not in text
    leaked = [line for line in hidden_test_lines(source_of(ps)) if line in text]
    assert not leaked, f"{ps}/{student}: hidden test lines in the feedback: {leaked}"
