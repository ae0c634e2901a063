"""The website as a reader sees it: every page of the table of contents opened in headless Chromium.

The built site is served on 127.0.0.1 (a free port) and the pages are opened one after the other in
one browser tab per width, as a reader goes from page to page. Any request for another host is
reported, and never sent: Chromium hands it to a proxy that refuses it. For each page the
test checks HTTP status of the page and every asset, the console, typeset math (typeset when the
site was built: no typesetting script, MathML for assistive technology, and the MathJax fonts it
is drawn in preloaded, no other fetched), decoded images,
the font that actually drew the Chinese text, and the navigation (sidebar, next/previous, search):
on every page, a reader can click its links to the pages before and after it, and one link of each
kind is followed.
The Exercises page must offer each released problem set as a zip without solutions.

Every page must fit a laptop (1280 px) and a phone (390 px): no code, equation or table clipped or
scrolling sideways (on a phone, code may scroll, and so may an equation too wide at the 85 % of its
size that it may shrink to, in its own box), and every picture has alt text and a caption. At
1280 px a page shows one search field, and nothing covers the sidebar's site title.

A screenshot of every page, at both widths, goes to ``_build/screenshots/`` for review (of its first screen;
of the whole page with ``QKV_SCREENSHOTS=full``), with the measured
load times (navigation start to the load event, and MathJax's first typesetting on a page that
loads MathJax) in ``load-times.txt``; bench/page_ready.py measures page ready against a plain page.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import re
import statistics
import threading
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from .browser_support import (
    CHROME,
    CHROMIUM,
    FIGURES,
    FULL_PAGE_SCREENSHOTS,
    LAYOUT,
    MATH,
    PHONE_WINDOW,
    RAW_TEX,
    FontCoverage,
    ReaderTab,
    Recorder,
    clickable,
    docname_of,
    fetch,
    launch_chromium,
    new_page,
    open_typeset,
    page_url,
    probe_cjk_fonts,
    serve,
    sidebar_link,
    toc_docnames,
    visit,
    visit_phone,
    without_fragment,
)
from .exercise_support import PROBLEM_SETS as COURSE_PROBLEM_SETS

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "screenshots"
PAGES = toc_docnames(ROOT / "_toc.yml")
EXERCISES_PAGE = "book/exercises"
PROBLEM_SETS = [name.split("_")[0] for name in COURSE_PROBLEM_SETS]  # ps1, ps2, ...: every source folder
# nbgrader's markers; none may survive into what students download.
SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(built_site):
    """The base URL of the built site, served on 127.0.0.1."""
    with serve(built_site) as base:
        yield base


@pytest.fixture(scope="module")
def playwright():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium fonts-wqy-microhei)")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright):
    chromium = launch_chromium(playwright)
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def screenshots():
    """``_build/screenshots/``, emptied of the previous run's pictures."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):
        old.unlink()
    return SCREENSHOTS


@pytest.fixture(scope="module")
def wide(browser):
    """The tab, 1280 px wide, in which the visits open their pages one after the other."""
    tab = ReaderTab(browser)
    yield tab
    tab.close()


@pytest.fixture(scope="module")
def phone(browser):
    """The tab on a phone's screen (390 px, touch) in which the phone visits open their pages."""
    tab = ReaderTab(browser, **PHONE_WINDOW)
    yield tab
    tab.close()


@pytest.fixture(scope="module")
def visits(wide, site, screenshots):
    """Each table-of-contents page opened once (lazily), shared by the checks below."""
    cache = {}

    def get(docname):
        if docname not in cache:
            # the sidebar's link to the next page of the table of contents (from the last page, to the first)
            following = PAGES[(PAGES.index(docname) + 1) % len(PAGES)] if docname in PAGES else None
            cache[docname] = visit(wide, site, docname, screenshots, sidebar_target=following)
        return cache[docname]

    return get


@pytest.fixture(scope="module")
def fonts():
    return FontCoverage()


def report(docname, problems):
    return f"{docname}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("docname", PAGES)
def test_page_and_every_asset_load_from_the_test_server(visits, docname):
    page = visits(docname)
    problems = []
    if page.status != 200:
        problems.append(f"HTTP {page.status} for the page itself, {page.url}")
    problems += page.recorder.network_problems()
    status, _ = fetch(page.favicon)
    if status != 200:
        problems.append(f"HTTP {status} for the favicon {page.favicon} (every reader's browser asks for it)")
    assert not problems, report(docname, problems)
    assert page.recorder.requests, f"{docname}: the recorder saw no request at all"


@pytest.mark.parametrize("docname", PAGES)
def test_page_has_no_console_errors(visits, docname):
    page = visits(docname)
    problems = page.problems_before_checks + page.recorder.console_errors
    assert not problems, report(docname, problems)


@pytest.mark.parametrize("docname", PAGES)
def test_math_is_typeset(visits, docname):
    page = visits(docname)
    math = page.math
    problems = []
    if math["mathElements"] and not math["containers"]:
        problems.append(
            f"{math['mathElements']} math elements but no MathJax output (mjx-container); "
            f"MathJax version loaded: {math['mathjaxVersion']}"
        )
    problems += [f"math not typeset: {text!r}" for text in math["untypeset"]]
    problems += [f"MathJax error: {text!r}" for text in math["errors"]]
    problems += [f"raw TeX in the visible text: ...{text}..." for text in math["rawTex"]]
    assert not problems, report(docname, problems)


