"""The grader's parts that need no sandbox: ids, platform file names, reading what a sandbox sent back,
feedback escaping, CSV, and what the sandbox is allowed to see."""

from __future__ import annotations

import csv
import io
import json

import pytest

from qkv_grading import feedback, gradebook, jobs, judging, sandbox
from qkv_grading.collect import id_problem, platform_name
from qkv_grading.sandbox import Limits

from .exercise_support import ROOT, SOURCE
from .grading_support import PS2


@pytest.mark.parametrize("name", ["alice", "ann_b", "[xy]", "com,ma", 'quote"d', "n\u00e4me", "李雷", "a.b-c"])
def test_safe_ids_are_accepted(name):
    assert id_problem(name) is None


@pytest.mark.parametrize("name, why", [
    ("..", "path"), (".", "path"), ("a/b", "path"), ("a\\b", "path"), ("", "empty"), ("   ", "empty"),
    ("bad\nname", "control"), ("tab\there", "control"), ("rtl\u202eevil", "invisible"), (" alice", "spaces"),
    (".hidden", "starts with '.'"), ("=1+1", "formula"), ("@cmd", "formula"), ("x" * 101, "longer"),
    ("caf\udce9", "not UTF-8"),
])
def test_unsafe_ids_are_refused_with_the_reason(name, why):
    assert why in id_problem(name)


@pytest.mark.parametrize("file, student, late, attempt", [
    ("hana_4711_90210_ps2_scaled_dot_product.ipynb", "hana", None, None),
    ("ivan_late_4712_90210_ps2_scaled_dot_product-2.ipynb", "ivan", "late", "2"),
    ("ann_b_4714_2_ps2_scaled_dot_product.ipynb", "ann_b", None, None),
    ("a_1_2_3_55_66_ps2_scaled_dot_product-10.ipynb", "a_1_2_3", None, "10"),
])
def test_platform_file_names_are_read_from_their_right_end(file, student, late, attempt):
    match = platform_name(["ps1_qkv", "ps2_scaled_dot_product"]).fullmatch(file)
    assert (match["student"], match["late"], match["attempt"], match["file"]) == (
        student, late, attempt, "ps2_scaled_dot_product")


def test_lines_that_are_not_answers_are_counted_and_ignored():
    lines = ['{"start": 0}', '{"cell": 0, "outputs": []}', "[" * 100_000, "not json", '{"cell": "x"}', "[]",
             '{"capture": 1, "value": {"t": "none"}}', '{"capture": 1, "value": {"t": "str", "v": "later"}}',
             '{"done": true}']
    reading = judging.read_lines(lines)
    assert reading.done and reading.started == [0] and list(reading.cells) == [0]
    assert reading.captures[1]["value"] == {"t": "none"}, "the first answer for a check counts"
    assert reading.unreadable == 4


def test_outputs_are_plain_text_of_known_kinds_and_bounded():
    record = {"outputs": [{"kind": "stdout", "text": "x" * 50_000}, {"kind": "html", "text": "<b>"},
                          {"kind": "display", "text": "[1]", "omitted": ["text/html", "application/javascript"]},
                          "nonsense", {"kind": "error", "text": "tb", "ename": "E" * 500, "evalue": 7}]}
    items = judging.clean_outputs(record)
    assert [i["kind"] for i in items] == ["stdout", "display", "error", "cut"]
    assert sum(len(i["text"]) for i in items[:-1]) <= judging.MAX_OUTPUT_CHARS
    assert len(items[2]["ename"]) == 200 and items[2]["evalue"] == "7"


def _plan():
    from qkv_exercises.problem_sets import get_problem_set

    return jobs.plan(SOURCE / PS2, get_problem_set(PS2))


def test_a_job_carries_no_test_cell_and_no_solution_of_the_source():
    plan = _plan()
    release_like = json.loads((SOURCE / PS2 / f"{PS2}.ipynb").read_text(encoding="utf-8"))
    for cell in release_like["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = "answer = None  # mine"
    cells, notes = jobs.arrange(plan, release_like)
    job = jobs.build_job(plan, cells, "alice", "k" * 64)
    text = json.dumps(job)
    assert "ps.check" not in text and "BEGIN SOLUTION" not in text and "np.round" not in text
    captures = [c for c in job["cells"] if "capture" in c]
    assert [c["answer"] for c in captures] == [t.check.answer for t in plan.tests]
    assert not notes


def test_student_cells_stay_where_they_were_and_missing_answers_are_noted():
    plan = _plan()
    nb = json.loads((SOURCE / PS2 / f"{PS2}.ipynb").read_text(encoding="utf-8"))
    answer = next(i for i, c in enumerate(nb["cells"])
                  if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer_weights_q1")
    nb["cells"].insert(answer + 1, {"cell_type": "code", "metadata": {}, "source": "mine = 1", "outputs": []})
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") != "answer_output_q1"]
    cells, notes = jobs.arrange(plan, nb)
    order = [c.grade_id or c.source for c in cells if c.kind != "markdown"]
    assert order[order.index("answer_weights_q1") + 1] == "mine = 1"
    assert notes == ["no answer cell answer_output_q1 in the notebook (deleted?): nothing ran in its place"]


def test_feedback_shows_student_text_escaped_and_no_inline_script():
    plan = _plan()
    cells, _ = jobs.arrange(plan, None)
    cells.append(jobs.RunCell("student-markdown", "<script>alert(1)</script>"))
    graded = judging.Graded("<b>bob</b>", PS2, cells, max_score=plan.max_score)
    graded.notes.append("<img src=x onerror=alert(2)>")
    page = feedback.feedback_html(plan, graded)
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>bob</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script") == 2  # MathJax's configuration and MathJax, both from ../../_mathjax/


def test_grades_csv_is_valid_for_any_id(tmp_path):
    table = [["ps", "", "", 'com,ma "quoted"', "", "", "", "1.0", "0.0", "1.0", "8.0"]]
    gradebook.write_csv(tmp_path / "g.csv", table)
    rows = list(csv.reader(io.StringIO((tmp_path / "g.csv").read_text(encoding="utf-8"))))
    assert rows[0] == list(gradebook.COLUMNS) and rows[1][3] == 'com,ma "quoted"'


def test_the_sandbox_sees_numpy_and_ipython_but_nothing_of_the_course():
    names = {d.metadata["Name"].lower() for d in sandbox.allowed_distributions()}
    assert {"numpy", "ipython", "traitlets"} <= names
    assert not names & {"qkv", "torch", "nbgrader", "jupyter-server", "matplotlib"}
    targets = [t for _, t in sandbox.allowed_paths()]
    assert all(t.startswith(sandbox.SITE + "/") for t in targets)
    assert not any(t.split("/")[-1].startswith(("qkv", "torch")) for t in targets)


def test_the_sandbox_command_isolates_and_limits():
    descriptors = {target: 10 + i for i, (target, _) in enumerate(sandbox.runtime_files())} | {"seccomp": 9}
    command = sandbox.bwrap_command(70003, Limits(memory=1 << 30, processes=7, file_size=1 << 20), descriptors)
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session",
                 "--clearenv", "--as=1073741824", "--fsize=1048576", "--reuid=70003", "--nproc=7"):
        assert flag in command
    assert command[command.index("--seccomp") + 1] == "9"
    assert ["--remount-ro", "/"] == command[command.index("--chdir") - 2:command.index("--chdir")], \
        "/ is made read-only after everything in it is in place"
    outside = [a for a in command if str(ROOT) in a and "site-packages" not in a]
    assert not outside, f"the repository is in the sandbox: {outside}"
