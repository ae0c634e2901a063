"""Dishonest and hostile submissions, graded with the real command beside honest classmates.

The adversarial class (tests/adversarial_class.py) is graded three times with ``python -m
qkv_grading grade`` (then ``--fresh``, running every notebook again, then from the journal), and
the tests show:

- 0 points gained by any tampering, and the partial work of the others graded as it is;
- 0 classmates affected: honest students get full marks, their files are untouched, and no file
  of the course, the repository or the gradebook was changed by a submission;
- no hidden-test text, no solution and no expected value of a hidden check in any feedback page;
- no live script in any feedback page (only MathJax, from the feedback folder);
- the batch finishes, with a reason for each failure, no process of a sandbox left alive, and
  no connection made to a server on this machine;
- no sandbox makes a user namespace of its own (nor mounts a tmpfs in it), a kernel key, or a
  file outside its two bounded tmpfs folders or past their sizes (:mod:`tests.sandbox_attacks`);
- what another local user planted in the temp folder beforehand (a lock folder of links to a
  file of root's, a runtime folder with a runner of theirs) is never used or followed;
- another course graded at the same time on the same machine is graded right, and nothing of
  either class is left;
- the runs give identical grades.

The same class, smaller, is graded once more by a real unprivileged user (grading without
root, :mod:`tests.local_users`), with the same attacks on the sandbox and the same planted
temp folder: again 0 marks gained, 0 classmates harmed, the batch finished.

What the hand-ins send back, and what reaches the instructor's terminal: tests/test_grading_hostile_data.py.
"""

from __future__ import annotations

import html
import html.parser
import os
import shutil
import sqlite3

import numpy as np
import pytest

from qkv_exercises import variants
from qkv_exercises.checking import format_number
from qkv_exercises.checks import seed_for
from qkv_exercises.identity import student_variant

from .adversarial_class import FULL, HONEST, TIMEOUT, VICTIM, digest, planted_temp_folder, sandbox_attackers
from .exercise_support import hidden_test_lines, read_notebook, solution_lines
from .grading_probe.ps99_probe import hidden_calls
from .grading_support import (
    HIDDEN_MARK,
    PROBE,
    PS2,
    grading_command,
    hand_in,
    read_grades,
    released,
    sandbox_processes,
    source_of,
    student_lines,
)
from .local_users import GRADER, NEIGHBOUR, give, local_user, run_as
from .sandbox_attacks import left_behind

pytestmark = pytest.mark.slow


@pytest.fixture
def graded(adversarial_class):
    return adversarial_class

def test_the_batch_finishes_and_every_student_has_a_grade(graded):
    for run in graded["runs"]:
        printed = run["result"].stdout + run["result"].stderr
        assert run["result"].returncode == 0, printed[-5000:]
        expected = set(HONEST) | {("blank", PS2)} | {(s, c[0]) for s, c in graded["cases"].items()}
        assert expected <= set(run["grades"]), printed[-5000:]
        assert all(score == 0 for key, score in run["grades"].items() if key not in expected)  # nothing handed in


def test_no_tampering_gains_a_point(graded):
    """Each attacker gets exactly what its own work earns (blank answers: 0)."""
    for run in graded["runs"]:
        for student, (ps, _, _, expected, _) in graded["cases"].items():
            if expected is not None:
                assert run["grades"][(student, ps)] == expected, (student, student_lines(run["result"].stdout, student))
        assert run["grades"][("blank", PS2)] == 0


def test_a_notebook_that_sleeps_in_every_cell_is_stopped_with_what_it_did_in_time(graded):
    for run in graded["runs"]:
        assert run["grades"][("sleeper", PS2)] < FULL


def test_classmates_are_not_affected(graded):
    for run in graded["runs"]:
        for key, score in HONEST.items():
            assert run["grades"][key] == score, student_lines(run["result"].stdout, key[0])
            lines = student_lines(run["result"].stdout, key[0])
            assert len(lines) == 1, f"notes on an honest submission: {lines}"
        assert run["classmate"] == (graded["folder"] / "honest_a" / PS2 / f"{PS2}.ipynb").read_bytes()


