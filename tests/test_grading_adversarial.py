"""Dishonest and hostile submissions, graded with the real command beside honest classmates.

One class hands in problem set 2 and the probe problem set (``ps99_probe``: hidden value and
function checks). Most attackers hand in blank answers, so that any point they get could only
come from tampering. The class is graded twice with ``python -m qkv_grading grade`` (the second
time ``--fresh``, running every notebook again), and the tests show:

- 0 points gained by any tampering, and the partial work of the others graded as it is;
- 0 classmates affected: honest students get full marks, their files are untouched, and no file
  of the course, the repository or the gradebook was changed by a submission;
- no hidden-test text, no solution and no expected value of a hidden check in any feedback page;
- no live script in any feedback page (only MathJax, from the feedback folder);
- the batch finishes, with a reason for each failure, no process of a sandbox left alive, and
  no connection made to a server on this machine;
- the two runs give identical grades.
"""

from __future__ import annotations

import hashlib
import html
import html.parser
import json
import socket
import sqlite3
import threading

import numpy as np
import pytest

from qkv_exercises import variants
from qkv_exercises.checking import format_number
from qkv_exercises.checks import seed_for
from qkv_exercises.identity import student_variant

from .exercise_support import ROOT, hidden_test_lines, points, read_notebook, solution_lines, source_notebook
from .grading_probe.ps99_probe import hidden_calls
from .grading_support import (
    HIDDEN_MARK,
    PROBE,
    PS2,
    grading,
    hand_in,
    probe_course,
    read_grades,
    released,
    sandbox_processes,
    source_of,
    student_lines,
    with_cells,
)

pytestmark = pytest.mark.slow

TIMEOUT = "12"  # seconds per notebook in these runs
FULL = points(source_notebook(PS2))  # every point of ps2
HONEST = {("honest_a", PS2): FULL, ("honest_b", PS2): FULL, ("probe_honest", PROBE): 4}


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.5)
        self.port, self.accepted, self.running = self.server.getsockname()[1], 0, True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                connection, _ = self.server.accept()
                self.accepted += 1
                connection.close()
            except OSError:
                pass

    def close(self):
        self.running = False
        self.thread.join(timeout=2)
        self.server.close()


