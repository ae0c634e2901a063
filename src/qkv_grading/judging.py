"""From the run record to points (trusted side, after the sandbox).

The run record (:mod:`qkv_grading.run_record`) comes already decoded and bounded, every
string made safe; it is still read as a student's data: answers are rebuilt with
:func:`qkv_exercises.answers.decode` (anything else is
:class:`~qkv_exercises.answers.MalformedAnswer`: 0 points and the reason), and every
check is judged here, by the same ``check.judge`` the student side calls, with this
process's own qkv and the givens of the variant the submission is graded with. Visible
checks state their expected values (``reveal=True``: the student reads them in the
feedback after grading); hidden checks never do. The whole of judging one submission
stays within its time budget (:class:`~qkv_grading.run_record.Budget`).

Every check is judged in the submission's language (:func:`submission_language`: the ``LANGUAGE``
its first cell passed to ``start()``, else its notebook's metadata, else English), inside
:func:`qkv_book.language.speaking`, so that its messages, and the feedback page, speak it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qkv_book.language import ENGLISH, speaking
from qkv_exercises import answers
from qkv_exercises.checking import Verdict
from qkv_exercises.language import typed_language
from qkv_exercises.checks import FunctionCheck, Raised, Returned

from .jobs import Plan, RunCell, calls_of, givens_of
from .run_record import Budget, CellRecord, RunRecord
from .safe_text import stored

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
    language: str = ENGLISH  # the submission's: its checks' messages and its feedback page speak it

    @property
    def score(self) -> float:
        return sum(c.points for c in self.checks.values())


def clean_outputs(entry: CellRecord | None) -> list[dict]:
    """A cell's outputs as plain text items of known kinds, at most :data:`MAX_OUTPUT_CHARS` characters in all."""
    if entry is None:
        return []
    items, room = [], MAX_OUTPUT_CHARS
    for output in entry.outputs[:200]:
        item = {"kind": output.kind, "text": output.text[:room]}
        room -= len(item["text"])
        if output.kind == "error":
            item["ename"], item["evalue"] = output.ename[:200], output.evalue[:2000]
        if output.omitted:
            item["omitted"] = list(output.omitted)
        items.append(item)
    if entry.cut > 0 or room <= 0:
        items.append({"kind": "cut", "text": f"({entry.cut or 'more'} characters of output not kept)"})
    return items


def submission_language(solved_for, notebook_language: str | None = None) -> str:
    """The language a submission speaks: the ``LANGUAGE`` its last ``start()`` call passed (``solved_for``,
    from its run record), else ``notebook_language`` (its metadata's), else English. Never raises: a
    language the course does not speak counts as none."""
    typed = solved_for[-1][3] if solved_for and len(solved_for[-1]) > 3 else ""
    try:
        chosen = typed_language(typed)
    except ValueError:
        chosen = None
    return chosen or notebook_language or ENGLISH


def judge(plan: Plan, student: str, key: str, cells: list[RunCell], record: RunRecord, limits, *,
          variant_id: str | None = None, budget: Budget | None = None,
          notebook_language: str | None = None) -> Graded:
    """Points and messages for one submission, from its run record (see :func:`sandbox.run_job`).

    ``variant_id`` is the id whose numbers the submission is graded with (``student`` when
    None); ``notebook_language`` the language its metadata gives (see :func:`submission_language`).
    Raises :class:`~qkv_grading.run_record.OverBudget` when ``budget`` runs out.
    """
    language = submission_language(record.solved_for, notebook_language)
    with speaking(language):
        graded = _judge(plan, student, key, cells, record, limits, variant_id or student,
                        budget or Budget(float("inf")))
    graded.language = language
    return graded


def _judge(plan: Plan, student: str, key: str, cells: list[RunCell], record: RunRecord, limits,
           variant_id: str, budget: Budget) -> Graded:
    graded = Graded(student, plan.name, cells, max_score=plan.max_score)
    givens = givens_of(plan, variant_id)
    by_job = {c.job_id: c for c in cells if c.job_id is not None}
    for job_id, entry in record.by_cell.items():
        cell = by_job.get(job_id)
        # what a function printed while called on hidden inputs stays out
        if cell is not None and not (cell.kind == "test" and cell.source_cell.hidden):
            graded.outputs[job_id] = clean_outputs(entry)
    stop = _stop_note(record, by_job, limits)
    if stop:
        graded.notes.append(stop)
    for cell in cells:
        if cell.job_id is None:
            continue
        entry = record.by_cell.get(cell.job_id)
        if entry is None:
            continue
        if entry.timed_out:
            graded.notes.append(f"{cell.label or 'the check of ' + str(cell.grade_id)} ran past the time limit of "
                                f"{min(limits.cell_seconds, limits.notebook_seconds):g} s per cell and was stopped")
        elif entry.answer == "lost" and cell.kind != "test":
            graded.notes.append(f"the output of {cell.label} was not read: {entry.lost}")
        elif cell.kind != "test":
            errors = [o for o in graded.outputs.get(cell.job_id, []) if o["kind"] == "error"]
            if errors:
                first = errors[0]["evalue"].strip().splitlines()
                detail = f": {first[0][:120]}" if first else ""
                graded.notes.append(f"{cell.label} raised {errors[0]['ename']}{detail}")
    for cell in cells:
        if cell.kind == "test":
            sc = cell.source_cell
            budget.check(f"judging {sc.grade_id}")
            verdict = _judge_test(plan, sc.check, record.by_cell.get(cell.job_id), givens, student, key, stop)
            graded.checks[sc.grade_id] = CheckResult(sc.grade_id, sc.points if verdict.passed else 0.0, sc.points,
                                                     verdict.passed, stored(verdict.message), sc.hidden)
    budget.check("judging")
    graded.notes.extend(_solved_for_note(record.solved_for, student, variant_id))
    if record.dropped:
        one = record.dropped == 1
        graded.notes.append(f"ignored {record.dropped} line{'' if one else 's'} sent back by the notebook that "
                            f"{'is' if one else 'are'} not the runner's records")
    return graded


