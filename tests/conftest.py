"""Shared fixtures: the repository root, one fresh build of the website and one release of the
course per test run.

``make test`` runs the tests in one process per core (pytest-xdist, ``--dist loadgroup``): the
book is built once for all of them, and the tests that share any other fixture wider than a
function run in one process (``tests/workers.py``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .workers import GroupScheduling, across_workers, once_per_run, write_groups

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
@across_workers
def built_site(tmp_path_factory) -> Path:
    """Build the whole book from scratch (warnings are errors) and return its ``_build/html``.

    The build goes to a temporary folder, so the tests never depend on, or disturb, the
    ``_build/`` of ``make site``; it is made once for all the run's workers. Set
    ``QKV_TEST_SITE`` to an existing ``html`` folder to reuse a build while working on the tests
    themselves.
    """
    reuse = os.environ.get("QKV_TEST_SITE")
    if reuse:
        html = Path(reuse)
        assert (html / "index.html").is_file(), f"QKV_TEST_SITE={reuse} holds no index.html"
        return html

    def build(folder: Path) -> None:
        # Built by `make site` itself, so the tests see what a reader gets (into an empty folder: every page).
        result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "site",
                                 f"BUILD_DIR={folder / '_build'}"], capture_output=True, text=True)
        assert result.returncode == 0, f"the book build failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"

    return once_per_run(tmp_path_factory, "site", build) / "_build" / "html"


@pytest.fixture(scope="session")
@across_workers
def released_course(tmp_path_factory) -> Path:
    """A fresh copy of the course with every problem set released by ``nbgrader generate_assignment``
    (its ``release/<ps>/<ps>.ipynb``), made once for all the run's workers. The tests only read it."""
    from .exercise_support import copy_course, nbgrader

    def release(folder: Path) -> None:
        nbgrader(copy_course(folder), "generate_assignment", "*", "--force")

    return once_per_run(tmp_path_factory, "released-course", release) / "course"


def pytest_configure(config):
    """The variants' givens are drawn once for all the run's workers (``notebook_support.givens_of``)."""
    from .notebook_support import share_givens_through

    share_givens_through(config)


def pytest_collection_modifyitems(config, items):
    """In each worker of ``make test``: group the tests that share a fixture's instance."""
    if hasattr(config, "workerinput"):
        write_groups(config._tmp_path_factory, items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` sends each group of tests that share a fixture to one worker."""
    if config.getvalue("dist") == "loadgroup":
        return GroupScheduling(config, log)
    return None


from .adversarial_class import adversarial_class  # noqa: E402, F401 (the session's adversarial class)
from .cluster_support import grading_cluster, shared_cluster, stop_unless_needed  # noqa: E402, F401 (the TLS Dask cluster)


def pytest_runtest_teardown(item, nextitem):
    """Stop the session's TLS cluster when the next test does not need it (it is started again for one that does)."""
    stop_unless_needed(nextitem)