def attacks(course, listener_port) -> dict:
    """``{student: (problem set, notebook, extra files, expected score, words its notes must hold)}``."""
    blank, probe_blank = released(course, PS2), released(course, PROBE)
    solution, probe_solution = source_of(PS2), source_of(PROBE)
    classmate = course / "submitted" / "honest_a" / PS2 / f"{PS2}.ipynb"
    targets = [ROOT / "src" / "qkv_exercises" / "checking.py", ROOT / "src" / "qkv" / "attention.py",
               course / "nbgrader_config.py", classmate, course / "gradebook.db", course / "grades.csv",
               course / "source" / PS2 / "planted.txt", course / ".grading" / "key"]
    writes = "\n".join(f"try:\n    open({str(t)!r}, 'w').write('tampered')\n    print('WROTE', {str(t)!r})\n"
                       f"except Exception as err:\n    print('could not write:', type(err).__name__)" for t in targets)
    # honest_a's answers, typed in by hand: right for honest_a's numbers only
    theirs = variants.q1_example(student_variant(PS2, "honest_a"))
    copied = np.round(theirs.Q @ theirs.K.T, 2).tolist()
    return {
        "patcher": (PS2, with_cells(blank, {"answer_scores_q1": (
            "import os, qkv_exercises\nqkv_exercises.start = lambda *a, **k: ps\n"
            "ps.check = lambda *a, **k: print('\u2713 correct')\nps.summary = lambda: print('8 of 8 points')\n"
            "if os.environ.get('NBGRADER_EXECUTION') == 'autograde':\n    print('under the autograder')\n"
            "scores_q1 = None")}), {}, 0, []),
        "transformer": (PS2, with_cells(blank, {"answer_scores_q1": (
            "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\nscores_q1 = None")}),
            {}, 0, []),
        "numpy_patch": (PS2, with_cells(blank, {"answer_scores_q1": (
            "np.abs = lambda x: np.zeros_like(x)\nnp.allclose = lambda *a, **k: True\n"
            "np.isclose = lambda a, b, **k: np.ones(np.shape(a), dtype=bool)\nscores_q1 = None")}), {}, 0, []),
        "qkv_folder": (PS2, blank, {
            "qkv/__init__.py": "def softmax(x, axis=-1):\n    return x\n",
            "qkv_exercises/__init__.py": "def start(*a, **k):\n    raise SystemExit\n",
            "helpers.zip": "PK not really a zip",
        }, 0, ["other files handed in were not used"]),
        "writer": (PS2, with_cells(blank, {"answer_scores_q1": writes + "\nscores_q1 = None"}), {}, 0, []),
        "db_tamper": (PS2, with_cells(blank, {"answer_scores_q1": (
            f"import sqlite3\ntry:\n    db = sqlite3.connect({str(course / 'gradebook.db')!r})\n"
            "    db.execute('UPDATE grade SET manual_score = 0')\n    db.commit()\nexcept Exception as err:\n"
            "    print('no gradebook:', err)\nscores_q1 = None")}), {}, 0, []),
        "copier": (PS2, with_cells(blank, {"answer_scores_q1": (
            "import glob, json\nfound = glob.glob('../../../submitted/*/*/*.ipynb') + "
            f"glob.glob({str(course / 'submitted' / '*' / '*' / '*.ipynb')!r})\nprint('found', found)\n"
            "for path in found:\n    for cell in json.load(open(path))['cells']:\n"
            "        exec(''.join(cell['source']))\nscores_q1 = globals().get('scores_q1')")}), {}, 0, []),
        "copied_answers": (PS2, with_cells(blank, {"answer_scores_q1": f"scores_q1 = {copied}"}), {}, 0, []),
        "leaker": (PS2, with_cells(blank, {"answer_scores_q1": (
            "import glob, os, socket\nprint(os.listdir('/'), glob.glob('../../../source/*/*.ipynb'), "
            "glob.glob('/sandbox/**', recursive=True)[:50], glob.glob('/job/**', recursive=True))\n"
            f"for path in [{str(course / 'source' / PS2 / (PS2 + '.ipynb'))!r}, {str(course / 'gradebook.db')!r},"
            f" {str(course / 'source' / PROBE / (PROBE + '.ipynb'))!r}]:\n"
            "    try:\n        print(open(path, errors='replace').read())\n    except Exception as err:\n"
            "        print('cannot read', type(err).__name__)\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {listener_port}), timeout=2)\n    print('CONNEC' + 'TED-OK')\n"
            "except Exception as err:\n    print('no network:', type(err).__name__)\nscores_q1 = None")}), {}, 0, []),
        "html": (PS2, with_cells(blank, {"answer_scores_q1": (
            "# <script>alert('answer source')</script>\nfrom IPython.display import HTML, Javascript, display\n"
            "display(HTML('<script>alert(1)</script><div class=\"banner\">Score: 8.0 / 8.0</div>'))\n"
            "display(Javascript('alert(2)'))\nprint('<img src=x onerror=alert(3)>')\nscores_q1 = None")},
            markdown_before={"answer_scores_q1": ["<script>alert(4)</script><img src=x onerror=alert(5)>\n"
                                                  "<a href=\"javascript:alert(6)\">score</a>"]}), {}, 0, []),
        "background": (PS2, with_cells(blank, {"answer_scores_q1": (
            "import os, subprocess, time\n"
            f"subprocess.Popen(['sh', '-c', 'sleep 20; echo tampered > {course / 'grades.csv'}'],"
            " start_new_session=True)\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n"
            "scores_q1 = None")}), {}, 0, []),
        "sleeper": (PS2, with_cells(solution, {g: "import time\ntime.sleep(10)\n" + _answer(solution, g)
                                               for g in _answers(solution)}),
                    {}, None, ["ran past its time limit of 12 s"]),
        "forkbomb": (PS2, with_cells(blank, {"answer_scores_q1": (
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")}),
            {}, 0, ["ran past its time limit"]),
        "memory": (PS2, with_cells(solution, {}, before={"answer_scores_q1": ["hog = np.ones(1 << 31)"]}),
                   {}, FULL, ["raised MemoryError"]),
        "big_output": (PS2, with_cells(solution, {}, before={"answer_scores_q1": ["print('x' * 100_000_000)"]}),
                       {}, FULL, []),
        "killer": (PS2, with_cells(solution, {}, before={"answer_scores_raw_head1": [
            "import os, signal\nfor pid in (-1, os.getppid(), 1, os.getpid()):\n    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass"]}),
            {}, 4, ["checks after it were not reached"]),
        "exiter": (PS2, with_cells(solution, {}, before={"answer_weights_q1": ["import os\nos._exit(3)"]}),
                   {}, 2, ["ended (exit code 3)"]),
        "forger": (PS2, with_cells(blank, {"answer_scores_q1": (
            "import os\nfor fd in range(3, 12):\n    try:\n"
            "        os.write(fd, b'{\"capture\": 1, \"value\": {\"t\": \"array\", \"dtype\": \"float\", \"shape\": [9],"
            " \"v\": [1]}}\\n{\"cell\": \"x\"}\\n' + b'[' * 100000 + b'\\n')\n    except OSError:\n        pass\n"
            "scores_q1 = None")}), {}, 0, []),
        "edited_tests": (PS2, _edit_tests(blank), {}, 0, []),
        "wrong_id": (PS2, _wrong_id(solution), {}, FULL, ["solved with STUDENT_ID = 'honest_a'"]),
        "odd_values": (PS2, with_cells(blank, {"answer_scores_q1": (
            "class Hostile:\n    def __array__(self, *a, **k):\n        raise RuntimeError('no')\n"
            "    def __repr__(self):\n        raise RuntimeError('no')\nscores_q1 = Hostile()"),
            "answer_scaled_scores_q1": "scaled_scores_q1 = [[[[[[[[[[[[[1.0]]]]]]]]]]]]]",
            "answer_weights_q1": "weights_q1 = np.zeros(5_000_000)"}), {}, 0, []),
        "probe_slip": (PROBE, with_cells(probe_solution, {"answer_weights": (
            "e = np.exp(q1 @ K.T)\nweights = np.round(e / e.sum(), 2)  # the scores not scaled")}), {}, 3, []),
        "probe_spy": (PROBE, with_cells(probe_blank, {"answer_softmax": (
            "def softmax(x):\n    import inspect, sys\n    for frame in inspect.stack():\n"
            "        print(frame.filename, frame.code_context)\n    try:\n        import qkv\n"
            "        return qkv.softmax(x)\n    except Exception as err:\n        print('no qkv:', err)\n"
            "    try:\n        from qkv_exercises import checking\n        return checking.softmax(x)\n"
            "    except Exception as err:\n        print('no checks:', err)\n    return None")}), {}, 0, []),
        "probe_wrong": (PROBE, with_cells(probe_solution, {"answer_softmax": (
            "def softmax(x):\n    return np.exp(x)  # not normalised")}), {}, 2, []),
    }


def _answers(nb) -> list[str]:
    return [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
            if c["metadata"].get("nbgrader", {}).get("solution")]


def _answer(nb, grade_id) -> str:
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
    return "".join(cell["source"])


def _edit_tests(nb) -> dict:
    """Blank answers; every test cell replaced by ``pass`` with 100 points, and one test cell deleted."""
    nb = json.loads(json.dumps(nb))
    tests = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    for cell in tests:
        cell["source"] = "pass"
        cell["metadata"]["nbgrader"]["points"] = 100
    nb["cells"].remove(tests[0])
    return nb


def _wrong_id(nb) -> dict:
    nb = json.loads(json.dumps(nb))
    cell = next(c for c in nb["cells"] if "student-id" in c["metadata"].get("tags", []))
    cell["source"] = 'STUDENT_ID = "honest_a"\nPRACTICE = 1'
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Release, hand in, grade twice (the second time every notebook again); what each run left."""
    course = probe_course(tmp_path_factory.mktemp("adversarial"))
    result = grading(course, "release")
    assert result.returncode == 0, result.stdout + result.stderr
    listener = Listener()
    folder = course.parent / "hand-ins"
    for (student, ps), _ in HONEST.items():
        hand_in(folder, student, ps, source_of(ps))
    hand_in(folder, "blank", PS2, released(course, PS2))
    cases = attacks(course, listener.port)
    for student, (ps, nb, files, _, _) in cases.items():
        path = hand_in(folder, student, ps, nb)
        for name, text in files.items():
            (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
            (path.parent / name).write_text(text, encoding="utf-8")
    watched = [ROOT / "src" / "qkv_exercises" / "checking.py", ROOT / "src" / "qkv" / "attention.py",
               course / "nbgrader_config.py"]
    before = {str(p): _digest(p) for p in watched}
    sources_before = sorted(p.name for p in (course / "source" / PS2).iterdir())
    runs = []
    for extra in ((), ("--fresh",)):
        result = grading(course, "grade", str(folder), "--timeout", TIMEOUT, *extra)
        grades = read_grades(course / "grades.csv") if (course / "grades.csv").is_file() else {}
        pages = {p.parent.parent.name + "/" + p.parent.name: p.read_text(encoding="utf-8")
                 for p in (course / "feedback").glob("*/*/*.html")}
        runs.append({"result": result, "grades": grades, "pages": pages,
                     "classmate": (course / "submitted" / "honest_a" / PS2 / f"{PS2}.ipynb").read_bytes()})
    listener.close()
    return {"course": course, "cases": cases, "runs": runs, "before": before, "watched": watched,
            "sources_before": sources_before, "folder": folder, "accepted": listener.accepted}


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
    assert {str(p): _digest(p) for p in graded["watched"]} == graded["before"]
    assert sorted(p.name for p in (course / "source" / PS2).iterdir()) == graded["sources_before"]
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("SELECT count(*) FROM grade WHERE manual_score IS NOT NULL").fetchone() == (0,)
    assert "tampered" not in (course / "grades.csv").read_text(encoding="utf-8")


def test_no_process_of_a_sandbox_is_left_and_no_connection_was_made(graded):
    assert sandbox_processes() == []
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
            if (student, ps) not in HONEST and student not in ("sleeper", "memory", "big_output", "killer",
                                                                 "exiter", "wrong_id", "probe_slip", "probe_wrong"):
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


def test_two_runs_give_identical_grades(graded):
    first, second = graded["runs"]
    assert first["grades"] == second["grades"]


def test_the_autograded_notebooks_are_read_by_nbgrader(graded):
    """formgrader reads autograded/<student>/<ps>/<ps>.ipynb: a valid notebook with the source's metadata."""
    import nbformat

    course = graded["course"]
    nb = nbformat.read(course / "autograded" / "honest_a" / PS2 / f"{PS2}.ipynb", as_version=4)
    nbformat.validate(nb)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert [i for i in ids if i] == [c["metadata"]["nbgrader"]["grade_id"] for c in read_notebook(
        course / "source" / PS2 / f"{PS2}.ipynb")["cells"] if c["metadata"].get("nbgrader")]
