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
:func:`qkv_book.language.speaking`, so that its messages, and the feedback page, speak it: the
grader's own verdicts (a check not reached, an answer not defined or unreadable) are messages of
the problem sets' catalogue too, and the notes on how the notebook ran are
:class:`~qkv_grading.notes.Note`: English on the instructor's console, the student's language on
the feedback page. What they quote (an error's message, a sandbox's reason) stays as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qkv_book.language import ENGLISH, speaking
from qkv_exercises import answers
from qkv_exercises.checking import Verdict
from qkv_exercises.language import N_, _, typed_language
from qkv_exercises.checks import FunctionCheck, Raised, Returned

from .jobs import Plan, RunCell, calls_of, givens_of
from .notes import Note, PluralNote
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
    """A cell's outputs as plain text items of known kinds, at most :data:`MAX_OUTPUT_CHARS` characters in all
    (what was cut said in the current language)."""
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
        cut = (_("({count} characters of output not kept)").format(count=entry.cut) if entry.cut > 0
               else _("(more characters of output not kept)"))
        items.append({"kind": "cut", "text": cut})
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
            graded.notes.append(Note("{cell} ran past the time limit of {seconds:g} s per cell and was stopped",
                                     cell=_named(cell), seconds=min(limits.cell_seconds, limits.notebook_seconds)))
        elif entry.answer == "lost" and cell.kind != "test":
            graded.notes.append(Note("the output of {cell} was not read: {reason}", cell=cell.label,
                                     reason=entry.lost))
        elif cell.kind != "test":
            errors = [o for o in graded.outputs.get(cell.job_id, []) if o["kind"] == "error"]
            if errors:
                first = errors[0]["evalue"].strip().splitlines()
                if first:
                    graded.notes.append(Note("{cell} raised {error}: {message}", cell=cell.label,
                                             error=errors[0]["ename"], message=first[0][:120]))
                else:
                    graded.notes.append(Note("{cell} raised {error}", cell=cell.label, error=errors[0]["ename"]))
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
        graded.notes.append(PluralNote("ignored {count} line sent back by the notebook that is not the runner's "
                                       "records",
                                       "ignored {count} lines sent back by the notebook that are not the runner's "
                                       "records", record.dropped))
    return graded


def refused(plan: Plan, student: str, cells: list[RunCell], reason: str,
            notebook_language: str | None = None) -> Graded:
    """A submission whose run record was refused (:class:`~qkv_grading.run_record.RecordRefused`): 0 points."""
    graded = Graded(student, plan.name, cells, max_score=plan.max_score,
                    language=submission_language((), notebook_language))
    graded.notes.append(Note("what its sandbox handed back was refused, so no check could be judged: {reason}",
                             reason=reason))
    with speaking(graded.language):
        message = _("Not checked: what the notebook handed back was refused ({reason}).").format(reason=reason)
    for cell in cells:
        if cell.kind == "test":
            sc = cell.source_cell
            graded.checks[sc.grade_id] = CheckResult(sc.grade_id, 0.0, sc.points, False, message, sc.hidden)
    return graded


def _named(cell: RunCell) -> str:
    """How a note names ``cell``: its label, or for a test cell its check."""
    return cell.label or Note("the check of {grade_id}", grade_id=str(cell.grade_id))


def _in_cell(cell: RunCell | None, in_cell: str, anywhere: str, **fields) -> Note:
    """The note ``in_cell`` (naming the cell as ``{cell}``), or ``anywhere`` when the cell is not known."""
    if cell is None:
        return Note(anywhere, **fields)
    return Note(in_cell, cell=_named(cell), **fields)


