"""From a source notebook and a submission to a sandbox job (trusted side, before the sandbox).

:func:`plan` reads a problem set's source notebook (``source/<ps>/<ps>.ipynb``) once:
each cell's role from its nbgrader metadata, each test cell's check from
``qkv_exercises.problem_sets.<ps>``, each test's points from the source (never from a
submission). :func:`build_job` then makes, for one submission filed under one student
id, the job the sandbox runs (:mod:`qkv_grading.sandbox_runner`):

- locked cells that are not tests (set-up, givens shown, summary): the SOURCE text;
- answer cells (``solution``): the submission's cell with the same ``grade_id``
  (none: nothing runs in its place, and a note says so);
- the student-id cell (tag ``student-id``): the submission's;
- cells the student added: kept, after the problem-set cell they followed;
- test cells: never their text; in their place the runner captures the check's answer
  (a variable, or a function called on inputs drawn here: a hidden check's inputs from
  the course's grading key, the problem set, the check and the student).

The job also carries the givens of the filed id's variant, computed here by qkv.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkv_exercises import answers
from qkv_exercises.checks import FunctionCheck, ProblemSet, seed_for
from qkv_exercises.identity import student_variant
from qkv_exercises.notebook import Session

from .notes import Note
from .safe_text import stored

STUDENT_ID_TAG = "student-id"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MAX_NOTEBOOK_BYTES = 20 << 20
MAX_CELLS = 2000
MAX_CELL_CHARS = 200_000


class PlanError(ValueError):
    """A problem set that the sandboxed grader cannot grade: the message says why (an instructor's matter)."""


class NotANotebook(ValueError):
    """A submission that is not a notebook (the message says what is wrong)."""


@dataclass(frozen=True)
class SourceCell:
    """One cell of the source notebook and its role: markdown, locked, answer, student-id, test."""

    index: int
    cell_type: str
    source: str
    role: str
    grade_id: str | None = None
    points: float = 0.0
    check: object = None
    metadata: dict = field(default_factory=dict)

    @property
    def hidden(self) -> bool:
        return bool(self.check is not None and self.check.hidden)

    @property
    def released_source(self) -> str:
        """The text a student sees in the released notebook: without the hidden-test region."""
        return strip_hidden(self.source)


@dataclass(frozen=True)
class Plan:
    """How to grade one problem set: its source cells in order, and its problem-set module."""

    problem_set: ProblemSet
    notebook: str
    cells: tuple[SourceCell, ...]
    digest: str  # SHA-256 of the source notebook's bytes

    @property
    def name(self) -> str:
        return self.problem_set.name

    @property
    def tests(self) -> list[SourceCell]:
        return [c for c in self.cells if c.role == "test"]

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.cells if c.role in ("test", "manual"))


def strip_hidden(text: str) -> str:
    lines, inside = [], False
    for line in text.splitlines(keepends=True):
        if HIDDEN_BEGIN in line:
            inside = True
        elif HIDDEN_END in line:
            inside = False
        elif not inside:
            lines.append(line)
    return "".join(lines)


def cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        if not all(isinstance(s, str) for s in source):
            raise NotANotebook("a cell's source is not text")
        return "".join(source)
    if not isinstance(source, str):
        raise NotANotebook("a cell's source is not text")
    return source


def nbgrader_meta(cell: dict) -> dict:
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def _tags(cell: dict) -> list:
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return tags if isinstance(tags, list) else []


