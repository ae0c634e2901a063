"""A notebook in the sandbox cannot get past its limits, and leaves nothing behind, as root and without root.

Each test runs :func:`qkv_grading.sandbox.run_job` itself (the pure step of grading, a few
seconds a sandbox) on cells written as an attacker would write them, as root (CI) and as a
real unprivileged local user (:mod:`tests.local_users`), and reads what the cells printed.
The same attacks are graded with the real command in ``tests/test_grading_adversarial.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from qkv_grading import cgroups, identities, run_record, sandbox

from ..exercise_support import ROOT
from ..local_users import GRADER, local_user, run_as
from ..sandbox_attacks import holes, job, left_behind, printed, status

pytestmark = pytest.mark.skipif(sandbox.shutil.which("bwrap") is None, reason="needs bubblewrap")

MiB = 1 << 20
LIMITS = sandbox.Limits(notebook_seconds=40, workspace=8 * MiB, shared_memory=4 * MiB, sandbox_memory=320 * MiB)


@pytest.fixture(scope="module")
def as_root():
    """The attacks run as root: one sandbox that tries everything, then one that looks for what it left."""
    if not sandbox.privileged():
        pytest.skip("runs as root (CI); the unprivileged run is test_without_root_*")
    first = sandbox.run_job(job("user namespace", "kernel keys", "writable places", "processes", "left behind"),
                            LIMITS)
    uid = int(next(line for line in printed(first) if line.startswith("left behind: uid")).split()[-1])
    # Its processes, and any under its identity unless another grader holds that identity again.
    after = {"processes": left_behind("\n".join(printed(first))), "leftovers": identities.leftover_processes().get(uid)}
    second = sandbox.run_job(job("what is left"), LIMITS)
    return {"first": first, "second": second, "uid": uid, **after}


def test_as_root_no_user_namespace_key_or_writable_place_outside_the_limits(as_root):
    lines = printed(as_root["first"])
    assert not holes(lines), "\n".join(lines)
    assert sum("user namespace: refused" in line for line in lines) == 1, "\n".join(lines)
    assert sum("kernel keys: refused" in line for line in lines) == 2, "\n".join(lines)
    assert [line.split()[-1] for line in lines if "writable places: size" in line] == [
        str(LIMITS.workspace), str(LIMITS.shared_memory)]
    assert sum("writable places: full" in line for line in lines) == 2, "\n".join(lines)
    assert f"processes: forked {LIMITS.processes - 1}" in lines, "\n".join(lines)


def test_as_root_nothing_of_a_sandbox_is_left_for_the_next(as_root):
    assert as_root["processes"] == [], "processes of the sandbox left running as it ended"
    assert as_root["leftovers"] is None
    lines = printed(as_root["second"])
    assert not holes(lines), "\n".join(lines)
    # Only the sandbox's own reaper (1) and the runner (2) are in view: nothing of the first sandbox.
    assert "what is left: processes ['1', '2']" in lines, "\n".join(lines)


def test_as_root_each_sandbox_has_an_identity_in_the_range_no_one_else_holds(as_root):
    assert as_root["uid"] in identities.uids()
    assert 0 < as_root["uid"] != os.getuid()


def _failed_to_start(data: bytes) -> str | None:
    """Why the sandbox of this run record did not start its runner, or None if it did."""
    record = run_record.decode(data)
    return f"{record.status}: {record.reason} {record.stderr[-300:]}" if record.status == "sandbox_failed" else None


def _started(run) -> list[bytes]:
    """The run records ``run()`` returns, all run once more if any sandbox did not start, as the grader
    does (a sandbox that never started its runner says nothing of its limits; run together again, the
    sandboxes still run at once); a second failure fails the test, saying why."""
    results = run()
    if any(map(_failed_to_start, results)):
        results = run()
    failed = [why for why in map(_failed_to_start, results) if why]
    assert not failed, f"sandboxes did not start twice: {failed}"
    return results


def test_two_graders_at_once_never_share_an_identity(tmp_path):
    """Sandboxes of two threads of this process and of another grading process, all at once."""
    if not sandbox.privileged():
        pytest.skip("identities are taken only when grading runs as root")
    sleeper = {"problem_set": "ps0", "givens": {},
               "cells": [{"id": 0, "run": "import os, time\nprint('uid', os.getuid())\ntime.sleep(4)"}]}

    def at_once() -> list[bytes]:
        other = subprocess.Popen([sys.executable, "-c", "import sys\nfrom qkv_grading import sandbox\n"
                                  f"sys.stdout.buffer.write(sandbox.run_job({sleeper!r}))"], stdout=subprocess.PIPE)
        results = []
        threads = [threading.Thread(target=lambda: results.append(sandbox.run_job(sleeper, LIMITS))) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results + [other.communicate(timeout=300)[0]]

    results = _started(at_once)
    records = [run_record.decode(r) for r in results]
    assert all(printed(r) for r in results), [(r.status, r.reason) for r in records]
    uids = [int(printed(r)[0].split()[-1]) for r in results]
    assert len(set(uids)) == 3, uids


def test_every_module_a_sandbox_may_import_has_its_bytecode_written():
    """A sandbox sees its packages read-only and cannot write their bytecode: ``make venv`` wrote it
    (``compile_allowed``), each file's matching its source's time and size."""
    stale = []
    for path, _ in sandbox.allowed_paths():
        for source in [Path(path)] if path.endswith(".py") else sorted(Path(path).rglob("*.py")):
            cached = Path(importlib.util.cache_from_source(str(source)))
            header = cached.read_bytes()[8:16] if cached.is_file() else b""
            written_for = (int(source.stat().st_mtime) & 0xFFFFFFFF, source.stat().st_size & 0xFFFFFFFF)
            if len(header) < 8 or struct.unpack("<II", header) != written_for:
                stale.append(str(source))
    assert not stale, f"{len(stale)} modules without current bytecode, as {stale[:5]}: run make venv"


def test_a_sandbox_is_bounded_in_memory_as_a_whole():
    """Three processes of 150 MiB each, under the per-process limit but over the sandbox's 320 MiB together."""
    if not isinstance(cgroups.kind(), cgroups.Hierarchy):
        pytest.skip(f"this machine gives no cgroup for a sandbox ({cgroups.kind()}): memory is bounded per process")
    hog = ("import os, select, time\nread, write = os.pipe()\nchildren = []\n"
           "def hold():\n    block = bytearray(150 << 20)\n    for i in range(0, len(block), 4096):\n"
           "        block[i] = 1\n    return block\n"
           "for _ in range(2):\n    pid = os.fork()\n    if pid == 0:\n        block = hold()\n"
           "        os.write(write, b'x')\n        time.sleep(8)\n        os._exit(0)\n    children.append(pid)\n"
           "block = hold()\nheld = b''\nwhile len(held) < 2 and select.select([read], [], [], 6)[0]:\n"
           "    held += os.read(read, 2)\n"
           "alive = [os.waitpid(pid, os.WNOHANG)[0] == 0 for pid in children]\n"
           "print('HOLE all three held their memory' if len(held) == 2 and all(alive) else 'memory: a process was stopped')")
    [data] = _started(lambda: [sandbox.run_job({"problem_set": "ps0", "givens": {}, "cells": [{"id": 0, "run": hog}]},
                                               LIMITS)])
    lines = printed(data)
    assert not holes(lines), lines
    assert status(data) == "killed" or "memory: a process was stopped" in lines, (status(data), lines)
    # One process past the sandbox's memory (and under its own limit) is the one killed, and the record says why.
    hog = "block = bytearray(400 << 20)\nfor i in range(0, len(block), 4096):\n    block[i] = 1\nprint('HOLE held')"
    [data] = _started(lambda: [sandbox.run_job({"problem_set": "ps0", "givens": {}, "cells": [{"id": 0, "run": hog}]},
                                               LIMITS)])
    record = run_record.decode(data)
    assert (record.status, record.signal) == ("killed", 9), record
    assert record.reason == "the sandbox ran out of its 320 MiB of memory"


