"""How `make site` builds the book: in parallel, and without avoidable work in every chapter.

Speed itself is measured by ``bench/book_build.py``, never asserted here; these tests check the
conditions it depends on, each of which a change elsewhere could silently undo.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import editions  # noqa: E402  (Sphinx extensions of the book, in book/_ext)
import kernel_start  # noqa: E402
import myst_defaults  # noqa: E402
import parallel_build  # noqa: E402


def fake_app(**extensions):
    """An app whose extensions are (module version, declared parallel_read_safe) pairs."""
    return SimpleNamespace(extensions={
        name: SimpleNamespace(module=SimpleNamespace(__version__=version), parallel_read_safe=declared)
        for name, (version, declared) in extensions.items()})


def test_only_the_reviewed_versions_are_declared_safe():
    app = fake_app(sphinx_multitoc_numbering=("0.1.3", None), sphinx_jupyterbook_latex=("1.1.0", None))
    parallel_build.declare_reviewed_extensions(app, config=None)
    assert app.extensions["sphinx_multitoc_numbering"].parallel_read_safe is True
    assert app.extensions["sphinx_jupyterbook_latex"].parallel_read_safe is None, "1.1.0 was never read"


def test_an_extensions_own_declaration_is_kept():
    app = fake_app(sphinx_multitoc_numbering=("0.1.3", False), other_extension=("0.1.3", None))
    parallel_build.declare_reviewed_extensions(app, config=None)
    assert app.extensions["sphinx_multitoc_numbering"].parallel_read_safe is False
    assert app.extensions["other_extension"].parallel_read_safe is None


SPHINX_PARALLEL = """
import sys, tempfile
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace
with tempfile.TemporaryDirectory() as out, docutils_namespace():
    app = Sphinx(".", ".", out, out + "/.doctrees", "dummy", status=None, warning=sys.stderr, parallel=2)
    print(app.is_parallel_allowed("read"), app.is_parallel_allowed("write"))