def plan(source_folder: Path, problem_set: ProblemSet) -> Plan:
    """The plan of ``problem_set`` from its source folder; :class:`PlanError` says what does not fit."""
    folder = Path(source_folder)
    path = folder / f"{problem_set.name}.ipynb"
    notebooks = sorted(p.name for p in folder.glob("*.ipynb"))
    if notebooks != [path.name]:
        raise PlanError(f"{folder} must hold exactly one notebook, {path.name}; it holds {', '.join(notebooks) or 'none'}")
    data = path.read_bytes()
    nb = json.loads(data)
    cells, seen = [], set()
    for index, cell in enumerate(nb["cells"]):
        meta, text = nbgrader_meta(cell), cell_text(cell)
        grade_id = meta.get("grade_id")
        if grade_id is not None and grade_id in seen:
            raise PlanError(f"{path.name}: two cells have grade_id {grade_id!r}")
        seen.add(grade_id)
        points = float(meta.get("points", 0) or 0)
        if cell["cell_type"] != "code":
            role = "manual" if meta.get("grade") and meta.get("solution") else (
                "answer" if meta.get("solution") else "markdown")
        elif STUDENT_ID_TAG in _tags(cell):
            role = "student-id"
        elif meta.get("solution"):
            role = "manual" if meta.get("grade") else "answer"
        elif meta.get("grade"):
            role = "test"
        else:
            role = "locked"
        check = None
        if role == "test":
            try:
                check = problem_set.check(grade_id)
            except KeyError:
                raise PlanError(f"{path.name}: test cell {grade_id!r} has no check in "
                                f"qkv_exercises.problem_sets.{problem_set.name}") from None
            if (HIDDEN_BEGIN in text) != bool(check.hidden):
                raise PlanError(f"{path.name}: test cell {grade_id!r} is {'' if HIDDEN_BEGIN in text else 'not '}"
                                f"a hidden test, but its check says hidden={check.hidden}")
        cells.append(SourceCell(index, cell["cell_type"], text, role, grade_id, points, check,
                                cell.get("metadata", {})))
    tested = {c.grade_id for c in cells if c.role == "test"}
    untested = [c.grade_id for c in problem_set.checks if c.grade_id not in tested]
    if untested:
        raise PlanError(f"{path.name}: no test cell for the checks {', '.join(untested)}")
    return Plan(problem_set, path.stem, tuple(cells), hashlib.sha256(data).hexdigest())


# --------------------------------------------------------------------------- a submission


def read_submission(path: Path) -> dict:
    """The submitted notebook as JSON, checked to be one; :class:`NotANotebook` says what is wrong."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise NotANotebook(f"{path.name} is {size / 2**20:.0f} MB, more than a notebook of this course can be "
                           f"({MAX_NOTEBOOK_BYTES >> 20} MB)")
    try:
        nb = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise NotANotebook(f"{path.name} is not a valid notebook (not JSON: {str(err)[:80]})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotANotebook(f"{path.name} is not a valid notebook (no list of cells)")
    if len(nb["cells"]) > MAX_CELLS:
        raise NotANotebook(f"{path.name} has {len(nb['cells'])} cells, more than {MAX_CELLS}")
    for cell in nb["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotANotebook(f"{path.name} is not a valid notebook (a cell without a type)")
        if len(cell_text(cell)) > MAX_CELL_CHARS:
            raise NotANotebook(f"{path.name} has a cell of more than {MAX_CELL_CHARS} characters")
        # Lone surrogates (which no UTF-8 file holds), control and bidirectional characters become
        # visible escapes: in a string literal they mean what they meant; anywhere else they were errors.
        cell["source"] = stored(cell_text(cell).replace("\r\n", "\n").replace("\r", "\n"))
    return nb


@dataclass
class RunCell:
    """A cell of the notebook as graded, in order: what it is, its text, and its job cell id (if it runs)."""

    kind: str  # markdown, instructor, answer, student-id, student, student-markdown, test, manual
    source: str
    grade_id: str | None = None
    job_id: int | None = None
    label: str = ""
    source_cell: SourceCell | None = None


def arrange(plan_: Plan, nb: dict | None) -> tuple[list[RunCell], list[str]]:
    """The cells to run and show, in the source's order, with the student's added cells where they were."""
    notes = []
    by_id, student_id_cell, added_after = {}, None, collections.defaultdict(list)
    known = {c.grade_id for c in plan_.cells if c.grade_id}
    instructors = {c.source for c in plan_.cells if c.grade_id is None and c.role in ("markdown", "locked")}
    anchor = None
    for cell in (nb or {}).get("cells", []):
        grade_id = nbgrader_meta(cell).get("grade_id")
        if isinstance(grade_id, str) and grade_id in known and grade_id not in by_id:
            by_id[grade_id] = cell
            anchor = grade_id
        elif student_id_cell is None and STUDENT_ID_TAG in _tags(cell):
            student_id_cell = cell
            anchor = STUDENT_ID_TAG
        elif cell_text(cell) in instructors:
            continue  # an instructor's cell without an id (the introduction), as released: the source's is shown
        elif cell["cell_type"] in ("code", "markdown", "raw"):
            added_after[anchor].append(cell)
    cells: list[RunCell] = []

    def add_students(after):
        for cell in added_after.get(after, ()):
            kind = "student" if cell["cell_type"] == "code" else "student-markdown"
            cells.append(RunCell(kind, cell_text(cell)))

    add_students(None)
    for sc in plan_.cells:
        if sc.role == "markdown":
            cells.append(RunCell("markdown", sc.source, sc.grade_id, source_cell=sc))
        elif sc.role == "locked":
            cells.append(RunCell("instructor" if sc.cell_type == "code" else "markdown", sc.source, sc.grade_id,
                                 source_cell=sc))
        elif sc.role == "student-id":
            text = cell_text(student_id_cell) if student_id_cell is not None else sc.source
            if student_id_cell is None:
                notes.append(Note("the student-id cell is missing (its tag was removed?): the source's was run "
                                  "instead"))
            cells.append(RunCell("student-id", text, source_cell=sc))
        elif sc.role in ("answer", "manual"):
            submitted = by_id.get(sc.grade_id)
            if submitted is None and nb is not None:
                notes.append(Note("no answer cell {grade_id} in the notebook (deleted?): nothing ran in its place",
                                  grade_id=sc.grade_id))
            kind = "answer" if sc.role == "answer" else "manual"
            text = cell_text(submitted) if submitted is not None else ""
            cells.append(RunCell(kind if sc.cell_type == "code" else kind + "-markdown", text, sc.grade_id,
                                 source_cell=sc))
        elif sc.role == "test":
            cells.append(RunCell("test", sc.source, sc.grade_id, source_cell=sc))
        add_students(sc.grade_id if sc.role != "student-id" else STUDENT_ID_TAG)
    code_number = 0
    for cell in cells:
        if cell.kind in ("instructor", "answer", "manual", "student-id", "student"):
            code_number += 1
            cell.label = (Note("cell {grade_id}", grade_id=cell.grade_id) if cell.grade_id
                          else Note("the student-id cell") if cell.kind == "student-id"
                          else Note("code cell {number} (added by the student)", number=code_number))
    return cells, notes


def grading_key(course_root: Path) -> str:
    """The course's secret grading key (``.grading/key``), made on first use; hidden checks' inputs derive from it."""
    path = Path(course_root) / ".grading" / "key"
    if not path.is_file():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32) + "\n", encoding="ascii")
        path.chmod(0o600)
    return path.read_text(encoding="ascii").strip()


def givens_of(plan_: Plan, student: str) -> dict:
    """The givens of ``student``'s variant (computed once per student: the job and the judging both need them)."""
    return _givens(plan_.problem_set, student)


