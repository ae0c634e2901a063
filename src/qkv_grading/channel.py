"""The channel between the pure step and the runner in the sandbox, and the runner's end-of-run marker.

:func:`qkv_grading.sandbox.run_job` starts the runner (:mod:`qkv_grading.sandbox_runner`)
in a sandbox and calls :func:`drive`, which talks to it over the sandbox's standard input
and output and returns the run record's bytes (:mod:`qkv_grading.run_record`):

1. it sends the header, one JSON line (the givens and the cell limits); the runner answers
   :data:`READY` once it is set up, before any code of the notebook runs. No answer within
   :func:`startup_seconds` (more on a loaded machine): the sandbox failed (``sandbox_failed``),
   not the submission, and the grader runs it again later. The notebook's own time limit
   starts then, so that a loaded machine's slow start costs no student their time;
2. it sends the job's cells one at a time, each with a fresh random nonce. The runner
   runs the cell, sends its record (``{"cell": id, ...}``) and then
   ``{"end_of_cell": id, "nonce": nonce}``, and only then does the next cell go out;
3. after the last cell's end it closes standard input, and the runner exits.

The notebook's code runs in the runner's process: it can write anything to the channel
and read anything the runner knows, but never the nonce of a cell that has not been sent.
So it cannot make this side believe that the runner went through cells it did not: the
status ``finished``, the end-of-run marker, is decided here, outside the sandbox, once
the last cell's end came back, and a process that ends sooner (whatever it wrote before)
gets ``ended`` or ``killed`` and the note that says so. Every other line is read as
untrusted data: only the first record of the cell in progress is kept (re-encoded as
canonical JSON, at most :attr:`~qkv_grading.run_record.Bounds.cell_bytes`), and the last
``solved_for``; the rest is counted as dropped. Nothing here raises for what the sandbox
sends, and nothing of it is ever evaluated.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import select
import selectors
import signal
import subprocess
import threading
import time

from . import run_record
from .run_record import STDERR_CHARS, Bounds

READY = b'{"ready": true}'
STARTUP_SECONDS = 60.0  # a sandbox may take this long to start the runner on a machine with a core free
MAX_STARTUP_SECONDS = 600.0  # and never longer, however loaded the machine
HEADER_FIELDS = ("problem_set", "givens", "display_methods")


def end_of_cell(cell_id: int, nonce: str) -> bytes:
    """The line with which the runner ends a cell (the runner writes it with ``json.dumps``, as here)."""
    return json.dumps({"end_of_cell": cell_id, "nonce": nonce}).encode("ascii")


def startup_seconds(load: float | None = None, cores: int | None = None) -> float:
    """How long a sandbox may take to start its runner, none of it counted in the notebook's time:
    :data:`STARTUP_SECONDS` times the machine's load per core when that is above 1, at most
    :data:`MAX_STARTUP_SECONDS`.

    ``load`` is the machine's load average over the last minute (the processes that want a core),
    ``cores`` its number of cores (both read from this machine when None): past one process a
    core, each gets its share of a core, and the runner's start takes that much longer."""
    load = os.getloadavg()[0] if load is None else load
    cores = (os.cpu_count() or 1) if cores is None else cores
    return min(MAX_STARTUP_SECONDS, STARTUP_SECONDS * max(1.0, load / max(1, cores)))


def header_of(job: dict, limits, site: str) -> dict:
    """The header line's data: what the runner needs before the first cell."""
    return {**{k: job[k] for k in HEADER_FIELDS if k in job}, "site": site,
            "cell_timeout": min(limits.cell_seconds, limits.notebook_seconds),
            "max_output_chars": limits.output_chars_per_cell}


def _line(data: dict) -> bytes:
    return json.dumps(data, ensure_ascii=True).encode("ascii") + b"\n"


