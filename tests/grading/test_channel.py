"""The runner's end-of-run marker cannot be forged: a run is ``finished`` only when every cell's end came
back with the nonce sent with that cell, and whatever else a notebook writes on the channel is counted
and dropped; a runner slow to start is waited for longer on a loaded machine. The runners here are
stand-ins (plain Python processes), so no sandbox is needed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from qkv_grading import channel, run_record
from qkv_grading.sandbox import Limits

JOB = {"problem_set": "ps2", "givens": {}, "display_methods": [],
       "cells": [{"id": 0, "run": "x = 1"}, {"id": 1, "run": "y = 2"}, {"id": 2, "capture": "value", "answer": "y"}]}

# A stand-in runner that speaks the protocol as the real one does; HOSTILE is run in place of cell 1.
RUNNER = textwrap.dedent('''
    import json, os, sys
    out = sys.stdout.buffer
    def send(record):
        out.write((json.dumps(record) + "\\n").encode()); out.flush()
    header = json.loads(sys.stdin.buffer.readline())
    send({"ready": True})
    for line in sys.stdin.buffer:
        cell = json.loads(line)
        if cell["id"] == 1:
            HOSTILE
        record = {"cell": cell["id"], "outputs": [{"kind": "stdout", "text": "ran %d" % cell["id"]}], "cut": 0,
                  "timed_out": False, "seconds": 0.0}
        if "capture" in cell:
            record["value"] = {"t": "num", "v": 2}
        send(record)
        send({"end_of_cell": cell["id"], "nonce": cell["nonce"]})
''')


def _drive(hostile: str = "pass", seconds: float = 20, job=JOB) -> run_record.RunRecord:
    code = RUNNER.replace("HOSTILE", textwrap.indent(textwrap.dedent(hostile), " " * 8).strip())
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    data = channel.drive(process, job, Limits(notebook_seconds=seconds), "/site", threading.Event(),
                         time.monotonic(), run_record.Bounds(cell_bytes=1 << 16))
    return run_record.decode(data)


def test_a_runner_that_goes_through_every_cell_finishes():
    record = _drive()
    assert record.status == "finished" and record.in_cell is None and record.dropped == 0
    assert [c.cell for c in record.cells] == [0, 1, 2]
    assert record.by_cell[2].value == {"t": "num", "v": 2}


def test_a_forged_end_of_run_then_an_exit_is_a_process_that_ended():
    """The notebook writes what a finished run would (every cell's record, ends with guessed nonces, the
    old runner's "done") and exits with 0: the run ended in the cell it was in."""
    record = _drive('''
        for i in (1, 2):
            send({"cell": i, "outputs": [], "cut": 0, "timed_out": False, "seconds": 0.0, "value": {"t": "num", "v": 9}})
            send({"end_of_cell": i, "nonce": "0" * 32})
        send({"done": True}); send({"status": "finished"})
        os._exit(0)''')
    assert record.status == "ended" and record.exit_code == 0 and record.in_cell == 1
    assert 2 not in record.by_cell, "nothing is taken for a cell that was never sent"
    assert record.dropped >= 4


def test_the_nonce_of_the_cell_in_progress_ends_only_that_cell():
    """Reading the cell's own nonce (the runner holds it) ends cell 1 early; the run still ends in cell 2."""
    record = _drive('''
        send({"end_of_cell": 1, "nonce": cell["nonce"]})
        os._exit(3)''')
    assert record.status == "ended" and record.exit_code == 3 and record.in_cell == 2


def test_a_runner_killed_by_a_signal_is_killed():
    record = _drive("import signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert record.status == "killed" and record.signal == 9 and record.in_cell == 1


def test_records_of_other_cells_and_garbage_are_dropped_and_the_first_record_of_a_cell_counts():
    record = _drive('''
        out.write(b"not json\\n" + b"[" * 5000 + b"\\n" + bytes(range(256)) + b"\\n"); out.flush()
        send({"cell": 2, "outputs": [], "value": {"t": "num", "v": 9}})
        send({"cell": 1, "outputs": [{"kind": "stdout", "text": "first"}], "cut": 0, "timed_out": False,
              "seconds": 0.0})''')
    assert record.status == "finished"
    assert record.by_cell[1].outputs[0].text == "first"
    assert record.by_cell[2].value == {"t": "num", "v": 2}, "cell 2's record came in cell 2's turn"
    assert record.dropped == 6  # 4 lines of garbage (bytes 0-255 hold a newline), cell 2's, the second of cell 1


def test_a_record_too_long_to_read_is_lost_with_the_reason_and_the_run_goes_on():
    record = _drive('''
        out.write(b'{"cell": 1, "outputs": [{"kind": "stdout", "text": "' + b"x" * 300_000 + b'"}]}\\n')
        send({"end_of_cell": 1, "nonce": cell["nonce"]})
        continue''')
    assert record.status == "finished"
    assert record.by_cell[1].answer == "lost" and "larger than" in record.by_cell[1].lost
    assert record.by_cell[2].value == {"t": "num", "v": 2}


def test_a_runner_that_never_starts_is_the_sandboxs_failure():
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('bwrap: no permission'); "
                                "sys.exit(1)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    data = channel.drive(process, JOB, Limits(), "/site", threading.Event(), time.monotonic())
    record = run_record.decode(data)
    assert record.status == "sandbox_failed" and "bwrap: no permission" in record.reason


def test_a_notebook_past_its_time_limit_times_out_in_the_cell_it_was_in():
    record = _drive("import time; time.sleep(30)", seconds=2)
    assert record.status == "timed_out" and record.in_cell == 1


@pytest.mark.parametrize("load_per_core, status", [(0.0, "sandbox_failed"), (8.0, "finished")])
def test_a_sandbox_slow_to_start_is_waited_for_longer_the_more_loaded_the_machine(monkeypatch, load_per_core,
                                                                                status):
    """A runner that takes 3.5 s to be ready, with 1 s allowed for a start on a machine with a core free
    (and 2 s for the notebook): it fails on an idle machine, and is waited for on one loaded 8 processes
    a core (8 s), where its notebook then has its own 2 s."""
    monkeypatch.setattr(channel, "STARTUP_SECONDS", 1.0)
    monkeypatch.setattr(channel.os, "getloadavg", lambda: (load_per_core * (os.cpu_count() or 1),) * 3)
    slow = RUNNER.replace('send({"ready": True})', 'import time; time.sleep(3.5); send({"ready": True})')
    process = subprocess.Popen([sys.executable, "-c", slow.replace("HOSTILE", "pass")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    record = run_record.decode(channel.drive(process, JOB, Limits(notebook_seconds=2), "/site", threading.Event(),
                                             time.monotonic()))
    assert record.status == status, record
    if status == "sandbox_failed":
        assert record.reason == "the sandbox did not start the runner within 2 s"


def test_the_start_of_a_sandbox_may_take_longer_on_a_loaded_machine_within_a_bound():
    assert channel.startup_seconds(load=0.5, cores=2) == channel.STARTUP_SECONDS
    assert channel.startup_seconds(load=25, cores=2) > channel.startup_seconds(load=6, cores=2) > channel.STARTUP_SECONDS
    assert channel.startup_seconds(load=10_000, cores=2) == channel.MAX_STARTUP_SECONDS


def test_a_process_left_holding_the_error_pipe_does_not_hold_up_the_grader(tmp_path):
    """The notebook leaves a process of its own (in a session of its own, so not in the runner's
    process group) that keeps the error pipe open and then ends the runner: the run ends as one
    that ended, and drive() returns rather than wait on that pipe for ever."""
    pid_file = tmp_path / "left.pid"
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("record", _drive(f'''
        if os.fork() == 0:
            os.setsid(); os.close(0); os.close(1)
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            import time; time.sleep(120); os._exit(0)
        while not os.path.exists({str(pid_file)!r}):
            pass
        os._exit(5)''')), daemon=True)
    thread.start()
    try:
        thread.join(timeout=60)  # a bound on a hang, not a measure of speed: drive() takes well under a second
        assert not thread.is_alive(), "drive() waits on the error pipe a leftover process holds open"
        record = result["record"]
        assert record.status == "ended" and record.exit_code == 5 and record.in_cell == 1
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), 9)
            except (ProcessLookupError, ValueError):
                pass
