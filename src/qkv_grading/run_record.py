"""The run record: what the pure step hands back for one submission, and how the trusted process reads it.

:func:`qkv_grading.sandbox.run_job` returns bytes: one JSON object, ASCII only (every other
character as a ``\\u`` escape), made by :func:`assemble`. Nothing in it is ever unpickled,
evaluated or trusted: :func:`decode` checks it against :class:`Bounds` before any other
work, then reads it as plain data into a :class:`RunRecord`, every string made safe
(:func:`qkv_grading.safe_text.stored`) on the way. A record that breaks a bound or has
another shape raises :class:`RecordRefused`, whose message is the reason the submission
scores 0; it never stops the batch.

The record's fields (``RunRecord.as_dict``):

- ``format``: :data:`FORMAT`;
- ``status``: how the run ended, one of :data:`STATUSES`:

  - ``finished``: the runner went through every cell (its end-of-cell replies, which the
    notebook cannot forge, all came back: :mod:`qkv_grading.channel`);
  - ``timed_out``: the notebook ran past its time limit;
  - ``overflow``: it sent back more than its limit of bytes;
  - ``ended``: its process ended before the last cell (``exit_code``);
  - ``killed``: its process was killed by a signal (``signal``);
  - ``sandbox_failed``: no sandbox could run it (``reason``): the machine's fault, not the
    submission's;

- ``cells``: one entry per job cell that ended, in order (:class:`CellRecord`);
- ``in_cell``: the job cell that was running when the run stopped (null when finished);
- ``exit_code``, ``signal``, ``seconds``, ``reason``, ``stderr`` (its last characters);
- ``solved_for``: the ``(problem set, STUDENT_ID, PRACTICE, LANGUAGE)`` of the notebook's last
  ``start()`` call, as it passed them;
- ``dropped``: how many lines the notebook sent that were not the runner's records.

A cell's entry (``CellRecord.as_dict``): ``cell`` (its job id), ``outputs`` (a list of
``{"kind", "text"}`` with ``ename`` and ``evalue`` for errors and ``omitted`` for the
kinds of output that were left out), ``cut`` (characters of output not kept),
``timed_out``, ``seconds``, and for a test cell's capture one of ``value`` (an answer
encoded by :func:`qkv_exercises.answers.encode`), ``outcomes`` (each call of a function:
``{"returned": answer, "warned": [...]}`` or ``{"raised", "message", "traceback",
"warned"}``) or ``missing`` (the name was not defined). ``lost`` instead says why the
runner's record of the cell was not read (too large, not a record).
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import dataclass

from .safe_text import stored

FORMAT = "qkv-run-record/1"
STATUSES = ("finished", "timed_out", "overflow", "ended", "killed", "sandbox_failed")
OUTPUT_KINDS = ("stdout", "stderr", "result", "display", "error")
STDERR_CHARS = 2000


@dataclass(frozen=True)
class Bounds:
    """What a run record may hold; anything beyond costs the submission, with the reason."""

    record_bytes: int = 16 << 20  # bytes of the whole record
    cell_bytes: int = 4 << 20  # bytes of one cell's record as the runner sends it (larger: the cell says so)
    values: int = 2_000_000  # JSON values (numbers, strings, lists, objects) in the whole record
    depth: int = 40  # levels of nesting of lists and objects
    string_chars: int = 100_000  # characters of one string
    items: int = 1_000_000  # items of one list (an array's entries are one list)
    judging_seconds: float = 10.0  # CPU time of the grading thread to decode and judge one submission


class RecordRefused(ValueError):
    """A run record that breaks a bound or is not of the record's shape: the message says which."""


class OverBudget(RecordRefused):
    """Decoding and judging one submission took longer than its time budget."""


