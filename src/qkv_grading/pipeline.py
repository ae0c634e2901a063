"""The instructor's commands: release every problem set, and grade a class's submissions.

Run from the repository (``make release``, ``make grade SUBMISSIONS=...``) or directly::

    python -m qkv_grading release                      # every problem set -> exercises/release/
    python -m qkv_grading grade SUBMISSIONS            # a folder submitted/<student>/<ps>/ or an LMS .zip
    python -m qkv_grading collect SUBMISSIONS          # only copy or unzip into exercises/submitted/
    python -m qkv_grading autograde                    # only autograde what is in exercises/submitted/
    python -m qkv_grading feedback                     # only write feedback HTML
    python -m qkv_grading export                       # only write exercises/grades.csv

Every step runs the real nbgrader command line in the course folder. ``grade`` does
collect, autograde, feedback and export in one go and prints a line per submission as
it is graded. A submission that cannot be graded (not a notebook, no notebook of the
right name, a kernel that dies) is reported with its reason, recorded in the
gradebook with 0 points, and never stops the others; every student that handed
something in has a row in ``grades.csv``.

The work is done one problem set at a time, each in one ``nbgrader autograde`` run
over a list of students (:func:`autograde`), so a later version can grade several
lists side by side (each with its own gradebook file, merged afterwards, since the
SQLite gradebook takes one writer at a time).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

COURSE_ID = "attention-by-hand"
DEFAULT_COURSE = Path("exercises")
TIMEOUT_ERRORS = ("CellTimeoutError", "KeyboardInterrupt")

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
        return sorted(p.name for p in (self.root / "source").iterdir() if p.is_dir() and any(p.glob("*.ipynb")))

    def notebooks(self, problem_set: str) -> list[str]:
        """The notebook names (without ``.ipynb``) a submission of ``problem_set`` must contain."""
        return sorted(p.stem for p in (self.root / "source" / problem_set).glob("*.ipynb"))

    def submitted(self, student: str, problem_set: str) -> Path:
        return self.root / "submitted" / student / problem_set

    def autograded(self, student: str, problem_set: str) -> Path:
        return self.root / "autograded" / student / problem_set

    def feedback(self, student: str, problem_set: str) -> Path:
        return self.root / "feedback" / student / problem_set


def nbgrader_env() -> dict[str, str]:
    """The environment nbgrader needs: it calls ``alembic`` (to create the gradebook) by name, so
    the folder of this Python goes first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def nbgrader(course: Course, *args: str, on_line: Printer | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m nbgrader ARGS`` in the course folder; return it with its log (stderr) as text.

    ``on_line`` receives each log line as it is written.
    """
    env = nbgrader_env()
    command = [sys.executable, "-m", "nbgrader", *args]
    process = subprocess.Popen(command, cwd=course.root, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace")
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if on_line is not None:
            on_line(line.rstrip("\n"))
    process.wait()
    return subprocess.CompletedProcess(command, process.returncode, stdout="".join(lines), stderr="")


def shown(path: Path) -> str:
    """``path`` as the instructor would type it: relative to the current folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class GradingError(RuntimeError):
    """An nbgrader step failed for the whole course (not for one submission)."""


def _require(result: subprocess.CompletedProcess, what: str) -> None:
    if result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-25:])
        raise GradingError(f"{what} failed (nbgrader exited with {result.returncode}):\n{tail}")


# --------------------------------------------------------------------------- release


@dataclass(frozen=True)
class ReleasedSet:
    """One released problem set: its folder under ``release/``, its title and its points."""

    name: str
    folder: Path
    title: str
    points: float


def release(course: Course, out: Printer = print) -> list[ReleasedSet]:
    """Release every problem set (``nbgrader generate_assignment``) into ``release/``."""
    started = time.perf_counter()
    out(f"Releasing {len(course.problem_sets())} problem sets from {shown(course.root / 'source')}/ ...")
    _require(nbgrader(course, "generate_assignment", "*", "--force"), "nbgrader generate_assignment")
    released = []
    for name in course.problem_sets():
        folder = course.root / "release" / name
        released.append(ReleasedSet(name, folder, problem_set_title(folder), problem_set_points(folder)))
        out(f"  {name:<24} {released[-1].points:>4g} points  {shown(folder)}/")
    out(f"Released {len(released)} problem sets in {time.perf_counter() - started:.1f} s.")
    return released


