"""The run record is read as data only: every bound is checked before any work, a record that
breaks one is refused with the reason, and every string comes out safe."""

from __future__ import annotations

import json

import pytest

from qkv_exercises import answers
from qkv_grading import run_record
from qkv_grading.run_record import Bounds, Budget, CallOutcome, CellRecord, Output, RecordRefused, RunRecord


def _record(**head) -> RunRecord:
    cells = (
        CellRecord(0, (Output("stdout", "hello 外送\n"),), seconds=0.5),
        CellRecord(1, (Output("error", "Traceback ...", "ValueError", "bad shape"),)),
        CellRecord(2, answer="value", value=answers.encode([[1.0, 2.5], [3.0, float("nan")]])),
        CellRecord(3, answer="outcomes", outcomes=(CallOutcome(returned=answers.encode(1.5), warned=("w",)),
                                                     CallOutcome(raised="KeyError", message="'k'", traceback="tb"))),
        CellRecord(4, answer="missing"),
        CellRecord(5, answer="lost", lost="its record was larger than 4 MB"),
    )
    return RunRecord(head.pop("status", "finished"), cells, solved_for=(("ps2", "alice", "1"),), **head)


def _bytes(data: dict) -> bytes:
    return json.dumps(data).encode("ascii")


def test_a_record_reads_back_as_it_was_written():
    record = _record(exit_code=0, seconds=1.25, dropped=2)
    decoded = run_record.decode(run_record.encode(record))
    assert decoded.as_dict() == record.as_dict()
    assert decoded.by_cell[2].value == answers.encode([[1.0, 2.5], [3.0, float("nan")]])
    assert answers.decode(decoded.by_cell[3].outcomes[0].returned) == 1.5


def test_the_record_is_ascii_bytes_whatever_the_student_printed():
    record = _record()
    data = run_record.encode(record)
    assert isinstance(data, bytes) and data.isascii()


@pytest.mark.parametrize("data, reason", [
    ("not bytes", "not bytes"),
    (b'{"status": "finished"}' + b" " * (2 << 20), "more than the 1 MB"),
    ('{"status": "finished", "reason": "caf\u00e9"}'.encode("utf-8"), "not ASCII"),
    (b"[" + b"1," * 600 + b"1]", "up to 602 values"),
    (b"not json", "not JSON"),
    (b'{"format": "qkv-run-record/1", "status": "finished", "seconds": NaN}', "not JSON"),
    (b'{"format": "qkv-run-record/1", "status": "finished", "exit_code": ' + b"9" * 5000 + b"}", "not JSON"),
])
def test_bounds_are_checked_before_the_record_is_parsed(data, reason):
    with pytest.raises(RecordRefused, match=reason):
        run_record.decode(data, Bounds(record_bytes=1 << 20, values=600))


def _head(**fields) -> dict:
    return {"format": run_record.FORMAT, "status": "finished", "cells": [], **fields}


@pytest.mark.parametrize("data, reason", [
    (_head(stderr="x" * 2001), "a string of 2001 characters"),
    (_head(cells=[{"cell": 0, "outputs": [], "value": [[[[[[[[[[[[0]]]]]]]]]]]]}]), "nested more than 8 levels"),
    (_head(solved_for=[["a"]] * 501), "a list of 501 items"),
    (_head(status="passed"), "its status is not one of"),
    (_head(format="qkv-run-record/0"), "not a run record of format"),
    (_head(cells=[{"cell": 0, "outputs": [{"kind": "text/html", "text": "<script>"}]}]), "no known kind"),
    (_head(cells=[{"cell": "0"}]), "no cell id"),
    (_head(cells=[{"cell": 0, "timed_out": "no"}]), "timed_out is not true or false"),
    (_head(seconds=-1), "seconds are not a time"),
    (_head(dropped=True), "dropped is not a count"),
    ([_head()], "not an object"),
])
def test_a_record_that_breaks_a_bound_or_its_shape_is_refused_with_the_reason(data, reason):
    with pytest.raises(RecordRefused, match=reason):
        run_record.decode(_bytes(data), Bounds(string_chars=2000, depth=8, items=500))


def test_deep_nesting_is_refused_even_past_what_python_can_recurse():
    with pytest.raises(RecordRefused, match="nested"):
        run_record.decode(b"[" * 100_000 + b"]" * 100_000)


def test_the_walk_visits_no_more_values_than_the_bound():
    values = [0] * 50
    data = _bytes(_head(cells=[{"cell": 0, "outputs": [], "value": {"t": "list", "v": values}}]))
    run_record.decode(data, Bounds(values=100))
    with pytest.raises(RecordRefused, match="values"):
        run_record.decode(data, Bounds(values=60))


def test_a_spent_budget_stops_the_decoding():
    with pytest.raises(run_record.OverBudget, match="more than 0 s"):
        run_record.decode(run_record.encode(_record()), budget=Budget(0))


def test_every_string_in_the_record_comes_out_safe():
    hostile = "\ud800\x1b[2K\u202e\r"
    data = _head(stderr=hostile, reason=hostile, solved_for=[["ps2", hostile, "1"]], cells=[
        {"cell": 0, "outputs": [{"kind": "error", "text": hostile, "ename": hostile, "evalue": hostile,
                                 "omitted": [hostile]}]},
        {"cell": 1, "outputs": [], "value": {"t": "str", "v": hostile}},
        {"cell": 2, "outputs": [], "outcomes": [{"raised": hostile, "message": hostile, "traceback": hostile,
                                                 "warned": [hostile]}]}])
    record = run_record.decode(json.dumps(data).encode("ascii"))
    texts = [record.stderr, record.reason, record.solved_for[0][1], *record.by_cell[0].outputs[0].as_dict().values(),
             answers.decode(record.by_cell[1].value), *record.by_cell[2].outcomes[0].as_dict().values()]
    flat = json.dumps(texts, ensure_ascii=False)
    flat.encode("utf-8")
    for bad in ("\x1b", "\u202e", "\r", "\ud800"):
        assert bad not in flat, bad
    assert "\\\\x1b[2K" in flat, "the escape is shown, not dropped"


def test_a_failed_run_says_why():
    record = run_record.decode(run_record.failed("could not start bwrap: no such file"))
    assert record.status == "sandbox_failed" and "bwrap" in record.reason