"""


@pytest.mark.slow
def test_every_extension_of_the_book_allows_reading_and_writing_in_parallel():
    """With the book's own configuration (the conf.py that `make site` generates), Sphinx may use
    several processes: no extension is undeclared (that warning fails the build under -W)."""
    made = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "conf.py"], capture_output=True, text=True)
    assert made.returncode == 0, made.stdout + made.stderr
    env = dict(os.environ, PYTHONPATH=str(ROOT / "book" / "_ext"))
    result = subprocess.run([sys.executable, "-c", SPHINX_PARALLEL], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"], result.stderr
    assert "does not declare" not in result.stderr, result.stderr


def test_glue_in_a_chapter_compiles_no_iri_grammar():
    """A chapter's first ``glue`` imports nbformat and jsonschema; jsonschema must find rfc3987 and
    not build the Earley parsers of rfc3987-syntax (seconds of CPU in every chapter's kernel)."""
    code = ("import sys; from myst_nb import glue; glue('x', 1.5, display=False); "
            "print('rfc3987_syntax' in sys.modules, 'jsonschema' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    iri_grammar, jsonschema = result.stdout.split()
    assert jsonschema == "True", "glue no longer imports jsonschema: this test and rfc3987 in requirements.txt can go"
    assert iri_grammar == "False", "jsonschema loaded rfc3987_syntax: is rfc3987 installed?"


def test_a_documents_default_settings_are_docutils_own_and_its_own_objects():
    """myst-parser's make_document, made cheaper for the translated paragraphs: each document gets
    the values docutils' get_default_settings gives, in objects no other document shares."""
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser as RSTParser

    first, second = myst_defaults.make_document(), myst_defaults.make_document("page.md")
    expected = {name: repr(value) for name, value in vars(get_default_settings(RSTParser)).items()}
    assert {name: repr(value) for name, value in vars(first.settings).items()} == expected
    assert second["source"] == "page.md"
    first.settings.report_level = 5
    first.settings.record_dependencies.add("chapter.md")
    assert second.settings.report_level == 2 and second.settings.record_dependencies.list == []
    assert myst_defaults.make_document().settings.record_dependencies.list == []


def test_only_the_reviewed_myst_parser_gets_that_make_document(monkeypatch):
    from myst_parser.mdit_to_docutils import base

    own = base.make_document
    monkeypatch.setattr(myst_defaults.myst_parser, "__version__", "4.0.0")
    myst_defaults.setup(SimpleNamespace())
    assert base.make_document is own, "4.0.0 was never read"
    monkeypatch.setattr(myst_defaults.myst_parser, "__version__", myst_defaults.REVIEWED)
    monkeypatch.setattr(base, "make_document", own)  # put back after the test
    myst_defaults.setup(SimpleNamespace())
    assert base.make_document is myst_defaults.make_document


def _one_cell_client(tmp_path):
    """myst-nb's inline execution client of a notebook of one cell, ``print(6 * 7)``, as a chapter's."""
    import logging

    import nbformat
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.execute.inline import NotebookClientInline

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "chapter.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    return NotebookClientInline(notebook, tmp_path / "chapter.ipynb", NbParserConfig(), logging.getLogger("test"))


@pytest.fixture
def kernels(monkeypatch):
    """The kernel managers made (``made``); while ``next_port_taken`` is true, the next port jupyter_client
    chooses for a kernel is one another socket holds, as when another program takes it between
    jupyter_client's choice and the kernel's bind (then ``next_port_taken`` is false again)."""
    import socket

    from jupyter_client.connect import LocalPortCache
    from nbclient import NotebookClient

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    state = SimpleNamespace(made=[], next_port_taken=False)
    find_available_port, create = LocalPortCache.find_available_port, NotebookClient.create_kernel_manager

    def find_a_port(self, ip):
        if state.next_port_taken:
            state.next_port_taken = False
            return taken.getsockname()[1]
        return find_available_port(self, ip)

    def create_kernel_manager(self):
        state.made.append(create(self))
        return state.made[-1]

    monkeypatch.setattr(LocalPortCache, "find_available_port", find_a_port)
    monkeypatch.setattr(NotebookClient, "create_kernel_manager", create_kernel_manager)
    yield state
    taken.close()


def test_a_kernel_that_dies_as_it_starts_is_started_again_on_new_ports(tmp_path, monkeypatch, kernels):
    from myst_nb.core.execute.inline import NotebookClientInline

    original = getattr(NotebookClientInline.start_client, "__wrapped__", NotebookClientInline.start_client)
    monkeypatch.setattr(NotebookClientInline, "start_client", original)
    kernels.next_port_taken = True
    with pytest.raises(RuntimeError, match="Kernel died"):  # without the extension: the page fails
        with _one_cell_client(tmp_path):
            pass
    assert len(kernels.made) == 1
    monkeypatch.setattr(NotebookClientInline, "start_client", kernel_start.retrying(original))
    kernels.made.clear()
    kernels.next_port_taken = True
    with _one_cell_client(tmp_path) as client:
        _count, outputs = client.code_cell_outputs(0)
    assert len(kernels.made) == 2, "a second kernel manager chose new ports and started"
    assert [output.get("text") for output in outputs] == ["42\n"]


def test_a_start_that_fails_otherwise_or_every_time_is_not_tried_again():
    calls = []

    def fails_with(message):
        def start_client(self):
            calls.append(message)
            raise RuntimeError(message)
        return start_client

    client = SimpleNamespace(path="chapter.md")
    with pytest.raises(RuntimeError, match="No such kernel"):
        kernel_start.retrying(fails_with("No such kernel named python9"))(client)
    assert len(calls) == 1, "a failure other than a dead kernel is raised at once"
    calls.clear()
    with pytest.raises(RuntimeError, match="Kernel died"):
        kernel_start.retrying(fails_with("Kernel died before replying to kernel_info"))(client)
    assert len(calls) == kernel_start.ATTEMPTS


def test_only_the_reviewed_myst_nb_gets_that_start(monkeypatch):
    from myst_nb.core.execute.inline import NotebookClientInline

    own = getattr(NotebookClientInline.start_client, "__wrapped__", NotebookClientInline.start_client)
    monkeypatch.setattr(NotebookClientInline, "start_client", own)
    monkeypatch.setattr(kernel_start.myst_nb, "__version__", "1.5.0")
    kernel_start.setup(SimpleNamespace())
    assert NotebookClientInline.start_client is own, "1.5.0 was never read"
    monkeypatch.setattr(kernel_start.myst_nb, "__version__", kernel_start.REVIEWED)
    kernel_start.setup(SimpleNamespace())
    kernel_start.setup(SimpleNamespace())
    assert NotebookClientInline.start_client.__wrapped__ is own, "wrapped once, however often set up"


# Both editions side by side (`make site`'s full build): a translated page that measures waits for the
# English build to have read its twin.

def page_app(tmp_path, language, source):
    """A Sphinx app as the measurements hook sees it, reading ``book/chapter.md`` (``source``)."""
    (tmp_path / "book").mkdir(exist_ok=True)
    (tmp_path / "book" / "chapter.md").write_text(source, encoding="utf-8")
    build = tmp_path / "_build"
    env = SimpleNamespace(docname="book/chapter", doc2path=lambda docname: tmp_path / f"{docname}.md",
                          note_dependency=lambda path: None)
    return SimpleNamespace(builder=SimpleNamespace(name="html"), doctreedir=str(build / ".doctrees"),
                           config=SimpleNamespace(language=language), env=env)


MEASURING = "```{code-cell}\nt = measured_once('one step', run)\n```\n"


@pytest.fixture
def kernel_variables(monkeypatch):
    """The variables the hook sets for the kernels, put back as they were after the test (the hook
    sets them in os.environ, where a later kernel of this process would inherit them)."""
    for variable in (editions.MEASUREMENTS_MODE_VARIABLE, editions.MEASUREMENTS_FILE_VARIABLE,
                     editions.ENGLISH_BUILD_VARIABLE):
        monkeypatch.setenv(variable, "")
    return monkeypatch


def test_the_english_build_marks_a_page_that_measures_once_it_is_read(tmp_path, kernel_variables):
    app = page_app(tmp_path, "en", MEASURING)
    older = tmp_path / "_build" / "measurements" / "book" / "chapter-0123456789abcdef.json"
    older.parent.mkdir(parents=True)
    older.write_text("{}")
    Path(f"{older}{editions.READ_MARK}").touch()
    editions.tell_the_kernel_where_its_measurements_are(app, "book/chapter", None)
    assert list(older.parent.iterdir()) == [], "the older measurements and their mark are removed"
    path = Path(os.environ[editions.MEASUREMENTS_FILE_VARIABLE])
    assert os.environ[editions.MEASUREMENTS_MODE_VARIABLE] == "record"
    editions.mark_the_page_read(app, None)
    assert Path(f"{path}{editions.READ_MARK}").is_file()

    plain = page_app(tmp_path, "en", "No measurement here.\n")
    editions.tell_the_kernel_where_its_measurements_are(plain, "book/chapter", None)
    editions.mark_the_page_read(plain, None)
    assert [p.name for p in older.parent.glob(f"*{editions.READ_MARK}")] == [], "no mark for a page that measures nothing"


def test_a_translated_page_that_measures_waits_until_the_english_build_has_read_it(tmp_path, kernel_variables):
    english = subprocess.Popen(["sleep", "60"])  # the English build, still running
    try:
        kernel_variables.setenv(editions.ENGLISH_BUILD_VARIABLE, str(english.pid))
        app = page_app(tmp_path, "zh_TW", MEASURING)
        path = editions.measurements_file(tmp_path / "_build", "book/chapter", MEASURING.encode())
        path.parent.mkdir(parents=True)
        threading.Timer(1.0, lambda: Path(f"{path}{editions.READ_MARK}").touch()).start()
        started = time.monotonic()
        editions.tell_the_kernel_where_its_measurements_are(app, "book/chapter", None)
        assert time.monotonic() - started >= 0.9, "the page did not wait for its English twin"
        assert english.poll() is None and os.environ[editions.MEASUREMENTS_MODE_VARIABLE] == "replay"

        plain = page_app(tmp_path, "zh_TW", "No measurement here.\n")
        started = time.monotonic()
        editions.tell_the_kernel_where_its_measurements_are(plain, "book/chapter", None)
        assert time.monotonic() - started < 0.5, "a page that measures nothing waited"
    finally:
        english.kill()
        english.wait()


def test_the_wait_ends_when_the_english_build_ends_without_reading_the_page(tmp_path):
    english = subprocess.Popen(["sleep", "0.5"])  # ends, and is not waited for (a zombie) until the end
    started = time.monotonic()
    editions.wait_for_the_english_page(tmp_path / "chapter-0123456789abcdef.json", english.pid, poll=0.05)
    assert 0.4 <= time.monotonic() - started < 10
    assert not editions.process_is_running(english.pid)
    english.wait()
    assert not editions.process_is_running(english.pid)
