"""Helpers for the grading tests: a course with the probe problem set, the real grading command, results.

The probe problem set ``ps99_probe`` (``tests/grading_probe/ps99_probe.py`` and the notebook
:func:`probe_notebook` makes) has a hidden value check and visible and hidden function
checks. :func:`grading` runs the instructors' command, ``python -m qkv_grading``, exactly
(``runpy`` runs its ``__main__``) after putting the probe's folder on the problem sets' path, and
can report what the grading process itself cost.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from qkv_grading.pipeline import nbgrader_env

from .exercise_support import copy_course, nbgrader_meta, read_notebook, source_notebook, write_notebook

PS2 = "ps2_scaled_dot_product"
PROBE = "ps99_probe"
PROBE_FOLDER = Path(__file__).resolve().parent / "grading_probe"
HIDDEN_MARK = "HIDDEN-PROBE-MARK"  # written only inside the probe's hidden tests
LAUNCH = ("import atexit, json, resource, runpy, sys\n"
          "import qkv_exercises.problem_sets as sets\n"
          "sets.__path__.append(sys.argv.pop(1))\n"
          "usage = sys.argv.pop(1)\n"
          "def report():\n"
          "    mine = resource.getrusage(resource.RUSAGE_SELF)\n"
          "    with open(usage, 'w') as f:\n"
          "        json.dump({'max_rss_bytes': mine.ru_maxrss * 1024, 'cpu_seconds': mine.ru_utime + mine.ru_stime}, f)\n"
          "if usage != '-':\n"
          "    atexit.register(report)\n"
          "runpy.run_module('qkv_grading', run_name='__main__', alter_sys=True)\n")


def _cell(kind: str, source: str, **meta) -> dict:
    cell = {"cell_type": kind, "id": meta.pop("id"), "metadata": {}, "source": source}
    if meta.get("tags"):
        cell["metadata"]["tags"] = meta.pop("tags")
    if meta:
        cell["metadata"]["nbgrader"] = {"schema_version": 3, "task": False, "grade": False, "solution": False,
                                        "locked": False, **meta}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def probe_notebook() -> dict:
    """The source notebook of ``ps99_probe``: one answer per check, solutions and hidden tests marked."""
    test = dict(grade=True, locked=True, points=1)
    cells = [
        _cell("markdown", "# Grading probe\n\nThe grading tests' own problem set: $q_1 K^\\top$ and a softmax.",
              id="intro"),
        _cell("code", 'STUDENT_ID = ""\nPRACTICE = 1', id="student-id", tags=["student-id"]),
        _cell("code", 'import numpy as np\n\nfrom qkv_exercises import start\n\nps = start("ps99_probe", STUDENT_ID, '
                      'PRACTICE)\nq1, K = ps.q1, ps.K\nps.show("K", K, row_labels=ps.keys)',
              id="setup", grade_id="setup", locked=True),
        _cell("code", "scores = None\n### BEGIN SOLUTION\nscores = np.round(q1 @ K.T, 2)\n### END SOLUTION",
              id="answer-scores", grade_id="answer_scores", solution=True),
        _cell("code", '"""scores is q1 K^T."""\nps.check("scores", scores)', id="scores", grade_id="scores", **test),
        _cell("code", "weights = None\n### BEGIN SOLUTION\ne = np.exp(q1 @ K.T / np.sqrt(2))\n"
                      "weights = np.round(e / e.sum(), 2)\n### END SOLUTION",
              id="answer-weights", grade_id="answer_weights", solution=True),
        _cell("code", f'"""weights is the softmax of the scaled scores, checked when graded."""\n'
                      f'### BEGIN HIDDEN TESTS\nps.check("weights_hidden", weights)  # {HIDDEN_MARK}\n'
                      "### END HIDDEN TESTS", id="weights-hidden", grade_id="weights_hidden", **test),
        _cell("code", "def softmax(x):\n    ### BEGIN SOLUTION\n    x = np.asarray(x, dtype=float)\n"
                      "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n    return e / e.sum(axis=-1, keepdims=True)\n"
                      "    ### END SOLUTION\n    raise NotImplementedError()",
              id="answer-softmax", grade_id="answer_softmax", solution=True),
        _cell("code", '"""softmax on q1 K^T."""\nps.check("softmax_visible", softmax)', id="softmax-visible",
              grade_id="softmax_visible", **test),
        _cell("code", f'"""softmax on other inputs, checked when graded."""\n### BEGIN HIDDEN TESTS\n'
                      f'ps.check("softmax_hidden", softmax)  # {HIDDEN_MARK}\n### END HIDDEN TESTS',
              id="softmax-hidden", grade_id="softmax_hidden", **test),
        _cell("code", "ps.summary()", id="summary", grade_id="summary", locked=True),
    ]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                                        "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def probe_course(where: Path) -> Path:
    """A fresh course folder (:func:`copy_course`) with the probe problem set added to ``source/``."""
    course = copy_course(where)
    write_notebook(course / "source" / PROBE / f"{PROBE}.ipynb", probe_notebook())
    return course


def grading_command(course: Path, *args: str, usage: Path | None = None) -> list[str]:
    """``python -m qkv_grading --course COURSE ARGS``, with the probe problem set known; with ``usage``, the
    grading process writes its own peak memory and CPU time there (JSON) as it exits."""
    return [sys.executable, "-c", LAUNCH, str(PROBE_FOLDER), str(usage or "-"), "--course", str(course), *args]


def grading(course: Path, *args: str, timeout: float = 900, usage: Path | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run :func:`grading_command` (``env`` over the environment nbgrader needs)."""
    return subprocess.run(grading_command(course, *args, usage=usage), cwd=course.parent,
                          env={**nbgrader_env(), **(env or {})}, capture_output=True, text=True, timeout=timeout)


