"""The instructors' commands (``python -m qkv_grading``) on a temporary copy of the course.

(e) A batch with a notebook that is not valid JSON, one that raises in its first cell, one that
loops forever and one whose process ends itself: each is graded (0 or partial) and reported,
every other student still gets a grade, and every student has a row in grades.csv.
Also: releasing prints every problem set; a zip downloaded from a learning platform is collected
by the platform's file names (ids with ``_``, resubmissions, archives inside never unpacked); ids
that are not safe are refused and the others graded; grades.csv is valid CSV for any id; a grading
run that is killed keeps its grades and the next run finishes; a Dask cluster of two workers over
TLS gives the same grades as the local run, and one without TLS is refused. A notebook of the
繁體中文 edition (its markdown translated, its metadata saying zh-TW) earns the same marks as the
English one, and its feedback speaks Chinese.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from qkv_book.language import speaking
from qkv_exercises import slips
from qkv_grading.translation import translated_notebook

from .exercise_support import (
    PROBLEM_SETS,
    copy_course,
    nbgrader,
    points,
    read_notebook,
    source_notebook,
    with_answer,
    with_first_cell,
    write_notebook,
)
from .grading_support import PS2, grading, read_grades, student_lines

COURSE_ROOT = Path(__file__).resolve().parents[1] / "exercises"

pytestmark = pytest.mark.slow

SLIP_A1 = ("S_raw = Q1 @ K1.T\n"
           "A1 = np.round(np.exp(S_raw) / np.exp(S_raw).sum(axis=1, keepdims=True), 2)  # not scaled")
Q1_SCORES = "scores_q1 = np.round(q1 @ K.T, 2)"
Q1_SCALED = "scaled_scores_q1 = np.round(q1 @ K.T / np.sqrt(2), 2)"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course copy after ``python -m qkv_grading release``, cells limited to 3 s, with what release printed."""
    course = copy_course(tmp_path_factory.mktemp("grading"))
    with (course / "nbgrader_config.py").open("a", encoding="utf-8") as f:
        f.write("\nc.Execute.timeout = 3  # the tests' endless loops end sooner\n")
    result = grading(course, "release")
    assert result.returncode == 0, result.stdout + result.stderr
    return course, result.stdout


def test_release_prints_every_problem_set_with_its_points(released):
    course, printed = released
    for ps in PROBLEM_SETS:
        line = next((line for line in printed.splitlines() if line.strip().startswith(ps)), None)
        assert line is not None, f"release did not mention {ps}:\n{printed}"
        assert f"{points(source_notebook(ps)):g} points" in line
        assert (course / "release" / ps / f"{ps}.ipynb").is_file()
    assert f"Released {len(PROBLEM_SETS)} problem sets" in printed


DAVE_LOOP = "O1 = None\nwhile True:  # never ends\n    pass"
GINA_EXIT = "import os\nos._exit(1)  # ends the process"


def broken_class(course) -> dict:
    source = source_notebook(PS2)
    release = read_notebook(course / "release" / PS2 / f"{PS2}.ipynb")
    erin = with_first_cell(with_answer(with_answer(release, "answer_scores_q1", Q1_SCORES),
                                       "answer_scaled_scores_q1", Q1_SCALED),
                           "raise RuntimeError('still trying something out')")
    return {
        "alice": source,
        "bob": with_answer(source, "answer_weights_head1", SLIP_A1),
        "dave": with_answer(source, "answer_output_head1", DAVE_LOOP),
        "erin": erin,
        "gina": with_answer(source, "answer_output_head1", GINA_EXIT),
        # the 繁體中文 edition's notebook, solved as alice's and bob's are
        "hana": translated_notebook(source, COURSE_ROOT, PS2, "zh-TW"),
        "ivan": translated_notebook(with_answer(source, "answer_weights_head1", SLIP_A1), COURSE_ROOT, PS2, "zh-TW"),
        # the 繁體中文 edition's notebook, broken as dave's, gina's and erin's are
        "jack": translated_notebook(with_answer(source, "answer_output_head1", DAVE_LOOP), COURSE_ROOT, PS2, "zh-TW"),
        "kate": translated_notebook(with_answer(source, "answer_output_head1", GINA_EXIT), COURSE_ROOT, PS2, "zh-TW"),
        "lena": translated_notebook(erin, COURSE_ROOT, PS2, "zh-TW"),
    }


