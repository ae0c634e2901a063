"""How long grading takes: seconds per graded notebook for a class of synthetic submissions.

    .venv/bin/python bench/grading.py                      # 50 submissions of ps2_scaled_dot_product
    .venv/bin/python bench/grading.py --students 20 --problem-set ps4_single_head

Makes a temporary copy of the course, releases it (not timed), writes the submissions
(a mix of the solution, the untouched release and one-slip variants), then times
``qkv_grading.pipeline.grade`` step by step: collect, autograde, feedback, export. Prints the figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from qkv_grading import pipeline as grading

ROOT = Path(__file__).resolve().parents[1]


def synthetic_submissions(course: grading.Course, problem_set: str, count: int, folder: Path) -> None:
    """``count`` hand-ins: a third solutions, a third untouched, a third with one answer replaced by None."""
    source = json.loads((course.root / "source" / problem_set / f"{problem_set}.ipynb").read_text(encoding="utf-8"))
    release = json.loads((course.root / "release" / problem_set / f"{problem_set}.ipynb").read_text(encoding="utf-8"))
    answers = [c for c in source["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    rng = random.Random(0)
    for i in range(count):
        kind = i % 3
        nb = json.loads(json.dumps(source if kind != 1 else release))
        if kind == 2:  # one answer left out
            target = rng.choice(answers)["metadata"]["nbgrader"]["grade_id"]
            for cell in nb["cells"]:
                if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == target:
                    cell["source"] = "pass  # skipped this one"
        path = folder / f"student{i:03d}" / problem_set / f"{problem_set}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(nb), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--problem-set", default="ps2_scaled_dot_product")
    args = parser.parse_args()
    quiet = lambda line: None  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="qkv-bench-grading-") as tmp:
        root = Path(tmp) / "course"
        shutil.copytree(ROOT / "exercises", root, ignore=shutil.ignore_patterns(
            "release", "submitted", "autograded", "feedback", "downloaded", "gradebook.db", "*.csv"))
        course = grading.Course(root)
        started = time.perf_counter()
        grading.release(course, quiet)
        release_seconds = time.perf_counter() - started
        folder = Path(tmp) / "hand-ins"
        synthetic_submissions(course, args.problem_set, args.students, folder)

        timings = {}
        started = time.perf_counter()
        subs = grading.collect(course, folder, args.problem_set, quiet)
        for sub in subs:
            grading.inspect_submission(course, sub)
        timings["collect"] = time.perf_counter() - started
        started = time.perf_counter()
        grading.autograde(course, args.problem_set, subs, out=quiet, progress=(0, len(subs)))
        timings["autograde"] = time.perf_counter() - started
        started = time.perf_counter()
        grading.feedback(course, args.problem_set, [s.student for s in subs], quiet)
        timings["feedback"] = time.perf_counter() - started
        started = time.perf_counter()
        grading.export(course, subs, quiet)
        timings["export"] = time.perf_counter() - started

    n = len(subs)
    total = sum(timings.values())
    scores = sorted({s.score for s in subs})
    print(f"Grading {n} synthetic submissions of {args.problem_set} (scores seen: {scores}); "
          f"release of all problem sets, not counted: {release_seconds:.1f} s")
    for step, seconds in timings.items():
        print(f"  {step:<10} {seconds:7.1f} s   {seconds / n:6.2f} s per notebook")
    print(f"  {'total':<10} {total:7.1f} s   {total / n:6.2f} s per notebook")
    return 0


if __name__ == "__main__":
    sys.exit(main())
