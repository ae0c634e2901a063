"""Run one submission's cells inside the grading sandbox and hand back its answers, as JSON lines.

This file runs only inside the sandbox (:mod:`qkv_grading.sandbox`), as
``python -S -s /sandbox/lib/qkv_runner.py``, with the standard library, numpy, IPython
(and what they need) and the stub ``qkv_exercises`` (:mod:`qkv_grading.sandbox_stub`
and :mod:`qkv_exercises.answers`) importable, and nothing else of the course.

It speaks the protocol of :mod:`qkv_grading.channel` on the standard input and output it
was started with. First a header line (JSON): the givens of the student's variant, the
display methods, the cell limits; once set up it answers ``{"ready": true}``. Then one
line per cell, each with a nonce, in the order they run:

- ``{"id": i, "run": "<code>"}``: run the code as Jupyter would (IPython, so magics work);
- ``{"id": i, "capture": "value", "answer": "A1"}``: the value of the variable ``A1``, encoded;
- ``{"id": i, "capture": "function", "answer": "softmax", "calls": [{"args": .., "kwargs": ..}]}``:
  the function ``softmax`` called on each of the grader's inputs (each outcome encoded).

For each it writes the cell's record, ``{"cell": i, "outputs": [...], ...}`` (with
``value``, ``outcomes`` or ``missing`` for a capture; the fields are listed in
:mod:`qkv_grading.run_record`), ``{"solved_for": [...]}`` when the notebook called
``start()``, and then ``{"end_of_cell": i, "nonce": "<the cell's nonce>"}``. When its
input ends, it exits. The student's own ``print`` and file descriptors 0 and 1 go
elsewhere, so answers are written as each cell ends, and a notebook stopped later (time
limit, a dead process) still hands back what it computed before.

Everything here can be undone by the student's code, which runs in this same process:
it can only change what this submission hands back. The grader outside trusts nothing
of it but its shape, judges the answers itself, and decides itself whether the run
went through every cell.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


MAX_ITEMS = 200  # blocks of output kept per cell


class Output:
    """A bounded record of one cell's outputs: at most ``limit`` characters of text and
    :data:`MAX_ITEMS` blocks in all."""

    def __init__(self, limit: int):
        self.limit, self.used, self.cut = limit, 0, 0
        self.items: list[dict] = []

    def add(self, kind: str, text: str, **extra) -> None:
        text = ANSI.sub("", str(text))
        room = max(0, self.limit - self.used)
        if len(text) > room:
            self.cut += len(text) - room
            text = text[:room]
        self.used += len(text)
        if self.items and self.items[-1]["kind"] == kind and kind in ("stdout", "stderr") and not extra:
            self.items[-1]["text"] += text
        elif len(self.items) >= MAX_ITEMS:
            self.cut += len(text)
        elif text or extra:
            self.items.append({"kind": kind, "text": text, **extra})


class Stream:
    """``sys.stdout`` / ``sys.stderr`` of the student's code: text goes into the current cell's record."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, runner, name: str):
        self.runner, self.name = runner, name

    def write(self, text) -> int:
        text = str(text)
        self.runner.output.add(self.name, text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("no file descriptor")


class Runner:
    def __init__(self, job: dict, channel):
        self.job, self.channel = job, channel
        self.output = Output(int(job.get("max_output_chars", 20_000)))
        self.timed_out = False
        self.pid = os.getpid()

    # ----------------------------------------------------------------------- the channel out

    def send(self, record: dict) -> None:
        self.channel.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "replace"))
        self.channel.flush()

    # ----------------------------------------------------------------------- IPython

    def make_shell(self):
        from IPython.core.displayhook import DisplayHook
        from IPython.core.displaypub import DisplayPublisher
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets import Type
        from traitlets.config import Config

        runner = self

        class Hook(DisplayHook):
            """The value of a cell's last expression: its text/plain form only."""

            def write_output_prompt(self):
                pass

            def write_format_data(self, format_dict, md_dict=None):
                runner.output.add("result", format_dict.get("text/plain", ""), **_others(format_dict))

        class Publisher(DisplayPublisher):
            """``display(...)``: its text/plain form only; HTML, images and scripts are never kept."""

            def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
                runner.output.add("display", data.get("text/plain", ""), **_others(data))

            def clear_output(self, wait=False):
                pass

        class Shell(InteractiveShell):
            displayhook_class = Type(Hook)
            display_pub_class = Type(Publisher)

            def _showtraceback(self, etype, evalue, stb):
                runner.output.add("error", "\n".join(stb), ename=getattr(etype, "__name__", str(etype))[:200],
                                  evalue=_text(evalue)[:2000])

            def enable_gui(self, gui=None):
                pass

            def enable_matplotlib(self, gui=None):
                pass

        config = Config()
        config.HistoryManager.enabled = False
        config.InteractiveShell.colors = "nocolor"
        config.InteractiveShell.autoindent = False
        config.InteractiveShell.xmode = "Plain"
        return Shell.instance(config=config)

    # ----------------------------------------------------------------------- cells

    def alarm(self, signum, frame):
        self.timed_out = True
        raise KeyboardInterrupt(f"the cell ran past its time limit of {self.job.get('cell_timeout')} s")

    def limited(self, action):
        """Run ``action()`` with the per-cell time limit; the notebook's own limit is enforced outside."""
        self.timed_out = False
        signal.setitimer(signal.ITIMER_REAL, float(self.job.get("cell_timeout", 20)))
        try:
            return action()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def prepare(self) -> None:
        """Install the givens, make the shell and take over the standard streams; then say so."""
        import qkv_exercises
        from qkv_exercises import answers

        self.answers, self.stub = answers, qkv_exercises
        givens = {name: answers.decode(data) for name, data in self.job["givens"].items()}
        qkv_exercises._install(givens, self.job.get("display_methods", ()))
        self.shell = self.make_shell()
        # A first cell written before the notebooks had LANGUAGE still runs with their set-up cell.
        self.shell.user_ns.setdefault("LANGUAGE", "")
        sys.stdout, sys.stderr = Stream(self, "stdout"), Stream(self, "stderr")
        signal.signal(signal.SIGALRM, self.alarm)
        self.reported = 0
        self.send({"ready": True})

    def run_cell(self, cell: dict) -> None:
        """Run (or capture) one cell, then send its record and its end."""
        self.output = Output(int(self.job.get("max_output_chars", 20_000)))
        started = time.monotonic()
        if "run" in cell:
            try:
                self.limited(lambda: self.shell.run_cell(cell["run"], store_history=True, silent=False))
            except KeyboardInterrupt:  # the alarm rang outside the cell's own code
                self.timed_out = True
            record = {"cell": cell["id"]}
        else:
            try:
                record = {"cell": cell["id"],
                          **self.limited(lambda: self.capture(cell, self.shell.user_ns, self.answers))}
            except KeyboardInterrupt:
                self.timed_out = True
                record = {"cell": cell["id"], "missing": True}
        if os.getpid() != self.pid:  # a process the student's code forked: it hands back nothing
            os._exit(0)
        record.update(outputs=self.output.items, cut=self.output.cut, timed_out=self.timed_out,
                      seconds=round(time.monotonic() - started, 3))
        self.send(record)
        solved_for = self.stub._solved_for
        if len(solved_for) != self.reported:
            self.reported = len(solved_for)
            self.send({"solved_for": [list(map(str, entry)) for entry in solved_for[-20:]]})
        self.send({"end_of_cell": cell["id"], "nonce": cell["nonce"]})

    @staticmethod
    def capture(cell: dict, namespace: dict, answers) -> dict:
        name = cell["answer"]
        if name not in namespace:
            return {"missing": True}
        value = namespace[name]
        if cell["capture"] == "value":
            return {"value": answers.encode(value)}
        if not callable(value):
            return {"value": answers.encode(value)}
        outcomes = []
        for call in cell["calls"]:
            args, kwargs = answers.decode(call["args"]), answers.decode(call["kwargs"])
            result = answers.call_student_function(value, args, kwargs)
            if result[0] == "returned":
                outcomes.append({"returned": answers.encode(result[1]), "warned": result[2]})
            else:
                _, type_name, message, traceback_text, warned = result
                outcomes.append({"raised": str(type_name)[:200], "message": str(message)[:2000],
                                 "traceback": str(traceback_text)[-8000:], "warned": warned})
        return {"outcomes": outcomes}