FULL = points(source_notebook(PS2))  # every point of ps2; a slip costs its cell, an ended process the cells after it too
EXPECTED = {"alice": FULL, "bob": FULL - 1, "carol": 0, "dave": FULL - 1, "erin": 2, "gina": FULL - 2,
            "hana": FULL, "ivan": FULL - 1, "jack": FULL - 1, "kate": FULL - 2, "lena": 2}


@pytest.fixture(scope="module")
def broken_batch(released, tmp_path_factory):
    """Grade a class in which four submissions are broken in different ways."""
    course, _ = released
    folder = tmp_path_factory.mktemp("hand-ins") / "submitted"
    for student, nb in broken_class(course).items():
        write_notebook(folder / student / PS2 / f"{PS2}.ipynb", nb)
    (folder / "carol" / PS2).mkdir(parents=True)
    (folder / "carol" / PS2 / f"{PS2}.ipynb").write_text('{"cells": [', encoding="utf-8")  # not JSON
    result = grading(course, "grade", str(folder), "--timeout", "30")
    return course, result, folder


def test_broken_submissions_are_graded_and_reported(broken_batch):
    """(e) each broken notebook gets 0 or partial credit, the rest full grades, all in grades.csv."""
    course, result, _ = broken_batch
    printed = result.stdout + result.stderr
    assert result.returncode == 0, printed
    grades = {student: score for (student, ps), score in read_grades(course / "grades.csv").items() if ps == PS2}
    assert grades == EXPECTED, printed


@pytest.mark.parametrize("student, report", [
    ("carol", "is not a valid notebook"),
    ("dave", "cell answer_output_head1 ran past the time limit of 3 s per cell and was stopped"),
    ("erin", "code cell 1 (added by the student) raised RuntimeError: still trying something out"),
    ("gina", "the notebook's process ended (exit code 1) in cell answer_output_head1; the checks after it were "
             "not reached"),
    # the 繁體中文 edition's: the instructor's console says the same, in English
    ("jack", "cell answer_output_head1 ran past the time limit of 3 s per cell and was stopped"),
    ("kate", "the notebook's process ended (exit code 1) in cell answer_output_head1; the checks after it were "
             "not reached"),
    ("lena", "code cell 1 (added by the student) raised RuntimeError: still trying something out"),
])
def test_each_broken_submission_is_reported_with_its_reason(broken_batch, student, report):
    _, result, _ = broken_batch
    notes = "\n".join(student_lines(result.stdout, student))
    assert report in notes, f"no report {report!r} under {student}:\n{result.stdout}"


def test_progress_is_shown_for_every_submission(broken_batch):
    _, result, _ = broken_batch
    for student in EXPECTED:
        assert any(re.search(rf"/{len(EXPECTED)}\] {PS2}  {student}\b", line) for line in result.stdout.splitlines()), result.stdout


def test_feedback_is_written_for_every_graded_notebook(broken_batch):
    course, _, _ = broken_batch
    for student in ("alice", "bob", "dave", "erin", "gina", "hana", "ivan", "jack", "kate", "lena"):
        assert (course / "feedback" / student / PS2 / f"{PS2}.html").is_file(), student
        assert (course / "autograded" / student / PS2 / f"{PS2}.ipynb").is_file(), student
    assert not (course / "feedback" / "carol" / PS2).exists()