def problem_set_title(folder: Path) -> str:
    """The first heading of the problem set's first notebook, without its '#' marks."""
    for path in sorted(Path(folder).glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
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


def release_zips(source_course: Path, out_dir: Path) -> list[Path]:
    """Release every problem set in a temporary copy of the course and zip each one into ``out_dir``.

    The course folder itself is not touched (so parallel builds never collide). Each
    zip holds one folder, ``<problem set>/``, with the student notebooks.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qkv-release-") as tmp:
        copy = Path(tmp) / "course"
        shutil.copytree(source_course, copy, ignore=shutil.ignore_patterns(
            "release", "submitted", "autograded", "feedback", "downloaded", "gradebook.db", "*.csv",
            ".ipynb_checkpoints", "__pycache__"))
        released = release(Course(copy), out=lambda line: None)
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


@dataclass
class Submission:
    """One student's hand-in of one problem set, and what became of it."""

    student: str
    problem_set: str
    score: float | None = None
    max_score: float | None = None
    gradable: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.student, self.problem_set)


def collect(course: Course, submissions: Path, problem_set: str | None = None, out: Printer = print) -> list[Submission]:
    """Bring submissions into ``submitted/<student>/<problem set>/`` and list them.

    ``submissions`` is a folder in nbgrader's layout (``<student>/<problem set>/*.ipynb``,
    or a folder holding ``submitted/``), or a zip downloaded from a learning management
    system, filed with ``nbgrader zip_collect`` (see ``nbgrader_config.py`` for the file
    names it expects). ``problem_set`` limits the collection to one problem set.
    """
    submissions = Path(submissions).resolve()
    if not submissions.exists():
        raise GradingError(f"{submissions} does not exist")
    known = course.problem_sets()
    if problem_set is not None and problem_set not in known:
        raise GradingError(f"unknown problem set {problem_set!r}; the problem sets are {', '.join(known)}")
    if submissions.is_file():
        if not zipfile.is_zipfile(submissions):
            raise GradingError(f"{submissions} is neither a folder nor a zip file")
        found = _collect_zip(course, submissions, problem_set, known, out)
    else:
        found = _collect_folder(course, submissions, problem_set, known, out)
    out(f"Collected {len(found)} submissions from {len(set(s for s, _ in found))} students.")
    return [Submission(student, ps) for student, ps in sorted(found)]