@pytest.mark.parametrize("docname", PAGES)
def test_math_comes_typeset_with_its_mathml_and_no_typesetting_script_is_loaded(visits, docname):
    """The math was typeset when the site was built: the page loads no MathJax (nor any other
    typesetter), and every formula holds its MathML for assistive technology."""
    page = visits(docname)
    math = page.math
    problems = [f"loads a typesetting script: {src}" for src in math["typesetters"]]
    problems += [f"requested a typesetting script: {url}" for url in page.recorder.requests
                 if re.search(r"mathjax/.*\.js(\?|$)", url, re.I)]
    problems += [f"a formula without MathML for screen readers: {text!r}" for text in math["withoutMathML"]]
    assert not problems, report(docname, problems)


@pytest.mark.parametrize("docname", PAGES)
def test_a_page_preloads_the_math_fonts_it_draws_in_and_fetches_no_other(visits, docname):
    """A page names the MathJax fonts its math is drawn in, so that they load beside its
    stylesheets (not one after another once its layout meets them), and fetches none it does not
    draw in: a preload of a font no formula uses would cost every reader its bytes."""
    page = visits(docname)
    drawn = set(page.math_fonts["drawn"])
    preloaded = set(page.math_fonts["preloaded"])
    fetched = {without_fragment(url) for url in page.recorder.requests if "/mathjax/fonts/" in url}
    problems = [f"draws its math in {url} without preloading it" for url in sorted(drawn - preloaded)]
    problems += [f"fetches {url} and draws nothing in it" for url in sorted(fetched - drawn)]
    assert not problems, report(docname, problems)


@pytest.mark.parametrize("docname", PAGES)
def test_every_image_is_decoded(visits, docname):
    page = visits(docname)
    problems = [
        f"image not decoded: {image['src']} (alt {image['alt']!r}): "
        f"{image['error'] or 'naturalWidth 0'}"
        for image in page.images
        if image["error"] or not image["naturalWidth"]
    ]
    assert not problems, report(docname, problems)


def _font_problems(probes, fonts):
    """Runs of Chinese text drawn with fonts that have no glyphs for them (empty boxes, "tofu")."""
    problems = []
    for probe in probes:
        used = [font for font in probe["fonts"] if font.get("glyphCount", 0) > 0]
        if not used:
            continue  # not rendered (a collapsed or hidden element)
        names = ", ".join(f"{f['familyName']} ({f['glyphCount']} glyphs)" for f in used)
        for char in sorted({c for c in probe["text"] if re.match(r"[\u3400-\u9fff\uf900-\ufaff]", c)}):
            verdicts = [fonts.covers(font, char) for font in used]
            if any(verdicts):
                continue
            if None in verdicts:
                problems.append(
                    f"「{probe['text']}」 in {probe['where']} was drawn with {names}; fontconfig does not "
                    f"know that font (a web font?), so the test cannot tell whether it has 「{char}」"
                )
            else:
                problems.append(
                    f"「{probe['text']}」 in {probe['where']} shows empty boxes: drawn with {names}, "
                    f"which has no glyph for 「{char}」 (font-family: {probe['fontFamily']})"
                )
            break
    return problems


@pytest.mark.parametrize("docname", PAGES)
def test_chinese_text_is_drawn_with_a_font_that_has_its_glyphs(visits, fonts, docname):
    """Chromium names the fonts that drew each run of Chinese text; fontconfig says what they contain.

    Without a CJK font the characters fall back to a Latin font's empty box (tofu): that font is
    what Chromium then reports, and fontconfig shows it has no glyph for them.
    """
    problems = _font_problems(visits(docname).cjk, fonts)
    assert not problems, report(docname, problems)


CJK_SAMPLE = "<p>Query 查詢, Key 鍵, Value 值: 外送 晚到 補償</p><pre>中和 有 一個 永和路</pre>"


def _probe_sample(browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content(CJK_SAMPLE)
        return probe_cjk_fonts(context, page)
    finally:
        context.close()


def test_missing_cjk_font_would_be_reported(playwright, browser, fonts, tmp_path):
    """The font check passes the sample with this machine's fonts and flags it when Chromium has no CJK font.

    The second browser gets a fontconfig that offers only the installed fonts without 中 (U+4E2D).
    """
    with_cjk = _probe_sample(browser)
    assert len(with_cjk) >= 2 and not _font_problems(with_cjk, fonts), with_cjk

    latin_only = tmp_path / "fonts"
    latin_only.mkdir()
    for index, font_file in enumerate(sorted({p for p in fonts.files_without("中")})):
        (latin_only / f"{index}-{Path(font_file).name}").symlink_to(font_file)
    config = tmp_path / "fonts.conf"
    config.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n'
        f"<fontconfig><dir>{latin_only}</dir><cachedir>{tmp_path / 'cache'}</cachedir></fontconfig>\n",
        encoding="utf-8",
    )
    no_cjk = launch_chromium(playwright, env={**os.environ, "FONTCONFIG_FILE": str(config)})
    try:
        without_cjk = _probe_sample(no_cjk)
    finally:
        no_cjk.close()
    problems = _font_problems(without_cjk, fonts)
    assert any("empty boxes" in problem for problem in problems), without_cjk


