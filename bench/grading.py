"""How fast grading is: the course's command against plain ``nbgrader autograde``, and what it costs.

    .venv/bin/python bench/grading.py --students 100            # the comparison with nbgrader, 100 submissions
    .venv/bin/python bench/grading.py --sizes 20,200,1000 --repeat 2 --dask --nbgrader-repeat 0
    .venv/bin/python bench/grading.py --nbgrader-repeat 0 --hostile 20   # what each hostile hand-in costs

Makes a temporary copy of the course, releases it (not timed) and writes synthetic
submissions (a third the solution, a third the untouched release, a third the solution
with one answer left out). Then, on the same submissions:

- ``course``: ``python -m qkv_grading grade FOLDER --fresh``, what ``make grade`` runs:
  collect, every notebook in a sandbox, judging, gradebook, feedback pages and grades.csv;
- ``nbgrader``: plain ``nbgrader autograde <ps> --force`` (no feedback, no export) in a
  second copy of the course with the same submissions, scores read with ``nbgrader export``;
- ``--dask``: the course's command on a Dask cluster over TLS of two worker processes on
  127.0.0.1 (as the instructors' page sets one up, the workers as this user), and whether
  it gives every student the same score as the local run.

Each figure is the wall time of the whole command, so the start-up of Python and nbgrader
is in it, and beside it the grading process's own peak memory (its maximum resident set,
without the sandboxes). The scores of the two must be the same for every student.
``--sizes`` times the course's command on classes of several sizes (seconds per notebook
and peak memory should stay flat). ``--hostile N`` grades N clean hand-ins beside one of
each hostile kind of the adversarial tests (tests/hostile_data.py) and prints, for each,
the CPU time the grading process spent on it (reading its channel, decoding, judging,
writing) against the clean ones': the goal is at most 20 s beyond a clean one, and a peak
under 1 GB. The load average of the machine is printed with every figure: other work on
the machine slows both commands. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qkv_grading.pipeline import Course, nbgrader_env, release

ROOT = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns("release", "submitted", "autograded", "feedback", "downloaded", "gradebook.db",
                                 "*.csv", ".grading")


def new_course(where: Path) -> Course:
    shutil.copytree(ROOT / "exercises", where, ignore=IGNORED)
    course = Course(where)
    release(course, lambda line: None)
    return course


def synthetic_submissions(course: Course, problem_set: str, count: int, folder: Path) -> None:
    """``count`` hand-ins: a third solutions, a third untouched, a third with one answer left out."""
    source = json.loads((course.root / "source" / problem_set / f"{problem_set}.ipynb").read_text(encoding="utf-8"))
    release_nb = json.loads((course.root / "release" / problem_set / f"{problem_set}.ipynb").read_text(encoding="utf-8"))
    answers = [c for c in source["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    rng = random.Random(0)
    for i in range(count):
        kind = i % 3
        nb = json.loads(json.dumps(source if kind != 1 else release_nb))
        if kind == 2:
            target = rng.choice(answers)["metadata"]["nbgrader"]["grade_id"]
            for cell in nb["cells"]:
                if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == target:
                    cell["source"] = "pass  # skipped this one"
        path = folder / f"student{i:04d}" / problem_set / f"{problem_set}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb), encoding="utf-8")


# Runs `python -m qkv_grading ARGS` and, as it exits, writes its own peak memory to the file first on its command line.
MEASURED = ("import atexit, json, resource, runpy, sys\n"
            "usage = sys.argv.pop(1)\n"
            "def report():\n"
            "    with open(usage, 'w') as f:\n"
            "        json.dump(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, f)\n"
            "atexit.register(report)\n"
            "runpy.run_module('qkv_grading', run_name='__main__', alter_sys=True)\n")
# Grades a folder in-process and prints, as JSON, what the grading process spent on each submission.
GRADED = ("import json, resource, sys\n"
          "from pathlib import Path\n"
          "from qkv_grading.pipeline import Course, grade\n"
          "subs = grade(Course(sys.argv[1]), Path(sys.argv[2]), fresh=True, progress_bar=False, out=lambda line: None)\n"
          "print(json.dumps({'peak_bytes': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,\n"
          "                  'subs': [[s.student, s.trusted_seconds, s.score] for s in subs]}))\n")
# Writes the hostile hand-ins of the adversarial tests (run from the repository, where `tests` is a package).
HOSTILE = ("import json, sys\n"
           "from pathlib import Path\n"
           "from tests.hostile_data import data_attacks\n"
           "from tests.grading_support import PS2, hand_in\n"
           "for student, (ps, nb, files, _, _) in data_attacks(Path(sys.argv[1])).items():\n"
           "    if ps == PS2:\n"
           "        hand_in(Path(sys.argv[2]), student, ps, nb)\n")


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=nbgrader_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return seconds


def mib(size: float) -> str:
    return f"{size / 2**20:.0f} MiB"


def scores(csv_path: Path, problem_set: str) -> dict[str, float]:
    with csv_path.open(encoding="utf-8", newline="") as f:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(f) if row["assignment"] == problem_set}


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def course_command(course: Course, folder: Path, extra: tuple[str, ...] = ()) -> tuple[float, int]:
    """The wall time of ``python -m qkv_grading grade FOLDER --fresh``, and the grading process's peak memory."""
    usage = folder.parent / "usage.json"
    seconds = timed([sys.executable, "-c", MEASURED, str(usage), "--course", str(course.root), "grade", str(folder),
                     "--fresh", *extra], course.root.parent)
    return seconds, json.loads(usage.read_text())


