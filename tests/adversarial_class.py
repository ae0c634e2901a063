"""The adversarial class: one class of honest and hostile hand-ins, graded with the real command, once per session.

One class hands in problem set 2 and the probe problem set (``ps99_probe``: hidden value and
function checks). Most attackers hand in blank answers, so that any point they get could only
come from tampering: :func:`attacks` does things in the sandbox, :func:`tests.hostile_data.data_attacks`
sends hostile data back, :func:`tests.hostile_markup.markup_attacks` hands in markup meant to run on
the pages an instructor opens (formgrader's and nbgrader's feedback). The session fixture :func:`adversarial_class` (registered in
``tests/conftest.py``) grades the class three times with ``python -m qkv_grading grade``: then
``--fresh`` (every notebook runs again), then once more without (every record comes from the
journal), and keeps what each run printed, graded, wrote and cost (the grading process's peak
memory and CPU time). Its runs use a temp folder in which another local user planted, before,
what the grader once made there under predictable names (:func:`planted_temp_folder`), and
the first run has another course graded beside it, at the same time (:func:`another_course`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading

import numpy as np
import pytest

from qkv_exercises import variants
from qkv_exercises.identity import student_variant

from qkv_grading.pipeline import nbgrader_env

from .exercise_support import ROOT, points, source_notebook
from .grading_support import (
    PROBE,
    PS2,
    grading,
    grading_command,
    hand_in,
    probe_course,
    read_grades,
    released,
    sandbox_processes,
    source_of,
    with_cells,
)
from .local_users import NEIGHBOUR, local_user, run_as
from .sandbox_attacks import ATTACKS
from .hostile_data import data_attacks
from .hostile_markup import markup_attacks

# Seconds per notebook in these runs: an honest hand-in needs about 1.5 s of CPU; one that runs past
# the limit beside others runs again alone, so a loaded machine costs it no mark. Each attacker that
# sleeps or forks holds the run for this long, twice (beside the others, then alone).
TIMEOUT = "8"
FULL = points(source_notebook(PS2))  # every point of ps2
HONEST = {("honest_a", PS2): FULL, ("honest_b", PS2): FULL, ("probe_honest", PROBE): 4}


def digest(path) -> str:
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
        # Its first answer comes at once, every later one after 30 s asleep: whatever the machine's load
        # (another course is graded beside this class), the first is in time and no other is.
        "sleeper": (PS2, with_cells(solution, {g: ("import time\ntime.sleep(30)\n" if i else "") + _answer(solution, g)
                                               for i, g in enumerate(_answers(solution))}),
                    {}, 1, [f"ran past its time limit of {TIMEOUT} s"]),
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
        **sandbox_attackers(blank),
    }


def sandbox_attackers(blank: dict) -> dict:
    """Blank hand-ins whose first answer attacks the sandbox itself (:mod:`tests.sandbox_attacks`)."""
    escape = "\n".join(ATTACKS[name] for name in ("user namespace", "kernel keys", "writable places"))
    return {"escaper": (PS2, with_cells(blank, {"answer_scores_q1": escape + "\nscores_q1 = None"}), {}, 0, []),
            "lingerer": (PS2, with_cells(blank, {"answer_scores_q1": ATTACKS["left behind"] + "\nscores_q1 = None"}),
                         {}, 0, [])}


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


@pytest.fixture(scope="session")
def adversarial_class(tmp_path_factory):
    """Release, hand in, grade three times (every notebook again, then all from the journal); what each run left."""
    course = probe_course(tmp_path_factory.mktemp("adversarial"))
    result = grading(course, "release", PS2, PROBE)
    assert result.returncode == 0, result.stdout + result.stderr
    listener = Listener()
    folder = course.parent / "hand-ins"
    for (student, ps), _ in HONEST.items():
        hand_in(folder, student, ps, source_of(ps))
    hand_in(folder, "blank", PS2, released(course, PS2))
    cases = {**attacks(course, listener.port), **data_attacks(course), **markup_attacks(course, listener.port)}
    for student, (ps, nb, files, _, _) in cases.items():
        path = hand_in(folder, student, ps, nb)
        for name, text in files.items():
            (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
            (path.parent / name).write_text(text, encoding="utf-8")
    watched = [ROOT / "src" / "qkv_exercises" / "checking.py", ROOT / "src" / "qkv" / "attention.py",
               course / "nbgrader_config.py"]
    before = {str(p): digest(p) for p in watched}
    sources_before = sorted(p.name for p in (course / "source" / PS2).iterdir())
    shared_tmp = planted_temp_folder(course.parent)
    other = another_course(course, tmp_path_factory.mktemp("another-course"))
    runs = []
    for number, extra in enumerate(((), ("--fresh",), ())):
        usage = course.parent / f"usage-{number}.json"
        beside = None if number else subprocess.Popen(  # another course graded at the same time on this machine
            grading_command(other["course"], "grade", str(other["folder"]), "--timeout", TIMEOUT),
            cwd=other["course"].parent, env=nbgrader_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        result = grading(course, "grade", str(folder), "--timeout", TIMEOUT, *extra, usage=usage,
                         env={"TMPDIR": str(shared_tmp)})
        if beside is not None:
            out, err = beside.communicate(timeout=900)
            other["result"] = subprocess.CompletedProcess(beside.args, beside.returncode, out, err)
            other["grades"] = read_grades(other["course"] / "grades.csv")
        grades = read_grades(course / "grades.csv") if (course / "grades.csv").is_file() else {}
        pages = {p.parent.parent.name + "/" + p.parent.name: p.read_text(encoding="utf-8")
                 for p in (course / "feedback").glob("*/*/*.html")}
        runs.append({"result": result, "grades": grades, "pages": pages,
                     "usage": json.loads(usage.read_text()) if usage.is_file() else {},
                     "classmate": (course / "submitted" / "honest_a" / PS2 / f"{PS2}.ipynb").read_bytes()})
    listener.close()
    return {"course": course, "cases": cases, "runs": runs, "before": before, "watched": watched,
            "sources_before": sources_before, "folder": folder, "accepted": listener.accepted, "tmp": shared_tmp,
            "other": other, "left_over": sandbox_processes()}


VICTIM = "the instructor's own file"
PLANTED_RUNNER = "import sys\nprint('{\"done\": true}')\nsys.exit(0)\n"  # would hand back no answer for anyone


def planted_temp_folder(where) -> "os.PathLike":
    """A temp folder shared with another local user (sticky, as /tmp is), in which that user planted,
    before grading, what the grader once made there under predictable names: a folder of lock files
    that are links to a file of root's, and a runtime folder with a runner of their own."""
    from qkv_grading import sandbox

    shared = where / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = where / "victim.txt"
    victim.write_text(VICTIM, encoding="utf-8")
    if os.geteuid() != 0:
        return shared  # no other user to plant anything
    names = {"qkv_runner.py": "qkv_runner.py", "qkv_exercises/__init__.py": "qkv_exercises/__init__.py",
             "qkv_exercises/answers.py": "qkv_exercises/answers.py"}
    files = {name: dict(sandbox.runtime_files())[f"{sandbox.LIB}/{name}"] for name in names}
    named = hashlib.sha256(b"".join(n.encode() + d for n, d in sorted(files.items()))).hexdigest()[:16]
    runtime = f"qkv-grading-runtime-{os.geteuid()}-{named}"
    script = (f"mkdir -m 0755 qkv-grading-slots-0 {runtime} {runtime}/qkv_exercises && "
              f"for n in $(seq 1 64); do ln -s {victim} qkv-grading-slots-0/$n.lock; done && "
              f"printf '%s' \"$RUNNER\" > {runtime}/qkv_runner.py && touch {runtime}/qkv_exercises/__init__.py")
    neighbour = local_user(NEIGHBOUR)
    done = run_as(neighbour, ["/bin/sh", "-c", f"cd {shared} && {script}"], reachable=[shared],
                  env={"RUNNER": PLANTED_RUNNER}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return shared


def another_course(course, where) -> dict:
    """A second course (a copy of the released one) with a class of its own: an honest student and two
    who attack the sandbox."""
    other = where / "course"
    shutil.copytree(course, other, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback", ".grading"))
    folder = where / "hand-ins"
    hand_in(folder, "honest_c", PS2, source_of(PS2))
    for student, (ps, nb, *_) in sandbox_attackers(released(other, PS2)).items():
        hand_in(folder, student, ps, nb)
    return {"course": other, "folder": folder}
