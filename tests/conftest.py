"""Shared fixtures: the repository root and one fresh build of the website per test session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """Build the whole book from scratch (warnings are errors) and return its ``_build/html``.

    The build goes to a temporary folder, so the tests never depend on, or disturb, the
    ``_build/`` of ``make site``. Set ``QKV_TEST_SITE`` to an existing ``html`` folder to
    reuse a build while working on the tests themselves.
    """
    reuse = os.environ.get("QKV_TEST_SITE")
    if reuse:
        html = Path(reuse)
        assert (html / "index.html").is_file(), f"QKV_TEST_SITE={reuse} holds no index.html"
        return html
    out = tmp_path_factory.mktemp("site") / "_build"
    # Built by `make site` itself, so the tests see what a reader gets (into an empty folder: every page).
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "site", f"BUILD_DIR={out}"],
                            capture_output=True, text=True)
    assert result.returncode == 0, f"the book build failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return out / "html"


from .adversarial_class import adversarial_class  # noqa: E402, F401 (the session's adversarial class)
from .cluster_support import grading_cluster  # noqa: E402, F401 (the session's TLS Dask cluster)