def hostile_figures(course: Course, folder: Path, clean: int) -> None:
    """``clean`` clean hand-ins beside one of each hostile kind: what the grading process spent on each."""
    problem_set = "ps2_scaled_dot_product"
    synthetic_submissions(course, problem_set, clean, folder)
    subprocess.run([sys.executable, "-c", HOSTILE, str(course.root), str(folder)], cwd=ROOT, check=True,
                   env=nbgrader_env())
    result = subprocess.run([sys.executable, "-c", GRADED, str(course.root), str(folder)], cwd=ROOT,
                            env=nbgrader_env(), capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"grading the hostile class failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    spent = {student: seconds for student, seconds, _ in report["subs"]}
    clean_seconds = sorted(v for k, v in spent.items() if k.startswith("student"))
    median = clean_seconds[len(clean_seconds) // 2]
    print(f"\n{clean} clean hand-ins of {problem_set} and one of each hostile kind ({load()}):")
    print(f"  clean: {median:.3f} s of the grading process's CPU each (median), at most {clean_seconds[-1]:.3f} s")
    for student, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        if not student.startswith("student"):
            print(f"  {student:<14} {seconds:7.3f} s  ({seconds - median:+.3f} s beside a clean one)")
    print(f"  the grading process's peak memory: {mib(report['peak_bytes'])}")


@contextlib.contextmanager
def tls_cluster(where: Path, workers: int):
    """A scheduler and ``workers`` worker processes on 127.0.0.1, set up as the instructors' page says
    (certificates from ``python -m qkv_grading certificates``, TLS both ways); yields its address and
    the grader's certificates."""
    from distributed import Client

    from qkv_grading import cluster

    made = cluster.make_certificates(where / "certificates", ("127.0.0.1",))
    dask = str(Path(sys.executable).parent / "dask")

    def tls(role: str) -> list[str]:
        return ["--tls-ca-file", str(made[role] / "ca.pem"), "--tls-cert", str(made[role] / f"{role}.pem"),
                "--tls-key", str(made[role] / f"{role}-key.pem")]

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    started = [subprocess.Popen([dask, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
                                 "--no-dashboard", "--scheduler-file", str(where / "scheduler.json"), *tls("scheduler")],
                                env={**os.environ, "DASK_CONFIG": str(made["scheduler"])}, **quiet)]
    try:
        while not (where / "scheduler.json").is_file():
            time.sleep(0.2)
        address = json.loads((where / "scheduler.json").read_text())["address"]
        (where / "scratch").mkdir(mode=0o700)
        for _ in range(workers):
            started.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                                             "--no-dashboard", "--local-directory", str(where / "scratch"),
                                             *tls("worker")], env={**os.environ, "DASK_CONFIG": str(made["worker"])},
                                            **quiet))
        with Client(address, security=cluster.security(made["grader"]), timeout=60) as client:
            client.wait_for_workers(workers, timeout=300)
        yield address, made["grader"]
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=200, help="class size of the comparison with nbgrader")
    parser.add_argument("--sizes", default="", help="class sizes to time the course's command on, e.g. 20,200,1000")
    parser.add_argument("--repeat", type=int, default=1, help="times each figure of the course's command is measured")
    parser.add_argument("--nbgrader-repeat", type=int, default=1,
                        help="times plain nbgrader is measured (0: not at all; it is the slow one)")
    parser.add_argument("--dask", action="store_true", help="also time the course's command on a local Dask cluster")
    parser.add_argument("--problem-set", default="ps2_scaled_dot_product")
    parser.add_argument("--hostile", type=int, default=0, metavar="N",
                        help="also grade N clean hand-ins beside one of each hostile kind, and say what each cost")
    args = parser.parse_args()
    ps = args.problem_set
    print(f"{os.cpu_count()} cores; {load()} at the start")
    with tempfile.TemporaryDirectory(prefix="qkv-bench-grading-") as tmp:
        tmp = Path(tmp)
        ours = new_course(tmp / "ours" / "course")
        theirs = new_course(tmp / "nbgrader" / "course") if args.nbgrader_repeat else None
        folder = tmp / "hand-ins" / str(args.students)
        synthetic_submissions(ours, ps, args.students, folder)
        if theirs is not None:
            shutil.copytree(folder, theirs.root / "submitted")
        n = args.students
        print(f"\n{n} submissions of {ps}:")
        nbgrader_times = []
        for attempt in range(max(args.repeat, args.nbgrader_repeat)):
            if attempt < args.repeat:
                course_s, peak = course_command(ours, folder)
                print(f"  course   (grade, feedback, export) {course_s:7.1f} s  {course_s / n:5.2f} s per notebook  "
                      f"peak {mib(peak)}  ({load()})")
            if attempt < args.nbgrader_repeat:
                nbgrader_s = timed([sys.executable, "-m", "nbgrader", "autograde", ps, "--force"], theirs.root)
                nbgrader_times.append(nbgrader_s)
                print(f"  nbgrader (autograde only)          {nbgrader_s:7.1f} s  {nbgrader_s / n:5.2f} s per "
                      f"notebook  ({load()})")
                timed([sys.executable, "-m", "nbgrader", "export", "--to=export.csv"], theirs.root)
                same = scores(ours.root / "grades.csv", ps) == scores(theirs.root / "export.csv", ps)
                print(f"  the course's command is {nbgrader_s / course_s:.2f} times as fast; same scores for every "
                      f"student: {'yes' if same else 'NO'}")
        if args.dask:
            local = scores(ours.root / "grades.csv", ps)
            with tls_cluster(tmp / "cluster", workers=2) as (address, grader):
                for attempt in range(args.repeat):
                    seconds, _ = course_command(ours, folder, ("--dask", address, "--certificates", str(grader)))
                    print(f"  course on a Dask cluster over TLS (2 workers) {seconds:7.1f} s  {seconds / n:5.2f} s "
                          f"per notebook  ({load()})")
                    same = scores(ours.root / "grades.csv", ps) == local
                    print(f"    same scores as the local run for every student: {'yes' if same else 'NO'}")
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        if sizes:
            print("\nThe course's command by class size (start-up: its time on an empty folder):")
            empty = tmp / "hand-ins" / "empty"
            empty.mkdir()
            for attempt in range(args.repeat):
                print(f"  start-up {course_command(ours, empty)[0]:7.1f} s  ({load()})")
        measured = []
        for size in sizes:
            sized = tmp / "hand-ins" / f"size-{size}"
            synthetic_submissions(ours, ps, size, sized)
            for attempt in range(args.repeat):
                seconds, peak = course_command(ours, sized)
                measured.append((size, seconds))
                print(f"  {size:5d} submissions {seconds:7.1f} s  {seconds / size:5.2f} s per notebook  "
                      f"peak {mib(peak)}  ({load()})")
            shutil.rmtree(sized)
        for (n1, t1), (n2, t2) in zip(measured, measured[1:]):
            if n2 > n1:
                print(f"  from {n1} to {n2} submissions: {(t2 - t1) / (n2 - n1):.2f} s per added notebook")
        if args.hostile:
            hostile_figures(ours, tmp / "hand-ins" / "hostile", args.hostile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