def test_the_chinese_glossary_is_probed(visits):
    """The probe must find the Chinese on the notation page (查詢, 鍵, 值), or the font check above is empty."""
    page = visits("book/notation")
    drawn = "".join(p["text"] for p in page.cjk if any(f.get("glyphCount", 0) for f in p["fonts"]))
    missing = [term for term in ("查詢", "鍵", "值") if term not in drawn]
    assert not missing, f"book/notation: no rendered Chinese text {missing} found on the page (glossary missing?)"


@pytest.mark.parametrize("docname", PAGES)
def test_sidebar_links_every_page(visits, site, docname):
    page = visits(docname)
    linked = {docname_of(site, url) for url in page.sidebar}
    missing = [name for name in PAGES if name not in linked]
    assert not missing, f"{docname}: the sidebar has no link to {missing} (it links {sorted(filter(None, linked))})"


def test_internal_links_resolve(visits, site):
    """Every link on the table-of-contents pages that points into the site answers 200."""
    targets = {}
    for docname in PAGES:
        for url in visits(docname).links:
            if url.startswith(site):
                targets.setdefault(without_fragment(url), docname)
    problems = []
    for url, docname in sorted(targets.items()):
        status, _ = fetch(url)
        if status != 200:
            problems.append(f"{docname} links to {url}: HTTP {status}")
    assert not problems, "\n".join(problems)


def test_a_request_for_another_host_is_reported_and_never_sent(browser, tmp_path):
    """A page that asks for a CDN's stylesheet, a script by IP address, and a picture from a server
    of this machine under another name (``localhost``): each is reported as leaving the test server,
    and the other server never sees its request."""
    seen = []

    class Outside(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the name http.server calls
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format, *args):  # noqa: A002 - the name of the overridden argument
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Outside)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    outside = ["https://cdn.example.com/theme.css", "http://203.0.113.5/math.js",
               f"http://localhost:{other.server_port}/figure.png"]
    (tmp_path / "page.html").write_text(
        f'<!doctype html><link rel="stylesheet" href="{outside[0]}"><script src="{outside[1]}"></script>'
        f'<p>text</p><img src="{outside[2]}" alt="a figure">', encoding="utf-8")
    try:
        with serve(tmp_path) as base:
            recorder = Recorder(base)
            context, page = new_page(browser, recorder)
            try:
                page.goto(base + "page.html", wait_until="load")
                page.wait_for_load_state("networkidle")
            finally:
                context.close()
    finally:
        other.shutdown()
        other.server_close()
    problems = recorder.network_problems()
    for url in outside:
        assert any("leaving the test server" in p and url in p for p in problems), (url, problems)
    assert not seen, f"the browser reached a server other than the test server: {seen}"


def test_a_missing_asset_is_reported_and_a_copy_still_current_is_not():
    """HTTP 404 (or any error) for an asset is a problem; 304, the server confirming the browser's cached
    copy, is not."""
    recorder = Recorder("http://127.0.0.1:8000/")
    recorder.responses = [(200, "http://127.0.0.1:8000/a.css"), (304, "http://127.0.0.1:8000/b.css"),
                          (404, "http://127.0.0.1:8000/c.png"), (500, "http://127.0.0.1:8000/d.js")]
    assert recorder.network_problems() == ["HTTP 404 for http://127.0.0.1:8000/c.png",
                                           "HTTP 500 for http://127.0.0.1:8000/d.js"]


def test_site_root_opens_the_home_page(browser, site):
    """The bare address sends the reader on to the first page, and nothing on the way fails: the root page
    names the site's icon (or the browser would ask for ``/favicon.ico`` and log a 404). The root page is
    left at once, so a request of its own may be cut short (``walked``)."""
    recorder = Recorder(site)
    context, page = new_page(browser, recorder)
    try:
        page.goto(site)
        page.wait_for_url(page_url(site, PAGES[0]), timeout=15_000)  # until the first page's load event
    finally:
        context.close()
    problems = recorder.network_problems(walked=True) + recorder.console_errors
    assert not problems, report(site, problems)


def test_sidebar_links_open_every_page(visits, wide, site):
    """From each page, a reader can click the sidebar's link to the next page of the table of contents
    (from the last page, to the first), and a click on such a link opens its page.

    Each page's link is tried in its visit (a trial click: there, visible, steady, nothing over it);
    one of them is clicked and followed here. Following every one would load every page again, which
    costs the browser about a second each and adds nothing the trial and the one click do not show.
    """
    problems = [f"{docname}: the sidebar link to {PAGES[(i + 1) % len(PAGES)]}: {visits(docname).clickable['sidebar']}"
                for i, docname in enumerate(PAGES) if visits(docname).clickable["sidebar"]]
    recorder = Recorder(site)
    with wide.recorded(recorder) as page:
        problems += _followed(page, site, PAGES[-1], lambda: sidebar_link(page, site, PAGES[0]), PAGES[0],
                              f"the sidebar link to {PAGES[0]}")
    problems += recorder.network_problems(walked=True) + recorder.console_errors
    assert not problems, report("sidebar links", problems)


