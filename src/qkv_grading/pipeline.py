"""The instructor's commands: release every problem set, and grade a class's submissions.

Run from the repository (``make release``, ``make grade SUBMISSIONS=...``) or directly::

    python -m qkv_grading release [PROBLEM_SET ...]    # every problem set (or those) -> exercises/release/
    python -m qkv_grading grade SUBMISSIONS            # a folder submitted/<student>/<ps>/ or a platform's .zip
    python -m qkv_grading collect SUBMISSIONS          # only copy or unzip into exercises/submitted/
    python -m qkv_grading export                       # only write exercises/grades.csv from the gradebook
    python -m qkv_grading certificates [FOLDER]        # the certificates of a Dask cluster (TLS both ways)

``grade`` collects the hand-ins (:mod:`qkv_grading.collect`), then grades each one in
two steps:

1. the pure step, in a sandbox (:mod:`qkv_grading.sandbox`): the submission's cells run
   with the givens of the variant it is graded with, and its run record comes back as
   plain bytes (:mod:`qkv_grading.run_record`). Submissions run side by side on the
   local cores, or on the workers of a Dask cluster over TLS with certificates both ways
   (``--dask tls://ADDRESS``, :mod:`qkv_grading.cluster`), only a few more at a time than
   there are sandboxes, so that memory does not grow with the class;
2. the trusted step, in this process only, as each record arrives (:class:`Grading`):
   the record decoded within its bounds and time budget, every check judged by qkv
   (:mod:`qkv_grading.judging`), the points written to nbgrader's gradebook
   (:mod:`qkv_grading.gradebook`), the autograded notebook and the feedback page
   written (:mod:`qkv_grading.feedback`), the record added to the journal; then the
   record is dropped.

Then ``grades.csv`` is exported and a table of scores printed, with the reason for
every submission that could not be fully run. A submission that cannot be graded
at all (not a notebook, no notebook of the right name, a record refused) gets 0
points and its reason; none ever stops the others. A run that is stopped keeps every
grade written so far, and the next run takes up where it stopped, reading the journal
one record at a time (:mod:`qkv_grading.journal`). Every line printed goes through
:func:`~qkv_grading.safe_text.for_terminal`: no text of a student reaches the terminal raw.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from qkv_exercises.language import metadata_language
from qkv_exercises.problem_sets import order as problem_set_order

from . import collect as collecting
from . import feedback as feedbacks
from . import cluster, gradebook, jobs, judging, private_files, run_record, sandbox, translation
from .collect import Submission
from .journal import Journal, result_key
from .safe_text import for_terminal

COURSE_ID = "attention-by-hand"
DEFAULT_COURSE = Path("exercises")

Printer = Callable[[str], None]


# --------------------------------------------------------------------------- the course folder


@dataclass(frozen=True)
class Course:
    """An nbgrader course folder: ``source/<problem set>/*.ipynb`` and ``nbgrader_config.py``."""

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root).resolve())
        if not (self.root / "nbgrader_config.py").is_file() or not (self.root / "source").is_dir():
            raise ValueError(f"{self.root} is not a course folder: it needs nbgrader_config.py and source/")

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'gradebook.db'}"

    def problem_sets(self) -> list[str]:
        """The problem sets, in order: the folders of ``source/`` that hold a notebook."""
        return sorted((p.name for p in (self.root / "source").iterdir() if p.is_dir() and any(p.glob("*.ipynb"))),
                      key=problem_set_order)

    def autograded(self, student: str, problem_set: str) -> Path:
        return self.root / "autograded" / student / problem_set

    def feedback(self, student: str, problem_set: str) -> Path:
        return self.root / "feedback" / student / problem_set

    @property
    def cluster_folder(self) -> Path:
        """Where ``certificates`` puts the cluster's certificates by default (the grader's stay here)."""
        return self.root / ".grading" / "cluster"


def nbgrader_env() -> dict[str, str]:
    """The environment nbgrader needs: it calls ``alembic`` (to create the gradebook) by name, so
    the folder of this Python goes first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def shown(path: Path) -> str:
    """``path`` as the instructor would type it: relative to the current folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class GradingError(RuntimeError):
    """Something is wrong with the course or the machine (not with one submission)."""


def load_config(course: Course):
    """The course's ``nbgrader_config.py``, read as nbgrader reads it."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config()


def configured_limits(course: Course, timeout: float | None = None) -> sandbox.Limits:
    """The sandbox limits: ``c.Sandbox.<limit>`` in ``nbgrader_config.py`` over the defaults of
    :class:`sandbox.Limits`, the per-cell time from ``c.Execute.timeout``, and ``timeout`` (seconds
    per notebook) over both."""
    config = load_config(course)
    settings = {name: config.Sandbox[name] for name in sandbox.Limits.__dataclass_fields__ if name in config.Sandbox}
    if "timeout" in config.Execute:
        settings.setdefault("cell_seconds", config.Execute.timeout)
    limits = sandbox.Limits(**settings)
    if timeout is not None:
        limits = replace(limits, notebook_seconds=float(timeout))
    return limits


def _nbgrader_api(course: Course):
    """nbgrader's own API on the course folder, in this process (nbgrader takes seconds to start)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = load_config(course)
    coursedir = CourseDirectory(config=config)
    coursedir.root = str(course.root)
    gradebook.ensure_alembic_on_path()
    return NbGraderAPI(coursedir=coursedir, config=config)


# --------------------------------------------------------------------------- release


@dataclass(frozen=True)
class ReleasedSet:
    """One released problem set: its folder under ``release/``, its title and its points."""

    name: str
    folder: Path
    title: str
    points: float


def release(course: Course, out: Printer = print, problem_sets: list[str] | None = None) -> list[ReleasedSet]:
    """Release problem sets (``nbgrader generate_assignment``, every one by default) into ``release/``."""
    started = time.perf_counter()
    names = problem_sets or course.problem_sets()
    out(f"Releasing {len(names)} problem set{'s' if len(names) != 1 else ''} from {shown(course.root / 'source')}/ ...")
    api = _nbgrader_api(course)
    for name in names:
        result = api.generate_assignment(name, force=True)
        if not result["success"]:
            raise GradingError(f"nbgrader generate_assignment {name} failed:\n"
                               f"{(result.get('error') or result.get('log') or '')[-3000:]}")
    released = []
    for name in names:
        folder = course.root / "release" / name
        released.append(ReleasedSet(name, folder, problem_set_title(folder), problem_set_points(folder)))
        out(f"  {name:<24} {released[-1].points:>4g} points  {shown(folder)}/")
    out(f"Released {len(released)} problem set{'s' if len(released) != 1 else ''} in "
        f"{time.perf_counter() - started:.1f} s.")
    return released


def problem_set_title(folder: Path, language: str = "en") -> str:
    """The first heading of the problem set's first notebook, without its '#' marks, in ``language`` (the
    folder's course holds the translations, :mod:`qkv_grading.translation`)."""
    for path in sorted(Path(folder).glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if language != "en":
            notebook = translation.translated_notebook(notebook, Path(folder).parent.parent, Path(folder).name,
                                                       language)
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown":
                for line in "".join(cell["source"]).splitlines():
                    if line.startswith("#"):
                        return line.lstrip("#").strip()
    return Path(folder).name


def problem_set_points(folder: Path) -> float:
    """The total points of the graded cells of the problem set's notebooks."""
    total = 0.0
    for path in sorted(Path(folder).glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                total += float(meta.get("points", 0))
    return total


def release_zips(source_course: Path, out_dir: Path, language: str = "en") -> list[Path]:
    """Release every problem set in a temporary copy of the course and zip each one into ``out_dir``.

    The course folder itself is not touched (so parallel builds never collide). Each
    zip holds one folder, ``<problem set>/``, with the student notebooks, in ``language``: in
    another language than English the copy's source notebooks are translated first
    (:func:`translation.translated_notebook`: the markdown only, so the release has the same code
    and nbgrader metadata in every language).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qkv-release-") as tmp:
        copy = Path(tmp) / "course"
        shutil.copytree(source_course, copy, ignore=shutil.ignore_patterns(
            "release", "submitted", "autograded", "feedback", "downloaded", "gradebook.db", "*.csv",
            ".grading", ".ipynb_checkpoints", "__pycache__"))
        course = Course(copy)
        for name in course.problem_sets() if language != "en" else ():
            for path in (course.root / "source" / name).glob("*.ipynb"):
                notebook = json.loads(path.read_text(encoding="utf-8"))
                path.write_text(json.dumps(translation.translated_notebook(notebook, course.root, name, language),
                                           ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        released = release(course, out=lambda line: None)
        zips = []
        for item in released:
            target = out_dir / f"{item.name}.zip"
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(item.folder.rglob("*")):
                    if path.is_file():
                        archive.write(path, Path(item.name) / path.relative_to(item.folder))
            zips.append(target)
        return zips


# --------------------------------------------------------------------------- collect


def collect(course: Course, submissions: Path, problem_set: str | None = None, out: Printer = print) -> list[Submission]:
    """Bring submissions into ``submitted/<student>/<problem set>/`` and list them (:mod:`qkv_grading.collect`)."""
    submissions = Path(submissions).resolve()
    if not submissions.exists():
        raise GradingError(f"{submissions} does not exist")
    known = course.problem_sets()
    if problem_set is not None and problem_set not in known:
        raise GradingError(f"unknown problem set {problem_set!r}; the problem sets are {', '.join(known)}")
    if submissions.is_file():
        if not zipfile.is_zipfile(submissions):
            raise GradingError(f"{submissions} is neither a folder nor a zip file")
        found = collecting.collect_zip(course.root, submissions, known, problem_set, out)
    else:
        found = collecting.collect_folder(course.root, submissions, known, problem_set, out)
    out(f"Collected {len(found)} submission{'s' if len(found) != 1 else ''} from "
        f"{len({s.student for s in found})} student{'s' if len({s.student for s in found}) != 1 else ''}.")
    return found


# --------------------------------------------------------------------------- grade


@dataclass
class Task:
    """One submission on its way through grading (its job is dropped once it is sent to a sandbox)."""

    sub: Submission
    plan: jobs.Plan
    cells: list
    job: dict | None
    key: str
    language: str | None = None  # what the submitted notebook's metadata says it speaks


def plans_for(course: Course, problem_sets: set[str], out: Printer) -> dict[str, jobs.Plan | str]:
    """The plan of each problem set, or why it cannot be graded."""
    from qkv_exercises.problem_sets import get_problem_set, names

    found: dict[str, jobs.Plan | str] = {}
    for ps in sorted(problem_sets, key=problem_set_order):
        if ps not in names():
            found[ps] = (f"{ps} has no module qkv_exercises.problem_sets.{ps}, so its checks cannot run outside the "
                         "sandbox; port it to start() and ps.check() to grade it")
            continue
        try:
            found[ps] = jobs.plan(course.root / "source" / ps, get_problem_set(ps))
        except jobs.PlanError as err:
            found[ps] = str(err)
    for ps, plan in found.items():
        if isinstance(plan, str):
            out(f"ERROR: {ps} cannot be graded: {plan}")
    return found


def _ensure_released(course: Course, plans: list[jobs.Plan], out: Printer) -> None:
    """Release (and so enter in the gradebook) each problem set whose tests the gradebook does not know as they are."""
    stale = []
    with gradebook.Writer(course.db_url, COURSE_ID) as writer:
        for plan in plans:
            known = writer.cells_of(plan.name, plan.notebook)
            wanted = {c.grade_id: c.points for c in plan.cells if c.role in ("test", "manual")}
            if known != wanted:
                stale.append(plan.name)
    if stale:
        release(course, out, stale)


def run_jobs(tasks: Iterable[Task], limits: sandbox.Limits, workers: int, dask: str | None,
             certificates: Path | None = None) -> Iterator[tuple[Task, bytes]]:
    """Run the tasks' jobs (the pure step) and yield each with its run record's bytes as it finishes:
    in sandboxes on this machine, or on the Dask cluster at ``dask`` with the grader's ``certificates``
    (:mod:`qkv_grading.cluster`).

    ``tasks`` is read only as sandboxes come free, at most two per sandbox ahead, and each
    record is yielded (and then dropped) as it comes: memory does not grow with the class.
    """
    if dask:
        yield from cluster.run_jobs(tasks, limits.as_dict(), dask, certificates)
        return
    sandbox.STOP.clear()
    try:
        tasks, workers = iter(tasks), max(1, workers)
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            running: dict[concurrent.futures.Future, Task] = {}
            try:
                while True:
                    while len(running) < 2 * workers and (task := next(tasks, None)) is not None:
                        running[pool.submit(_timed_run_job, task.job, limits.as_dict())] = task
                        task.job = None
                    if not running:
                        return
                    finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                    for future in finished:
                        task = running.pop(future)
                        try:
                            data, seconds = future.result()
                            task.sub.trusted_seconds += seconds
                        except Exception:
                            data = _result_of(future)
                        yield task, data
            finally:  # stopped (Ctrl-C) or done: nothing still waiting runs, nothing still running goes on
                for future in running:
                    future.cancel()
                sandbox.STOP.set()
    finally:  # every sandbox of this run has ended: a later run_job of this process is not stopped
        sandbox.STOP.clear()


def _timed_run_job(job: dict, limits: dict) -> tuple[bytes, float]:
    """:func:`sandbox.run_job` in this process, and the CPU time its thread spent (reading the channel)."""
    started = time.thread_time()
    data = sandbox.run_job(job, limits)
    return data, time.thread_time() - started


def _result_of(future) -> bytes:
    try:
        return future.result()
    except Exception as err:  # the machinery failed (not the submission): reported, never graded as 0
        return run_record.failed(f"{type(err).__name__}: {str(err)[:300]}")


class Progress:
    """A progress bar with the time left (tqdm, on standard error) and one line per submission (standard output)."""

    def __init__(self, total: int, out: Printer, bar: bool):
        from tqdm import tqdm

        self.total, self.done, self.out = total, 0, out
        self.bar = tqdm(total=total, unit="notebook", file=sys.stderr, disable=not bar or total == 0,
                        dynamic_ncols=True, mininterval=0.5)

    def line(self, text: str) -> None:
        self.done += 1
        self.bar.update(1)
        line = for_terminal(f"  [{self.done:>{len(str(self.total))}}/{self.total}] {text}")
        if self.bar.disable:
            self.out(line)
        else:
            self.bar.write(line, file=sys.stdout)

    def close(self) -> None:
        self.bar.close()


def terminal_printer(out: Printer) -> Printer:
    """``out``, with every line it prints first made safe for a terminal (:func:`safe_text.for_terminal`)."""
    if getattr(out, "terminal_safe", False):
        return out

    def printer(line: str) -> None:
        out(for_terminal(line))

    printer.terminal_safe = True
    return printer


def grade(course: Course, submissions: Path, *, problem_set: str | None = None, timeout: float | None = None,
          workers: int | None = None, dask: str | None = None, certificates: Path | None = None, fresh: bool = False,
          progress_bar: bool | None = None, out: Printer = print) -> list[Submission]:
    """Collect, grade (sandbox, then judge), write the gradebook, feedback and ``grades.csv``; print a summary."""
    started = time.perf_counter()
    out = terminal_printer(out)
    if dask:
        certificates = Path(certificates) if certificates else course.cluster_folder / "grader"
        try:
            cluster.check_address(dask)
            cluster.role_files(certificates, "grader")
        except cluster.ClusterError as err:
            raise GradingError(str(err)) from None
    else:
        try:
            sandbox.check_available()
        except sandbox.SandboxUnavailable as err:
            raise GradingError(str(err)) from None
        if not sandbox.privileged():
            out(f"Note: {sandbox.weaker_without_root()}.")
        out(f"Sandboxes: {sandbox.isolation()}.")
    subs = collect(course, submissions, problem_set, out)
    if not subs:
        out("Nothing to grade.")
        return subs
    limits = configured_limits(course, timeout)
    plans = plans_for(course, {s.problem_set for s in subs}, out)
    good_plans = [p for p in plans.values() if not isinstance(p, str)]
    _ensure_released(course, good_plans, out)
    for sub in subs:
        if isinstance(plans[sub.problem_set], str):
            sub.gradable = False
            sub.notes.append(f"not graded: {plans[sub.problem_set]}")
    workers = workers or os.cpu_count() or 1
    where = f"on the Dask cluster at {dask}" if dask else f"{workers} at a time"
    out(f"Grading {len(subs)} submission{'s' if len(subs) != 1 else ''} in sandboxes, {where} (each notebook may run "
        f"{limits.notebook_seconds:g} s, each cell {min(limits.cell_seconds, limits.notebook_seconds):g} s) ...")
    bar = Progress(len(subs), out, sys.stderr.isatty() if progress_bar is None else progress_bar)
    try:
        with gradebook.Writer(course.db_url, COURSE_ID) as writer:
            run = Grading(course, writer, plans, limits, bar, fresh, rerun=bool(dask) or workers > 1)
            for task, data in run_jobs(run.pending(subs), limits, workers, dask, certificates):
                run.receive(task, data)
            # A notebook stopped at its time limit runs once more on its own, after the others, so that
            # no other notebook's load (a fork bomb next to it) can cost it marks.
            for task, data in run_jobs(run.pending(run.again, rerun=True), limits, 1, dask, certificates):
                run.receive(task, data, rerun=True)
            run.tidy_journals()
    except KeyboardInterrupt:
        bar.close()
        out("Stopped: every grade written so far is in the gradebook; run the same command again to grade the rest.")
        export(course, out)
        raise
    bar.close()
    feedbacks.copy_mathjax(course.root / "feedback")
    out(f"Feedback written to {shown(course.root / 'feedback')}/<student>/<problem set>/")
    export(course, out)
    _summary(subs, time.perf_counter() - started, out)
    if run.failed_machinery:
        raise GradingError(f"{run.failed_machinery} submission{'s' if run.failed_machinery != 1 else ''} could not be "
                           "run in a sandbox (see above) and were not graded; fix the machine and run the same "
                           "command again")
    return subs


class Grading:
    """One grading run's trusted side: which submissions go to a sandbox, and what becomes of each record.

    :meth:`pending` prepares each submission as the sandboxes come free (those the journal
    holds, or that cannot run, are finished on the way); :meth:`receive` decodes a record
    (:func:`run_record.decode`, within the submission's time budget), judges it, and writes
    the gradebook, the autograded notebook, the feedback page and the journal at once.
    """

    def __init__(self, course: Course, writer: gradebook.Writer, plans: dict, limits: sandbox.Limits,
                 bar: Progress, fresh: bool, rerun: bool):
        self.course, self.writer, self.plans, self.limits, self.bar = course, writer, plans, limits, bar
        self.key = jobs.grading_key(course.root)
        self.bounds = run_record.Bounds()
        self.rerun_timed_out = rerun
        self.journals = {p.name: Journal(course.root, p.name) for p in plans.values() if not isinstance(p, str)}
        self.done = {ps: ({} if fresh else j.index()) for ps, j in self.journals.items()}
        self.keys_now: dict[str, dict[str, str]] = {ps: {} for ps in self.journals}
        self.again: list[Submission] = []  # run once more on their own, after the others
        self.timed_out_beside_others: set[tuple[str, str]] = set()
        self.failed_machinery = 0

    def pending(self, subs: Iterable[Submission], rerun: bool = False) -> Iterator[Task]:
        """The tasks that need a sandbox, made one at a time; the others are finished here."""
        for sub in subs:
            task = self.prepare(sub) if sub.gradable else None
            if task is None:
                self.ungradable(sub)
                self.bar.line(f"{sub.problem_set}  {sub.student}: not graded, 0 points: {sub.notes[-1]}")
                continue
            self.keys_now[sub.problem_set][sub.student] = task.key
            offset = None if rerun else self.done[sub.problem_set].get(task.key)
            data = self.journals[sub.problem_set].record(offset) if offset is not None else None
            if data is not None:
                budget = run_record.Budget(self.bounds.judging_seconds)
                started = time.thread_time()
                try:
                    record = run_record.decode(data, self.bounds, budget)
                except run_record.RecordRefused:  # a journal of another version: run it again
                    record = None
                sub.trusted_seconds += time.thread_time() - started
                if record is not None:
                    self.finish(task, record, budget, from_journal=True)
                    continue
            yield task

    def prepare(self, sub: Submission) -> Task | None:
        """The task of a submission, or None (with the reason in its notes) when it is not a notebook."""
        plan = self.plans[sub.problem_set]
        try:
            nb = jobs.read_submission(sub.notebook)
        except jobs.NotANotebook as err:
            sub.gradable = False
            sub.notes.append(str(err))
            return None
        cells, notes = jobs.arrange(plan, nb)
        sub.notes.extend(n for n in notes if n not in sub.notes)
        job = jobs.build_job(plan, cells, sub.student, self.key, variant_id=sub.numbers_of)
        return Task(sub, plan, cells, job, result_key(job, sandbox.runtime_digest(), self.limits.as_dict()),
                    metadata_language(nb.get("metadata")))

    def receive(self, task: Task, data: bytes, rerun: bool = False) -> None:
        """One record back from a sandbox: decoded within the submission's time budget, then finished here,
        run again later (a sandbox that failed, a notebook past its time beside others), or, when its
        sandbox failed twice, reported as the machine's failure: not graded, never 0 points."""
        sub = task.sub
        budget = run_record.Budget(self.bounds.judging_seconds)
        started = time.thread_time()
        try:
            record = run_record.decode(data, self.bounds, budget)
        except run_record.RecordRefused as err:
            record, refused = None, str(err)
        sub.trusted_seconds += time.thread_time() - started
        if record is None:
            self.finish(task, None, budget, refused=refused)
            return
        if record.status == "sandbox_failed" and not rerun:  # most often a loaded machine: once more, on its own
            sub.notes.append(f"its sandbox failed ({record.reason}), so it was run again on its own after the others")
            self.again.append(sub)
            return
        if record.status == "sandbox_failed":
            self.failed_machinery += 1
            sub.gradable = False
            sub.notes.append(f"not graded: the sandbox could not run it: {record.reason}")
            self.bar.line(f"{task.plan.name}  {sub.student}: NOT GRADED: {sub.notes[-1]}")
            return
        if record.status == "timed_out" and not rerun and self.rerun_timed_out:
            self.timed_out_beside_others.add(sub.key)
            self.again.append(sub)
            return
        if rerun and sub.key in self.timed_out_beside_others:
            sub.notes.append("ran past its time limit beside other notebooks, so it was run again on its own"
                             + (", and ran past it again" if record.status == "timed_out" else ""))
        self.finish(task, record, budget)

    def finish(self, task: Task, record: run_record.RunRecord | None, budget: run_record.Budget, *,
               refused: str | None = None, from_journal: bool = False) -> None:
        """The trusted step for one submission: judge, gradebook, autograded notebook, feedback, journal."""
        sub, plan = task.sub, task.plan
        started = time.thread_time()
        graded = None
        if record is not None:
            try:
                graded = judging.judge(plan, sub.student, self.key, task.cells, record, self.limits,
                                       variant_id=sub.numbers_of, budget=budget, notebook_language=task.language)
            except run_record.OverBudget as err:
                record, refused = None, str(err)
        if graded is None or record is None:
            graded = judging.refused(plan, sub.student, task.cells, refused or "no record", task.language)
        graded.notes = sub.notes + graded.notes
        old = self.writer.score_of(sub.student, plan.name)
        graded.notes += self.writer.record(graded, plan.notebook, sub.timestamp, sub.platform_name)
        new = self.writer.score_of(sub.student, plan.name)
        sub.notes, sub.max_score = graded.notes, graded.max_score
        sub.score = new if new is not None else graded.score
        changed = old is not None and abs(old - sub.score) > 1e-9
        if changed:
            sub.notes.append(f"the regrade changed its score: {old:g} -> {sub.score:g}")
        folder = self.course.autograded(sub.student, plan.name)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / f"{plan.notebook}.ipynb").write_text(
            json.dumps(feedbacks.autograded_notebook(plan, graded), ensure_ascii=False, indent=1), encoding="utf-8")
        if sub.timestamp:
            (folder / "timestamp.txt").write_text(sub.timestamp, encoding="utf-8")
        feedbacks.write_feedback(self.course.root / "feedback", plan, graded, self.course.root)
        if record is not None and not from_journal:
            self.journals[plan.name].append(task.key, sub.student, run_record.encode(record))
        sub.trusted_seconds += time.thread_time() - started
        score = f"{old:g} -> {sub.score:g}" if changed else f"{sub.score:g}"
        self.bar.line(f"{plan.name}  {sub.student}: {score} / {sub.max_score:g}"
                      + (" (from the journal)" if from_journal else ""))

    def ungradable(self, sub: Submission) -> None:
        plan = self.plans[sub.problem_set]
        for stale in (self.course.autograded(sub.student, sub.problem_set),
                      self.course.feedback(sub.student, sub.problem_set)):
            shutil.rmtree(stale, ignore_errors=True)  # results of an earlier hand-in no longer count
        if isinstance(plan, str):
            return  # the course's problem, not the student's: nothing enters the gradebook
        graded = judging.Graded(sub.student, plan.name, max_score=plan.max_score, gradable=False)
        old = self.writer.score_of(sub.student, plan.name)
        self.writer.record(graded, plan.notebook, sub.timestamp, sub.platform_name)
        sub.score, sub.max_score = 0.0, plan.max_score
        if old is not None and abs(old) > 1e-9:
            sub.notes.append(f"the regrade changed its score: {old:g} -> 0")

    def tidy_journals(self) -> None:
        for ps, journal in self.journals.items():
            journal.keep_only(set(self.keys_now[ps]), set(self.keys_now[ps].values()))


def export(course: Course, out: Printer = print) -> Path:
    """Write ``grades.csv``: one row per student and problem set graded so far, nbgrader's columns, valid CSV."""
    target = course.root / "grades.csv"
    with gradebook.Writer(course.db_url, COURSE_ID) as writer:
        graded = writer.graded_problem_sets()
        table = gradebook.rows(writer.gb, graded) if graded else []
    gradebook.write_csv(target, table)
    students = len({row[3] for row in table})
    out(f"Grades of {students} student{'s' if students != 1 else ''} written to {shown(target)}")
    return target


def _summary(subs: list[Submission], seconds: float, out: Printer) -> None:
    width = max(len("student"), *(len(s.student) for s in subs))
    out("")
    out(f"{'student':<{width}}  {'problem set':<24} {'score':>11}")
    for sub in sorted(subs, key=lambda s: (problem_set_order(s.problem_set), s.student)):
        score = f"{sub.score:g} / {sub.max_score:g}" if sub.score is not None else "not graded"
        out(f"{sub.student:<{width}}  {sub.problem_set:<24} {score:>11}")
        for note in sub.notes:
            out(f"{'':<{width}}    ! {note}")
    attention = [s for s in subs if s.notes]
    costly = max(subs, key=lambda s: s.trusted_seconds)
    out("")
    out(f"This process spent {sum(s.trusted_seconds for s in subs):.1f} s of CPU on the submissions (reading, "
        f"judging, writing), at most {costly.trusted_seconds:.2f} s on one ({costly.student}, {costly.problem_set}).")
    out(f"Graded {len(subs)} submission{'s' if len(subs) != 1 else ''} in {seconds:.1f} s "
        f"({seconds / len(subs):.2f} s each); "
        f"{len(attention)} need a look (marked !), {sum(not s.gradable for s in subs)} could not be run "
        "(0 points, or not graded when the fault is the course's or the machine's).")


# --------------------------------------------------------------------------- a cluster's certificates


def make_certificates(course: Course | None, folder: Path | None, hosts: tuple[str, ...],
                      out: Printer = print) -> Path:
    """Make the cluster's authority and certificates (:func:`cluster.make_certificates`) in ``folder``
    (default: the course's) and say where each goes."""
    folder = Path(folder) if folder else course.cluster_folder
    made = cluster.make_certificates(folder, hosts)
    out(f"Certificates of a Dask cluster written to {shown(folder)}/ (each folder private to you; the authority's "
        "key is not kept):")
    out(f"  {shown(made['scheduler'])}/  copy to the scheduler's machine")
    out(f"  {shown(made['worker'])}/  copy to each worker's machine, readable by the workers' user only")
    out(f"  {shown(made['grader'])}/  stays here: grade --dask tls://HOST:8786 uses it")
    return folder


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkv_grading", description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE, help="the course folder (default: exercises)")
    commands = parser.add_subparsers(dest="command", required=True)
    released = commands.add_parser("release", help="release every problem set (or those named) into release/")
    released.add_argument("problem_sets", nargs="*", metavar="PROBLEM_SET",
                          help="only these problem sets (default: every one of source/)")
    for name, text in (("grade", "collect, grade in sandboxes, feedback and export"), ("collect", "only collect")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("submissions", type=Path, help="folder submitted/<student>/<ps>/ or a zip from a platform")
        sub.add_argument("--problem-set", help="grade only this problem set")
        if name == "grade":
            sub.add_argument("--timeout", type=float,
                             help="seconds each notebook may run (default: c.Sandbox.notebook_seconds, 60)")
            sub.add_argument("--workers", type=int, help="sandboxes side by side (default: the number of cores)")
            sub.add_argument("--dask", metavar="ADDRESS",
                             help="run the sandboxes on the workers of this Dask scheduler (tls://host:8786)")
            sub.add_argument("--certificates", type=Path, metavar="FOLDER",
                             help="the grader's certificates for --dask (default: .grading/cluster/grader/ of the "
                                  "course)")
            sub.add_argument("--fresh", action="store_true", help="run every submission again, ignoring the journal")
    commands.add_parser("export", help="write grades.csv from the gradebook")
    certificates = commands.add_parser("certificates", help="make the certificates of a Dask cluster (TLS both ways)")
    certificates.add_argument("folder", type=Path, nargs="?",
                              help="a new folder for them (default: .grading/cluster/ of the course)")
    certificates.add_argument("--host", action="append", default=[],
                              help="a name or address of a machine of the cluster, recorded in the certificates")
    args = parser.parse_args(argv)
    out = terminal_printer(lambda line: print(line, flush=True))
    try:
        if args.command == "certificates" and args.folder:  # needs no course folder
            make_certificates(None, args.folder, tuple(args.host), out)
            return 0
        course = Course(args.course)
        if args.command == "release":
            unknown = [ps for ps in args.problem_sets if ps not in course.problem_sets()]
            if unknown:
                raise GradingError(f"unknown problem set {unknown[0]!r}; the problem sets are "
                                   f"{', '.join(course.problem_sets())}")
            release(course, out, args.problem_sets or None)
        elif args.command == "grade":
            grade(course, args.submissions, problem_set=args.problem_set, timeout=args.timeout, workers=args.workers,
                  dask=args.dask, certificates=args.certificates, fresh=args.fresh, out=out)
        elif args.command == "certificates":
            make_certificates(course, args.folder, tuple(args.host), out)
        elif args.command == "collect":
            collect(course, args.submissions, args.problem_set, out)
        elif args.command == "export":
            export(course, out)
    except (GradingError, ValueError, cluster.ClusterError, private_files.UnsafeLocation) as err:
        print(f"error: {for_terminal(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
