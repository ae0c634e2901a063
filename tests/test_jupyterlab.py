"""The chapters opened as notebooks in JupyterLab, from the course environment, in headless Chromium.

A student who opens a chapter in JupyterLab (``.venv/bin/jupyter lab``) and runs it must see what
the website shows: the MyST prose rendered (by jupyterlab-myst), the numbers in the prose filled
in by ``{eval}``, and the code of ``qkv`` shown by ``show_source``. This test starts JupyterLab on
127.0.0.1 with a random token, a settings folder of its own (chapters open as Jupytext notebooks;
no news, no update check, no autosave) and a copy of ``book/``, loads the lab once in one browser
page, opens there every notebook chapter of the table of contents in turn (as a student opens one
file after another, each with its own kernel), runs all its cells, and reads what JupyterLab drew:

- no raw ``{eval}``/``{glue}`` role, no expression left unevaluated, no error in the prose;
- the numbers in the prose are, one by one, the numbers the built website shows for that chapter;
- every ``show_source(...)`` cell shows that function's code;
- no cell ends in an error.

One problem set of the 繁體中文 edition is opened the same way, as its download from the built site,
and run as a student first runs it: its checks, banner and summary speak Chinese.

Nothing is fetched from outside 127.0.0.1: every other request is blocked and reported.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple

import pytest

from .browser_support import Recorder, chromium_for_a_module, jupyter, new_page
from .test_chapter_sources import notebook_chapters
from .test_exercises_messages_zh_tw import english_runs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters()
LAB_SETTINGS = {
    # open MyST markdown chapters as notebooks (jupytext), as the course's README says to
    # (and never save them: the lab serves a copy, but nothing needs writing)
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {
        "defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}, "autosave": False},
    # draw every cell, so that the whole notebook can be read from the page
    # and start each chapter's kernel without asking which one
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none", "autoStartDefaultKernel": True},
    # nothing fetched from the internet
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}
RUN_TIMEOUT_S = 180
# Names of the chapters' measurements (a time, or a peak of memory seen by tracemalloc, taken afresh in
# each run) and what is computed from them: the lab's run gives other values than the website's build.
MEASURED = {"attention_cost": {"slope", "matrices_held", "n_gpu_full_attention", "full_peak",
                               "blockwise_peak"}}


class Lab(NamedTuple):
    base: str  # http://127.0.0.1:<port>/
    token: str
    folder: Path  # what the lab serves: a copy of book/, and what a test puts beside it


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a copy of the chapters on 127.0.0.1 (:class:`Lab`)."""
    home = tmp_path_factory.mktemp("lab")
    for name, values in LAB_SETTINGS.items():
        target = home / "settings" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values), encoding="utf-8")
    # A copy of the chapters: opening a notebook may rewrite its header, and the repository stays as it is.
    served = home / "course"
    shutil.copytree(ROOT / "book", served / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    # window.jupyterapp: the page opens and closes documents with the lab's own commands
    with jupyter("lab", served, home, "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True") as (base, token):
        yield Lab(base, token, served)


@pytest.fixture(scope="module")
def browser():
    yield from chromium_for_a_module()


class LabPage:
    """One browser page with JupyterLab loaded, in which the module's notebooks are opened one after another.

    Loading the lab's application costs seconds of the browser's time; a notebook opened in an already
    loaded lab starts its own kernel all the same. After a notebook that went wrong, the lab is loaded
    afresh (:meth:`ready`), so that one chapter's failure is not the next one's."""

    def __init__(self, browser, lab: Lab):
        self.lab = lab
        self.recorder = Recorder(lab.base)
        self.context, self.page = new_page(browser, self.recorder)  # 1280 px wide, 60 s for each step
        self.loaded = False
        self.reported = 0  # how many of recorder.outside a notebook's run has returned

    def ready(self):
        """The page, with the lab loaded (?reset: a fresh workspace, no document open)."""
        if not self.loaded:
            self.page.goto(f"{self.lab.base}lab?reset&token={self.lab.token}")
            self.page.wait_for_function("() => window.jupyterapp !== undefined", timeout=90_000)
            self.page.evaluate("() => window.jupyterapp.restored.then(() => true)")
            self.loaded = True
        return self.page


@pytest.fixture(scope="module")
def lab_page(browser, lab):
    page = LabPage(browser, lab)
    yield page
    page.context.close()


# Every cell drawn once the notebook has run: markdown cells (their rendered text, their inline
# expressions), code cells (their prompt, the errors they ended in, the code blocks they show). The lab
# draws an error as it draws any text sent to stderr (a warning), so a code cell's errors are read from
# the notebook's model: its outputs of type "error".
READ_NOTEBOOK = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const models = new Map((panel && panel.content && panel.content.widgets ? panel.content.widgets : [])
    .map((widget) => [widget.node, widget.model]));
  const errorsOf = (cell) => {
    const model = models.get(cell);
    if (!model || !model.outputs) return ['the notebook model of this cell was not found'];
    return model.outputs.toJSON().filter((output) => output.output_type === 'error')
      .map((output) => `${output.ename}: ${output.evalue}`.slice(0, 300));
  };
  const cells = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')];
  return cells.map((cell) => {
    if (cell.classList.contains('jp-MarkdownCell')) {
      const rendered = cell.querySelector('.myst') || cell.querySelector('.jp-RenderedMarkdown') || cell;
      return {type: 'markdown', text: rendered.innerText,
              errors: [...rendered.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]')]
                        .map((e) => e.innerText)};
    }
    const prompt = cell.querySelector('.jp-InputPrompt');
    return {type: 'code', prompt: prompt ? prompt.innerText.trim() : '',
            errors: errorsOf(cell),
            code: [...cell.querySelectorAll('.jp-OutputArea pre, .jp-OutputArea code')].map((e) => e.innerText)};
  });
}"""


# The prompts of the open notebook's code cells ("[*]:" while a cell runs): read while the cells run,
# every half second. textContent, unlike READ_NOTEBOOK's innerText, makes the browser lay nothing out.
PROMPTS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
  .map((prompt) => prompt.textContent.trim())"""


