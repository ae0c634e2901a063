"""Helpers for the exercise tests: a temporary copy of the course, the nbgrader command line, notebooks.

The tests never run nbgrader in ``exercises/`` itself: :func:`copy_course` copies its
``nbgrader_config.py`` and ``source/`` into a temporary folder, and every command runs there.
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from qkv_exercises.problem_sets import order as problem_set_order
from qkv_grading.pipeline import nbgrader_env

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "exercises"
SOURCE = COURSE / "source"
PROBLEM_SETS = sorted((p.name for p in SOURCE.iterdir() if p.is_dir()), key=problem_set_order)


def copy_course(where: Path) -> Path:
    """A fresh course folder under ``where``: the config, the feedback template, the source
    notebooks and their translations, nothing else."""
    course = Path(where) / "course"
    course.mkdir(parents=True)
    shutil.copy(COURSE / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(COURSE / "templates", course / "templates")
    shutil.copytree(SOURCE, course / "source", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(COURSE / "locales", course / "locales")  # the problem sets' translations
    return course


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the real nbgrader command line (``python -m nbgrader``) in ``course``."""
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
                            capture_output=True, text=True)
    if check:
        assert result.returncode == 0, (
            f"nbgrader {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def grading(course: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the instructors' command ``python -m qkv_grading --course COURSE ARGS``."""
    return subprocess.run([sys.executable, "-m", "qkv_grading", "--course", str(course), *args],
                          cwd=cwd or course.parent, env=nbgrader_env(), capture_output=True, text=True)


def read_notebook(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_notebook(path: Path, nb: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1), encoding="utf-8")


def source_notebook(problem_set: str) -> dict:
    return read_notebook(SOURCE / problem_set / f"{problem_set}.ipynb")


def cell_source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def nbgrader_meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def with_answer(nb: dict, grade_id: str, source: str) -> dict:
    """A copy of ``nb`` in which the cell ``grade_id`` holds ``source`` (a student's answer)."""
    nb = copy.deepcopy(nb)
    cells = [c for c in nb["cells"] if nbgrader_meta(c).get("grade_id") == grade_id]
    assert len(cells) == 1, f"no cell {grade_id!r} in the notebook"
    cells[0]["source"] = source
    return nb


def with_first_cell(nb: dict, source: str) -> dict:
    """A copy of ``nb`` with a code cell of the student's own put before every other cell."""
    nb = copy.deepcopy(nb)
    nb["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "students-own-first-cell",
                           "metadata": {}, "outputs": [], "source": source})
    return nb


def marked_regions(nb: dict, begin: str, end: str) -> list[str]:
    """The lines between ``begin`` and ``end`` markers in every cell (stripped, not empty)."""
    lines = []
    for cell in nb["cells"]:
        inside = False
        for line in cell_source(cell).splitlines():
            if begin in line:
                inside = True
            elif end in line:
                inside = False
            elif inside and line.strip():
                lines.append(line.strip())
    return lines


def solution_lines(nb: dict) -> list[str]:
    return marked_regions(nb, "### BEGIN SOLUTION", "### END SOLUTION")


def hidden_test_lines(nb: dict) -> list[str]:
    return marked_regions(nb, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def grade_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if nbgrader_meta(c).get("grade")]


def points(nb: dict) -> float:
    return sum(float(nbgrader_meta(c)["points"]) for c in grade_cells(nb))


def read_grades(csv_path: Path) -> dict[tuple[str, str], float]:
    """``{(student, problem set): score}`` from nbgrader's grades.csv."""
    with Path(csv_path).open(encoding="utf-8", newline="") as f:
        return {(row["student_id"], row["assignment"]): float(row["score"] or 0) for row in csv.DictReader(f)}


def error_outputs(nb: dict) -> list[tuple[str, dict]]:
    """``(grade_id or '', error output)`` for every error in the notebook's outputs."""
    found = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                found.append((nbgrader_meta(cell).get("grade_id", ""), output))
    return found