def refused(plan: Plan, student: str, cells: list[RunCell], reason: str,
            notebook_language: str | None = None) -> Graded:
    """A submission whose run record was refused (:class:`~qkv_grading.run_record.RecordRefused`): 0 points."""
    graded = Graded(student, plan.name, cells, max_score=plan.max_score,
                    language=submission_language((), notebook_language))
    graded.notes.append(f"what its sandbox handed back was refused, so no check could be judged: {reason}")
    for cell in cells:
        if cell.kind == "test":
            sc = cell.source_cell
            graded.checks[sc.grade_id] = CheckResult(sc.grade_id, 0.0, sc.points, False,
                                                     f"Not checked: what the notebook handed back was refused ({reason}).",
                                                     sc.hidden)
    return graded


def _where(record: RunRecord, by_job: dict) -> str:
    cell = by_job.get(record.in_cell)
    return f" in {cell.label or 'the check of ' + str(cell.grade_id)}" if cell is not None else ""


def _stop_note(record: RunRecord, by_job: dict, limits) -> str | None:
    """Why the notebook did not run to its end, naming the cell it was in; None when it did."""
    if record.status == "sandbox_failed":
        return f"the grader could not run the notebook: {record.reason}"
    if record.status == "finished":
        return None
    where = _where(record, by_job)
    if record.status == "timed_out":
        why = f"the notebook ran past its time limit of {limits.notebook_seconds:g} s{where}"
    elif record.status == "overflow":
        why = f"the notebook {record.reason or 'sent back too much'}{where}; the rest was not read"
    elif record.status == "killed":
        why = f"the notebook's process was killed (signal {record.signal}){where}"
        why += f": {record.reason}" if record.reason else ""  # the sandbox's memory limit, when it was that
    else:
        runner = record.stderr.strip().splitlines()
        detail = f": {runner[-1][:200]}" if runner else ""
        why = f"the notebook's process ended (exit code {record.exit_code}){where}{detail}"
    return why + "; the checks after it were not reached"


def _judge_test(plan: Plan, check, entry: CellRecord | None, givens: dict, student: str, key: str,
                stop: str | None) -> Verdict:
    if entry is None:
        return Verdict(False, "Not checked: the notebook stopped before this check" + (f" ({stop})." if stop else "."))
    if entry.timed_out:
        return Verdict(False, f"Not checked: {check.answer} ran past the time limit.")
    if entry.answer == "missing":
        return Verdict(False, f"{check.answer} was not defined when this check's turn came: run the cell that "
                              "defines it (did it raise an error?).")
    if entry.answer == "lost":
        return Verdict(False, f"{check.answer} could not be read as an answer ({entry.lost}).")
    try:
        if entry.answer not in ("value", "outcomes"):
            raise answers.MalformedAnswer("no answer in its record")
        if isinstance(check, FunctionCheck):
            return _judge_function(plan, check, entry, givens, student, key)
        if entry.answer != "value":
            raise answers.MalformedAnswer("the outcomes of calls, not a value")
        return check.judge(answers.decode(entry.value), givens, reveal=not check.hidden)
    except answers.MalformedAnswer as err:
        return Verdict(False, f"{check.answer} could not be read as an answer ({err}).")
    except Exception as err:  # a check that cannot judge what it was given: the grader's matter, reported
        return Verdict(False, f"{check.answer} could not be judged ({type(err).__name__}: {str(err)[:200]}).")


def _judge_function(plan: Plan, check: FunctionCheck, entry: CellRecord, givens: dict, student: str,
                    key: str) -> Verdict:
    if entry.answer == "value":
        value = answers.decode(entry.value)
        return Verdict(False, f"{check.answer} is {type(value).__name__}, not a function: run the cell that defines it.")
    calls = calls_of(plan, check, givens, student, key)
    if len(entry.outcomes) != len(calls):
        return Verdict(False, f"{check.answer} was not called on every input (did the notebook stop early?).")
    outcomes = []
    for outcome in entry.outcomes:
        if outcome.raised is None:
            outcomes.append(Returned(answers.decode(outcome.returned)))
        else:
            text = lambda value: value[:answers.MAX_TEXT]  # noqa: E731
            outcomes.append(Raised(text(outcome.raised), text(outcome.message),
                                   "" if check.hidden else text(outcome.traceback)))
    return check.judge(outcomes, calls, reveal=not check.hidden)


def _solved_for_note(solved_for, student: str, variant_id: str) -> list[str]:
    from qkv_exercises.identity import normalise_id

    if not solved_for or len(solved_for[-1]) < 2:
        return []
    typed = str(solved_for[-1][1])
    if normalise_id(typed) and normalise_id(typed) != variant_id:
        numbers = (f"{student!r}'s numbers" if variant_id == student
                   else f"the numbers of {variant_id!r}, its name on the learning platform")
        return [f"the notebook was solved with STUDENT_ID = {typed[:60]!r}; it is filed as {student!r} and was graded "
                f"with {numbers}"]
    return []  # an empty STUDENT_ID is what a student on the course's JupyterHub leaves