class _Feeder:
    """Writes lines to the sandbox's standard input in a thread of its own, so that a sandbox that
    never reads cannot hold up the reading of what it writes."""

    def __init__(self, stream):
        self.stream, self.lines = stream, queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def send(self, data: bytes | None) -> None:
        self.lines.put(data)

    def _run(self) -> None:
        try:
            while (data := self.lines.get()) is not None:
                self.stream.write(data)
                self.stream.flush()
        except (OSError, ValueError):  # the sandbox ended before reading it all
            pass
        finally:
            try:
                self.stream.close()
            except OSError:
                pass


class _Reading:
    """What has come back so far, and where the run is."""

    def __init__(self, cells: list[dict], bounds: Bounds):
        self.cells, self.bounds = cells, bounds
        self.ready, self.index, self.nonce = False, 0, ""
        self.startup = 0.0  # the seconds the runner may take to be ready (startup_seconds)
        self.records: list[bytes] = []
        self.record_bytes = 0
        self.this_cell: bytes | None = None  # the record of the cell in progress, once it came
        self.oversized = False  # a line of the cell in progress was too long to read
        self.solved_for: list = []
        self.dropped = 0
        self.full = False  # the record reached its limit of bytes

    @property
    def finished(self) -> bool:
        return self.ready and self.index >= len(self.cells)

    @property
    def in_cell(self) -> int | None:
        return self.cells[self.index]["id"] if self.ready and self.index < len(self.cells) else None

    def next_cell(self) -> bytes | None:
        """The line of the next cell to send, with its new nonce; None when every cell has ended."""
        if self.index >= len(self.cells):
            return None
        self.nonce = secrets.token_hex(16)
        self.this_cell, self.oversized = None, False
        return _line({**self.cells[self.index], "nonce": self.nonce})

    def line(self, line: bytes) -> bytes | None:
        """Read one complete line; return the next cell's line to send when this one ended a cell."""
        if not self.ready:
            if line == READY:
                self.ready = True
                return self.next_cell() or b""
            self.dropped += 1
            return None
        if self.finished:
            self.dropped += 1
            return None
        cell_id = self.cells[self.index]["id"]
        if line == end_of_cell(cell_id, self.nonce):
            return self._end(cell_id)
        if self.this_cell is None and line.startswith(b'{"cell": %d,' % cell_id):
            record = _parsed(line)
            if isinstance(record, dict) and record.get("cell") == cell_id:
                self.this_cell = _canonical(record)
                if self.this_cell is not None:
                    return None
        elif line.startswith(b'{"solved_for": '):
            record = _parsed(line)
            if isinstance(record, dict) and isinstance(record.get("solved_for"), list):
                self.solved_for = record["solved_for"][:20]
                return None
        self.dropped += 1
        return None

    def too_long(self) -> None:
        """A line of the cell in progress was longer than :attr:`Bounds.cell_bytes`: not read."""
        self.oversized = True
        self.dropped += 1

    def _end(self, cell_id: int) -> bytes | None:
        record = self.this_cell
        if record is None:
            why = (f"its record was larger than {self.bounds.cell_bytes >> 20} MB" if self.oversized
                   else "no record of it came back")
            record = run_record.canonical({"cell": cell_id, "lost": why})
        if self.record_bytes + len(record) > self.bounds.record_bytes - (64 << 10):
            self.full = True
            return None
        self.records.append(record)
        self.record_bytes += len(record)
        self.index += 1
        return self.next_cell() or b""


def _parsed(line: bytes):
    try:
        return json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None


def _no_constant(name: str):
    raise ValueError(name)


def _canonical(record: dict) -> bytes | None:
    try:
        return run_record.canonical(record)
    except (ValueError, TypeError, RecursionError):
        return None


