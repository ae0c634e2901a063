"""Sphinx extension: the released problem sets, and the course package students install, as downloads.

The directive ``problem-set-downloads`` (used in ``book/exercises.md``) renders a table
with one row per problem set of the nbgrader course in ``exercises/``, in the order of the
chapters that practise them (``chapter_order.py``): its title, its points and a link to
``<problem set>.zip``. The zips hold the student versions that
``nbgrader generate_assignment`` makes. They are made in a temporary copy of the course
(so the course folder is never written to and parallel builds never collide), in a
background process while the chapters are read, and written into the HTML output as
``exercises/<problem set>.zip`` when the build finishes.

The directive ``student-install`` renders the one command that installs what a student
needs: ``pip install`` of a wheel of the course package (``qkv``, ``qkv_book``,
``qkv_exercises``; its dependencies are JupyterLab, numpy, matplotlib, ipywidgets and
nbgrader), built in the same background process with setuptools (no download) and
written next to the zips. The page shows the wheel's address relative to itself;
``_static/student-install.js`` turns it into the absolute URL in the reader's browser.

A manifest in ``exercises/`` records a hash of the course's sources and of the package's,
so a rebuild with unchanged exercises and package reuses the zips and the wheel.

A translated edition of the site (:mod:`editions`, ``_build/html/zh-TW/``) releases the problem
sets in its own language, into its own ``exercises/`` (:func:`qkv_grading.pipeline.release_zips`:
the markdown translated from ``exercises/locales/<language>/LC_MESSAGES/<problem set>.po``, the
code cells and nbgrader metadata as in English, so one gradebook grades both), and its table
shows their translated titles. It builds no wheel: its install line offers the English site's,
the same package, whose checks speak the language each notebook says. A problem set's catalogue
translates every block of its markdown; a block without a translation (or with a stale, fuzzy one)
is released in English and named in the build's log, and ``tests/test_translations.py`` fails on it
unless ``exercises/<problem set>`` is listed in ``locales/<language>/pending.txt``. (Unlike a page's,
it does not fail the build: a change of a problem set's hints must not stop the website.)
A problem set without a catalogue yet (one just added) counts as pending: it is released with its
English markdown, and its checks speak the edition's language all the same.
"""

from __future__ import annotations

import hashlib
import html
import json
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from chapter_order import learn_chapters, practised_problem_sets
from editions import KERNEL_TAGS, _, edition, english_site_path, is_translated
from qkv_grading import translation
from qkv_grading.pipeline import Course, problem_set_points, problem_set_title, release_zips
from sphinx.util import logging

logger = logging.getLogger(__name__)

OUTPUT_FOLDER = "exercises"  # under the HTML output: exercises/<problem set>.zip
MANIFEST = "manifest.json"


def course_root(app) -> Path:
    return Path(app.srcdir) / app.config.problem_sets_course


def problem_set_folders(app) -> list[Path]:
    course = Course(course_root(app))
    return [course.root / "source" / name for name in course.problem_sets()]


PACKAGE_FILES = ("pyproject.toml", "README.md")  # with src/: what the wheel is built from


def package_root(app) -> Path:
    return Path(app.srcdir)


def download_link(app, docname: str, name: str, *, own_edition: bool = True) -> str:
    """The address of ``exercises/<name>`` relative to the page ``docname`` of this edition: in this
    edition's own ``exercises/`` (a problem set's zip), or with ``own_edition=False`` in the English
    site's (the wheel, which every edition shares)."""
    here = posixpath.dirname(english_site_path(app.config.language, docname))
    folder = posixpath.join(edition(app.config.language)[1] if own_edition else "", OUTPUT_FOLDER)
    return posixpath.relpath(f"{folder}/{name}", here or ".")


def kernel_language(app) -> str:
    """The course's tag of this edition's language: ``"en"``, ``"zh-TW"``."""
    return KERNEL_TAGS[edition(app.config.language)[0]]