# Open a file as a double click in the file browser does (with the default viewer the settings give it).
OPEN = "async (path) => { await window.jupyterapp.commands.execute('docmanager:open', {path}); return true; }"
# Close every document of the main area without asking to save it (nothing is saved: the lab serves a copy).
CLOSE_ALL = """async () => {
  const app = window.jupyterapp;
  for (const widget of Array.from(app.shell.widgets('main'))) {
    if (widget.context) widget.context.model.dirty = false;
    widget.dispose();
  }
  return document.querySelectorAll('.jp-NotebookPanel').length;
}"""


def run_chapter(lab_page: LabPage, source: Path, screenshot: Path, tree_path: str = "", settled=None):
    """Open ``source`` (a chapter; or ``tree_path``, a notebook of the lab's folder) and run all its cells.

    Returns what the lab drew (``READ_NOTEBOOK``) and the requests that left the lab's server meanwhile
    (and while the lab was loaded, for the first notebook after a load).
    ``settled(cells)``, if given, says when the page shows all it should: the lab renders a markdown
    cell's expressions when their replies arrive, which on a loaded machine can be seconds after the
    last code cell ran, so the page is read again until then (at most 30 s more)."""
    lab = lab_page.lab
    page = lab_page.ready()
    finished = False
    try:
        page.evaluate(OPEN, tree_path or source.relative_to(ROOT).as_posix())
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=90_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
        page.click(".jp-NotebookPanel .jp-Notebook")
        page.keyboard.press("Escape")
        run_all(page)
        started = time.monotonic()
        deadline = started + RUN_TIMEOUT_S
        retried = False
        while True:
            prompts = page.evaluate(PROMPTS)
            busy = [i for i, prompt in enumerate(prompts) if "*" in prompt or prompt in ("", "[ ]:")]
            if not busy:
                break
            idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count() > 0
            if idle and not retried and time.monotonic() - started > 20:
                run_all(page)  # the kernel was not connected yet when the first Run All came
                retried = True
            if time.monotonic() > deadline:
                errors = [e for c in page.evaluate(READ_NOTEBOOK) for e in c["errors"]]
                page.screenshot(path=str(screenshot), full_page=False)
                pytest.fail(f"{source.name}: code cells {busy} of {len(prompts)} not run after {RUN_TIMEOUT_S} s; "
                            f"errors: {errors[:3]}")
            page.wait_for_timeout(500)
        cells = page.evaluate(READ_NOTEBOOK)
        # the prose's expressions are evaluated after the cells before them: wait until none is left
        for _ in range(60):
            if not any("Unexecuted inline expression" in c.get("text", "") for c in cells):
                break
            page.wait_for_timeout(500)
            cells = page.evaluate(READ_NOTEBOOK)
        page.wait_for_timeout(1000)
        cells = page.evaluate(READ_NOTEBOOK)
        for _ in range(60 if settled else 0):
            if settled(cells):
                break
            page.wait_for_timeout(500)
            cells = page.evaluate(READ_NOTEBOOK)
        page.screenshot(path=str(screenshot), full_page=False)
        finished = True
        # what left the server since the last notebook's run: loading the lab (if it was), and this notebook
        return cells, lab_page.recorder.outside[lab_page.reported:]
    finally:
        lab_page.reported = len(lab_page.recorder.outside)
        try:
            if page.evaluate(CLOSE_ALL):
                finished = False  # a notebook is still drawn
        except Exception:  # noqa: BLE001 - the page is loaded afresh for the next notebook
            finished = False
        lab_page.loaded = finished
        shut_down_kernels(lab)