def _followed(page, site, start: str, link, expected: str, what: str) -> list[str]:
    """Open ``start``, click ``link()`` (a locator, or None: ``what``) and follow it; the problem if the page
    has no such link or it does not open ``expected``."""
    page.goto(page_url(site, start))
    found = link()
    if found is None or not found.count():
        return [f"{start}: no {what}"]
    with page.expect_navigation():
        found.click()
    opened = docname_of(site, page.url)
    return [] if opened == expected else [f"{start}: {what} opened {page.url}, not {expected}"]


def _chain(visits, site, start: str, kind: str) -> list[str]:
    """The pages met following each visited page's ``kind`` link ("next" or "prev") from ``start``."""
    seen = [start]
    while (links := getattr(visits(seen[-1]), kind)) and len(seen) <= 2 * len(PAGES):
        seen.append(docname_of(site, links[0]) or links[0])
        if seen[-1] not in PAGES:
            break
    return seen


def test_next_and_previous_links_walk_every_page_in_order(visits, wide, site):
    """Following "next" from the first page meets every page in the order of the table of contents,
    and "previous" from the last page meets them all back; a reader can click each of those links, and
    a click on each kind opens the page it leads to.

    The links are read from each page's visit, where each is tried (a trial click: there, visible,
    steady, nothing over it); one of each kind is clicked and followed here.
    """
    forward = _chain(visits, site, PAGES[0], "next")
    backward = _chain(visits, site, PAGES[-1], "prev")
    assert forward == PAGES, f"following 'next' from {PAGES[0]} visits {forward}, the table of contents is {PAGES}"
    assert backward == list(reversed(PAGES)), f"following 'previous' from {PAGES[-1]} visits {backward}"
    problems = [f"{docname}: its '{kind}' link: {visits(docname).clickable[kind]}"
                for docname in PAGES for kind, there in (("next", docname != PAGES[-1]), ("prev", docname != PAGES[0]))
                if there and visits(docname).clickable[kind]]
    recorder = Recorder(site)
    with wide.recorded(recorder) as page:
        for start, selector, expected in ((PAGES[0], "a.right-next", PAGES[1]), (PAGES[-1], "a.left-prev", PAGES[-2])):
            problems += _followed(page, site, start, lambda: page.locator(selector).first, expected,
                                  f"its {selector} link")
    problems += recorder.network_problems(walked=True) + recorder.console_errors
    assert not problems, report("next/previous links", problems)


def test_search_finds_softmax(browser, site, screenshots):
    recorder = Recorder(site)
    context, page = new_page(browser, recorder)
    try:
        page.goto(site + "search.html?q=softmax")
        page.wait_for_function(
            "() => { const s = document.querySelector('#search-results p.search-summary');"
            " return s && s.innerText.trim() !== ''; }",
            timeout=30_000,
        )
        summary = page.inner_text("#search-results p.search-summary")
        hits = page.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.href)")
        with contextlib.suppress(PlaywrightTimeout):  # the results' summaries arrive one by one
            page.wait_for_function(f"() => ({MATH})({json.dumps(RAW_TEX)}).rawTex.length === 0", timeout=10_000)
        math = page.evaluate(MATH, RAW_TEX)
        page.screenshot(path=str(screenshots / "search-softmax.png"), full_page=FULL_PAGE_SCREENSHOTS)
    finally:
        context.close()
    chapters = {docname_of(site, url) for url in hits} & set(PAGES)
    assert chapters, f"search.html?q=softmax: no result links to a chapter ({summary!r}; links {hits})"
    problems = recorder.network_problems() + recorder.console_errors
    problems += [f"raw TeX in the search results: ...{text}..." for text in math["rawTex"]]
    problems += [f"MathJax error: {text!r}" for text in math["errors"]]
    problems += [f"loads a typesetting script: {src}" for src in math["typesetters"]]
    problems += [f"a formula without MathML for screen readers: {text!r}" for text in math["withoutMathML"]]
    assert not problems, report("search.html?q=softmax", problems)


def test_invalid_theme_mode_would_be_reported(browser, site):
    """The console check sees the theme's 'Got invalid theme mode' error when it happens.

    The site configures a default mode so that the message never appears; here a stale value in
    the reader's storage provokes it, to prove that the per-page console check would catch it.
    """
    recorder = Recorder(site)
    context, page = new_page(browser, recorder)
    try:
        page.add_init_script("localStorage.setItem('mode', 'sepia')")
        page.goto(page_url(site, PAGES[0]), wait_until="load")
        page.wait_for_timeout(300)
    finally:
        context.close()
    assert any("invalid theme mode" in text for text in recorder.console_errors), recorder.console_errors


def _problem_set_of(filename):
    match = re.search(r"(?<![a-z0-9])(ps[1-9][0-9]*)(?![0-9])", filename.lower())
    return match.group(1) if match else None


def _grade_ids(notebook):
    return sorted(
        cell["metadata"]["nbgrader"]["grade_id"]
        for cell in notebook["cells"]
        if "grade_id" in cell.get("metadata", {}).get("nbgrader", {})
    )