def wheel_name(root: Path) -> str:
    """The file name of the course package's wheel, from ``pyproject.toml``: ``qkv-0.1.0-py3-none-any.whl``."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    return f"{name}-{project['version']}-py3-none-any.whl"


def package_sources(root: Path) -> list[Path]:
    """What the wheel is made of: the project files, and every module and catalogue under ``src/``."""
    return [root / name for name in PACKAGE_FILES] + sorted(
        path for pattern in ("*.py", "*.po") for path in (root / "src").rglob(pattern))


def sources_hash(app) -> str:
    """A hash of everything the downloads depend on: the source notebooks and their catalogues, the
    nbgrader config, the package, and the edition's language."""
    course, package = course_root(app), package_root(app)
    digest = hashlib.sha256(kernel_language(app).encode())
    course_files = [course / "nbgrader_config.py", *(course / "source").rglob("*"),
                    *(course / "locales").rglob("*.po")]
    for base, paths in ((course, course_files), (package, package_sources(package))):
        for path in sorted(paths):
            if path.is_file() and ".ipynb_checkpoints" not in path.parts:
                digest.update(str(path.relative_to(base)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def build_wheel(root: Path, out_dir: Path) -> Path:
    """Build the course package's wheel from a copy of ``pyproject.toml``, ``README.md`` and ``src/``.

    setuptools' own build backend runs in this environment (no isolated build, no
    download); the copy keeps build folders out of the repository.
    """
    with tempfile.TemporaryDirectory(prefix="qkv-wheel-") as scratch:
        copy = Path(scratch) / "package"
        copy.mkdir()
        for name in PACKAGE_FILES:
            shutil.copy2(root / name, copy / name)
        shutil.copytree(root / "src", copy / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
        out_dir.mkdir(parents=True, exist_ok=True)
        built = subprocess.run(
            [sys.executable, "-c", "import sys, setuptools.build_meta as backend; "
                                   "print(backend.build_wheel(sys.argv[1]))", str(out_dir.resolve())],
            cwd=copy, capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"building the course package's wheel failed:\n{built.stderr[-3000:]}")
    wheel = out_dir / built.stdout.strip().splitlines()[-1]
    if wheel.name != wheel_name(root):
        raise RuntimeError(f"the wheel is named {wheel.name}, expected {wheel_name(root)}")
    return wheel


class ProblemSetDownloads(SphinxDirective):
    """A table of the problem sets: title, points and the link to each released zip."""

    has_content = False

    def run(self):
        folders = self._in_chapter_order(problem_set_folders(self.env.app))
        table = nodes.table(classes=["problem-sets"])
        group = nodes.tgroup(cols=3)
        table += group
        for width in (50, 15, 35):  # the zip names of two-digit problem sets need the room
            group += nodes.colspec(colwidth=width)
        headings = (_("Problem set"), _("Points"), _("Download"))
        group += nodes.thead("", self._row(*([nodes.Text(str(h))] for h in headings)))
        body = nodes.tbody()
        for folder in folders:
            for notebook in sorted(folder.glob("*.ipynb")):
                self.env.note_dependency(str(notebook))
            catalogue = translation.catalogue_path(course_root(self.env.app), folder.name, kernel_language(self.env.app))
            if is_translated(self.env.app.config.language) and catalogue.is_file():
                self.env.note_dependency(str(catalogue))
            link = nodes.reference("", f"{folder.name}.zip", internal=False,
                                   refuri=download_link(self.env.app, self.env.docname, f"{folder.name}.zip"))
            title = problem_set_title(folder, kernel_language(self.env.app))
            body += self._row(_with_math(title), [nodes.Text(f"{problem_set_points(folder):g}")],
                              [nodes.literal("", "", link)])
        group += body
        return [table]

    def _in_chapter_order(self, folders: list[Path]) -> list[Path]:
        """The problem sets in the order of the chapters that practise them (the sidebar's)."""
        if not folders:
            raise self.error(f"no problem sets found in {course_root(self.env.app) / 'source'}")
        try:
            practised = practised_problem_sets(self.env)
        except ValueError as error:
            raise self.error(f"the chapters' problem sets: {error}") from None
        for chapter in learn_chapters(self.env):
            self.env.note_dependency(self.env.doc2path(chapter))
        by_name = {folder.name: folder for folder in folders}
        unpractised = [name for name in by_name if name not in practised]
        unknown = [f"{chapter} names {name}" for name, chapter in practised.items() if name not in by_name]
        if unpractised or unknown:
            raise self.error("every problem set belongs to the chapters whose **Practise:** paragraph names it: "
                             + "; ".join([*(f"no chapter names {name}" for name in unpractised),
                                          *(f"{problem}, which exercises/source does not have" for problem in unknown)]))
        return [by_name[name] for name in practised]

    @staticmethod
    def _row(*cells):
        row = nodes.row()
        for content in cells:
            entry = nodes.entry()
            entry += nodes.paragraph("", "", *content, translatable=False)  # already in the edition's language
            row += entry
        return row


class StudentInstall(SphinxDirective):
    """The command that installs the course package from this website, with a link to the wheel."""

    has_content = False

    def run(self):
        wheel = download_link(self.env.app, self.env.docname, wheel_name(package_root(self.env.app)),
                              own_edition=False)
        for path in package_sources(package_root(self.env.app)):
            self.env.note_dependency(str(path))
        command = f"pip install {html.escape(wheel)}"
        block = (f'<div class="highlight-text notranslate student-install" data-wheel="{html.escape(wheel)}">'
                 f'<div class="highlight"><pre><span></span>{command}</pre></div></div>')
        link = nodes.paragraph("", str(_("The course package: ")), nodes.reference(
            "", posixpath.basename(wheel), internal=False, refuri=wheel), translatable=False)
        return [nodes.raw("", block, format="html"), link]


def add_install_script(app, pagename, templatename, context, doctree):
    """Load ``_static/student-install.js`` on the pages that show the install command."""
    if doctree is not None and any("student-install" in node.astext() for node in doctree.findall(nodes.raw)):
        app.add_js_file("student-install.js")


def _with_math(text: str) -> list[nodes.Node]:
    """``text`` as nodes, with each ``$...$`` part as inline math (a title such as "why divide by $\\sqrt{d_k}$")."""
    parts = text.split("$")
    return [nodes.math(part, part) if i % 2 else nodes.Text(part) for i, part in enumerate(parts) if part]


def report_untranslated(app) -> None:
    """Warn about each block of a problem set's markdown that this edition's catalogue does not translate
    (or only with a fuzzy translation), unless the problem set is pending (see the module docstring)."""
    from translation_check import catalogue_entries, is_pending, translation_problem

    course = course_root(app)
    for folder in problem_set_folders(app):
        name = folder.name
        if is_pending(app, f"{OUTPUT_FOLDER}/{name}"):
            continue
        po_path = translation.catalogue_path(course, name, kernel_language(app))
        if not po_path.is_file():  # a problem set just added: released with its English markdown until then
            logger.info("%s has no catalogue yet (%s): `make translations` makes it", name,
                        po_path.relative_to(app.srcdir))
            continue
        entries = catalogue_entries(po_path)
        for notebook in sorted(folder.glob("*.ipynb")):
            for message in translation.markdown_messages(json.loads(notebook.read_text(encoding="utf-8"))):
                problem = translation_problem(message, entries)
                if problem is not None:
                    logger.info("%s: %s in %s for %r (released in English)", name, problem,
                                po_path.relative_to(app.srcdir), message[:120])


def start_release(app):
    """Begin releasing the problem sets in the background, unless the output already has them."""
    app.problem_set_release = None
    if app.builder.format != "html":
        return
    if is_translated(app.config.language):
        report_untranslated(app)
    target = Path(app.outdir) / OUTPUT_FOLDER
    wanted = sources_hash(app)
    manifest = target / MANIFEST
    if manifest.is_file():
        saved = json.loads(manifest.read_text(encoding="utf-8"))
        made = saved.get("zips", []) + [name for name in [saved.get("wheel", "")] if name]
        if saved.get("hash") == wanted and all((target / name).is_file() for name in made):
            return
    staging = Path(tempfile.mkdtemp(prefix="qkv-problem-sets-"))
    # A process of its own, not a thread: nbgrader changes the working directory while it releases,
    # and Sphinx's reading processes are forked from this one (they would start in the temporary
    # copy of the course, which is gone by the time they look up their dependencies).
    # Its output goes to files: a full pipe would stop it until the build finishes.
    with open(staging / "paths.json", "w") as out, open(staging / "release.log", "w") as log:
        process = subprocess.Popen([sys.executable, __file__, str(course_root(app)), str(package_root(app)),
                                    str(staging / "made"), kernel_language(app)], stdout=out, stderr=log)
    app.problem_set_release = (process, staging, wanted)  # on the app: the environment gets pickled


def finish_release(app, exception):
    """Wait for the release and put the zips (and their manifest) into the HTML output."""
    pending = getattr(app, "problem_set_release", None)
    if pending is None:
        return
    process, staging, wanted = pending
    app.problem_set_release = None
    process.wait()
    try:
        if exception is not None:
            return
        if process.returncode != 0:
            log = (staging / "release.log").read_text(encoding="utf-8", errors="replace")
            raise ExtensionError(f"releasing the problem sets failed:\n{log[-3000:]}")
        made = json.loads((staging / "paths.json").read_text(encoding="utf-8").strip().splitlines()[-1])
        zips, wheel = [Path(path) for path in made["zips"]], made["wheel"] and Path(made["wheel"])
        target = Path(app.outdir) / OUTPUT_FOLDER
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in [*zips, *([wheel] if wheel else [])]:
            shutil.copy2(path, target / path.name)
        manifest = {"hash": wanted, "zips": [p.name for p in zips], "wheel": wheel.name if wheel else ""}
        (target / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def release_downloads(course: Path, package: Path, staging: Path, language: str) -> dict:
    """Release the problem sets in ``language`` into zips, and in English build the wheel too, under
    ``staging``; their paths."""
    zips = release_zips(course, staging / "zips", language)
    wheel = build_wheel(package, staging / "wheel") if language == "en" else ""
    return {"zips": [str(path) for path in zips], "wheel": str(wheel)}


def setup(app):
    app.add_config_value("problem_sets_course", "exercises", "env")
    app.add_directive("problem-set-downloads", ProblemSetDownloads)
    app.add_directive("student-install", StudentInstall)
    app.connect("html-page-context", add_install_script)
    app.connect("builder-inited", start_release)
    app.connect("build-finished", finish_release)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # the release process that start_release begins: course, package, staging, language
    print(json.dumps(release_downloads(*(Path(arg) for arg in sys.argv[1:4]), sys.argv[4])), flush=True)
