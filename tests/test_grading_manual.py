"""Manual grading with the course's config: formgrader and nbgrader's feedback, used as an instructor does.

A copy of the session's adversarial class (graded with ``python -m qkv_grading grade``) is served
by a real formgrader: a Jupyter server with nbgrader's extensions, on 127.0.0.1 with a token,
started in the course folder. In headless Chromium the instructor

- opens the grading page of every kind of submission: it opens, shows the student's answers
  as written (the hostile student's markup as text) and the instructor's math typeset;
- enters a score and a comment on a page: ``nbgrader export`` then shows the score, and
  ``nbgrader generate_feedback`` writes a page with both, which opens from the course folder;
- opens the lists of submissions and students.

On every page no script of a student's runs: no dialog, no request the page does not need (any
other is blocked and reported), no console message, none of the marks a student's script would
leave (:mod:`tests.hostile_markup`), no element or attribute through which one could run, and no
kernel or session started on the server. The grading page and the feedback page are opened once
more with the hostile hand-in in place of the autograded notebook, as plain nbgrader would have
left it, to try the templates' own defences without the grading process's.
"""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from playwright.sync_api import sync_playwright

from qkv_grading.pipeline import COURSE_ID

from .browser_support import CHROMIUM, launch_chromium
from .exercise_support import nbgrader, solution_lines, write_notebook
from .formgrader_support import INSPECT, SETTLED, Watch, api, formgrader, same_server, under_folders
from .grading_support import PROBE, PS2, read_grades, source_of
from .hostile_markup import MARKS, RUN, STUDENT, hostile_notebook

pytestmark = pytest.mark.slow

PAGE_TIMEOUT_MS = 60_000
# What the grading page asks of its server: formgrader's files, its API for this submission's
# grades and comments, and MathJax from the course folder.
GRADING_PAGE_NEEDS = ("/formgrader/static/", "/formgrader/api/grade", "/formgrader/api/comment",
                      "/files/feedback/_mathjax/")
NAMES = (f"<img src=x onerror=\"{RUN}\">", f"</a><script>{RUN}</script>")
COMMENT = "Good start. <b>Shown</b> as written: <script>alert('comment')</script>"


@pytest.fixture(scope="module")
def course(adversarial_class, tmp_path_factory):
    """A copy of the graded class, so that grading by hand changes nothing the other tests read, with the
    hostile student's names in the gradebook made of markup too (as a roster imported into nbgrader may be)."""
    copy = tmp_path_factory.mktemp("manual") / "course"
    shutil.copytree(adversarial_class["course"], copy, symlinks=True,
                    ignore=shutil.ignore_patterns("journal"))
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}", COURSE_ID) as gradebook:
        gradebook.update_or_create_student(STUDENT, last_name=NAMES[0], first_name=NAMES[1])
    return copy


@pytest.fixture(scope="module")
def server(course, tmp_path_factory):
    with formgrader(course, tmp_path_factory.mktemp("formgrader")) as (base, token):
        yield base, token


@pytest.fixture(scope="module")
def instructor(server):
    """A browser logged in to the server as the instructor (with the token, as Jupyter's printed link does)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser`")
    base, token = server
    with sync_playwright() as driver:
        chromium = launch_chromium(driver)
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        page = context.new_page()
        page.goto(f"{base}api/status?token={token}")
        page.close()
        yield context
        context.close()
        chromium.close()


def submissions(server, problem_set=PS2) -> dict[str, str]:
    """``{student: submission id}`` of one problem set, from formgrader's API."""
    status, body = api(*server, f"formgrader/api/submitted_notebooks/{problem_set}/{problem_set}")
    assert status == 200, f"formgrader's API answered {status}"
    return {entry["student"]: entry["id"] for entry in json.loads(body)}


def visit(context, url, allowed, server=None, act=None) -> dict:
    """Open ``url`` in a new page, wait for it (and MathJax), do ``act(page)``, and say what the page did."""
    page = context.new_page()
    watch = Watch(lambda asked: asked == url or allowed(asked))
    watch.attach(page)
    try:
        page.goto(url, wait_until="load")
        page.evaluate(SETTLED)
        acted = act(page) if act else None
        page.evaluate(SETTLED)
        seen = page.evaluate(INSPECT)
    finally:
        page.close()
    if server is not None:  # nothing started on the server behind the page's back
        for what in ("kernels", "sessions", "terminals"):
            assert api(*server, f"api/{what}") == (200, b"[]"), f"a {what[:-1]} was started"
    return {"watch": watch, "seen": seen, "acted": acted}