def _check_released_zip(name, data):
    """Problems with one downloaded problem set: a zip of released nbgrader notebooks, no solutions."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return [f"{name} is not a zip file ({len(data)} bytes, starts {data[:16]!r})"]
    problems = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if archive.testzip() is not None:
            problems.append(f"{name}: corrupt member {archive.testzip()}")
        notebooks = [n for n in archive.namelist() if n.endswith(".ipynb") and ".ipynb_checkpoints" not in n]
        if not notebooks:
            problems.append(f"{name} holds no .ipynb (members: {archive.namelist()})")
        for member in notebooks:
            text = archive.read(member).decode("utf-8")
            try:
                notebook = json.loads(text)
            except json.JSONDecodeError as error:
                problems.append(f"{name}: {member} is not valid JSON ({error})")
                continue
            for marker in SOLUTION_MARKERS:
                if marker in text:
                    problems.append(f"{name}: {member} contains '{marker}': the solution or hidden tests leaked")
            released_ids = _grade_ids(notebook)
            if not released_ids:
                problems.append(f"{name}: {member} has no nbgrader cells: not a released problem set")
                continue
            sources = sorted(ROOT.glob(f"exercises/source/*/{Path(member).name}"))
            if not sources:
                problems.append(f"{name}: {member} matches no notebook in exercises/source/")
                continue
            source_ids = _grade_ids(json.loads(sources[0].read_text(encoding="utf-8")))
            if released_ids != source_ids:
                problems.append(
                    f"{name}: {member} is stale: its graded cells {released_ids} differ from "
                    f"{sources[0].relative_to(ROOT)}'s {source_ids}"
                )
    return problems


def test_exercises_page_downloads_each_released_problem_set(visits, browser, site, tmp_path):
    visits(EXERCISES_PAGE)  # the page itself is checked by the per-page tests
    recorder = Recorder(site)
    context, page = new_page(browser, recorder, accept_downloads=True)
    problems = []
    try:
        page.goto(page_url(site, EXERCISES_PAGE))
        links = page.eval_on_selector_all(
            "a[href]", "links => links.map((a, i) => ({i, href: a.href, text: a.innerText.trim()}))"
        )
        zips = [link for link in links if without_fragment(link["href"]).lower().endswith(".zip")]
        offered = {_problem_set_of(Path(without_fragment(link["href"])).name) for link in zips}
        missing = [ps for ps in PROBLEM_SETS if ps not in offered]
        if missing:
            problems.append(
                f"no download link ending in .zip for {missing} "
                f"(zip links: {[link['href'] for link in zips] or 'none'})"
            )
        for link in zips:
            url = without_fragment(link["href"])
            name = Path(url).name
            with page.expect_download() as download_info:
                page.locator("a[href]").nth(link["i"]).click(modifiers=[])
            download = download_info.value
            if download.failure():
                problems.append(f"downloading {url} (link {link['text']!r}) failed: {download.failure()}")
                continue
            saved = tmp_path / name
            download.save_as(saved)
            status, served = fetch(url)
            if status != 200:
                problems.append(f"{url}: HTTP {status}")
                continue
            if saved.read_bytes() != served:
                problems.append(f"{url}: the browser's download differs from what the server sends")
            problems += _check_released_zip(name, saved.read_bytes())
    finally:
        context.close()
    # A download ends the navigation that started it; Chromium reports that as net::ERR_ABORTED.
    recorder.failed = [f for f in recorder.failed if not (".zip" in f and "ERR_ABORTED" in f)]
    problems += recorder.network_problems() + recorder.console_errors
    assert not problems, report(f"{EXERCISES_PAGE} downloads", problems)


def test_page_load_times(visits, capsys):
    """Measured, printed and written next to the screenshots; never asserted (the machine varies)."""
    times = {docname: visits(docname).load_ms for docname in PAGES}
    unmeasured = [docname for docname, ms in times.items() if ms is None]
    assert not unmeasured, f"no load event measured for {unmeasured}"
    worst = max(times, key=times.get)
    lines = [f"{ms:8.0f} ms  {docname}" for docname, ms in sorted(times.items(), key=lambda item: -item[1])]
    summary = (
        f"page load (navigation start to load event and MathJax done), {len(times)} pages: "
        f"median {statistics.median(times.values()):.0f} ms, worst {times[worst]:.0f} ms ({worst})"
    )
    (SCREENSHOTS / "load-times.txt").write_text(summary + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    with capsys.disabled():
        print(f"\n{summary}\n" + "\n".join(lines) + f"\nscreenshots: {SCREENSHOTS}")


# ---------------------------------------------------------------- every page fits, every picture is described
#
# At 1280 px (both sidebars shown) no code block, equation or table may be clipped or scroll
# sideways, and the page itself must not. At 390 px (a phone) code may scroll inside its box, but
# the page may not scroll sideways and no equation or table may be clipped. Every picture sits in
# a figure with a caption and has alt text that says what it shows (not a file name).


@pytest.fixture(scope="module")
def phone_visits(phone, site, screenshots):
    """Each page opened once (lazily) on a phone's screen, 390 px wide."""
    cache = {}

    def get(docname):
        if docname not in cache:
            cache[docname] = visit_phone(phone, site, docname, screenshots)
        return cache[docname]

    return get


