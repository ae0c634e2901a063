"""The instructors' page shows the release and grading output as the commands print it.

Its transcripts are typed into the page, so they can fall behind the problem sets: these tests
compare them with the course. Every problem set is listed once, in the order the command
releases them, with the points of its source notebook; the grading transcript's totals are
problem set 2's points.
"""

from __future__ import annotations

import re

from .exercise_support import PROBLEM_SETS, ROOT, points, source_notebook

PAGE = (ROOT / "book" / "instructors.md").read_text(encoding="utf-8")


def test_the_release_transcript_lists_every_problem_set_with_its_points():
    listed = re.findall(r"^  (ps\d+_\w+) +(\d+) points  exercises/release/\1/$", PAGE, flags=re.M)
    assert [ps for ps, _ in listed] == PROBLEM_SETS
    wrong = {ps: (int(n), points(source_notebook(ps))) for ps, n in listed if int(n) != points(source_notebook(ps))}
    assert not wrong, f"points on the page vs in the notebook: {wrong}"
    assert f"Releasing {len(PROBLEM_SETS)} problem sets" in PAGE
    assert re.search(rf"^Released {len(PROBLEM_SETS)} problem sets in [\d.]+ s\.$", PAGE, flags=re.M)


def test_the_grading_transcript_counts_problem_set_2s_points():
    full = points(source_notebook("ps2_scaled_dot_product"))
    totals = re.findall(r"ps2_scaled_dot_product +(?:\w+: )?\d+ / (\d+)", PAGE)
    assert totals, "the page shows no grading transcript of problem set 2"
    assert {int(t) for t in totals} == {full}, f"totals on the page {sorted(set(totals))}, the notebook's {full:g}"


def test_the_course_folder_ends_with_the_last_problem_set():
    last = PROBLEM_SETS[-1]
    assert f"│   └── {last}/{last}.ipynb" in PAGE
