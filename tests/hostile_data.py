"""Hand-ins that attack the grader with what they send back, rather than with what they do in the sandbox.

The notebook's code runs in the runner's process, so it can write anything to the channel the
runner answers on: records of its own making for the cell it is in (it finds the cell's id in the
runner's frames), bytes that are no record at all, a flood, or a forged end of the run. It can
also put terminal escapes and bidirectional controls into what it prints, raises and types.
:func:`data_attacks` gives the adversarial class (tests/adversarial_class.py) one hand-in per
kind, in the form of :func:`tests.adversarial_class.attacks`.
"""

from __future__ import annotations

import json

from .grading_support import PROBE, PS2, released, source_of, with_cells

# Writes raw bytes to every descriptor that may be the channel; record(i, ...) sends a record for job
# cell i. A student finds their cell's number by counting the release's cells as the grader does
# (:func:`counted` puts it in place of THIS_CELL, and the test cells' in place of CHECK_CELLS).
CHANNEL = (
    "import json, os\n"
    "def channel(data):\n"
    "    for fd in range(3, 16):\n"
    "        try:\n"
    "            os.write(fd, data)\n"
    "        except OSError:\n"
    "            pass\n"
    "def record(cell_id, **fields):\n"
    "    channel(('{\"cell\": %d, ' % cell_id).encode() + json.dumps(fields)[1:].encode() + b'\\n')\n"
)


def counted(course, problem_set: str, nb: dict) -> dict:
    """``nb`` with THIS_CELL in each cell replaced by that cell's number in the grader's job, and
    CHECK_CELLS by the list of the test cells' numbers."""
    from qkv_exercises.problem_sets import get_problem_set
    from qkv_grading import jobs

    from .grading_probe.ps99_probe import PROBLEM_SET as PROBE_SET

    plan = jobs.plan(course / "source" / problem_set, PROBE_SET if problem_set == PROBE else get_problem_set(problem_set))
    cells, _ = jobs.arrange(plan, nb)
    jobs.build_job(plan, cells, "anyone", "0" * 64)
    checks = [c.job_id for c in cells if c.kind == "test"]
    numbers = {c.source: c.job_id for c in cells if c.job_id is not None}
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if "THIS_CELL" in text or "CHECK_CELLS" in text:
            cell["source"] = text.replace("THIS_CELL", str(numbers.get(text, -1))).replace("CHECK_CELLS", str(checks))
    return nb


# What rewrote the instructor's summary: erase the line, move up, print a full score.
ESCAPES = "\x1b[2K\x1b[1G\r" + f"escapes  {PS2}  9 / 9" + "\x1b[1A\x1b[2K"
BIDI = "\u202e9 / 0\u202c \u2066x\u2069"
UNSAFE = "\ud800 \udfff " + ESCAPES + BIDI + " \x00\x07\x9b31m"


def _in_added_cells(blank: dict, *sources: str) -> dict:
    return with_cells(blank, {}, before={"answer_scores_q1": list(sources)})


def _with_student_id(nb: dict, typed: str) -> dict:
    nb = json.loads(json.dumps(nb))
    cell = next(c for c in nb["cells"] if "student-id" in c["metadata"].get("tags", []))
    cell["source"] = f"STUDENT_ID = {typed!r}\nPRACTICE = 1"
    return nb


def data_attacks(course) -> dict:
    """``{student: (problem set, notebook, extra files, expected score, words its notes must hold)}``."""
    blank, solution = released(course, PS2), source_of(PS2)
    forged_outputs = (f"record(THIS_CELL, outputs=[{{'kind': 'stdout', 'text': {UNSAFE!r}}}, {{'kind': 'error', "
                      f"'text': {UNSAFE!r}, 'ename': {UNSAFE!r}, 'evalue': {UNSAFE!r}}}], cut=0, timed_out=False, "
                      "seconds=0.0)\n"
                      f"channel(json.dumps({{'solved_for': [['{PS2}', {UNSAFE!r}, '1']]}}).encode() + b'\\n')\n")
    full = CHANNEL + "record(THIS_CELL, outputs=[{'kind': 'stdout', 'text': 'x' * 90_000}] * 40, cut=0, timed_out=False, seconds=0.0)"
    attacks = {
        # the output that ended the run before grades.csv was written, on every rerun
        "unsafe_text": (PS2, _in_added_cells(blank, CHANNEL + forged_outputs), {}, 0,
                        ["(added by the student) raised \ufffd \ufffd \\x1b[2K", "ignored 1 line sent back"]),
        "escapes": (PS2, with_cells(_with_student_id(blank, ESCAPES + BIDI), {},
                                    before={"answer_scores_q1": [f"print({UNSAFE!r})\nraise RuntimeError({ESCAPES!r})"]},
                                    markdown_before={"answer_scores_q1": [f"# {BIDI} {ESCAPES}"]}),
                    {}, 0, ["raised RuntimeError", "solved with STUDENT_ID"]),
        "forged_end": (PS2, with_cells(solution, {}, before={"answer_weights_q1": [CHANNEL + (
            "channel(b'{\"done\": true}\\n{\"status\": \"finished\"}\\n')\n"
            "for later in range(THIS_CELL, THIS_CELL + 60):\n"
            "    channel(json.dumps({'end_of_cell': later, 'nonce': '0' * 32}).encode() + b'\\n')\n"
            "os._exit(0)")]}), {}, 2, ["process ended (exit code 0)"]),
        "flood": (PS2, _in_added_cells(blank, CHANNEL + "for _ in range(80):\n    channel(b'x' * (1 << 20))"),
                  {}, 0, ["the notebook sent back more than 64 MB"]),
        "record_full": (PS2, _in_added_cells(blank, *[full + f"  # {n}" for n in range(6)]),
                        {}, 0, ["the notebook sent back answers and output of more than 16 MB"]),
        "many_values": (PS2, _in_added_cells(blank, *[CHANNEL + f"record(THIS_CELL, outputs=[], value=[0] * 1_000_000)  # {n}"
                                                      for n in range(5)]),
                        {}, 0, ["refused", "values, more than 2000000"]),
        "deep": (PS2, _in_added_cells(blank, CHANNEL + "v = 0\nfor _ in range(500):\n    v = [v]\n"
                                                       "record(THIS_CELL, outputs=[], value=v)"),
                 {}, 0, ["refused", "nested more than 40 levels deep"]),
        "long_string": (PS2, _in_added_cells(blank, CHANNEL + "record(THIS_CELL, outputs=[{'kind': 'stdout', "
                                                              "'text': 'x' * 200_000}])"),
                        {}, 0, ["refused", "a string of 200000 characters"]),
        # ids that are the course's own folder names are students like any
        "submitted": (PS2, blank, {}, 0, []),
        "autograded": (PS2, blank, {}, 0, []),
    }
    if (course / "release" / PROBE).is_dir():  # the course of the grading tests (bench/grading.py has none)
        # a function check's record forged from inside the function: numbers no answer holds
        attacks["odd_numbers"] = (PROBE, with_cells(released(course, PROBE), {"answer_softmax": (
            "def softmax(x):\n" + "".join("    " + line + "\n" for line in CHANNEL.splitlines()) +
            "    big = {'t': 'array', 'dtype': 'int', 'shape': [2], 'v': [10 ** 4000, -10 ** 4000]}\n"
            "    for check in CHECK_CELLS:\n"
            "        record(check, outputs=[], outcomes=[{'returned': big, 'warned': []}])\n"
            "    return x")}), {}, 0, [])
    return {student: (ps, counted(course, ps, nb), *rest) for student, (ps, nb, *rest) in attacks.items()}