def generated_pages(html_root: Path) -> list[str]:
    """The pages Sphinx makes beside the table of contents (search, the general index, ...)."""
    pages = []
    for html_file in sorted(html_root.glob("*.html")):
        text = html_file.read_text(encoding="utf-8", errors="replace")
        if 'http-equiv="refresh"' in text or "http-equiv='refresh'" in text:
            continue  # a redirect, not a page
        pages.append(html_file.stem)
    return [name for name in pages if name not in PAGES]


def layout_problems(layout: dict, *, code_may_scroll: bool) -> list[str]:
    problems = []
    for item in layout["offenders"]:
        if code_may_scroll and item["kind"] in ("code", "equation scrolls"):
            continue
        problems.append(
            f"{item['kind']} {item['content']} px wide in a box of {item['box']} px: {item['where']!r}"
        )
    if layout["page"]:
        problems.append(
            f"the page scrolls sideways: {layout['page']['content']} px of content in a "
            f"{layout['page']['box']} px window"
        )
    return problems


FILE_NAME = re.compile(r"(^|/)[^\s/]+\.(png|jpe?g|svg|gif|webp)$", re.I)


def figure_problems(figures: dict) -> list[str]:
    problems = []
    for image in figures["images"]:
        name = image["src"].rsplit("/", 1)[-1]
        if not image["alt"] or FILE_NAME.search(image["alt"]) or image["alt"] == image["src"]:
            problems.append(f"picture {name} has no alt text that says what it shows (alt={image['alt']!r})")
        if not image["inFigure"]:
            problems.append(f"picture {name} is not in a figure with a caption")
        elif not image["caption"]:
            problems.append(f"picture {name} is in a figure without a caption")
    for figure in figures["figures"]:
        if not figure["caption"]:
            problems.append(f"figure {figure['id'] or '(no id)'} has no caption")
    return problems


@pytest.mark.parametrize("docname", PAGES)
def test_nothing_is_clipped_or_scrolls_sideways_at_1280_px(visits, docname):
    page = visits(docname)
    problems = layout_problems(page.layout, code_may_scroll=False)
    assert not problems, report(f"{docname} at 1280 px", problems)


@pytest.mark.parametrize("docname", PAGES)
def test_on_a_phone_the_page_never_scrolls_sideways_and_no_equation_or_table_is_clipped(phone_visits, docname):
    page = phone_visits(docname)
    problems = page.problems_before_checks + layout_problems(page.layout, code_may_scroll=True)
    assert not problems, report(f"{docname} at 390 px", problems)


def test_generated_pages_fit_both_widths(wide, phone, site, built_site, screenshots):
    """Search, the general index and any other page Sphinx adds, at 1280 px and at 390 px."""
    names = generated_pages(built_site)
    assert "search" in names, f"no search page among the generated pages {names}"
    problems = []
    for name in names:
        at_1280 = visit(wide, site, name, screenshots)
        problems += [f"{name} at 1280 px: {p}" for p in layout_problems(at_1280.layout, code_may_scroll=False)]
        at_390 = visit_phone(phone, site, name, screenshots)
        problems += [f"{name} at 390 px: {p}" for p in layout_problems(at_390.layout, code_may_scroll=True)]
    assert not problems, report("generated pages", problems)


@pytest.mark.parametrize("docname", PAGES)
def test_every_figure_is_sharp_on_a_high_dpi_screen_and_opens_at_full_size(visits, docname):
    """A chapter's figure has at least two pixels per CSS pixel it is shown at (a "2x" picture), and a
    click opens the picture itself, to zoom into on a phone."""
    problems = []
    for image in visits(docname).images:
        if not image["inFigure"] or not image["src"].endswith(".png"):
            continue
        name = image["src"].rsplit("/", 1)[-1]
        if image["naturalWidth"] < 1.95 * image["shownWidth"]:
            problems.append(f"{name}: {image['naturalWidth']} px shown {image['shownWidth']:.0f} px wide")
        if image["link"] != image["src"]:
            problems.append(f"{name} does not link to its full picture (link {image['link']!r})")
    assert not problems, report(docname, problems)


# Figures drawn to be read on a phone as they are: at 390 px each is shown at READABLE of its size or
# more (its picture is a "2x" one: half its pixels are its size), so that its numbers and tokens keep
# the size they have at 1280 px. The decoding chapter's three steps, side by side, were shrunk to
# less than half on a phone; stacked, they fit.
PHONE_FIGURES = {"book/decoding": ["fig-decoding-steps"]}
READABLE = 0.85


def shown_scales(images: list[dict], figures: list[str]) -> dict[str, float]:
    """How much of its size the picture of each figure of ``figures`` is shown at (1: its full size)."""
    scales = {image["figure"]: image["shownWidth"] / (image["naturalWidth"] / 2) for image in images
              if image["figure"] in figures and image["naturalWidth"]}
    assert set(scales) == set(figures), f"figures not found on the page: {set(figures) - set(scales)}"
    return scales