def test_no_file_of_the_course_or_the_repository_was_changed(graded):
    course = graded["course"]
    assert {str(p): digest(p) for p in graded["watched"]} == graded["before"]
    assert sorted(p.name for p in (course / "source" / PS2).iterdir()) == graded["sources_before"]
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("SELECT count(*) FROM grade WHERE manual_score IS NOT NULL").fetchone() == (0,)
    assert "tampered" not in (course / "grades.csv").read_text(encoding="utf-8")


def test_no_process_of_a_sandbox_is_left_and_no_connection_was_made(graded):
    """Whatever else runs on the machine: the lingerer's own processes (in its sandbox's process
    namespace, which its page shows) and those under an identity no grader holds."""
    assert graded["left_over"] == {} and sandbox_processes() == {}
    for run in graded["runs"][:2]:  # the third is read from the journal
        assert left_behind(html.unescape(run["pages"][f"lingerer/{PS2}"])) == [], "a process of the lingerer is left"
    assert graded["accepted"] == 0
    leaker = graded["runs"][0]["pages"][f"leaker/{PS2}"]
    assert "CONNECTED-OK" not in html.unescape(leaker) and "no network: " in html.unescape(leaker)


def _hidden_expected_values(course, student) -> list[str]:
    """The expected values of the probe's hidden checks for ``student``, computed here with numpy."""
    ex = variants.q1_example(student_variant(PROBE, student))
    scores = ex.Q @ ex.K.T / np.sqrt(2)
    weights = np.exp(scores) / np.exp(scores).sum()
    key = (course / ".grading" / "key").read_text(encoding="ascii").strip()
    givens = {"q1": ex.Q, "K": ex.K}
    calls = hidden_calls(givens, np.random.default_rng(seed_for(key, PROBE, "softmax_hidden", student)))
    outputs = [np.exp(c.args[0] - c.args[0].max(-1, keepdims=True)) for c in calls]
    outputs = [o / o.sum(-1, keepdims=True) for o in outputs]
    return [format_number(v) for v in np.concatenate([weights.ravel(), *(o.ravel() for o in outputs)])]