def _stop_note(record: RunRecord, by_job: dict, limits) -> Note | None:
    """Why the notebook did not run to its end, naming the cell it was in; None when it did."""
    if record.status == "sandbox_failed":
        return Note("the grader could not run the notebook: {reason}", reason=record.reason)
    if record.status == "finished":
        return None
    cell = by_job.get(record.in_cell)
    if record.status == "timed_out":
        return _in_cell(
            cell, N_("the notebook ran past its time limit of {seconds:g} s in {cell}; the checks after it were not "
                     "reached"),
            N_("the notebook ran past its time limit of {seconds:g} s; the checks after it were not reached"),
            seconds=limits.notebook_seconds)
    if record.status == "overflow":  # the channel's reasons (qkv_grading.channel), each a whole sentence
        if (megabytes := _overflow_megabytes(record.reason, "sent back more than {megabytes} MB")) is not None:
            return _in_cell(
                cell, N_("the notebook sent back more than {megabytes} MB in {cell}; the rest was not read; the "
                         "checks after it were not reached"),
                N_("the notebook sent back more than {megabytes} MB; the rest was not read; the checks after it "
                   "were not reached"), megabytes=megabytes)
        if (megabytes := _overflow_megabytes(record.reason, "sent back answers and output of more than {megabytes} "
                                                            "MB")) is not None:
            return _in_cell(
                cell, N_("the notebook sent back answers and output of more than {megabytes} MB in {cell}; the rest "
                         "was not read; the checks after it were not reached"),
                N_("the notebook sent back answers and output of more than {megabytes} MB; the rest was not read; "
                   "the checks after it were not reached"), megabytes=megabytes)
        return _in_cell(
            cell, N_("the notebook sent back too much in {cell} ({reason}); the rest was not read; the checks after "
                     "it were not reached"),
            N_("the notebook sent back too much ({reason}); the rest was not read; the checks after it were not "
               "reached"), reason=record.reason or "?")
    if record.status == "killed":
        if record.reason:  # the sandbox's memory limit, when it was that
            return _in_cell(
                cell, N_("the notebook's process was killed (signal {signal}) in {cell}: {reason}; the checks after "
                         "it were not reached"),
                N_("the notebook's process was killed (signal {signal}): {reason}; the checks after it were not "
                   "reached"), signal=record.signal, reason=record.reason)
        return _in_cell(
            cell, N_("the notebook's process was killed (signal {signal}) in {cell}; the checks after it were not "
                     "reached"),
            N_("the notebook's process was killed (signal {signal}); the checks after it were not reached"),
            signal=record.signal)
    runner = record.stderr.strip().splitlines()
    if runner:
        return _in_cell(
            cell, N_("the notebook's process ended (exit code {code}) in {cell}: {detail}; the checks after it were "
                     "not reached"),
            N_("the notebook's process ended (exit code {code}): {detail}; the checks after it were not reached"),
            code=record.exit_code, detail=runner[-1][:200])
    return _in_cell(
        cell, N_("the notebook's process ended (exit code {code}) in {cell}; the checks after it were not reached"),
        N_("the notebook's process ended (exit code {code}); the checks after it were not reached"),
        code=record.exit_code)


def _overflow_megabytes(reason: str, message: str) -> str | None:
    """The number of megabytes in ``reason`` when it is the channel's ``message``, else None."""
    before, after = message.split("{megabytes}")
    if reason.startswith(before) and reason.endswith(after):
        number = reason[len(before):len(reason) - len(after)]
        if number.isdigit():
            return number
    return None


def _judge_test(plan: Plan, check, entry: CellRecord | None, givens: dict, student: str, key: str,
                stop: Note | None) -> Verdict:
    """The verdict on one check, in the current language (the submission's: :func:`judge`)."""
    name = check.answer
    if entry is None:
        if stop:
            return Verdict(False, _("Not checked: the notebook stopped before this check ({why}).").format(
                why=stop.shown()))
        return Verdict(False, _("Not checked: the notebook stopped before this check."))
    if entry.timed_out:
        return Verdict(False, _("Not checked: {name} ran past the time limit.").format(name=name))
    if entry.answer == "missing":
        return Verdict(False, _("{name} was not defined when this check's turn came: run the cell that defines it "
                                "(did it raise an error?).").format(name=name))
    if entry.answer == "lost":
        return Verdict(False, _("{name} could not be read as an answer ({reason}).").format(name=name,
                                                                                           reason=entry.lost))
    try:
        if entry.answer not in ("value", "outcomes"):
            raise answers.MalformedAnswer(N_("no answer in its record"))
        if isinstance(check, FunctionCheck):
            return _judge_function(plan, check, entry, givens, student, key)
        if entry.answer != "value":
            raise answers.MalformedAnswer(N_("the outcomes of calls, not a value"))
        return check.judge(answers.decode(entry.value), givens, reveal=not check.hidden)
    except answers.MalformedAnswer as err:
        return Verdict(False, _("{name} could not be read as an answer ({reason}).").format(
            name=name, reason=_malformed(err)))
    except Exception as err:  # a check that cannot judge what it was given: the grader's matter, reported
        return Verdict(False, _("{name} could not be judged ({error}: {message}).").format(
            name=name, error=type(err).__name__, message=str(err)[:200]))


def _malformed(err: answers.MalformedAnswer) -> str:
    """Why an answer could not be read, in the current language."""
    try:
        return _(err.message).format(**err.fields)
    except (KeyError, IndexError, ValueError):
        return str(err)


def _judge_function(plan: Plan, check: FunctionCheck, entry: CellRecord, givens: dict, student: str,
                    key: str) -> Verdict:
    if entry.answer == "value":
        value = answers.decode(entry.value)
        return Verdict(False, _("{name} is {type}, not a function: run the cell that defines it.").format(
            name=check.answer, type=type(value).__name__))
    calls = calls_of(plan, check, givens, student, key)
    if len(entry.outcomes) != len(calls):
        return Verdict(False, _("{name} was not called on every input (did the notebook stop early?).").format(
            name=check.answer))
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
        if variant_id == student:
            return [Note("the notebook was solved with STUDENT_ID = {typed}; it is filed as {student} and was graded "
                         "with {student}'s numbers", typed=repr(typed[:60]), student=repr(student))]
        return [Note("the notebook was solved with STUDENT_ID = {typed}; it is filed as {student} and was graded "
                     "with the numbers of {variant}, its name on the learning platform", typed=repr(typed[:60]),
                     student=repr(student), variant=repr(variant_id))]
    return []  # an empty STUDENT_ID is what a student on the course's JupyterHub leaves