def source_of(problem_set: str) -> dict:
    return probe_notebook() if problem_set == PROBE else source_notebook(problem_set)


def released(course: Path, problem_set: str) -> dict:
    return read_notebook(course / "release" / problem_set / f"{problem_set}.ipynb")


def hand_in(folder: Path, student: str, problem_set: str, nb: dict) -> Path:
    path = folder / student / problem_set / f"{problem_set}.ipynb"
    write_notebook(path, nb)
    return path


def with_cells(nb: dict, changes: dict[str, str], before: dict[str, list[str]] | None = None,
               markdown_before: dict[str, list[str]] | None = None) -> dict:
    """A copy of ``nb`` with the cells named by grade_id replaced, and cells of the student's own added
    before the named cells (code in ``before``, markdown in ``markdown_before``)."""
    nb = json.loads(json.dumps(nb))
    cells = []
    for number, cell in enumerate(nb["cells"]):
        grade_id = nbgrader_meta(cell).get("grade_id")
        for kind, added in (("code", (before or {}).get(grade_id, ())),
                            ("markdown", (markdown_before or {}).get(grade_id, ()))):
            for k, source in enumerate(added):
                extra = {"cell_type": kind, "id": f"own-{number}-{kind}-{k}", "metadata": {}, "source": source}
                if kind == "code":
                    extra.update(outputs=[], execution_count=None)
                cells.append(extra)
        if grade_id in changes:
            cell["source"] = changes[grade_id]
        cells.append(cell)
    nb["cells"] = cells
    return nb


def read_grades(csv_path: Path) -> dict[tuple[str, str], float]:
    """``{(student, problem set): score}`` from grades.csv, read with the csv module (so it must be valid CSV)."""
    with Path(csv_path).open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert all(len(row) == len(header) for row in rows), f"grades.csv rows of different lengths: {rows}"
    index = {name: i for i, name in enumerate(header)}
    return {(row[index["student_id"]], row[index["assignment"]]): float(row[index["score"]] or 0) for row in rows[1:]}


def sandbox_processes() -> dict[int, list[int]]:
    """Processes left under a sandbox identity that no grader holds (another course graded meanwhile
    on this machine holds its own, and is not counted)."""
    from qkv_grading import identities

    return identities.leftover_processes()


def student_lines(stdout: str, student: str) -> list[str]:
    """The summary row of ``student`` and the notes (``!``) under it."""
    lines = stdout.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith(student + " ")), default=None)
    if start is None:
        return []
    found = [lines[start]]
    for line in lines[start + 1:]:
        if not line.strip().startswith("!"):
            break
        found.append(line)
    return found