def assert_nothing_ran(visited: dict, title: str) -> None:
    watch, seen = visited["watch"], visited["seen"]
    assert watch.problems() == [], "\n".join(watch.problems())
    assert seen["title"] == title and not seen["pwned"] and not seen["marked"], (seen["title"], seen["pwned"])
    assert MARKS["console"] not in " ".join(watch.console)
    for kind in ("handlers", "scriptUrls", "live", "styled", "foreignLinks", "pictures"):
        assert seen[kind] == [], f"{kind}: {seen[kind][:5]}"


def grading_page(server, student, problem_set=PS2) -> str:
    base, _ = server
    return f"{base}formgrader/submissions/{submissions(server, problem_set)[student]}/"


def test_formgrader_opens_submissions_of_every_problem_set(server, course):
    """With the course's config formgrader's template is the course's: it opens the largest notebook
    of each problem set (of output, cells or text the others cannot beat) and the blank hand-in."""
    for problem_set in sorted(p.name for p in (course / "autograded" / "blank").iterdir()) + [PROBE]:
        ids = submissions(server, problem_set)
        notebooks = {s: course / "autograded" / s / problem_set / f"{problem_set}.ipynb" for s in ids}
        largest = max((s for s in ids if notebooks[s].is_file()), key=lambda s: notebooks[s].stat().st_size)
        for student in {largest, "blank"} & set(ids):
            status, body = api(*server, f"formgrader/submissions/{ids[student]}/")
            assert status == 200, f"formgrader cannot open {student}'s {problem_set}: HTTP {status}"
            assert b'class="panel panel-primary nbgrader_cell"' in body, f"{student}'s {problem_set} shows no graded cell"


def test_an_honest_submission_shows_its_answers_and_the_instructors_math(server, instructor):
    base, _ = server
    visited = visit(instructor, grading_page(server, "honest_a"), same_server(base, *GRADING_PAGE_NEEDS), server)
    assert_nothing_ran(visited, PS2)
    text = visited["seen"]["text"]
    answers = [line for line in solution_lines(source_of(PS2)) if line.strip()]
    missing = [line for line in answers if line.strip() not in text]
    assert not missing, f"answers not on the page: {missing[:3]}"
    assert visited["seen"]["mathjax"] and visited["seen"]["typeset"] > 5, "the instructor's math is not typeset"


def show_name(page) -> str:
    """Click the eye by the submission's number, as an instructor does to see whose it is."""
    page.click("span.glyphicon.name-hidden")
    return page.locator("a.name-shown").inner_text()


def test_a_hostile_submission_shows_its_markup_as_text_and_runs_none_of_it(server, instructor):
    base, _ = server
    visited = visit(instructor, grading_page(server, STUDENT), same_server(base, *GRADING_PAGE_NEEDS), server,
                    show_name)
    assert_nothing_ran(visited, PS2)
    text = visited["seen"]["text"]
    for written in (f"<script>{RUN}</script>", '<img src="x" onerror=', r"$\href{javascript:alert(1)}{x}$",
                    "![svg](attachment:evil.svg)"):
        assert written in text, f"{written!r} is not shown as the student wrote it"
    assert visited["acted"].strip() == f"{NAMES[0]}, {NAMES[1]}", f"the page names the student {visited['acted']!r}"


@pytest.fixture(scope="module")
def graded_by_hand(server, instructor, course):
    """On the hostile student's grading page, 1 point for scores_q1 and a comment; then export and feedback."""
    base, _ = server

    def grade(page):
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
            page.fill("#scores_q1", "1")
            page.locator("#scores_q1").blur()
        with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT") as noted:
            page.fill("#answer_scores_q1-comment", COMMENT)
            page.locator("#answer_scores_q1-comment").blur()
        return saved.value.status, noted.value.status

    visited = visit(instructor, grading_page(server, STUDENT), same_server(base, *GRADING_PAGE_NEEDS), server, grade)
    exported = nbgrader(course, "export", check=False)
    feedback = nbgrader(course, "generate_feedback", PS2, "--student", STUDENT, "--force", check=False)
    return {"visited": visited, "exported": exported, "feedback": feedback,
            "page": course / "feedback" / STUDENT / PS2 / f"{PS2}.html"}


