"""The grader's parts that need no sandbox: ids, platform file names, feedback escaping, CSV, and what
the sandbox is allowed to see. (Reading what a sandbox sent back: tests/grading/.)"""

from __future__ import annotations

import csv
import io
import json

import pytest

from qkv_grading import feedback, gradebook, jobs, judging, sandbox
from qkv_grading.collect import id_key, id_problem
from qkv_grading.platforms import read_upload
from qkv_grading.sandbox import Limits

from .exercise_support import ROOT, SOURCE
from .grading_support import PS2


@pytest.mark.parametrize("name", ["alice", "ann_b", "[xy]", "com,ma", "o'neil", "n\u00e4me", "李雷", "a.b-c"])
def test_safe_ids_are_accepted(name):
    assert id_problem(name) is None


@pytest.mark.parametrize("name, why", [
    ("..", "path"), (".", "path"), ("a/b", "path"), ("a\\b", "path"), ("", "empty"), ("   ", "empty"),
    ("bad\nname", "control"), ("tab\there", "control"), ("rtl\u202eevil", "invisible"), (" alice", "spaces"),
    (".hidden", "starts with '.'"), ("=1+1", "formula"), ("@cmd", "formula"), ("x" * 101, "longer"),
    ("caf\udce9", "not UTF-8"), ('quote"d', "markup"), ("<b>", "markup"),
])
def test_unsafe_ids_are_refused_with_the_reason(name, why):
    assert why in id_problem(name)


@pytest.mark.parametrize("path, name, user, late, attempt", [
    ("hana_4711_90210_ps2_scaled_dot_product.ipynb", "hana", "4711", False, 0),
    ("ivan_late_4712_90210_ps2_scaled_dot_product-2.ipynb", "ivan", "4712", True, 2),
    ("ann_b_4714_2_ps2_scaled_dot_product.ipynb", "ann_b", "4714", False, 0),
    ("a_1_2_3_55_66_ps2_scaled_dot_product-10.ipynb", "a_1_2_3", "55", False, 10),
    ("Ann Lee_310_assignsubmission_file_ps2_scaled_dot_product.ipynb", "Ann Lee", "310", False, 0),
    ("all/Ann_Lee_311_assignsubmission_file/ps2_scaled_dot_product.ipynb", "Ann_Lee", "311", False, 0),
])
def test_platform_file_names_are_read_from_their_right_end(path, name, user, late, attempt):
    upload = read_upload(path, ["ps1_qkv", "ps2_scaled_dot_product"])
    assert (upload.name, upload.user, upload.late, upload.attempt, upload.problem_set) == (
        name, user, late, attempt, "ps2_scaled_dot_product")


@pytest.mark.parametrize("a, b", [("Alice", "alice"), ("n\u00e4me", "na\u0308me"), ("STRASSE", "straße"),
                                  ("\ufb01le", "file")])
def test_ids_that_differ_only_by_case_or_unicode_form_share_a_key(a, b):
    assert id_key(a) == id_key(b)


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


def test_a_changed_score_keeps_the_one_it_replaced_in_grades_csv(tmp_path):
    def written(score: str) -> dict:
        gradebook.write_csv(tmp_path / "g.csv", [["ps1", "", "", "ann", "", "", "", score, "0.0", score, "8.0"],
                                                 ["ps1", "", "", "bob", "", "", "", "3.0", "0.0", "3.0", "8.0"]])
        with (tmp_path / "g.csv").open(encoding="utf-8", newline="") as f:
            return {row["student_id"]: row["previous_score"] for row in csv.DictReader(f)}

    assert written("8.0") == {"ann": "", "bob": ""}
    assert written("6.0") == {"ann": "8.0", "bob": ""}, "ann's regrade changed 8 -> 6"
    assert written("6.0") == {"ann": "", "bob": ""}, "an export that changes nothing marks nothing"


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


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own query, as in gradebook.Writer
def test_the_export_counts_one_student_in_the_singular(tmp_path):
    from qkv_grading.pipeline import COURSE_ID, Course, export

    from .exercise_support import copy_course

    course = Course(copy_course(tmp_path))
    with gradebook.Writer(course.db_url, COURSE_ID) as writer:
        writer.gb.add_assignment("ps1_qkv")
        writer.gb.update_or_create_student("ann")
        writer.gb.update_or_create_submission("ps1_qkv", "ann", timestamp="2024-05-01 14:03:00.000000 UTC")
    printed = []
    export(course, printed.append)
    assert printed == [f"Grades of 1 student written to {course.root / 'grades.csv'}"]
    with (course.root / "grades.csv").open(encoding="utf-8", newline="") as f:
        assert [row["timestamp"] for row in csv.DictReader(f)] == ["2024-05-01 14:03:00"]


def test_a_finished_grading_run_leaves_no_stop_for_the_next_sandbox_of_its_process():
    """run_jobs stops its sandboxes when it ends (done or interrupted); once they have ended, a sandbox
    run later in the same process (a submission run again on its own) is not told to stop."""
    from qkv_grading import pipeline

    assert list(pipeline.run_jobs([], Limits(), 1, None)) == []
    assert not sandbox.STOP.is_set(), "the stop of a finished run is left set: later sandboxes fail as 'stopped'"


def test_git_ignores_every_file_that_grading_writes_in_the_course():
    """The grading key, journals, gradebook, grades and students' work stay out of a commit of the repository."""
    import shutil
    import subprocess

    from qkv_grading import journal
    from qkv_grading.collect import PLATFORM_NAMES
    from qkv_grading.pipeline import Course

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    course = Course(ROOT / "exercises")
    written = [course.root / ".grading" / "key", journal.Journal(course.root, PS2).path, course.root / PLATFORM_NAMES,
               course.cluster_folder / "grader" / "grader-key.pem", course.root / "gradebook.db",
               course.root / "grades.csv", course.root / "submitted" / "alice" / PS2 / f"{PS2}.ipynb",
               course.autograded("alice", PS2) / f"{PS2}.ipynb", course.feedback("alice", PS2) / f"{PS2}.html",
               course.root / "release" / PS2 / f"{PS2}.ipynb"]
    paths = [str(p.relative_to(ROOT)) for p in written]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert sorted(set(paths) - set(ignored)) == [], "written by grading, but git would commit them"