def test_a_chinese_notebook_gets_the_same_marks_and_its_feedback_in_chinese(broken_batch):
    """hana and ivan hand in the zh-TW edition's notebook, solved as alice's and bob's: the same points
    per check, and a feedback page whose words and slip speak Chinese, while bob's stays English."""
    course, _, _ = broken_batch
    pages = {student: (course / "feedback" / student / PS2 / f"{PS2}.html").read_text(encoding="utf-8")
             for student in ("bob", "ivan")}
    with speaking("zh-TW"):
        advice = slips.NO_SQRT_DK.advice
    assert '<html lang="zh-Hant-TW">' in pages["ivan"] and "可能的疏失" in pages["ivan"]
    assert advice in pages["ivan"] and slips.NO_SQRT_DK.english in pages["bob"]
    assert '<html lang="en">' in pages["bob"] and "Likely slip" in pages["bob"] and "可能的疏失" not in pages["bob"]
    marks = {student: re.findall(r'<td class="(passed|failed)">([\d.]+ / [\d.]+)</td>', pages[student])
             for student in pages}
    assert marks["ivan"] == marks["bob"] and marks["bob"], marks


@pytest.mark.parametrize("student, cell, twin, english_note", [
    ("jack", "answer_output_head1", "dave", "ran past the time limit of 3 s per cell and was stopped"),
    ("kate", "answer_output_head1", "gina", "the checks after it were not reached"),
    ("lena", None, "erin", "(added by the student) raised RuntimeError"),
])
def test_a_chinese_notebook_that_loops_ends_or_raises_reads_why_in_chinese(broken_batch, student, cell, twin,
                                                                           english_note):
    """jack, kate and lena hand in the zh-TW edition's notebook, broken as dave's, gina's and erin's: the
    same points, and a feedback page whose notes and verdicts (a cell stopped at the time limit, a process
    that ended, the checks not reached or whose answers were never defined) speak Chinese."""
    import html

    from .test_exercises_messages_zh_tw import english_runs

    course, _, _ = broken_batch
    pages = {s: (course / "feedback" / s / PS2 / f"{PS2}.html").read_text(encoding="utf-8") for s in (student, twin)}
    texts = [html.unescape(t) for t in re.findall(r"<li>(.*?)</li>", pages[student], re.S)
             + re.findall(r'<td class="failed">[^<]*</td><td><pre>(.*?)</pre></td>', pages[student], re.S)]
    assert len(texts) >= 2, pages[student]
    english = [f"{runs}: {text}" for text in texts if (runs := english_runs(text))]
    assert not english, f"{student}: English on the zh-TW feedback page:\n" + "\n".join(english)
    assert all(re.search("[\u4e00-\u9fff]", text) for text in texts), texts
    if cell is not None:
        assert f"儲存格 {cell}" in pages[student], "the notes name the cell the notebook stopped in"
    assert english_note in pages[twin] and english_note not in pages[student], "the English twin's page says it"
    marks = {s: re.findall(r'<td class="(passed|failed)">([\d.]+ / [\d.]+)</td>', pages[s]) for s in pages}
    assert marks[student] == marks[twin] and marks[twin], marks


def test_feedback_loads_nothing_from_another_host(broken_batch):
    """The feedback page's scripts are relative and resolve inside the feedback folder (MathJax included)."""
    course, _, _ = broken_batch
    page = course / "feedback" / "alice" / PS2 / f"{PS2}.html"
    sources = re.findall(r"<(?:script|link|img)\b[^>]*?(?:src|href)=[\"']([^\"']+)", page.read_text(encoding="utf-8"))
    remote = [s for s in sources if re.match(r"(?:[a-z]+:)?//", s)]
    assert not remote, f"the feedback page loads from another host: {remote}"
    scripts = [s for s in sources if s.endswith(".js")]
    assert any(s.endswith("tex-svg.js") for s in scripts), f"no MathJax script on the feedback page: {sources}"
    for script in scripts:
        assert (page.parent / script).resolve().is_file(), f"{script} does not exist next to the feedback"


