"""The journal keeps each record as it arrives and is never read whole: a resumed run finds a record by
its key, reading one line at a time, and a line cut short by a killed run is never taken for one."""

from __future__ import annotations

import tracemalloc

from qkv_grading import run_record
from qkv_grading.journal import Journal
from qkv_grading.run_record import CellRecord, Output, RunRecord


def _record(text: str) -> bytes:
    return run_record.encode(RunRecord("finished", (CellRecord(0, (Output("stdout", text),)),)))


def test_a_record_comes_back_as_it_was_written_and_the_last_of_a_key_wins(tmp_path):
    journal = Journal(tmp_path, "ps2")
    journal.append("a" * 64, "alice", _record("first"))
    journal.append("b" * 64, "bob", _record("外送 \ud800 \x1b[2K"))
    journal.append("a" * 64, "alice", _record("again"))
    index = journal.index()
    assert set(index) == {"a" * 64, "b" * 64}
    assert journal.record(index["a" * 64]) == _record("again")
    decoded = run_record.decode(journal.record(index["b" * 64]))
    assert decoded.cells[0].outputs[0].text == "外送 \ufffd \\x1b[2K"


def test_a_line_cut_short_by_a_killed_run_is_not_read(tmp_path):
    journal = Journal(tmp_path, "ps2")
    journal.append("a" * 64, "alice", _record("whole"))
    with journal.path.open("ab") as f:
        f.write(b'{"key": "' + b"c" * 64 + b'", "student": "carl", "record": "{\\"cells')  # killed mid-line
    assert set(journal.index()) == {"a" * 64}
    journal.append("d" * 64, "dora", _record("after"))  # the next run appends after the cut line
    index = journal.index()
    assert set(index) == {"a" * 64, "d" * 64}
    assert journal.record(index["d" * 64]) == _record("after")


def test_keep_only_drops_earlier_hand_ins_and_repeated_keys(tmp_path):
    journal = Journal(tmp_path, "ps2")
    for key, student in (("a", "alice"), ("b", "bob"), ("a", "alice"), ("c", "alice")):
        journal.append(key * 64, student, _record(key))
    journal.keep_only({"alice", "bob"}, {"c" * 64, "b" * 64})
    lines = journal.path.read_bytes().splitlines()
    assert [line[9:10] for line in lines] == [b"b", b"c"]


def test_finding_a_record_reads_one_line_at_a_time(tmp_path):
    """A journal of 40 records of 1 MB each is indexed, and one record read, in a few MB of memory."""
    journal = Journal(tmp_path, "ps2")
    for number in range(40):
        journal.append(f"{number:064x}", f"s{number}", _record(chr(65 + number % 26) * (1 << 20)))
    tracemalloc.start()
    index = journal.index()
    data = journal.record(index[f"{7:064x}"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(index) == 40 and data == _record("H" * (1 << 20))
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MB held to find one record in a 40 MB journal"