def _others(bundle: dict) -> dict:
    """The kinds of output that were left out (HTML, images, JavaScript ...), by name."""
    others = sorted(k for k in bundle if k != "text/plain")
    return {"omitted": others[:10]} if others else {}


def _text(value) -> str:
    try:
        return str(value)
    except Exception:  # a hostile __str__
        return f"<{type(value).__name__}>"


def main() -> None:
    cells = os.fdopen(os.dup(0), "rb")
    job = json.loads(cells.readline().decode("utf-8"))
    sys.path.append(job["site"])  # numpy, IPython and what they need, read-only
    channel = os.fdopen(os.dup(1), "wb")
    nothing = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the student's input() and raw writes to descriptor 1 go nowhere
        os.dup2(nothing, fd)
    runner = Runner(job, channel)
    status = 0
    try:
        runner.prepare()
        for line in cells:
            runner.run_cell(json.loads(line.decode("utf-8")))
    except BaseException as err:  # the runner itself failed (the grader reports it as the reason)
        os.write(2, f"runner: {type(err).__name__}: {_text(err)}"[:2000].encode("utf-8", "replace"))
        status = 1
    try:
        channel.flush()
    finally:
        os._exit(status)  # no exit handler of the student's runs after the answers are out


if __name__ == "__main__":
    main()