def test_no_feedback_page_shows_a_hidden_test_or_its_expected_values(graded):
    course = graded["course"]
    hidden = hidden_test_lines(source_of(PROBE)) + [HIDDEN_MARK, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"]
    secret = solution_lines(source_of(PS2)) + solution_lines(source_of(PROBE)) + ["BEGIN SOLUTION"]
    for run in graded["runs"]:
        assert run["pages"], "no feedback pages"
        for name, page in run["pages"].items():
            text = html.unescape(page)
            leaked = [line for line in hidden if line in text]
            assert not leaked, f"{name}: hidden test text in the feedback: {leaked}"
            student, ps = name.split("/")
            worked = student in graded["cases"] and graded["cases"][student][3] != 0  # the solution, changed
            if (student, ps) not in HONEST and not worked:
                leaked = [line for line in secret if line in text]
                assert not leaked, f"{name}: solution text in the feedback of a blank hand-in: {leaked}"
            if ps == PROBE:
                values = [v for v in _hidden_expected_values(course, student) if len(v) > 5 and v in text]
                assert not values, f"{name}: expected values of hidden checks in the feedback: {values}"


def test_a_failed_hidden_check_says_what_is_wrong_without_the_expected_value(graded):
    page = html.unescape(graded["runs"][0]["pages"][f"probe_slip/{PROBE}"])
    assert "Hidden test weights_hidden: failed, 0 / 1 points" in page
    assert "too large" in page or "too small" in page


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_no_feedback_page_holds_a_live_script(graded):
    for run in graded["runs"]:
        for name, page in run["pages"].items():
            parser = Tags()
            parser.feed(page)
            scripts = [a.get("src") for t, a in parser.tags if t == "script"]
            assert scripts == ["../../_mathjax/config.js", "../../_mathjax/tex-svg.js"], (name, scripts)
            handlers = [(t, k) for t, a in parser.tags for k in a if k.lower().startswith("on")]
            assert not handlers, (name, handlers)
            links = [v for _, a in parser.tags for k, v in a.items() if v and "javascript:" in v.lower()]
            assert not links, (name, links)
            assert not [t for t, _ in parser.tags if t in ("iframe", "object", "embed", "form", "base")], name
            policy = [a for t, a in parser.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
            assert policy and "script-src 'self'" in policy[0]["content"], name
    page = graded["runs"][0]["pages"][f"html/{PS2}"]
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in page, "the student's markdown is shown as text"
    assert '<div class="banner">' not in page


def test_feedback_and_autograded_notebooks_stay_small(graded):
    course = graded["course"]
    for student in ("big_output", "forger", "odd_values"):
        ps = graded["cases"][student][0]
        assert (course / "feedback" / student / ps / f"{ps}.html").stat().st_size < 1_000_000
        assert (course / "autograded" / student / ps / f"{ps}.ipynb").stat().st_size < 1_000_000


def test_every_failure_has_its_reason(graded):
    for run in graded["runs"]:
        for student, (_, _, _, _, words) in graded["cases"].items():
            notes = "\n".join(student_lines(run["result"].stdout, student))
            for word in words:
                assert word in notes, f"{student}: no {word!r} in\n{notes}"


def test_the_runs_give_identical_grades(graded):
    """Every run grades alike; but the sleeper, whose work within its time limit depends on the machine's load."""
    first, *others = [{k: v for k, v in run["grades"].items() if k[0] != "sleeper"} for run in graded["runs"]]
    for other in others:
        assert other == first


def test_the_autograded_notebooks_are_read_by_nbgrader(graded):
    """formgrader reads autograded/<student>/<ps>/<ps>.ipynb: a valid notebook with the source's metadata."""
    import nbformat

    course = graded["course"]
    nb = nbformat.read(course / "autograded" / "honest_a" / PS2 / f"{PS2}.ipynb", as_version=4)
    nbformat.validate(nb)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert [i for i in ids if i] == [c["metadata"]["nbgrader"]["grade_id"] for c in read_notebook(
        course / "source" / PS2 / f"{PS2}.ipynb")["cells"] if c["metadata"].get("nbgrader")]


def _feedback_text(run, student) -> str:
    return html.unescape(run["pages"][f"{student}/{PS2}"])


def test_no_sandbox_makes_a_user_namespace_or_a_key_or_writes_past_its_limits(graded):
    for run in graded["runs"]:
        page = _feedback_text(run, "escaper")
        assert "HOLE" not in page, page[-3000:]
        for verdict in ("user namespace: refused", "no tmpfs", "kernel keys: refused", "writable places: full /job",
                        "writable places: full /dev/shm", "writable places: refused /sandbox"):
            assert verdict in page, f"no {verdict!r} in the feedback of the escaper"
        assert "HOLE" not in _feedback_text(run, "lingerer")


def test_what_another_user_planted_in_the_temp_folder_is_never_used(graded):
    if os.geteuid() != 0:
        pytest.skip("needs root, to plant as another local user")
    assert (graded["course"].parent / "victim.txt").read_text(encoding="utf-8") == VICTIM
    neighbour = local_user(NEIGHBOUR)
    made = [p for p in graded["tmp"].iterdir() if p.lstat().st_uid != neighbour.pw_uid]
    loose = [(p.name, oct(p.lstat().st_mode)) for p in made if p.lstat().st_mode & 0o077]
    assert not loose, f"the grader left files in the temp folder that others may open: {loose}"


@pytest.fixture(scope="module")
def graded_without_root(adversarial_class, tmp_path_factory):
    """The released course graded again by a real unprivileged user: honest, blank and sandbox attackers."""
    user = local_user(GRADER)
    where = tmp_path_factory.mktemp("without-root")
    course = where / "course"
    shutil.copytree(adversarial_class["course"], course, ignore=shutil.ignore_patterns(
        "submitted", "autograded", "feedback", "grades.csv", "gradebook.db", ".grading"))
    folder = where / "hand-ins"
    blank = released(course, PS2)
    hand_in(folder, "honest_a", PS2, source_of(PS2))
    hand_in(folder, "blank", PS2, blank)
    cases = sandbox_attackers(blank)
    for student, (ps, nb, *_) in cases.items():
        hand_in(folder, student, ps, nb)
    shared = planted_temp_folder(where)
    home = where / "home"
    home.mkdir()
    give(where, user)
    done = run_as(user, grading_command(course, "grade", str(folder), "--timeout", TIMEOUT), reachable=[where],
                  env={"HOME": str(home), "TMPDIR": str(shared), "PYTHONIOENCODING": "utf-8"}, cwd=where,
                  capture_output=True, text=True, timeout=900)
    grades = read_grades(course / "grades.csv") if (course / "grades.csv").is_file() else {}
    return {"result": done, "grades": grades, "cases": cases, "course": course, "user": user, "tmp": shared}


def test_without_root_the_batch_finishes_and_no_attack_gains_a_point(graded_without_root):
    run = graded_without_root
    printed = run["result"].stdout + run["result"].stderr
    assert run["result"].returncode == 0, printed[-5000:]
    assert "not running as root" in printed and "Sandboxes: each sandbox as your user in a user namespace" in printed
    assert run["grades"] == {("honest_a", PS2): FULL, ("blank", PS2): 0, ("escaper", PS2): 0, ("lingerer", PS2): 0}
    assert student_lines(run["result"].stdout, "honest_a")[1:] == [], "notes on an honest submission"


def test_without_root_no_sandbox_makes_a_user_namespace_or_a_key_or_writes_past_its_limits(graded_without_root):
    course = graded_without_root["course"]
    page = html.unescape((course / "feedback" / "escaper" / PS2 / f"{PS2}.html").read_text(encoding="utf-8"))
    assert "HOLE" not in page, page[-3000:]
    for verdict in ("user namespace: refused", "kernel keys: refused", "writable places: full /job",
                    "writable places: full /dev/shm", "writable places: refused /"):
        assert verdict in page, f"no {verdict!r} in the feedback of the escaper"
    assert (course.parent / "victim.txt").read_text(encoding="utf-8") == VICTIM
    lingerer = html.unescape((course / "feedback" / "lingerer" / PS2 / f"{PS2}.html").read_text(encoding="utf-8"))
    assert left_behind(lingerer) == [], "a process of a sandbox is left"  # not others of the grader's user


def test_another_course_graded_at_the_same_time_is_graded_right_and_shares_nothing(graded):
    """Two graders as root at once take their sandboxes' identities from one registry: neither class
    is harmed, and nothing of either is left (the tests of qkv_grading.identities show no uid is shared)."""
    other = graded["other"]
    assert other["result"].returncode == 0, (other["result"].stdout + other["result"].stderr)[-5000:]
    assert other["grades"] == {("honest_c", PS2): FULL, ("escaper", PS2): 0, ("lingerer", PS2): 0}
    assert graded["runs"][0]["grades"][("honest_a", PS2)] == FULL
    page = html.unescape((other["course"] / "feedback" / "escaper" / PS2 / f"{PS2}.html").read_text(encoding="utf-8"))
    assert "HOLE" not in page and "kernel keys: refused" in page
    page = html.unescape((other["course"] / "feedback" / "lingerer" / PS2 / f"{PS2}.html").read_text(encoding="utf-8"))
    assert left_behind(page) == [], "a process of the other course's lingerer is left"