@pytest.mark.parametrize("docname", sorted(PHONE_FIGURES))
def test_a_figure_drawn_for_a_phone_keeps_its_size_there_in_both_editions(phone_visits, chinese_visits, visits,
                                                                            docname):
    figures = PHONE_FIGURES[docname]
    problems = []
    for where, page in ((f"{docname} at 390 px", phone_visits(docname)),
                        (f"zh-TW/{docname} at 390 px", chinese_visits(docname, on_phone=True)),
                        (f"{docname} at 1280 px", visits(docname)),
                        (f"zh-TW/{docname} at 1280 px", chinese_visits(docname))):
        problems += [f"{where}: {figure} is shown at {scale:.0%} of its size" for figure, scale in
                     shown_scales(page.images, figures).items() if scale < READABLE]
    assert not problems, report(docname, problems)


def test_a_figure_shrunk_on_a_phone_would_be_reported():
    images = [{"figure": "fig-wide", "naturalWidth": 1494, "shownWidth": 342},  # 747 px drawn in 342
              {"figure": "fig-narrow", "naturalWidth": 720, "shownWidth": 342}]
    scales = shown_scales(images, ["fig-wide", "fig-narrow"])
    assert scales["fig-wide"] < READABLE <= scales["fig-narrow"]
    with pytest.raises(AssertionError, match="fig-missing"):
        shown_scales(images, ["fig-missing"])


@pytest.mark.parametrize("docname", PAGES)
def test_every_picture_has_alt_text_and_a_caption(visits, docname):
    problems = figure_problems(visits(docname).figures)
    assert not problems, report(docname, problems)


def test_the_layout_and_figure_checks_can_fail(browser, site):
    """On a real page made worse on purpose, each check reports what it must: a long code line, a
    wide table, an equation too wide for a phone, the page scrolling sideways, a picture with a file
    name for alt text and no caption."""
    recorder = Recorder(site)
    context, page = new_page(browser, recorder, **PHONE_WINDOW)
    try:
        opened = open_typeset(page, site, "book/scaled_dot_product", recorder)
        clean = page.evaluate(LAYOUT)
        page.evaluate("""() => {
          const article = document.querySelector('.bd-article');
          const pre = article.querySelector('.highlight pre');
          pre.textContent = 'x = ' + '1 + '.repeat(120) + '1';
          const table = document.createElement('table');
          table.innerHTML = '<tr><td style="white-space: nowrap">' + 'wide '.repeat(80) + '</td></tr>';
          article.append(table);
          const [math, other] = article.querySelectorAll('mjx-container[display="true"]');
          math.style.fontSize = '600%';
          other.dataset.fitScale = '0.5';
          const spill = document.createElement('div');
          spill.style.width = '900px';
          spill.textContent = 'a block wider than the window';
          article.append(spill);
          const img = document.createElement('img');
          img.src = '../_static/favicon.svg';
          img.alt = 'favicon.svg';
          article.append(img);
        }""")
        broken = page.evaluate(LAYOUT)
        figures = page.evaluate(FIGURES)
    finally:
        context.close()
    assert not opened.problems_before_checks and not layout_problems(clean, code_may_scroll=True), clean
    kinds = {item["kind"] for item in broken["offenders"]}
    assert {"code", "table", "equation", "equation drawn too small"} <= kinds, broken
    assert broken["page"], "a 900 px block on a 390 px screen was not reported"
    problems = figure_problems(figures)
    assert any("no alt text" in p for p in problems) and any("not in a figure" in p for p in problems), problems


# ---------------------------------------------------------------- the theme's chrome: one search field, the title in view
#
# sphinx-book-theme 1.3.0 (with pydata-sphinx-theme 0.17.1) adds a second search field in a bar across the
# top of every page at 1280 px, above the sidebar's site title; the lock keeps the pair the site was
# reviewed with. These checks see what a reader sees, whatever the theme's version, in both editions.

EDITIONS = ["en", "zh-TW"]  # the English site at the root, the 繁體中文 one at zh-TW/


def chrome_problems(chrome: dict) -> list[str]:
    problems = []
    fields = chrome["searchFields"]
    if len(fields) != 1:
        shown = "; ".join(f"{f['what']} in {f['where']} at {f['top']} px" for f in fields)
        problems.append(f"{len(fields)} search fields in view, not 1: {shown or 'none'}")
    if chrome["title"] is None:
        problems.append("the sidebar shows no site title")
    else:
        covering = sorted({hit for hit in chrome["coveredBy"] if hit})
        if covering:
            problems.append(f"the site title {chrome['title']!r} is covered by {', '.join(covering)}")
    return problems


@pytest.fixture(scope="module")
def chinese_chrome(wide, site):
    """The theme's chrome (``CHROME``) of each page of the 繁體中文 edition at 1280 px, each page
    opened once (lazily) and typeset; the English pages' is in ``visits``."""
    base = site + "zh-TW/"
    cache = {}

    def get(docname):
        if docname not in cache:
            recorder = Recorder(site)
            with wide.recorded(recorder) as page:
                visit = open_typeset(page, base, docname, recorder, watch=False)
                assert visit.status == 200, f"zh-TW/{docname}.html answered {visit.status}"
                cache[docname] = page.evaluate(CHROME)
        return cache[docname]

    return get


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("docname", PAGES)
def test_one_search_field_and_the_site_title_uncovered_at_1280_px(visits, chinese_chrome, edition, docname):
    chrome = visits(docname).chrome if edition == "en" else chinese_chrome(docname)
    problems = chrome_problems(chrome)
    assert not problems, report(f"{edition}: {docname} at 1280 px", problems)