def test_a_score_entered_on_the_grading_page_is_what_nbgrader_export_shows(graded_by_hand, course):
    assert graded_by_hand["visited"]["acted"] == (200, 200), "formgrader did not save the score and the comment"
    assert_nothing_ran(graded_by_hand["visited"], PS2)
    assert graded_by_hand["exported"].returncode == 0, graded_by_hand["exported"].stderr[-2000:]
    assert read_grades(course / "grades.csv")[(STUDENT, PS2)] == 1.0


def test_nbgrader_generate_feedback_shows_the_score_and_comment_and_runs_no_script(graded_by_hand, instructor, course):
    assert graded_by_hand["feedback"].returncode == 0, graded_by_hand["feedback"].stderr[-2000:]
    page = graded_by_hand["page"]
    visited = visit(instructor, page.as_uri(), under_folders(page.parent, course / "feedback" / "_mathjax"))
    assert_nothing_ran(visited, f"{PS2}: feedback")
    text = visited["seen"]["text"]
    assert "Score: 1.0 / 9.0" in text and "Good start. Shown as written: <script>alert('comment')</script>" in text
    assert f"<script>{RUN}</script>" in text, "the student's markup is not shown as text"
    assert visited["seen"]["mathjax"] and visited["seen"]["typeset"] > 5, "the instructor's math is not typeset"


@pytest.fixture(scope="module")
def plain(server, instructor, course, graded_by_hand):
    """The hostile hand-in in place of its autograded notebook (as plain nbgrader leaves it): both pages."""
    base, _ = server
    write_notebook(course / "autograded" / STUDENT / PS2 / f"{PS2}.ipynb", hostile_notebook(course))
    grading = visit(instructor, grading_page(server, STUDENT), same_server(base, *GRADING_PAGE_NEEDS), server)
    nbgrader(course, "generate_feedback", PS2, "--student", STUDENT, "--force")
    page = course / "feedback" / STUDENT / PS2 / f"{PS2}.html"
    feedback = visit(instructor, page.as_uri(), under_folders(page.parent, course / "feedback" / "_mathjax"))
    return {"grading": grading, "feedback": feedback}


@pytest.mark.parametrize("which", ["grading", "feedback"])
def test_the_pages_own_defences_hold_for_a_notebook_the_grader_did_not_write(plain, which):
    visited = plain[which]
    assert_nothing_ran(visited, PS2 if which == "grading" else f"{PS2}: feedback")
    text = visited["seen"]["text"]
    assert "My notes" in text and "<script>" in text, "the student's cells are not shown"
    assert "[JavaScript output not shown]" in text, "the JavaScript output is not named"
    assert visited["seen"]["typeset"] > 5


def test_the_lists_of_submissions_and_students_show_ids_as_text(server, instructor):
    base, _ = server
    quoted = urllib.parse.quote(STUDENT)
    def loaded(page):  # the lists are filled in from formgrader's API after the page has loaded
        page.wait_for_function("() => !document.body.innerText.includes('Loading, please wait')")

    for path in (f"formgrader/gradebook/{PS2}/{PS2}", "formgrader/manage_students", f"formgrader/manage_students/{quoted}"):
        visited = visit(instructor, base + path, same_server(base, "/formgrader/static/", "/formgrader/api/"), server,
                        loaded)
        watch, seen = visited["watch"], visited["seen"]
        assert watch.problems() == [], (path, watch.problems())
        students = [h for h in seen["handlers"] + seen["scriptUrls"] if "alert" in h or "pwned" in h.lower()]
        assert not seen["pwned"] and not students, (path, students)
        if "manage_students" in path:  # (the gradebook's list shows "Submission #n" until names are revealed)
            assert STUDENT in seen["text"], f"{path} does not show {STUDENT!r}"
            if path == "formgrader/manage_students":
                assert f"{NAMES[0]}, {NAMES[1]}" in seen["text"], f"{path} does not show the names as written"