class Budget:
    """The time budget of one submission's decoding and judging (:attr:`Bounds.judging_seconds`), in CPU time
    of the thread that does it: neither the machine's load nor a suspended process costs a student marks."""

    def __init__(self, seconds: float):
        self.seconds, self.deadline = float(seconds), time.thread_time() + float(seconds)

    def check(self, doing: str) -> None:
        if time.thread_time() > self.deadline:
            raise OverBudget(f"decoding and judging what it handed back took more than {self.seconds:g} s "
                             f"(while {doing})")


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Output:
    """One block of a cell's output, as text."""

    kind: str  # one of OUTPUT_KINDS
    text: str
    ename: str = ""
    evalue: str = ""
    omitted: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        data = {"kind": self.kind, "text": self.text}
        if self.kind == "error":
            data.update(ename=self.ename, evalue=self.evalue)
        if self.omitted:
            data["omitted"] = list(self.omitted)
        return data


@dataclass(frozen=True)
class CallOutcome:
    """What one call of a student's function did: returned an encoded answer, or raised."""

    returned: object = None  # the answer, as answers.encode made it (None when it raised)
    raised: str | None = None  # the exception's type name
    message: str = ""
    traceback: str = ""
    warned: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        if self.raised is None:
            return {"returned": self.returned, "warned": list(self.warned)}
        return {"raised": self.raised, "message": self.message, "traceback": self.traceback,
                "warned": list(self.warned)}


@dataclass(frozen=True)
class CellRecord:
    """What one job cell did (see the module docstring)."""

    cell: int
    outputs: tuple[Output, ...] = ()
    cut: int = 0
    timed_out: bool = False
    seconds: float = 0.0
    answer: str = "none"  # "none" (a cell that only runs), "value", "outcomes", "missing" or "lost"
    value: object = None  # the encoded answer when answer == "value"
    outcomes: tuple[CallOutcome, ...] = ()
    lost: str = ""  # why the runner's record was not read, when answer == "lost"

    def as_dict(self) -> dict:
        if self.answer == "lost":
            return {"cell": self.cell, "lost": self.lost}
        data = {"cell": self.cell, "outputs": [o.as_dict() for o in self.outputs], "cut": self.cut,
                "timed_out": self.timed_out, "seconds": self.seconds}
        if self.answer == "value":
            data["value"] = self.value
        elif self.answer == "outcomes":
            data["outcomes"] = [o.as_dict() for o in self.outcomes]
        elif self.answer == "missing":
            data["missing"] = True
        return data


@dataclass(frozen=True)
class RunRecord:
    """One submission's run, as the trusted process reads it (see the module docstring)."""

    status: str
    cells: tuple[CellRecord, ...] = ()
    in_cell: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    seconds: float = 0.0
    reason: str = ""
    stderr: str = ""
    solved_for: tuple[tuple[str, ...], ...] = ()
    dropped: int = 0

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")

    @functools.cached_property
    def by_cell(self) -> dict[int, CellRecord]:
        """The entry of each job cell (the first, should one come twice)."""
        found: dict[int, CellRecord] = {}
        for cell in self.cells:
            found.setdefault(cell.cell, cell)
        return found

    def head(self) -> dict:
        """Every field but ``cells``, as plain data."""
        return {"format": FORMAT, "status": self.status, "in_cell": self.in_cell, "exit_code": self.exit_code,
                "signal": self.signal, "seconds": self.seconds, "reason": self.reason, "stderr": self.stderr,
                "solved_for": [list(entry) for entry in self.solved_for], "dropped": self.dropped}

    def as_dict(self) -> dict:
        return {**self.head(), "cells": [c.as_dict() for c in self.cells]}

    @classmethod
    def from_dict(cls, data: dict) -> RunRecord:
        """The record from plain data already checked by :func:`decode`'s walk; :class:`RecordRefused` on any other shape."""
        _fields_of(data, "the record")
        if data.get("format") != FORMAT:
            raise RecordRefused(f"it is not a run record of format {FORMAT}")
        status = data.get("status")
        if status not in STATUSES:
            raise RecordRefused("its status is not one of " + ", ".join(STATUSES))
        cells = _list(data, "cells")
        solved_for = tuple(tuple(_text(v, "solved_for") for v in _as_list(entry, "solved_for"))
                           for entry in _list(data, "solved_for"))
        return cls(status, tuple(_cell(c) for c in cells), in_cell=_optional_int(data, "in_cell"),
                   exit_code=_optional_int(data, "exit_code"), signal=_optional_int(data, "signal"),
                   seconds=_seconds(data), reason=_text(data.get("reason", ""), "reason"),
                   stderr=_text(data.get("stderr", ""), "stderr")[-STDERR_CHARS:], solved_for=solved_for,
                   dropped=_count(data, "dropped"))