@functools.lru_cache(maxsize=1024)
def _givens(problem_set: ProblemSet, student: str) -> dict:
    return problem_set.givens(student_variant(problem_set.name, student))


def calls_of(plan_: Plan, check: FunctionCheck, givens: dict, student: str, key: str):
    """The inputs a function check calls the student's function on: visible ones fixed, hidden ones drawn now."""
    if check.hidden:
        return check.calls(givens, np.random.default_rng(seed_for(key, plan_.name, check.grade_id, student)))
    return plan_.problem_set.visible_calls(check, givens)


def build_job(plan_: Plan, cells: list[RunCell], student: str, key: str, variant_id: str | None = None) -> dict:
    """The sandbox job for ``cells`` (from :func:`arrange`), with the givens of the variant of ``variant_id``
    (``student`` when None) and the hidden inputs drawn for ``student``."""
    givens = givens_of(plan_, variant_id or student)
    job_cells = []
    for cell in cells:
        if cell.kind in ("instructor", "answer", "manual", "student-id", "student"):
            cell.job_id = len(job_cells)
            job_cells.append({"id": cell.job_id, "run": cell.source})
        elif cell.kind == "test":
            check = cell.source_cell.check
            cell.job_id = len(job_cells)
            entry = {"id": cell.job_id, "capture": check.kind if check.kind == "function" else "value",
                     "answer": check.answer}
            if isinstance(check, FunctionCheck):
                entry["calls"] = [{"args": answers.encode(tuple(call.args)),
                                   "kwargs": answers.encode(dict(call.kwargs))}
                                  for call in calls_of(plan_, check, givens, student, key)]
            job_cells.append(entry)
    return {"problem_set": plan_.name,
            "givens": {name: answers.encode(value) for name, value in givens.items()},
            "display_methods": list(Session.DISPLAY_METHODS), "cells": job_cells}
