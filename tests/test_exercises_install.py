"""A student installs only what a student needs, with the one line the Exercises page gives.

The built website serves a wheel of the course package. The test serves the site on
127.0.0.1, installs that wheel into a fresh virtual environment with the page's ``pip
install`` line (pip fetches the dependencies from the package index, through its cache),
then, in that environment only: imports what a problem set needs, finds nothing of the
book or test toolchain, runs a problem set downloaded from the site with nbclient (as
*Restart & Run All* does), and validates it with nbgrader, as JupyterLab's Validate button does.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import urllib.parse
import zipfile
from pathlib import Path

import pytest

from .browser_support import serve
from .exercise_support import cell_source, nbgrader_meta, source_notebook, with_answer, write_notebook

pytestmark = pytest.mark.slow

BOOK_AND_TEST_TOOLS = {"jupyter-book", "sphinx", "myst-nb", "myst-parser", "jupytext", "django-static-mathjax",
                       "pytest", "hypothesis", "playwright", "setuptools"}
PROBLEM_SET = "ps2_scaled_dot_product"


def install_line(built_site: Path) -> tuple[str, str]:
    """The page's install command as written in its HTML, and the wheel's address relative to the page."""
    page = (built_site / "book" / "exercises.html").read_text(encoding="utf-8")
    block = re.search(r'<div class="[^"]*student-install[^"]*" data-wheel="([^"]+)"><div class="highlight">'
                      r'<pre><span></span>([^<]+)</pre>', page)
    assert block, "the Exercises page has no install command"
    return html.unescape(block.group(2)), html.unescape(block.group(1))


@pytest.fixture(scope="module")
def student_env(built_site, tmp_path_factory) -> Path:
    """A fresh venv with the course package installed from the served site, as the page says."""
    command, wheel = install_line(built_site)
    venv = tmp_path_factory.mktemp("student") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    # The page's command as it is; only pip's writing of every module's bytecode is left out (about a
    # third of the install's time): Python writes it for what the tests import, as they import it.
    env["PIP_NO_COMPILE"] = "1"
    with serve(built_site) as base:
        url = urllib.parse.urljoin(f"{base}book/exercises.html", wheel)  # what the page's script shows
        assert command == f"pip install {wheel}"
        result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", url], env=env,
                                capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, f"pip install {url} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return venv


def run_in(venv: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["JUPYTER_DATA_DIR"] = str(venv / "share" / "jupyter-user")  # no kernels of this machine's user
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=venv)


def test_the_page_offers_the_wheel_the_site_serves(built_site):
    command, wheel = install_line(built_site)
    path = (built_site / "book" / wheel).resolve()
    assert path.parent == (built_site / "exercises").resolve() and path.is_file()
    with zipfile.ZipFile(path) as archive:
        packages = {name.split("/")[0] for name in archive.namelist()}
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert {"qkv", "qkv_book", "qkv_exercises"} <= packages
    requires = {re.split(r"[<>=!; \[]", line.split(":", 1)[1].strip())[0].lower()
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")}
    assert {"numpy", "matplotlib", "ipywidgets", "jupyterlab", "nbgrader"} <= requires
    assert not requires & BOOK_AND_TEST_TOOLS, requires & BOOK_AND_TEST_TOOLS
    script = (built_site / "_static" / "student-install.js").read_text(encoding="utf-8")
    assert "new URL(block.dataset.wheel, document.baseURI)" in script


def test_the_install_brings_what_a_student_needs_and_nothing_of_the_book(student_env):
    imported = run_in(student_env, str(student_env / "bin" / "python"), "-c",
                      "import qkv, qkv_book.plots, qkv_exercises.notebook, ipywidgets, matplotlib, nbgrader, "
                      "jupyterlab, numpy; print(qkv.__file__)")
    assert imported.returncode == 0, imported.stderr
    assert str(student_env) in imported.stdout, "qkv comes from the student's environment, not this repository"
    listed = run_in(student_env, str(student_env / "bin" / "python"), "-m", "pip", "list", "--format", "json")
    installed = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert not installed & (BOOK_AND_TEST_TOOLS - {"setuptools"}), installed & BOOK_AND_TEST_TOOLS


@pytest.fixture(scope="module")
def downloaded(built_site, tmp_path_factory) -> dict:
    """Problem set 2 as the site's zip holds it, and with a student's right answers typed in."""
    folder = tmp_path_factory.mktemp("download")
    with zipfile.ZipFile(built_site / "exercises" / f"{PROBLEM_SET}.zip") as archive:
        released = json.loads(archive.read(f"{PROBLEM_SET}/{PROBLEM_SET}.ipynb"))
    solved = released
    for cell in source_notebook(PROBLEM_SET)["cells"]:
        if nbgrader_meta(cell).get("solution"):
            answer = re.sub(r"^ *### (BEGIN|END) SOLUTION\n?", "", cell_source(cell), flags=re.M)
            solved = with_answer(solved, nbgrader_meta(cell)["grade_id"], answer)
    solved["cells"][1]["source"] = 'STUDENT_ID = "ab1234"\nPRACTICE = 1\nLANGUAGE = ""'
    paths = {}
    for name, nb in (("released", released), ("solved", solved)):
        paths[name] = folder / name / f"{PROBLEM_SET}.ipynb"
        write_notebook(paths[name], nb)
    return paths


RUN_ALL = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3").execute()
for cell in nb.cells:
    for output in cell.get("outputs", []):
        if output.output_type == "error" or output.get("name") == "stderr":
            print("FAILED CELL", cell.source[:80], output)
        elif output.output_type == "stream":
            print(output.text)
"""


def test_a_downloaded_problem_set_runs_in_that_environment(student_env, downloaded):
    tests = [c for c in source_notebook(PROBLEM_SET)["cells"] if nbgrader_meta(c).get("grade")]
    for name, expected_marks, whose in (("solved", "\u2713", "the numbers of student ab1234"),
                                        ("released", "\u2717", "these are practice numbers")):
        ran = run_in(student_env, str(student_env / "bin" / "python"), "-c", RUN_ALL, str(downloaded[name]))
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "FAILED CELL" not in ran.stdout, ran.stdout[-3000:]
        assert whose in ran.stdout and "Summary of Problem set 2" in ran.stdout
        assert ran.stdout.count(expected_marks) == 2 * len(tests), ran.stdout[-3000:]  # each check, then the summary


def test_validate_works_from_that_install(student_env, downloaded):
    validated = run_in(student_env, str(student_env / "bin" / "nbgrader"), "validate", str(downloaded["solved"]))
    assert "Success! Your notebook passes all the tests." in validated.stdout + validated.stderr, (
        validated.stdout[-3000:] + validated.stderr[-3000:])
    failed = run_in(student_env, str(student_env / "bin" / "nbgrader"), "validate", str(downloaded["released"]))
    assert "VALIDATION FAILED" in failed.stdout + failed.stderr
    extensions = run_in(student_env, str(student_env / "bin" / "jupyter"), "labextension", "list")
    assert "nbgrader" in extensions.stdout + extensions.stderr, "JupyterLab has nbgrader's extension (Validate)"