@pytest.fixture(scope="module")
def as_grader():
    """The attacks run by a real unprivileged user (grading without root)."""
    user = local_user(GRADER)
    # Other processes of the grader's user run meanwhile (twenty, as a Dask worker's would).
    code = ("import json, subprocess, sys\nfrom qkv_grading import sandbox\n"
            "from tests.sandbox_attacks import left_behind, printed\nlimits = sandbox.Limits(**json.loads(sys.argv[1]))\n"
            "others = [subprocess.Popen(['sleep', '300']) for _ in range(20)]\n"
            "first = sandbox.run_job(json.loads(sys.argv[2]), limits)\nleft = left_behind('\\n'.join(printed(first)))\n"
            "for other in others:\n    other.kill()\n"
            "second = sandbox.run_job(json.loads(sys.argv[3]), limits)\n"
            "print(json.dumps({'first': first.decode('ascii'), 'second': second.decode('ascii'), 'left': left,\n"
            "                  'isolation': sandbox.isolation(), 'per_sandbox': sandbox.processes_counted_per_sandbox()}))")
    done = run_as(user, [sys.executable, "-c", code, json.dumps(LIMITS.as_dict()),
                         json.dumps(job("user namespace", "kernel keys", "writable places", "processes", "left behind")),
                         json.dumps(job("what is left"))], reachable=[], env={"HOME": "/nonexistent"},
                  cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    return {"first": found["first"].encode("ascii"), "second": found["second"].encode("ascii"),
            "isolation": found["isolation"], "uid": user.pw_uid, "left": found["left"], "per_sandbox": found["per_sandbox"],
            "left_now": left_behind("\n".join(printed(found["first"].encode("ascii"))))}


def test_without_root_no_user_namespace_key_or_writable_place_outside_the_limits(as_grader):
    lines = printed(as_grader["first"])
    assert not holes(lines), "\n".join(lines)
    assert "user namespace" in as_grader["isolation"]
    assert sum("kernel keys: refused" in line for line in lines) == 2, "\n".join(lines)
    assert [line.split()[-1] for line in lines if "writable places: size" in line] == [
        str(LIMITS.workspace), str(LIMITS.shared_memory)]
    assert f"left behind: uid {as_grader['uid']}" in lines
    # As many as as root, whatever else the grader's user runs (on Linux 5.14 on: counted per sandbox).
    if as_grader["per_sandbox"]:
        assert f"processes: forked {LIMITS.processes - 1}" in lines, "\n".join(lines)


def test_without_root_nothing_of_a_sandbox_is_left_for_the_next(as_grader):
    """The processes that the first sandbox left in a session of their own (one forked twice) are gone
    when it ends, though no control group holds them, and whatever else runs as the grader's user."""
    lines = printed(as_grader["second"])
    assert not holes(lines), "\n".join(lines)
    assert "what is left: processes ['1', '2']" in lines, "\n".join(lines)
    assert as_grader["left"] == [], "processes of the sandbox left running as it ended"
    assert as_grader["left_now"] == []