def run_all(page):
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def shut_down_kernels(lab):
    """End every kernel the lab started, so that chapters do not pile up kernels."""
    base, token = lab.base, lab.token
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never a proxy
    with direct.open(f"{base}api/kernels?token={token}", timeout=30) as response:
        kernels = json.loads(response.read())
    for kernel in kernels:
        request = urllib.request.Request(f"{base}api/kernels/{kernel['id']}?token={token}", method="DELETE")
        direct.open(request, timeout=30).close()


class _WebsiteNumbers(HTMLParser):
    """The texts of the inline {eval} results of a built page (``span.output.text_plain``)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.values: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class", "") or ""
        if self._depth:
            self._depth += 1
        elif tag == "span" and "text_plain" in classes.split() and "output" in classes.split():
            self._depth = 1
            self.values.append("")

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.values[-1] += data


def website_numbers(built_site: Path, source: Path) -> list[str]:
    parser = _WebsiteNumbers()
    parser.feed((built_site / source.relative_to(ROOT).with_suffix(".html")).read_text(encoding="utf-8"))
    return [value.strip() for value in parser.values]


def number_patterns(source: Path, expected: list[str]) -> list[tuple[str, re.Pattern]]:
    """Each number the website shows in ``source``'s prose, with the pattern that finds it in JupyterLab's
    prose: the number itself, or, for a measurement (taken afresh in each run), its form only: 2.49 where
    the website has 2.07."""
    expressions = re.findall(r"\{eval\}`([^`]*)`", source.read_text(encoding="utf-8"))
    measured = MEASURED.get(source.stem, set())
    patterns = []
    for index, value in enumerate(expected):
        expression = expressions[index] if index < len(expressions) else ""
        if measured & set(re.findall(r"\w+", expression)):
            patterns.append((value, re.compile(re.sub(r"\d+", r"\\d+", re.escape(value)))))
        else:
            patterns.append((value, re.compile(re.escape(value))))
    return patterns


def missing_number(cells, patterns: list[tuple[str, re.Pattern]]) -> str | None:
    """The first of the website's numbers (:func:`number_patterns`) that JupyterLab's prose (``cells``)
    lacks, in the same order, as a problem; None if there is none."""
    prose = " ".join(" ".join(cell["text"].split()) for cell in cells if cell["type"] == "markdown")
    at = 0
    for index, (value, pattern) in enumerate(patterns):
        found = pattern.search(prose, at)
        if found is None:
            return (f"number {index} of the prose, {value!r} on the website, is not in JupyterLab's prose "
                    f"after ...{prose[max(0, at - 60):at]!r}, which goes on {prose[at:at + 160]!r}")
        at = found.end()
    return None


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_runs_and_renders_in_jupyterlab(lab_page, lab, built_site, source):
    screenshots = ROOT / "_build" / "screenshots"
    screenshots.mkdir(parents=True, exist_ok=True)
    expected = website_numbers(built_site, source)
    patterns = number_patterns(source, expected)
    cells, outside = run_chapter(lab_page, source, screenshots / f"jupyterlab-{source.stem}.png",
                                 settled=lambda cells: missing_number(cells, patterns) is None)
    text = source.read_text(encoding="utf-8")
    lab_socket = "WebSocket " + lab.base.replace("http://", "ws://")  # the kernel's own channels
    problems = [f"request leaving the lab server (blocked): {r}" for r in outside if not r.startswith(lab_socket)]
    markdown = [c for c in cells if c["type"] == "markdown"]
    code = [c for c in cells if c["type"] == "code"]
    if not markdown or not code:
        problems.append(f"JupyterLab drew {len(markdown)} markdown and {len(code)} code cells")
    for cell in markdown:
        for raw in re.findall(r"\{(?:eval|glue(?::\w+)?)\}`[^`]*`?", cell["text"]):
            problems.append(f"raw role in the rendered prose: {raw!r}")
        if "Unexecuted inline expression" in cell["text"]:
            problems.append(f"an expression was not evaluated: {cell['text'][:120]!r}")
        problems += [f"error in the prose: {error!r}" for error in cell["errors"]]
    for cell in code:
        problems += [f"a cell ended in an error: {error!r}" for error in cell["errors"]]
    if len(re.findall(r"\{eval\}`", text)) != len(expected):
        problems.append(f"the source has {len(re.findall(r'{eval}`', text))} {{eval}} roles, "
                        f"the website shows {len(expected)} numbers")
    # each number the website shows in the prose appears in JupyterLab's prose too, in the same order
    problems += [problem for problem in [missing_number(cells, patterns)] if problem]
    code_shown = "\n".join(block for cell in code for block in cell["code"])
    for dotted in re.findall(r"\bshow_source\(((?:qkv|qkv_book)(?:\.\w+)+)\)", text):
        name = dotted.rsplit(".", 1)[-1]
        if not re.search(rf"\b(?:def|class) {re.escape(name)}\b", code_shown):
            problems.append(f"show_source({dotted}) shows no code for {name}")
    assert not problems, f"{source.name} in JupyterLab:\n  " + "\n  ".join(problems)


ZH_PROBLEM_SET = "ps1_qkv"
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def test_a_chinese_problem_set_runs_in_jupyterlab_and_its_checks_speak_chinese(lab_page, lab, built_site):
    """The 繁體中文 download of problem set 1 (``zh-TW/exercises/ps1_qkv.zip`` of the built site), opened in
    JupyterLab and run before any answer is written: every cell runs, and what the checks print (the
    banner, each verdict, the summary) is Chinese, as its metadata says, with no English sentence left."""
    with zipfile.ZipFile(built_site / "zh-TW" / "exercises" / f"{ZH_PROBLEM_SET}.zip") as download:
        download.extractall(lab.folder / "zh-TW")
    notebook = f"zh-TW/{ZH_PROBLEM_SET}/{ZH_PROBLEM_SET}.ipynb"
    screenshots = ROOT / "_build" / "screenshots"
    screenshots.mkdir(parents=True, exist_ok=True)
    cells, _outside = run_chapter(lab_page, lab.folder / notebook,
                                  screenshots / f"jupyterlab-zh-TW-{ZH_PROBLEM_SET}.png", tree_path=notebook)
    code = [c for c in cells if c["type"] == "code"]
    printed = [line for c in code for block in c["code"] for line in block.splitlines() if line.strip()]
    verdicts = [line for line in printed if line.lstrip().startswith(("\u2713", "\u2717"))]
    problems = [f"a cell ended in an error: {error!r}" for c in code for error in c["errors"]]
    if len(verdicts) < 5:
        problems.append(f"{len(verdicts)} verdicts printed, not one per check: {printed[:8]}")
    problems += [f"a verdict without Chinese: {line!r}" for line in verdicts if not HAN.search(line)]
    problems += [f"English in what the checks print: {runs} in {line!r}" for line in printed
                 if (runs := english_runs(line))]
    if not any("習題" in line for line in printed):
        problems.append(f"no banner or summary naming the problem set in Chinese: {printed[:3]}")
    assert not problems, f"{notebook} in JupyterLab:\n  " + "\n  ".join(problems[:20])