INTRUDER = """
import sys, time
from distributed import Client
for attempt in range(30):
    try:
        client = Client(sys.argv[1], timeout=3)
        print("CONNECTED", client.submit(sum, [1, 2]).result(timeout=5), list(client.who_has()), flush=True)
    except Exception as err:
        print("refused", type(err).__name__, flush=True)
    time.sleep(0.5)
"""


def test_a_tls_dask_cluster_of_two_workers_gives_the_same_grades(broken_batch, grading_cluster):
    """The same class graded again on a Dask cluster over TLS (a scheduler and two workers on 127.0.0.1,
    the workers as an unprivileged user, set up as the instructors' page says)."""
    course, _, folder = broken_batch
    address = grading_cluster["address"]
    # Meanwhile a peer without a certificate keeps trying to join, submit work and read results.
    intruder = subprocess.Popen([sys.executable, "-c", INTRUDER, address], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    result = grading(course, "grade", str(folder), "--timeout", "30", "--fresh", "--dask", address,
                     "--certificates", str(grading_cluster["certificates"] / "grader"))
    intruder.terminate()
    tried = intruder.communicate(timeout=60)[0]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on the Dask cluster at tls://127.0.0.1:" in result.stdout
    assert "refused" in tried and "CONNECTED" not in tried, tried
    grades = {s: score for (s, ps), score in read_grades(course / "grades.csv").items() if ps == PS2}
    assert grades == EXPECTED, result.stdout


def test_grading_on_a_cluster_without_tls_is_refused(broken_batch):
    course, _, folder = broken_batch
    result = grading(course, "grade", str(folder), "--dask", "tcp://127.0.0.1:8786")
    assert result.returncode == 1 and "must start with tls://" in result.stderr, result.stderr


def _platform_zip(tmp_path, members: dict[str, dict | bytes]) -> "os.PathLike":
    archive = tmp_path / "downloads.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, content in members.items():
            z.writestr(name, content if isinstance(content, bytes) else json_bytes(content))
    return archive


def json_bytes(nb: dict) -> bytes:
    import json

    return json.dumps(nb).encode("utf-8")


def _typed_for(nb: dict, name: str) -> dict:
    """``nb`` solved by hand for the numbers of ``name``: its first answer typed in, and ``STUDENT_ID = name``."""
    import numpy as np

    from qkv_exercises import variants
    from qkv_exercises.identity import student_variant

    ex = variants.q1_example(student_variant(PS2, name))
    nb = with_answer(nb, "answer_scores_q1", f"scores_q1 = {np.round(ex.Q @ ex.K.T, 2).tolist()}")
    for cell in nb["cells"]:
        if "student-id" in cell["metadata"].get("tags", []):
            cell["source"] = f"STUDENT_ID = {name!r}\nPRACTICE = 1"
    return nb


def test_a_zip_from_a_learning_platform_is_collected_by_the_platforms_user_ids(released, tmp_path):
    """Canvas's and Moodle's names: the student is the platform's user id, so two students named 'ann' are two
    students; their numbers are their names' (what they typed as STUDENT_ID). Ids with '_', a late resubmission
    (the latest is graded); an unsafe name, a name of non-UTF-8 bytes, a zip inside the download and a stray
    file are reported."""
    course, _ = released
    source = source_notebook(PS2)
    slip = with_answer(source, "answer_weights_head1", SLIP_A1)
    archive = _platform_zip(tmp_path, {
        f"hana_4711_90210_{PS2}.ipynb": source,
        f"ivan_late_4712_90210_{PS2}-1.ipynb": source,
        f"ivan_late_4712_90211_{PS2}-2.ipynb": slip,
        f"ann_4713_1_{PS2}.ipynb": _typed_for(source, "ann"),
        f"ann_4720_7_{PS2}.ipynb": slip,
        f"ann_b_4714_2_{PS2}.ipynb": slip,
        f"Lee Wu_310_assignsubmission_file_{PS2}.ipynb": source,
        f"Kim Ho_311_assignsubmission_file/{PS2}.ipynb": slip,
        f".._4715_3_{PS2}.ipynb": source,
        f"cafX_4716_4_{PS2}.ipynb": source,
        f"olga_4717_5_{PS2}.zip": b"PK\x03\x04 an archive a student uploaded",
        f"{PS2}.ipynb": source,
    })
    data = archive.read_bytes()
    archive.write_bytes(data.replace(b"cafX_", b"caf\xe9_"))  # a name in Latin-1, not UTF-8
    result = grading(course, "grade", str(archive))
    assert result.returncode == 0, result.stdout + result.stderr
    users = {"4711": FULL, "4712": FULL - 1, "4713": FULL, "4720": FULL - 1, "4714": FULL - 1, "310": FULL,
             "311": FULL - 1}
    grades = {s: g for (s, ps), g in read_grades(course / "grades.csv").items() if s in users}
    assert grades == users, result.stdout
    import csv

    with (course / "grades.csv").open(encoding="utf-8", newline="") as f:
        names = {row["student_id"]: row["last_name"] for row in csv.DictReader(f) if row["student_id"] in users}
    assert names == {"4711": "hana", "4712": "ivan", "4713": "ann", "4720": "ann", "4714": "ann_b", "310": "Lee Wu",
                     "311": "Kim Ho"}
    printed = result.stdout
    assert "2 uploads in the download" in "\n".join(student_lines(printed, "4712"))
    assert f"graded the latest, ivan_late_4712_90211_{PS2}-2.ipynb" in printed
    assert "solved with STUDENT_ID" not in printed, "ann typed her name, whose numbers she was graded with"
    assert f"REFUSED: '.._4715_3_{PS2}.ipynb': the student name '..' cannot be used" in printed
    assert "REFUSED: b'caf\\xe9_4716_4" in printed and "not UTF-8" in printed
    assert f"NOT COLLECTED: 'olga_4717_5_{PS2}.zip' (an archive" in printed
    assert f"NOT COLLECTED: '{PS2}.ipynb' (its name does not match" in printed
    assert "Collected 7 submissions from 7 students." in printed
    assert not any(p.name.startswith("olga") for p in (course / "submitted").iterdir())
    timestamps = {row[3]: row[2] for row in csv.reader((course / "grades.csv").open(encoding="utf-8"))}
    assert all(timestamps[u] for u in users), "every hand-in has the time it was handed in"

    # hana's hand-in is replaced by one with a slip; the regrade of what was collected says what changed
    write_notebook(course / "submitted" / "4711" / PS2 / f"{PS2}.ipynb", slip)
    regraded = grading(course, "grade", str(course / "submitted"), "--problem-set", PS2)
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert {s: g for (s, ps), g in read_grades(course / "grades.csv").items() if s in users} == {
        **users, "4711": FULL - 1}, "a regrade of what was collected keeps each platform student's numbers"
    assert f"{PS2}  4711: {FULL:g} -> {FULL - 1:g} / {FULL:g}" in regraded.stdout
    assert f"the regrade changed its score: {FULL:g} -> {FULL - 1:g}" in "\n".join(
        student_lines(regraded.stdout, "4711"))
    assert "the regrade changed" not in "\n".join(student_lines(regraded.stdout, "4712"))
    with (course / "grades.csv").open(encoding="utf-8", newline="") as f:
        previous = {row["student_id"]: row["previous_score"] for row in csv.DictReader(f) if row["assignment"] == PS2}
    assert previous["4711"] == f"{float(FULL)}" and previous["4712"] == "", previous


def test_odd_folder_names_are_graded_and_unsafe_ones_refused(released, tmp_path):
    """Folder names that are globs, hold a comma or an apostrophe, or are the course's own folder names are ids
    like any; '..'-like, control characters, bytes that are not UTF-8, spreadsheet formulas, markup characters
    and ids that differ only by case or Unicode form are refused with a line each; grades.csv stays valid CSV,
    also as nbgrader's own export writes it."""
    course, _ = released
    folder = tmp_path / "submitted"
    source = source_notebook(PS2)
    good = ["[xy]", "com,ma", "o'neil", "na\u0308me", "submitted", "autograded", "feedback", "source", "_mathjax"]
    pairs = ["Zoe", "zoe", "\u212bsa", "\u00c5sa"]  # case; the Angstrom sign and the letter it is equivalent to
    for student in good + pairs + ["bad\nname", "=1+1", 'quote"d']:
        write_notebook(folder / student / PS2 / f"{PS2}.ipynb", source)
    os.makedirs(os.path.join(os.fsencode(folder), b"caf\xe9", os.fsencode(PS2)))
    write_notebook(folder / os.fsdecode(b"caf\xe9") / PS2 / f"{PS2}.ipynb", source)
    result = grading(course, "grade", str(folder))
    assert result.returncode == 0, result.stdout + result.stderr
    grades = read_grades(course / "grades.csv")
    for student in ["[xy]", "com,ma", "o'neil", "n\u00e4me", "submitted", "autograded", "feedback", "source",
                    "_mathjax"]:  # n\u00e4me in Unicode's composed form
        assert grades[(student, PS2)] == FULL, result.stdout
    assert "REFUSED: the folder 'bad\\nname': it holds control or invisible characters" in result.stdout
    assert "REFUSED: the folder '=1+1': it starts with '='" in result.stdout
    assert "REFUSED: the folder 'quote\"d': it holds < > or \", which formgrader's pages would read" in result.stdout
    assert "REFUSED: the folder b'caf\\xe9': it holds bytes that are not UTF-8 text" in result.stdout
    assert "REFUSED: the folder 'Zoe': it is the same id as 'zoe' but for case or Unicode form" in result.stdout
    assert "REFUSED: the folder 'zoe': it is the same id as 'Zoe'" in result.stdout
    assert "REFUSED: the folder '\u00c5sa' ('\\xc5sa'): it is the same id as '\u212bsa' ('\\u212bsa')" in result.stdout
    assert not [s for s, _ in grades if s.lower() in ("zoe", "\u00e5sa")], "neither of a pair is graded"
    nbgrader(course, "export", "--to=nbgrader-export.csv")
    theirs = read_grades(course / "nbgrader-export.csv")  # every problem set, 0 where nothing was handed in
    assert {k: v for k, v in theirs.items() if k[1] == PS2} == {k: v for k, v in grades.items() if k[1] == PS2}
    import csv

    with (course / "grades.csv").open(encoding="utf-8", newline="") as f:
        order = [(row["student_id"], row["assignment"]) for row in csv.DictReader(f)]
    from qkv_exercises.problem_sets import order as ps_order

    assert order == sorted(order, key=lambda k: (k[0], ps_order(k[1]))), "rows by student, then problem set"


def test_a_killed_run_keeps_its_grades_and_the_next_run_finishes(released, tmp_path):
    course, _ = released
    folder = tmp_path / "submitted"
    for student, nb in broken_class(course).items():
        write_notebook(folder / f"k-{student}" / PS2 / f"{PS2}.ipynb", nb)
    from .grading_support import LAUNCH, PROBE_FOLDER  # the same command as grading()
    from qkv_grading.pipeline import nbgrader_env

    process = subprocess.Popen([sys.executable, "-c", LAUNCH, str(PROBE_FOLDER), "-", "--course", str(course), "grade",
                                str(folder), "--timeout", "30", "--workers", "1"], cwd=tmp_path, env=nbgrader_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    done = []
    for line in process.stdout:
        graded = re.search(r"\[ *\d+/\d+\] ps2_scaled_dot_product  (k-\w+): \d", line)  # [ 9/10] from 10 on
        if graded:
            done.append(graded.group(1))
            if len(done) == 2:
                process.send_signal(signal.SIGKILL)
                break
    process.wait()
    assert len(done) == 2, "the run did not grade two notebooks before it was killed"
    exported = grading(course, "export")
    assert exported.returncode == 0, exported.stderr
    kept = {s for (s, ps) in read_grades(course / "grades.csv") if s.startswith("k-")}
    assert kept >= set(done), (kept, done)
    time.sleep(0.5)
    result = grading(course, "grade", str(folder), "--timeout", "30")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sum("(from the journal)" in line for line in result.stdout.splitlines()) >= 2, result.stdout
    grades = {s[2:]: g for (s, ps), g in read_grades(course / "grades.csv").items() if s.startswith("k-")}
    assert grades == {s: g for s, g in EXPECTED.items() if s != "carol"}, result.stdout


@pytest.mark.parametrize("args, message", [
    (["grade", "no/such/folder"], "does not exist"),
    (["grade", ".", "--problem-set", "ps9_nothing"], "unknown problem set 'ps9_nothing'"),
    (["release", "ps9_nothing"], "unknown problem set 'ps9_nothing'"),
])
def test_bad_arguments_get_a_clear_error(tmp_path, args, message):
    course = copy_course(tmp_path)
    result = grading(course, *args)
    assert result.returncode == 1
    assert message in result.stderr


def test_without_bubblewrap_grading_says_how_to_install_it(tmp_path):
    course = copy_course(tmp_path)
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    result = subprocess.run([sys.executable, "-m", "qkv_grading", "--course", str(course), "grade", str(tmp_path)],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "sudo apt-get install bubblewrap" in result.stderr


def test_a_sandbox_that_fails_runs_again_and_one_that_fails_twice_is_not_graded_never_0(released, tmp_path,
                                                                                       monkeypatch):
    """A loaded machine must cost no student a grade: a sandbox that fails (here: it did not start in
    time) runs once more on its own, after the others, and is graded as its classmate is, with a
    note; one that fails again is not graded (no 0 in grades.csv), the run says so and exits with 1."""
    from qkv_grading import pipeline, run_record

    course, _ = released
    folder = tmp_path / "submitted"
    for student in ("lucky", "unlucky", "hopeless"):
        write_notebook(folder / student / PS2 / f"{PS2}.ipynb", with_first_cell(source_notebook(PS2), f"# {student}"))
    real, tries = pipeline._timed_run_job, []

    def loaded_machine(job, limits):
        student = next(c["run"][2:] for c in job["cells"] if c.get("run", "").startswith("# "))
        tries.append(student)
        if student == "hopeless" or (student == "unlucky" and tries.count(student) == 1):
            return run_record.failed("the sandbox did not start the runner within 60 s"), 0.0
        return real(job, limits)

    monkeypatch.setattr(pipeline, "_timed_run_job", loaded_machine)
    monkeypatch.setenv("PATH", pipeline.nbgrader_env()["PATH"])
    printed = []
    with pytest.raises(pipeline.GradingError, match="1 submission could not be run in a sandbox"):
        pipeline.grade(pipeline.Course(course), folder, timeout=30, workers=2, progress_bar=False,
                       out=printed.append)
    assert sorted(tries) == ["hopeless", "hopeless", "lucky", "unlucky", "unlucky"]
    grades = read_grades(course / "grades.csv")
    assert grades[("unlucky", PS2)] == grades[("lucky", PS2)] > 0, "\n".join(printed)
    assert ("hopeless", PS2) not in grades, "a submission that no sandbox ran has a grade"
    text = "\n".join(printed)
    assert "its sandbox failed (the sandbox did not start the runner within 60 s), so it was run again" in text
    assert "hopeless: NOT GRADED: not graded: the sandbox could not run it" in text
    assert re.search(r"^hopeless +ps2\S* +not graded$", text, re.M), text
