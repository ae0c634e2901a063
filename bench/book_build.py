"""How long a cold build of the whole book takes, and what each chapter costs.

    .venv/bin/python bench/book_build.py                  # one cold `make site` into a temporary folder
    .venv/bin/python bench/book_build.py --repeat 3 --jobs 2
    .venv/bin/python bench/book_build.py --chapters       # each executed chapter alone: wall and kernel CPU
    .venv/bin/python bench/book_build.py --english-only   # a cold build of the English edition alone

A cold build is ``make site BUILD_DIR=<empty folder>``: every page read, every chapter executed,
the problem sets released. It prints the wall time, the CPU time (user + system) of the build and
everything it started (kernels, nbgrader), the load average before and after (the machine may be
shared: a wall time means little without it) and each chapter's execution time as myst-nb logged it.

``--english-only`` times a cold build of the English edition alone: the Makefile's first
sphinx-build, as ``make site`` runs it, into an empty folder (the build cost of the 繁體中文
edition is the difference with a cold ``make site``).

``--chapters`` executes each chapter that the book executes, one after the other, the way myst-nb
does (nbclient, a fresh kernel, the chapter's folder as working directory), and prints its wall
time, the CPU time of its kernel and its slowest cells. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = re.compile(r"(\S+)\.(?:md|ipynb): Executed notebook in ([\d.]+) seconds")


def children_cpu() -> tuple[float, float]:
    """User and system CPU seconds of the finished child processes (and theirs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def english_only(build: str, jobs: str | None) -> list[str]:
    """The Makefile's English sphinx-build (its `site` target's first one) into `build`."""
    jobs = jobs or str(2 * (os.cpu_count() or 1))
    return [str(ROOT / ".venv" / "bin" / "sphinx-build"), "-b", "html", "-j", jobs, "-W", "--keep-going", "-E",
            "-d", f"{build}/.doctrees", str(ROOT), f"{build}/html"]


def cold_build(jobs: str | None, english: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="qkv-bench-build-") as tmp:
        what = "English edition alone" if english else "make site (both editions)"
        print(f"cold build, {what}, JOBS={jobs or 'as in the Makefile'}; before: {load()}", flush=True)
        user0, sys0 = children_cpu()
        started = time.perf_counter()
        if english:
            subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "conf.py"], check=True,
                           capture_output=True)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT / "book" / "_ext"), os.environ.get("PYTHONPATH")]))}
            result = subprocess.run(english_only(f"{tmp}/_build", jobs), capture_output=True, text=True,
                                    cwd=ROOT, env=env)
        else:
            command = ["make", "--no-print-directory", "-C", str(ROOT), "site", f"BUILD_DIR={tmp}/_build"]
            result = subprocess.run(command + ([f"JOBS={jobs}"] if jobs else []), capture_output=True, text=True)
        wall = time.perf_counter() - started
        user1, sys1 = children_cpu()
        if result.returncode != 0:
            sys.exit(f"the build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        print(f"  wall {wall:6.1f} s   CPU {user1 - user0:6.1f} s user + {sys1 - sys0:5.1f} s sys"
              f"   after: {load()}")
        chapters = EXECUTED.findall(result.stdout + result.stderr)
        for path, seconds in sorted(chapters, key=lambda c: -float(c[1])):
            print(f"  {Path(path).name:<28} executed in {float(seconds):6.2f} s")


def executed_chapters() -> list[Path]:
    """The pages that myst-nb executes: those in the table of contents with a kernelspec."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [ch["file"] for part in toc.get("parts", []) for ch in part["chapters"]]
    pages = [ROOT / f"{name}.md" for name in files]
    return [page for page in pages if "kernelspec:" in page.read_text(encoding="utf-8").split("\n---", 1)[0]]


def cell_seconds(cell) -> float:
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    return (datetime.fromisoformat(end.replace("Z", "+00:00")) -
            datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def each_chapter() -> None:
    import jupytext
    from nbclient import NotebookClient

    print(f"each chapter alone; before: {load()}", flush=True)
    total = 0.0
    for page in executed_chapters():
        nb = jupytext.read(page)
        user0, sys0 = children_cpu()
        started = time.perf_counter()
        NotebookClient(nb, timeout=300, record_timing=True,
                       resources={"metadata": {"path": str(page.parent)}}).execute()
        wall = time.perf_counter() - started
        user1, sys1 = children_cpu()
        cpu = (user1 - user0) + (sys1 - sys0)
        total += cpu
        slowest = sorted(((cell_seconds(c), i) for i, c in enumerate(nb.cells) if c.cell_type == "code"),
                         reverse=True)[:3]
        cells = ", ".join(f"cell {i} {s:.2f} s" for s, i in slowest)
        print(f"  {page.stem:<24} wall {wall:6.2f} s   kernel CPU {cpu:5.2f} s   slowest: {cells}", flush=True)
    print(f"  all chapters: kernel CPU {total:.1f} s; after: {load()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="cold builds to time (default 1)")
    parser.add_argument("--jobs", help="sphinx-build -j for the build (default: the Makefile's JOBS)")
    parser.add_argument("--chapters", action="store_true", help="execute each chapter alone instead")
    parser.add_argument("--english-only", action="store_true",
                        help="time a cold build of the English edition alone (the Makefile's first sphinx-build)")
    args = parser.parse_args()
    if args.chapters:
        each_chapter()
    else:
        for _ in range(args.repeat):
            cold_build(args.jobs, args.english_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
