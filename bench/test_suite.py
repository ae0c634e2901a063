"""What the test suite costs: the slowest tests and fixtures by CPU and wall seconds, and the total.

    .venv/bin/python bench/test_suite.py                         # the whole `make test`
    .venv/bin/python bench/test_suite.py tests/test_variants.py  # a subset (pytest's arguments)
    .venv/bin/python bench/test_suite.py --report RECORD_FOLDER  # print a recorded run again

Runs ``make test`` with the plugin ``bench/suite_timer.py``, which records, in every pytest
process (the xdist workers too), each test's setup, call and teardown and each fixture's own
setup: wall seconds, and CPU seconds (user + sys) of the process and of the child processes it
reaped (kernels, the book build). It also prints the CPU seconds of the whole machine during the
run, which count the sandboxes and the browser's processes that no test process reaps. On a
shared machine wall time stretches with the load, so the load average is sampled during the run
and printed beside the totals; CPU seconds are what to compare between runs. Prints the figures; asserts nothing. ``--json FILE`` also
writes the summary, to compare runs side by side.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine_cpu() -> float | None:
    """CPU seconds (user, nice, system, irq, softirq) spent by the whole machine since it booted, from
    /proc/stat: they count what no process of the run reaps (sandboxes, the browser's processes)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    return sum(int(fields[i]) for i in (0, 1, 2, 5, 6)) / os.sysconf("SC_CLK_TCK")


def run_suite(pytest_args: list[str], record: Path) -> dict:
    """Run ``make test`` recording into ``record``; return its wall and CPU seconds and the load."""
    env = {**os.environ, "QKV_SUITE_RECORD": str(record)}
    pytest_value = shlex.join(["-p", "bench.suite_timer", *pytest_args])
    loads: list[float] = []
    done = threading.Event()

    def sample_load() -> None:
        while not done.wait(5.0):
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))

    sampler = threading.Thread(target=sample_load, daemon=True)
    sampler.start()
    start, machine_start = time.perf_counter(), machine_cpu()
    command = ["make", "--no-print-directory", "test", f"PYTEST_ARGS={pytest_value}"]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall, machine_end = time.perf_counter() - start, machine_cpu()
    done.set()
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "machine_cpu": None if machine_start is None else machine_end - machine_start,
            "exit_code": os.waitstatus_to_exitcode(status),
            "load_mean": sum(loads) / len(loads) if loads else None,
            "load_max": max(loads) if loads else None}


def read_records(record: Path) -> list[dict]:
    lines = []
    for path in sorted(record.glob("*.jsonl")):
        text = path.read_text(encoding="utf-8")
        lines += [json.loads(line) for line in text.splitlines() if line]
    return lines


def summarise(records: list[dict], run: dict | None) -> dict:
    """Per test, per fixture and per worker: wall and CPU seconds (own + children)."""
    tests = []
    for record in records:
        if record["kind"] == "test":
            phases = record["phases"].values()
            tests.append({"nodeid": record["nodeid"], "worker": record["worker"],
                          "wall": sum(p["wall"] for p in phases),
                          "cpu": sum(p["cpu"] + p["children"] for p in phases),
                          "setup_wall": record["phases"].get("setup", {}).get("wall", 0.0)})
    fixtures = [{"name": r["name"], "scope": r["scope"], "nodeid": r["nodeid"],
                 "worker": r["worker"], "wall": r["wall"], "cpu": r["cpu"] + r["children"]}
                for r in records if r["kind"] == "fixture"]
    workers = collections.defaultdict(lambda: {"wall": 0.0, "cpu": 0.0, "tests": 0, "busy": 0.0})
    for record in records:
        if record["kind"] == "worker":
            workers[record["worker"]]["wall"] = record["wall"]
            workers[record["worker"]]["cpu"] = record["cpu"] + record["children"]
    for test in tests:
        workers[test["worker"]]["tests"] += 1
        workers[test["worker"]]["busy"] += test["wall"]
    return {"run": run, "tests": tests, "fixtures": fixtures, "workers": dict(workers),
            "tests_cpu": sum(t["cpu"] for t in tests), "tests_wall": sum(t["wall"] for t in tests)}


def print_summary(summary: dict, top: int) -> None:
    def table(title: str, rows: list[dict], key: str, label) -> None:
        print(f"\n{title}")
        print(f"{'CPU s':>8} {'wall s':>8}  {'worker':<6} name")
        for row in sorted(rows, key=lambda r: -r[key])[:top]:
            print(f"{row['cpu']:>8.1f} {row['wall']:>8.1f}  {row['worker']:<6} {label(row)}")

    tests, fixtures = summary["tests"], summary["fixtures"]
    table("Slowest tests by CPU seconds (own + children, setup + call + teardown)", tests, "cpu",
          lambda r: r["nodeid"])
    table("Slowest tests by wall seconds", tests, "wall", lambda r: r["nodeid"])
    table("Slowest fixtures by CPU seconds (their own setup)", fixtures, "cpu",
          lambda r: f"{r['name']} ({r['scope']}) for {r['nodeid']}")
    table("Slowest fixtures by wall seconds", fixtures, "wall",
          lambda r: f"{r['name']} ({r['scope']}) for {r['nodeid']}")
    print(f"\n{'worker':<8} {'tests':>6} {'busy wall s':>12} {'process wall s':>15} {'CPU s':>8}")
    for name, worker in sorted(summary["workers"].items()):
        print(f"{name:<8} {worker['tests']:>6} {worker['busy']:>12.1f} {worker['wall']:>15.1f} "
              f"{worker['cpu']:>8.1f}")
    print(f"\n{len(tests)} tests: {summary['tests_cpu']:.0f} CPU s and "
          f"{summary['tests_wall']:.0f} wall s summed over tests")
    run = summary["run"]
    if run:
        load = (f"load average {run['load_mean']:.1f} mean, {run['load_max']:.1f} max"
                if run["load_mean"] is not None else "load not sampled")
        print(f"make test: {run['wall']:.0f} s wall, {run['cpu']:.0f} CPU s (every process it reaped), "
              f"exit code {run['exit_code']}; {load}")
        if run.get("machine_cpu") is not None:
            print(f"the whole machine meanwhile: {run['machine_cpu']:.0f} CPU s, "
                  f"{run['machine_cpu'] / run['wall']:.2f} of its {os.cpu_count()} cores busy on average")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, help="print the figures of a recorded run folder")
    parser.add_argument("--record", type=Path,
                        help="folder to record into (default: a new temporary one)")
    parser.add_argument("--json", type=Path, help="also write the summary to this file")
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    args, pytest_args = parser.parse_known_args()
    run = None
    if args.report:
        record = args.report
        saved = record / "run.json"
        run = json.loads(saved.read_text()) if saved.is_file() else None
    else:
        record = args.record or Path(tempfile.mkdtemp(prefix="test-suite-"))
        run = run_suite(pytest_args, record)
        (record / "run.json").write_text(json.dumps(run))
        print(f"\nrecorded in {record}")
    summary = summarise(read_records(record), run)
    print_summary(summary, args.top)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    if run:
        sys.exit(run["exit_code"])


if __name__ == "__main__":
    main()