def drive(process: subprocess.Popen, job: dict, limits, site: str, stop: threading.Event, started: float,
          bounds: Bounds | None = None) -> bytes:
    """Run ``job``'s cells in the started runner ``process`` (see the module docstring); the run record's bytes."""
    bounds = bounds or Bounds()
    errors = bytearray()
    ended = threading.Event()

    def drain():
        # Reads the raw descriptor only when select says it can, and stops once the run has ended
        # even if a process of the sandbox still holds the pipe open: a read blocked in the
        # buffered stream would hold its lock, and closing the stream would then wait forever.
        fd = process.stderr.fileno()
        while True:
            if not select.select([fd], [], [], 0.2)[0]:
                if ended.is_set():
                    return
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            errors.extend(chunk)
            del errors[:-2 * STDERR_CHARS]

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    feeder = _Feeder(process.stdin)
    feeder.send(_line(header_of(job, limits, site)))
    reading = _Reading(list(job["cells"]), bounds)
    status, reason = _read(process, feeder, reading, limits, bounds, stop, started)
    if status != "finished" or reading.full:
        process.kill()  # bwrap's own process; every process of the sandbox dies with it (--die-with-parent)
    feeder.send(None)
    try:
        code = process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        code = process.wait()
    ended.set()
    drainer.join(timeout=5)
    feeder.thread.join(timeout=5)
    for stream in (process.stdout, process.stderr):
        stream.close()
    stderr = bytes(errors).decode("utf-8", "replace")[-STDERR_CHARS:]
    exit_code, killed_by = (None, -code) if code < 0 else (code, code - 128 if 128 < code < 160 else None)
    if status == "ended":
        if not reading.ready:
            status = "sandbox_failed"
            last = stderr.strip().splitlines()[-1:] or ["no message"]
            reason = f"the sandbox ended before the runner started (exit code {code}): {last[0][:300]}"
        elif killed_by is not None:
            status = "killed"
    if status == "timed_out" and not reading.ready:
        status, reason = "sandbox_failed", f"the sandbox did not start the runner within {reading.startup:.0f} s"
    head = {"format": run_record.FORMAT, "status": status, "in_cell": None if status == "finished" else reading.in_cell,
            "exit_code": exit_code, "signal": killed_by if status == "killed" else None,
            "seconds": round(time.monotonic() - started, 3), "reason": reason, "stderr": stderr,
            "solved_for": reading.solved_for, "dropped": reading.dropped}
    return run_record.assemble(head, reading.records)


def _read(process, feeder: _Feeder, reading: _Reading, limits, bounds: Bounds, stop: threading.Event,
          started: float) -> tuple[str, str]:
    """Read the channel until the run ends; its status and, for ``sandbox_failed`` and ``overflow``, why."""
    deadline = None  # the notebook's, from its first cell on; before, the start's bound (reading.startup)
    reading.startup = max(startup_seconds(), float(limits.notebook_seconds))
    received, partial, skipping = 0, bytearray(), False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            if not reading.ready:  # read again as the machine's load changes, never shortened
                reading.startup = max(reading.startup, startup_seconds())
            left = (started + reading.startup if deadline is None else deadline) - time.monotonic()
            if left <= 0:
                return "timed_out", ""
            if stop.is_set():
                return "sandbox_failed", "grading was stopped"
            if not selector.select(timeout=min(left, 0.5)):
                continue
            chunk = os.read(process.stdout.fileno(), 1 << 20)
            if not chunk:
                return "ended", ""
            received += len(chunk)
            if received > limits.answer_bytes:
                return "overflow", f"sent back more than {limits.answer_bytes >> 20} MB"
            lines = chunk.split(b"\n")
            for number, piece in enumerate(lines):
                if skipping:
                    if number == 0:
                        continue  # still the line that was too long
                    skipping = False
                if number < len(lines) - 1:
                    partial.extend(piece)
                    was_ready = reading.ready
                    send = reading.line(bytes(partial))
                    partial.clear()
                    if reading.ready and not was_ready:  # the notebook's own time starts with its first cell
                        deadline = time.monotonic() + float(limits.notebook_seconds)
                    if reading.full:
                        return "overflow", f"sent back answers and output of more than {bounds.record_bytes >> 20} MB"
                    if send:
                        feeder.send(send)
                    if reading.finished:
                        return "finished", ""
                else:
                    partial.extend(piece)
                    if len(partial) > bounds.cell_bytes:
                        reading.too_long()
                        partial.clear()
                        skipping = True
