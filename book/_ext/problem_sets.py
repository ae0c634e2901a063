"""Sphinx extension: the released problem sets as downloads on the Exercises page.

The directive ``problem-set-downloads`` (used in ``book/exercises.md``) renders a table
with one row per problem set of the nbgrader course in ``exercises/``: its title, its
points and a link to ``<problem set>.zip``. The zips hold the student versions that
``nbgrader generate_assignment`` makes. They are made in a temporary copy of the course
(so the course folder is never written to and parallel builds never collide), in a
background thread while the chapters are read, and written into the HTML output as
``exercises/<problem set>.zip`` when the build finishes. A manifest in that folder
records a hash of the course's sources, so a rebuild with unchanged exercises reuses
the zips.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
import tempfile
import threading
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from qkv_grading.pipeline import Course, problem_set_points, problem_set_title, release_zips

OUTPUT_FOLDER = "exercises"  # under the HTML output: exercises/<problem set>.zip
MANIFEST = "manifest.json"


def course_root(app) -> Path:
    return Path(app.srcdir) / app.config.problem_sets_course


def problem_set_folders(app) -> list[Path]:
    course = Course(course_root(app))
    return [course.root / "source" / name for name in course.problem_sets()]


def sources_hash(app) -> str:
    """A hash of everything the release depends on: the source notebooks and the nbgrader config."""
    root = course_root(app)
    digest = hashlib.sha256()
    for path in sorted([root / "nbgrader_config.py", *(root / "source").rglob("*")]):
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


class ProblemSetDownloads(SphinxDirective):
    """A table of the problem sets: title, points and the link to each released zip."""

    has_content = False

    def run(self):
        folders = problem_set_folders(self.env.app)
        if not folders:
            raise self.error(f"no problem sets found in {course_root(self.env.app) / 'source'}")
        here = posixpath.dirname(self.env.docname)
        table = nodes.table(classes=["problem-sets"])
        group = nodes.tgroup(cols=3)
        table += group
        for width in (60, 15, 25):
            group += nodes.colspec(colwidth=width)
        group += nodes.thead("", self._row(*([nodes.Text(h)] for h in ("Problem set", "Points", "Download"))))
        body = nodes.tbody()
        for folder in folders:
            for notebook in sorted(folder.glob("*.ipynb")):
                self.env.note_dependency(str(notebook))
            link = nodes.reference("", f"{folder.name}.zip", internal=False,
                                   refuri=posixpath.relpath(f"{OUTPUT_FOLDER}/{folder.name}.zip", here or "."))
            body += self._row(_with_math(problem_set_title(folder)), [nodes.Text(f"{problem_set_points(folder):g}")],
                              [nodes.literal("", "", link)])
        group += body
        return [table]

    @staticmethod
    def _row(*cells):
        row = nodes.row()
        for content in cells:
            entry = nodes.entry()
            entry += nodes.paragraph("", "", *content)
            row += entry
        return row


def _with_math(text: str) -> list[nodes.Node]:
    """``text`` as nodes, with each ``$...$`` part as inline math (a title such as "why divide by $\\sqrt{d_k}$")."""
    parts = text.split("$")
    return [nodes.math(part, part) if i % 2 else nodes.Text(part) for i, part in enumerate(parts) if part]


def start_release(app):
    """Begin releasing the problem sets in the background, unless the output already has them."""
    app.problem_set_release = None
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / OUTPUT_FOLDER
    wanted = sources_hash(app)
    manifest = target / MANIFEST
    if manifest.is_file():
        saved = json.loads(manifest.read_text(encoding="utf-8"))
        if saved.get("hash") == wanted and all((target / name).is_file() for name in saved.get("zips", [])):
            return
    state = {"hash": wanted, "error": None, "zips": []}
    staging = Path(tempfile.mkdtemp(prefix="qkv-problem-sets-"))

    def work():
        try:
            state["zips"] = release_zips(course_root(app), staging)
        except Exception as err:  # reported when the build finishes
            state["error"] = err

    thread = threading.Thread(target=work, name="release problem sets", daemon=True)
    thread.start()
    app.problem_set_release = (thread, staging, state)  # on the app: the environment gets pickled


def finish_release(app, exception):
    """Wait for the release and put the zips (and their manifest) into the HTML output."""
    pending = getattr(app, "problem_set_release", None)
    if pending is None:
        return
    thread, staging, state = pending
    app.problem_set_release = None
    thread.join()
    try:
        if exception is not None:
            return
        if state["error"] is not None:
            raise ExtensionError(f"releasing the problem sets failed: {state['error']}") from state["error"]
        target = Path(app.outdir) / OUTPUT_FOLDER
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in state["zips"]:
            shutil.copy2(path, target / path.name)
        manifest = {"hash": state["hash"], "zips": [p.name for p in state["zips"]]}
        (target / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def setup(app):
    app.add_config_value("problem_sets_course", "exercises", "env")
    app.add_directive("problem-set-downloads", ProblemSetDownloads)
    app.connect("builder-inited", start_release)
    app.connect("build-finished", finish_release)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
