"""From what came out of the sandbox to points (trusted side, after the sandbox).

The sandbox's lines are read as untrusted data: each must be a JSON object of a
known shape, answers are rebuilt with :func:`qkv_exercises.answers.decode` (anything
else is :class:`~qkv_exercises.answers.MalformedAnswer`: 0 points and the reason),
and every check is judged here, by the same ``check.judge`` the student side calls,
with this process's own qkv and the givens of the variant of the id the submission is
filed under. Visible checks state their expected values (``reveal=True``: the student
reads them in the feedback after grading); hidden checks never do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from qkv_exercises import answers
from qkv_exercises.checking import Verdict
from qkv_exercises.checks import FunctionCheck, Raised, Returned

from .jobs import Plan, RunCell, calls_of, givens_of

OUTPUT_KINDS = ("stdout", "stderr", "result", "display", "error")
MAX_OUTPUT_CHARS = 20_000


@dataclass(frozen=True)
class CheckResult:
    grade_id: str
    points: float
    max_points: float
    passed: bool
    message: str
    hidden: bool


@dataclass
class Graded:
    """One submission, graded: the cells as run, their outputs, each check's result and the notes."""

    student: str
    problem_set: str
    cells: list[RunCell] = field(default_factory=list)
    outputs: dict[int, list[dict]] = field(default_factory=dict)
    checks: dict[str, CheckResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    max_score: float = 0.0
    gradable: bool = True

    @property
    def score(self) -> float:
        return sum(c.points for c in self.checks.values())


@dataclass
class Reading:
    """The sandbox's lines, read: outputs and captures by job cell id, the cells started, solved-for."""

    cells: dict[int, dict] = field(default_factory=dict)
    captures: dict[int, dict] = field(default_factory=dict)
    started: list[int] = field(default_factory=list)
    solved_for: list = field(default_factory=list)
    done: bool = False
    unreadable: int = 0


def read_lines(lines: list[str]) -> Reading:
    reading = Reading()
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            reading.unreadable += 1
            continue
        if not isinstance(record, dict):
            reading.unreadable += 1
        elif _is_id(record.get("start")):
            reading.started.append(record["start"])
        elif _is_id(record.get("cell")):
            reading.cells.setdefault(record["cell"], record)
        elif _is_id(record.get("capture")):
            reading.captures.setdefault(record["capture"], record)
        elif isinstance(record.get("solved_for"), list):
            reading.solved_for = record["solved_for"]
        elif record.get("done") is True:
            reading.done = True
        else:
            reading.unreadable += 1
    return reading


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def clean_outputs(record: dict | None) -> list[dict]:
    """A cell's outputs as plain text items of known kinds, at most :data:`MAX_OUTPUT_CHARS` characters in all."""
    if not isinstance(record, dict) or not isinstance(record.get("outputs"), list):
        return []
    items, room = [], MAX_OUTPUT_CHARS
    for item in record["outputs"][:200]:
        if not isinstance(item, dict) or item.get("kind") not in OUTPUT_KINDS:
            continue
        text = item.get("text") if isinstance(item.get("text"), str) else ""
        clean = {"kind": item["kind"], "text": text[:room]}
        room -= len(clean["text"])
        if item["kind"] == "error":
            clean["ename"] = str(item.get("ename", "Error"))[:200]
            clean["evalue"] = str(item.get("evalue", ""))[:2000]
        omitted = item.get("omitted")
        if isinstance(omitted, list):
            clean["omitted"] = [str(o)[:100] for o in omitted[:10]]
        items.append(clean)
    cut = record.get("cut")
    if _is_id(cut) and cut > 0 or room <= 0:
        items.append({"kind": "cut", "text": f"({cut if _is_id(cut) else 'more'} characters of output not kept)"})
    return items


def judge(plan: Plan, student: str, key: str, cells: list[RunCell], result: dict, limits) -> Graded:
    """Points and messages for one submission, from the sandbox's ``result`` (see :func:`sandbox.run_job`)."""
    graded = Graded(student, plan.name, cells, max_score=plan.max_score)
    reading = read_lines(result.get("lines", []))
    givens = givens_of(plan, student)
    by_job = {c.job_id: c for c in cells if c.job_id is not None}
    for job_id, record in reading.cells.items():
        graded.outputs[job_id] = clean_outputs(record)
    for job_id, record in reading.captures.items():
        cell = by_job.get(job_id)
        if cell is not None and not cell.source_cell.hidden:  # what a function printed while called on hidden inputs stays out
            graded.outputs[job_id] = clean_outputs(record)
    stop = _stop_note(result, reading, by_job, limits)
    if stop:
        graded.notes.append(stop)
    for cell in cells:
        if cell.job_id is None:
            continue
        record = reading.cells.get(cell.job_id) or reading.captures.get(cell.job_id) or {}
        if record.get("timed_out") is True:
            graded.notes.append(f"{cell.label or 'the check of ' + str(cell.grade_id)} ran past the time limit of "
                                f"{min(limits.cell_seconds, limits.notebook_seconds):g} s per cell and was stopped")
        elif cell.kind != "test":
            errors = [o for o in graded.outputs.get(cell.job_id, []) if o["kind"] == "error"]
            if errors:
                first = errors[0]["evalue"].strip().splitlines()
                detail = f": {first[0][:120]}" if first else ""
                graded.notes.append(f"{cell.label} raised {errors[0]['ename']}{detail}")
    for cell in cells:
        if cell.kind == "test":
            sc = cell.source_cell
            verdict = _judge_test(plan, sc.check, reading.captures.get(cell.job_id), givens, student, key, stop)
            graded.checks[sc.grade_id] = CheckResult(sc.grade_id, sc.points if verdict.passed else 0.0, sc.points,
                                                     verdict.passed, verdict.message, sc.hidden)
    graded.notes.extend(_solved_for_note(reading.solved_for, student))
    if reading.unreadable:
        graded.notes.append(f"{reading.unreadable} lines sent back by the notebook were not answers and were ignored")
    return graded


def _stop_note(result: dict, reading: Reading, by_job: dict, limits) -> str | None:
    """Why the notebook did not run to its end, naming the cell it was in; None when it did."""
    if result.get("error"):
        return f"the grader could not run the notebook: {result['error']}"
    if reading.done and not result.get("timed_out") and not result.get("overflow"):
        return None
    finished = set(reading.cells) | set(reading.captures)
    running = next((i for i in reversed(reading.started) if i not in finished), None)
    cell = by_job.get(running)
    where = f" in {cell.label or 'the check of ' + str(cell.grade_id)}" if cell is not None else ""
    if result.get("timed_out"):
        why = f"the notebook ran past its time limit of {limits.notebook_seconds:g} s{where}"
    elif result.get("overflow"):
        why = f"the notebook sent back more than {limits.answer_bytes >> 20} MB{where}; the rest was not read"
    elif result.get("signal"):
        why = f"the notebook's process was killed (signal {result['signal']}){where}"
    else:
        runner = (result.get("stderr") or "").strip().splitlines()
        detail = f": {runner[-1][:200]}" if runner else ""
        why = f"the notebook's process ended (exit code {result.get('exit')}){where}{detail}"
    return why + "; the checks after it were not reached"


def _judge_test(plan: Plan, check, capture: dict | None, givens: dict, student: str, key: str,
                stop: str | None) -> Verdict:
    if capture is None:
        return Verdict(False, "Not checked: the notebook stopped before this check" + (f" ({stop})." if stop else "."))
    if capture.get("timed_out") is True:
        return Verdict(False, f"Not checked: {check.answer} ran past the time limit.")
    if capture.get("missing") is True:
        return Verdict(False, f"{check.answer} was not defined when this check's turn came: run the cell that "
                              "defines it (did it raise an error?).")
    try:
        if isinstance(check, FunctionCheck):
            return _judge_function(plan, check, capture, givens, student, key)
        value = answers.decode(capture.get("value"))
        return check.judge(value, givens, reveal=not check.hidden)
    except answers.MalformedAnswer as err:
        return Verdict(False, f"{check.answer} could not be read as an answer ({err}).")
    except Exception as err:  # a check that cannot judge what it was given: the grader's matter, reported
        return Verdict(False, f"{check.answer} could not be judged ({type(err).__name__}: {str(err)[:200]}).")


def _judge_function(plan: Plan, check: FunctionCheck, capture: dict, givens: dict, student: str, key: str) -> Verdict:
    if "outcomes" not in capture:
        value = answers.decode(capture.get("value"))
        return Verdict(False, f"{check.answer} is {type(value).__name__}, not a function: run the cell that defines it.")
    outcomes_data = capture["outcomes"]
    if not isinstance(outcomes_data, list):
        raise answers.MalformedAnswer("the outcomes are not a list")
    outcomes = []
    for item in outcomes_data:
        if not isinstance(item, dict):
            raise answers.MalformedAnswer("an outcome is not an object")
        if "returned" in item:
            outcomes.append(Returned(answers.decode(item["returned"])))
        else:
            text = lambda k: str(item.get(k, ""))[:answers.MAX_TEXT]  # noqa: E731
            outcomes.append(Raised(text("raised"), text("message"), "" if check.hidden else text("traceback")))
    calls = calls_of(plan, check, givens, student, key)
    return check.judge(outcomes, calls, reveal=not check.hidden)


def _solved_for_note(solved_for: list, student: str) -> list[str]:
    from qkv_exercises.identity import normalise_id

    if not solved_for or not isinstance(solved_for[-1], list) or len(solved_for[-1]) < 2:
        return []
    typed = str(solved_for[-1][1])
    if normalise_id(typed) and normalise_id(typed) != student:
        return [f"the notebook was solved with STUDENT_ID = {typed[:60]!r}; it is filed as {student!r} and was graded "
                f"with {student!r}'s numbers"]
    return []  # an empty STUDENT_ID is what a student on the course's JupyterHub leaves