def test_the_search_field_and_title_checks_can_fail(browser, site):
    """On a real page made worse on purpose: a second search field across the top, and a bar over the
    site title, are both reported."""
    recorder = Recorder(site)
    context, page = new_page(browser, recorder)
    try:
        open_typeset(page, site, "book/qkv_roles", recorder)
        clean = page.evaluate(CHROME)
        page.evaluate("""() => {
          const field = document.querySelector('.search-button-field');
          const bar = document.createElement('div');
          bar.style.cssText = 'position: fixed; top: 0; left: 0; width: 100%; height: 200px; z-index: 2000; '
            + 'background: white';
          bar.append(field.cloneNode(true));
          document.body.append(bar);
        }""")
        broken = page.evaluate(CHROME)
    finally:
        context.close()
    assert not chrome_problems(clean), chrome_problems(clean)
    problems = chrome_problems(broken)
    assert any("2 search fields in view" in p for p in problems), problems
    assert any("the site title 'Attention by Hand' is covered by div" in p for p in problems), problems


def test_a_link_covered_hidden_or_missing_is_not_clickable(browser, site):
    """The trial click of the visits reports a "next" link that something covers, one that is hidden,
    and one that is not there; the same link as built is clickable."""
    recorder = Recorder(site)
    context, page = new_page(browser, recorder)
    try:
        open_typeset(page, site, PAGES[1], recorder)
        link = page.locator("a.right-next")
        found = {"as built": clickable(link)}
        page.evaluate("""() => {
          const bar = document.createElement('div');
          bar.style.cssText = 'position: fixed; inset: 0; z-index: 2000; background: white';
          document.body.append(bar);
        }""")
        found["covered"] = clickable(link, timeout_ms=1_000)
        page.evaluate("() => { document.querySelector('a.right-next').style.display = 'none'; }")
        found["hidden"] = clickable(link, timeout_ms=1_000)
        found["missing"] = clickable(page.locator("a.no-such-link"), timeout_ms=1_000)
    finally:
        context.close()
    assert found["as built"] is None, found
    assert "<div></div> intercepts pointer events" in (found["covered"] or ""), found
    assert found["hidden"] == "element is not visible", found
    assert found["missing"] == "not on the page", found


# ---------------------------------------------------------------- the 繁體中文 edition at both widths
#
# Three chapters of the 繁體中文 edition (finished catalogues, with figures, math and the examples'
# tokens), opened as the English pages are and checked the same way: everything loads, the math is
# typeset, every picture is decoded and has alt text and a caption, the Chinese is drawn with a font
# that has its glyphs, and nothing is clipped at 1280 px or on a phone. A few pages, not a second pass:
# the English pages' checks cover the layout of every chapter, and the Chinese pages share it.

ZH_PAGES = ["book/qkv_roles", "book/decoding", "book/training_attention"]


@pytest.fixture(scope="module")
def chinese_visits(wide, phone, site):
    """Each page of ``ZH_PAGES`` in the 繁體中文 edition opened once (lazily) at 1280 px, or on a phone."""
    base, cache = site + "zh-TW/", {}

    def get(docname, *, on_phone=False):
        if (docname, on_phone) not in cache:
            cache[docname, on_phone] = (visit_phone(phone, base, docname, None) if on_phone
                                        else visit(wide, base, docname, None))
        return cache[docname, on_phone]

    return get


@pytest.mark.parametrize("docname", ZH_PAGES)
def test_a_chinese_chapter_loads_typesets_draws_its_glyphs_and_fits_1280_px(chinese_visits, fonts, docname):
    page = chinese_visits(docname)
    math = page.math
    problems = [f"HTTP {page.status} for the page itself"] if page.status != 200 else []
    problems += page.recorder.network_problems() + page.problems_before_checks + page.recorder.console_errors
    problems += [f"math not typeset: {text!r}" for text in math["untypeset"] + math["errors"]]
    problems += [f"raw TeX in the visible text: ...{text}..." for text in math["rawTex"]]
    problems += [f"image not decoded: {image['src']}" for image in page.images
                 if image["error"] or not image["naturalWidth"]]
    problems += figure_problems(page.figures) + _font_problems(page.cjk, fonts)
    problems += layout_problems(page.layout, code_may_scroll=False)
    assert not problems, report(f"zh-TW/{docname} at 1280 px", problems)


@pytest.mark.parametrize("docname", ZH_PAGES)
def test_on_a_phone_a_chinese_chapter_never_scrolls_sideways_and_nothing_is_clipped(chinese_visits, docname):
    page = chinese_visits(docname, on_phone=True)
    problems = page.problems_before_checks + layout_problems(page.layout, code_may_scroll=True)
    assert not problems, report(f"zh-TW/{docname} at 390 px", problems)