def _collect_folder(course, folder, problem_set, known, out) -> set[tuple[str, str]]:
    if (folder / "submitted").is_dir():
        folder = folder / "submitted"
    found = set()
    for stray in sorted(folder.glob("*.ipynb")) + sorted(folder.glob("*/*.ipynb")):
        out(f"  NOT COLLECTED: {stray.relative_to(folder)} (expected <student>/<problem set>/<notebook>.ipynb)")
    for student_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for ps_dir in sorted(p for p in student_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if ps_dir.name not in known:
                out(f"  skipped {ps_dir.relative_to(folder)}: not a problem set of this course")
                continue
            if problem_set is not None and ps_dir.name != problem_set:
                continue
            target = course.submitted(student_dir.name, ps_dir.name)
            if ps_dir.resolve() != target.resolve():
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(ps_dir, target)
            found.add((student_dir.name, ps_dir.name))
    return found


def _collect_zip(course, archive, problem_set, known, out) -> set[tuple[str, str]]:
    with zipfile.ZipFile(archive) as z:
        names = [Path(n).name for n in z.namelist() if n.endswith(".ipynb")]
    wanted = [problem_set] if problem_set else [ps for ps in known if any(ps in n for n in names)]
    if not wanted:
        raise GradingError(f"{archive.name} holds no notebook named after a problem set ({', '.join(known)})")
    copied = re.compile(r"Copying to: .*[/\\]submitted[/\\](?P<student>[^/\\]+)[/\\](?P<ps>[^/\\]+)[/\\]")
    found, unmatched = set(), set()
    for ps in wanted:
        archive_dir = course.root / "downloaded" / ps / "archive"
        shutil.rmtree(archive_dir, ignore_errors=True)
        archive_dir.mkdir(parents=True)
        shutil.copy(archive, archive_dir / archive.name)
        result = nbgrader(course, "zip_collect", ps, "--force", "--strict")
        _require(result, f"nbgrader zip_collect {ps}")
        for line in result.stdout.splitlines():
            match = copied.search(line)
            if match:
                found.add((match["student"], match["ps"]))
            elif "Skipped submission with no match" in line:
                unmatched.add(Path(line.rsplit(": ", 1)[-1]).name)
    for name in sorted(unmatched):
        out(f"  NOT COLLECTED: {name} (its name does not match <student>_..._<notebook>.ipynb)")
    return found


def _submitted_pairs(course: Course) -> set[tuple[str, str]]:
    root = course.root / "submitted"
    if not root.is_dir():
        return set()
    return {(s.name, p.name) for s in root.iterdir() if s.is_dir() for p in s.iterdir() if p.is_dir()}


# --------------------------------------------------------------------------- autograde


def inspect_submission(course: Course, sub: Submission) -> None:
    """Mark ``sub`` as not gradable, with the reason, if its notebook is missing or is not a notebook."""
    import nbformat

    folder = course.submitted(sub.student, sub.problem_set)
    present = sorted(p.name for p in folder.glob("*.ipynb"))
    for name in course.notebooks(sub.problem_set):
        path = folder / f"{name}.ipynb"
        if not path.is_file():
            others = f" (found: {', '.join(present)})" if present else " (the folder holds no notebook)"
            sub.gradable = False
            sub.notes.append(f"no {name}.ipynb{others}")
            continue
        try:
            nb = nbformat.read(path, as_version=4)
            nbformat.validate(nb)
        except Exception as err:  # not JSON, not a notebook: nothing nbgrader could run
            sub.gradable = False
            first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            sub.notes.append(f"{name}.ipynb is not a valid notebook ({first_line[:160]})")


def autograde(course: Course, problem_set: str, subs: list[Submission], *, timeout: int | None = None,
              out: Printer = print, progress: tuple[int, int] = (0, 0)) -> None:
    """Autograde the gradable submissions of one problem set, all in one ``nbgrader autograde`` run.

    Prints a line as each submission starts. A submission the run did not grade (its
    kernel died, or a fault in it stopped the whole run) is graded once more on its own,
    so that one broken notebook never costs the others their grades. Afterwards each
    submission gets its score from the gradebook and notes on what went wrong while it
    ran (a cell stopped by the time limit, a cell of the student's that raised); one
    that nbgrader could not grade at all gets 0 points and the reason from nbgrader's log.
    """
    done, total = progress
    width = len(str(total))
    for sub in subs:
        if not sub.gradable:
            done += 1
            out(f"  [{done:>{width}}/{total}] {problem_set}  {sub.student}: not graded, 0 points: {sub.notes[-1]}")
            for stale in (course.autograded(sub.student, problem_set), course.feedback(sub.student, problem_set)):
                shutil.rmtree(stale, ignore_errors=True)  # results of an earlier hand-in no longer count
    todo = [s for s in subs if s.gradable]
    counter = {"n": done}

    def started(student: str) -> None:
        counter["n"] += 1
        out(f"  [{counter['n']:>{width}}/{total}] {problem_set}  {student}")

    if todo:
        _autograde_run(course, problem_set, [s.student for s in todo], timeout, started)
    missing = [s for s in todo if not _autograded(course, s)]
    if missing:
        out(f"  {len(missing)} not graded in that run; grading {'it' if len(missing) == 1 else 'them'} "
            "one at a time ...")
    for sub in missing:
        log = _autograde_run(course, problem_set, [sub.student], timeout, lambda student: None)
        if _autograded(course, sub):
            out(f"  {'':>{2 * width + 3}} {problem_set}  {sub.student}: graded on its own")
        else:
            sub.gradable = False
            sub.notes.append(f"nbgrader could not grade it: {_failure_reason(log)}")
            shutil.rmtree(course.feedback(sub.student, problem_set), ignore_errors=True)
            out(f"  {'':>{2 * width + 3}} {problem_set}  {sub.student}: not graded, 0 points: {sub.notes[-1]}")
    for sub in todo:
        if sub.gradable:
            sub.notes.extend(_run_notes(course.autograded(sub.student, sub.problem_set)))
    _record(course, problem_set, subs)


def _autograded(course: Course, sub: Submission) -> bool:
    return any(course.autograded(sub.student, sub.problem_set).glob("*.ipynb"))


def _autograde_run(course: Course, problem_set: str, students: list[str], timeout: int | None,
                   started: Callable[[str], None]) -> str:
    """One ``nbgrader autograde`` of ``students``' submissions of ``problem_set``; returns its log.

    Every other student in ``submitted/`` is excluded, so that only these are (re)graded.
    """
    wanted = set(students)
    others = sorted(s for s, ps in _submitted_pairs(course) if ps == problem_set and s not in wanted)
    args = ["autograde", problem_set, "--force"]
    if others:
        args.append("--CourseDirectory.student_id_exclude=" + ",".join(others))
    if timeout is not None:
        args.append(f"--Execute.timeout={int(timeout)}")
    pattern = re.compile(r"Sanitizing .*[/\\]submitted[/\\](?P<student>[^/\\]+)[/\\]" + re.escape(problem_set))

    def on_line(line: str) -> None:
        match = pattern.search(line)
        if match:
            started(match["student"])

    return nbgrader(course, *args, on_line=on_line).stdout


_GENERAL_ERRORS = ("There was an error processing", "Please see the", "Traceback (most recent call last)")


def _failure_reason(log: str) -> str:
    """Why nbgrader could not grade a submission, from the log of grading it on its own."""
    lines = [line.split("] ", 1)[-1].strip() for line in log.splitlines()]
    exceptions = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", line)]
    if exceptions:
        return exceptions[-1][:200]
    raw = log.splitlines()
    for i, line in enumerate(raw):
        if "| ERROR]" in line and not any(g in line for g in _GENERAL_ERRORS):
            message = [line.split("] ", 1)[-1].strip()]
            for more in raw[i + 1:]:  # a long message goes on in indented lines
                if not more.startswith(" ") or not more.strip():
                    break
                message.append(more.strip())
            return " ".join(message)[:200]
    return "no reason in nbgrader's log"


def _run_notes(notebook_dir: Path) -> list[str]:
    """What went wrong while a graded notebook ran, apart from failed tests (those are wrong answers)."""
    notes = []
    for path in sorted(notebook_dir.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code_number = 0
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            code_number += 1
            meta = cell.get("metadata", {}).get("nbgrader", {})
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if not errors:
                continue
            grade_id = meta.get("grade_id")
            name = f"cell {grade_id}" if grade_id else f"code cell {code_number} (not part of the problem set)"
            if code_number == 1:
                name = f"the first code cell ({grade_id})" if grade_id else "the first code cell (added by the student)"
            enames = {e.get("ename") for e in errors}
            if enames & set(TIMEOUT_ERRORS):
                notes.append(f"{name} ran past the time limit and was stopped")
            elif not meta.get("grade"):
                error = errors[0]
                evalue = str(error.get("evalue", "")).strip().splitlines()
                detail = f": {evalue[0][:120]}" if evalue else ""
                notes.append(f"{name} raised {error.get('ename')}{detail}")
    return notes


def _record(course: Course, problem_set: str, subs: list[Submission]) -> None:
    """Read each submission's score from the gradebook; enter the ungradable ones with 0 points."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url, COURSE_ID) as gb:
        assignment = gb.find_assignment(problem_set)
        for sub in subs:
            sub.max_score = float(assignment.max_score)
            if not sub.gradable:
                gb.update_or_create_student(sub.student)
                with warnings.catch_warnings():  # nbgrader's own query warns about its autoflush here
                    warnings.simplefilter("ignore")
                    submission = gb.update_or_create_submission(problem_set, sub.student)
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        grade.auto_score = 0
                        grade.needs_manual_grade = False
                gb.db.commit()
            sub.score = float(gb.find_submission(problem_set, sub.student).score or 0.0)


# --------------------------------------------------------------------------- feedback and export


def feedback(course: Course, problem_set: str, students: Iterable[str] | None = None, out: Printer = print) -> None:
    """Write feedback HTML (``feedback/<student>/<problem set>/``) for the autograded submissions."""
    args = ["generate_feedback", problem_set, "--force"]
    graded = {p.parent.name for p in (course.root / "autograded").glob(f"*/{problem_set}")}
    if students is not None:
        wanted = set(students) & graded
        others = sorted(graded - wanted)
        if not wanted:
            return
        if others:
            args.append("--CourseDirectory.student_id_exclude=" + ",".join(others))
    elif not graded:
        return
    _require(nbgrader(course, *args), f"nbgrader generate_feedback {problem_set}")
    copy_feedback_mathjax(course.root / "feedback")


# MathJax 3 (pip package django-static-mathjax): the SVG bundle and what it may load later.
MATHJAX_PARTS = ("tex-svg.js", "input", "ui", "a11y", "sre")


def copy_feedback_mathjax(feedback_dir: Path) -> None:
    """Put MathJax in ``feedback/_mathjax/``, where the course's feedback template loads it from."""
    import mathjax

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = feedback_dir / "_mathjax"
    if (target / MATHJAX_PARTS[0]).is_file():
        return
    target.mkdir(parents=True, exist_ok=True)
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            shutil.copy2(source / part, target / part)


def export(course: Course, subs: Iterable[Submission] = (), out: Printer = print) -> Path:
    """Write ``grades.csv`` (``nbgrader export``): one row per student and problem set graded so far.

    Any submission in ``subs`` that the export left out gets its own row with 0 points,
    so that no hand-in is ever missing from the file.
    """
    from nbgrader.api import Gradebook

    target = course.root / "grades.csv"
    with Gradebook(course.db_url, COURSE_ID) as gb:
        handed_in = [a.name for a in gb.assignments if a.num_submissions > 0]
    args = ["export", f"--to={target}"]
    if handed_in:
        args.append("--assignment=" + json.dumps(sorted(handed_in)))  # only problem sets graded so far
    _require(nbgrader(course, *args), "nbgrader export")
    with target.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    present = {(r["student_id"], r["assignment"]) for r in rows}
    missing = [s for s in subs if s.key not in present]
    if missing:
        with target.open("a", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            for sub in missing:
                writer.writerow([sub.problem_set, "", "", sub.student, "", "", "", 0.0, 0.0, 0.0, sub.max_score or ""])
    out(f"Grades of {len({r['student_id'] for r in rows} | {s.student for s in missing})} students "
        f"written to {shown(target)}")
    return target


# --------------------------------------------------------------------------- grade: all of it


def grade(course: Course, submissions: Path, *, problem_set: str | None = None, timeout: int | None = None,
          out: Printer = print) -> list[Submission]:
    """Collect, autograde, write feedback and export grades; print a line per submission and a summary."""
    started = time.perf_counter()
    subs = collect(course, submissions, problem_set, out)
    if not subs:
        out("Nothing to grade.")
        return subs
    _ensure_released(course, {s.problem_set for s in subs}, out)
    for sub in subs:
        inspect_submission(course, sub)
    out(f"Autograding {len(subs)} submissions (each cell may run "
        f"{timeout if timeout is not None else configured_timeout(course)} seconds) ...")
    done = 0
    for ps in sorted({s.problem_set for s in subs}):
        group = [s for s in subs if s.problem_set == ps]
        autograde(course, ps, group, timeout=timeout, out=out, progress=(done, len(subs)))
        done += len(group)
    out("Writing feedback ...")
    for ps in sorted({s.problem_set for s in subs}):
        feedback(course, ps, [s.student for s in subs if s.problem_set == ps and s.gradable], out)
    out(f"Feedback of {sum(s.gradable for s in subs)} submissions written to "
        f"{shown(course.root / 'feedback')}/<student>/<problem set>/")
    export(course, subs, out)
    _summary(subs, time.perf_counter() - started, out)
    return subs


def configured_timeout(course: Course) -> int | None:
    """The seconds each cell may run, as ``nbgrader_config.py`` sets them (``c.Execute.timeout``)."""
    from nbgrader.preprocessors import Execute
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config()
    return config.Execute.timeout if "timeout" in config.Execute else Execute.timeout.default_value


def _ensure_released(course: Course, problem_sets: set[str], out: Printer) -> None:
    from nbgrader.api import Gradebook

    if (course.root / "gradebook.db").is_file():
        with Gradebook(course.db_url, COURSE_ID) as gb:
            known = {a.name for a in gb.assignments}
        if problem_sets <= known:
            return
    release(course, out)


def _summary(subs: list[Submission], seconds: float, out: Printer) -> None:
    width = max(len("student"), *(len(s.student) for s in subs))
    out("")
    out(f"{'student':<{width}}  {'problem set':<24} {'score':>11}")
    for sub in sorted(subs, key=lambda s: (s.problem_set, s.student)):
        score = f"{sub.score:g} / {sub.max_score:g}" if sub.score is not None else "?"
        out(f"{sub.student:<{width}}  {sub.problem_set:<24} {score:>11}")
        for note in sub.notes:
            out(f"{'':<{width}}    ! {note}")
    attention = [s for s in subs if s.notes]
    out("")
    out(f"Graded {len(subs)} submissions in {seconds:.1f} s ({seconds / len(subs):.1f} s each); "
        f"{len(attention)} need a look (marked !), {sum(not s.gradable for s in subs)} could not be graded (0 points).")


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkv_grading", description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE, help="the course folder (default: exercises)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="release every problem set into release/")
    for name, text in (("grade", "collect, autograde, feedback and export"), ("collect", "only collect")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("submissions", type=Path, help="folder submitted/<student>/<ps>/ or a zip from an LMS")
        sub.add_argument("--problem-set", help="grade only this problem set (needed for a zip that mixes sets)")
        if name == "grade":
            sub.add_argument("--timeout", type=int, help="seconds each cell may run (default: nbgrader_config.py)")
    auto = commands.add_parser("autograde", help="autograde everything in submitted/")
    auto.add_argument("--problem-set")
    auto.add_argument("--timeout", type=int)
    fb = commands.add_parser("feedback", help="write feedback HTML for everything autograded")
    fb.add_argument("--problem-set")
    commands.add_parser("export", help="write grades.csv")
    args = parser.parse_args(argv)
    out = lambda line: print(line, flush=True)  # noqa: E731
    try:
        course = Course(args.course)
        if args.command == "release":
            release(course, out)
        elif args.command == "grade":
            grade(course, args.submissions, problem_set=args.problem_set, timeout=args.timeout, out=out)
        elif args.command == "collect":
            collect(course, args.submissions, args.problem_set, out)
        elif args.command == "autograde":
            started = time.perf_counter()
            subs = [Submission(s, p) for s, p in sorted(_submitted_pairs(course))
                    if args.problem_set in (None, p)]
            _ensure_released(course, {s.problem_set for s in subs}, out)
            for sub in subs:
                inspect_submission(course, sub)
            done = 0
            for ps in sorted({s.problem_set for s in subs}):
                group = [s for s in subs if s.problem_set == ps]
                autograde(course, ps, group, timeout=args.timeout, out=out, progress=(done, len(subs)))
                done += len(group)
            if subs:
                _summary(subs, time.perf_counter() - started, out)
            else:
                out("Nothing in submitted/ to grade.")
        elif args.command == "feedback":
            for ps in course.problem_sets():
                if args.problem_set in (None, ps):
                    feedback(course, ps, None, out)
            out(f"Feedback written to {shown(course.root / 'feedback')}/")
        elif args.command == "export":
            export(course, (), out)
    except (GradingError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