def assemble(head: dict, cells: list[bytes]) -> bytes:
    """The record's bytes from its head (:meth:`RunRecord.head`) and each cell's entry as canonical JSON bytes."""
    text = json.dumps(head, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return b'{"cells":[' + b",".join(cells) + b"]," + text[1:].encode("ascii")


def canonical(value) -> bytes:
    """``value`` (plain data) as the record writes it: compact JSON, ASCII only, no NaN."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def encode(record: RunRecord) -> bytes:
    """The bytes of ``record``, as :func:`assemble` makes them."""
    return assemble(record.head(), [canonical(c.as_dict()) for c in record.cells])


def failed(reason: str, seconds: float = 0.0, stderr: str = "") -> bytes:
    """The record of a run that no sandbox could make (``sandbox_failed``)."""
    return encode(RunRecord("sandbox_failed", seconds=round(seconds, 3), reason=reason[:500],
                            stderr=stderr[-STDERR_CHARS:]))


# --------------------------------------------------------------------------- decoding


def decode(data, bounds: Bounds | None = None, budget: Budget | None = None) -> RunRecord:
    """The :class:`RunRecord` in ``data``; :class:`RecordRefused` says why when ``data`` is not one.

    Checked before any other work: that ``data`` is bytes of ASCII, at most
    ``bounds.record_bytes`` long, with at most ``bounds.values`` separators and brackets
    (each value needs one); then, while it is parsed and walked once, the depth, the
    length of every string and list, and the budget's time.
    """
    bounds = bounds or Bounds()
    budget = budget or Budget(bounds.judging_seconds)
    if not isinstance(data, bytes):
        raise RecordRefused(f"it is {type(data).__name__}, not bytes")
    if len(data) > bounds.record_bytes:
        raise RecordRefused(f"it is {len(data) / 2**20:.1f} MB, more than the {bounds.record_bytes / 2**20:g} MB "
                            "a record may be")
    if not data.isascii():
        raise RecordRefused("it holds bytes that are not ASCII")
    separators = data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{")
    if separators + 1 > bounds.values:
        raise RecordRefused(f"it may hold up to {separators + 1} values, more than {bounds.values}")
    try:
        parsed = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise RecordRefused("it is nested more deeply than JSON can be read") from None
    except ValueError as err:
        raise RecordRefused(f"it is not JSON ({str(err)[:100]})") from None
    _Walk(bounds, budget).walk(parsed, 0)
    budget.check("reading the record")
    return RunRecord.from_dict(parsed)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class _Walk:
    """One pass over parsed JSON: depth, string and list sizes, the count of values and the time;
    every string replaced in place by its :func:`stored` form."""

    def __init__(self, bounds: Bounds, budget: Budget):
        self.bounds, self.budget, self.values = bounds, budget, 0

    def walk(self, value, depth: int):
        self.values += 1
        if self.values & 0xFFFF == 0:
            self.budget.check("reading the record")
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, list):
            self._container(len(value), depth)
            for i, item in enumerate(value):
                if isinstance(item, (str, list, dict)):
                    value[i] = self.walk(item, depth + 1)
                else:
                    self.values += 1
            return value
        if isinstance(value, dict):
            self._container(len(value), depth)
            for key in list(value):
                if len(key) > self.bounds.string_chars:
                    raise RecordRefused(f"it holds a name of {len(key)} characters")
                value[key] = self.walk(value[key], depth + 1)
            return value
        return value

    def _container(self, length: int, depth: int) -> None:
        if depth >= self.bounds.depth:
            raise RecordRefused(f"it is nested more than {self.bounds.depth} levels deep")
        if length > self.bounds.items:
            raise RecordRefused(f"it holds a list of {length} items, more than {self.bounds.items}")
        if self.values > self.bounds.values:
            raise RecordRefused(f"it holds more than {self.bounds.values} values")

    def _text(self, text: str) -> str:
        if len(text) > self.bounds.string_chars:
            raise RecordRefused(f"it holds a string of {len(text)} characters, more than {self.bounds.string_chars}")
        return text if text.isascii() and text.isprintable() else stored(text)


def _fields_of(data, what: str) -> dict:
    if not isinstance(data, dict):
        raise RecordRefused(f"{what} is not an object")
    return data


def _list(data: dict, key: str) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise RecordRefused(f"its {key} is not a list")
    return value


def _as_list(value, what: str) -> list:
    if not isinstance(value, list):
        raise RecordRefused(f"its {what} is not a list")
    return value


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise RecordRefused(f"its {what} is not text")
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_int(data: dict, key: str) -> int | None:
    value = data.get(key)
    if value is not None and not _is_int(value):
        raise RecordRefused(f"its {key} is not a whole number")
    return value


def _count(data: dict, key: str) -> int:
    value = data.get(key, 0)
    if not _is_int(value) or value < 0:
        raise RecordRefused(f"its {key} is not a count")
    return value


def _seconds(data: dict) -> float:
    value = data.get("seconds", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RecordRefused("its seconds are not a time")
    return float(value)


def _cell(data) -> CellRecord:
    _fields_of(data, "a cell's record")
    cell = data.get("cell")
    if not _is_int(cell) or cell < 0:
        raise RecordRefused("a cell's record has no cell id")
    if "lost" in data:
        return CellRecord(cell, answer="lost", lost=_text(data["lost"], "lost")[:500])
    outputs = tuple(_output(o) for o in _list(data, "outputs"))
    timed_out = data.get("timed_out", False)
    if not isinstance(timed_out, bool):
        raise RecordRefused("a cell's timed_out is not true or false")
    common = dict(outputs=outputs, cut=_count(data, "cut"), timed_out=timed_out, seconds=_seconds(data))
    if "value" in data:
        return CellRecord(cell, answer="value", value=data["value"], **common)
    if "outcomes" in data:
        return CellRecord(cell, answer="outcomes", outcomes=tuple(_outcome(o) for o in _list(data, "outcomes")),
                          **common)
    if data.get("missing") is True:
        return CellRecord(cell, answer="missing", **common)
    return CellRecord(cell, **common)


def _output(data) -> Output:
    _fields_of(data, "an output")
    kind = data.get("kind")
    if kind not in OUTPUT_KINDS:
        raise RecordRefused("an output is of no known kind")
    omitted = tuple(_text(o, "omitted")[:100] for o in _list(data, "omitted")[:10])
    if kind == "error":
        return Output(kind, _text(data.get("text", ""), "text"), _text(data.get("ename", "Error"), "ename")[:200],
                      _text(data.get("evalue", ""), "evalue"), omitted)
    return Output(kind, _text(data.get("text", ""), "text"), omitted=omitted)


def _outcome(data) -> CallOutcome:
    _fields_of(data, "an outcome")
    warned = tuple(_text(w, "warning") for w in _list(data, "warned")[:20])
    if "returned" in data:
        return CallOutcome(returned=data["returned"], warned=warned)
    return CallOutcome(raised=_text(data.get("raised", ""), "raised")[:200], message=_text(data.get("message", ""),
                       "message"), traceback=_text(data.get("traceback", ""), "traceback"), warned=warned)
