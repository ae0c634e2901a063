"""Look at the built website the way a reader's browser does: served on 127.0.0.1, opened in Chromium.

``test_site_browser.py`` holds the assertions; this module holds the machinery:

- ``toc_docnames``: the pages of ``_toc.yml``, root first, in reading order;
- ``serve``: the html folder over HTTP on 127.0.0.1, on a free port;
- ``launch_chromium``: Debian's Chromium driven by Playwright (no browser download);
- ``Recorder``: every request, response, failure and console error of one page, and any request
  that would leave the test server (Chromium sends each of those to a proxy that is not there, so
  none leaves: ``launch_chromium``);
- ``visit``: open one page, wait for the load event and for MathJax, force every image to load,
  take a full-page screenshot, try its links to the pages around it (``clickable``), and collect
  what the tests check;
- ``probe_cjk_fonts``: which fonts actually drew each run of Chinese text (Chromium's
  ``CSS.getPlatformFontsForNode``);
- ``FontCoverage``: whether those fonts have glyphs for it, as fontconfig says;
- ``fetch``: a plain GET to the test server, for links and downloads;
- ``jupyter``: JupyterLab or a Jupyter server on 127.0.0.1 with a token, for the tests that use one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Wide enough for the theme to show the primary sidebar (it collapses below 960 px).
VIEWPORT = {"width": 1280, "height": 900}
PAGE_TIMEOUT_MS = 60_000
# Each page visited leaves a screenshot in _build/screenshots/ for review: of what a reader sees first,
# or, with QKV_SCREENSHOTS=full in the environment, of the whole page (seconds of the browser's time a
# page, ten for the reference). The checks never read the pictures.
FULL_PAGE_SCREENSHOTS = os.environ.get("QKV_SCREENSHOTS", "") == "full"

# What raw TeX looks like in a reader's text: \( \) \[ \] delimiters, $$, or any command such as
# \sqrt or \begin (a title whose math was flattened to text shows "\sqrt{d_k}" with no delimiters).
RAW_TEX = r"\\(?:[A-Za-z]+|[()\[\]])|\$\$"


def toc_docnames(toc_file: Path) -> list[str]:
    """The documents of a Jupyter Book ``_toc.yml``: the root, then every file in reading order."""
    toc = yaml.safe_load(toc_file.read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    walk(toc.get("sections"))
    return [str(Path(name).with_suffix("")) for name in names]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the name of the overridden argument
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 on a free port; yield its base URL (ending in ``/``)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# The test server is on this machine: never send its requests through a proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url: str) -> tuple[int, bytes]:
    """GET ``url`` directly; its HTTP status and body."""
    try:
        with _DIRECT.open(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(url: str) -> bool:
    """True once the server at ``url`` answers 200."""
    try:
        return fetch(url)[0] == 200
    except OSError:  # not listening yet
        return False


@contextlib.contextmanager
def jupyter(subcommand: str, root: Path, home: Path, *options: str, env: dict | None = None,
            start_seconds: float = 120) -> Iterator[tuple[str, str]]:
    """``jupyter <subcommand>`` (``lab``, ``server``) serving ``root``, started in it, on 127.0.0.1 with a
    random token, its runtime, settings and workspaces in ``home``; yields ``(base URL, token)`` once
    it answers, and stops it afterwards. Its output is in ``home/jupyter.log``."""
    token = secrets.token_hex(16)
    port = free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           **(env or {})}
    command = [str(Path(sys.executable).with_name("jupyter")), subcommand, "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               "--ServerApp.port_retries=0", "--allow-root", *options]
    log_path = home / "jupyter.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
        base = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + start_seconds
            while not answers(f"{base}api/status?token={token}"):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter {subcommand} did not start:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.5)
            yield base, token
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


@functools.cache
def _refusing_socket() -> socket.socket:
    """A port of 127.0.0.1 that this process holds (the cache keeps the socket) and never listens on:
    a connection to it is refused."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    return held


@functools.cache
def _offline_flags() -> tuple[str, ...]:
    """Every request for a host other than 127.0.0.1 (``localhost`` and ``[::1]`` included, which
    Chromium would otherwise send direct) goes to a proxy that refuses it: the browser reaches
    nothing outside the test servers, whatever a page asks for, and the ``Recorder`` names it.
    Blocking there, rather than routing each request through Playwright and the test process (which
    also turns the browser's cache off), takes a sixth of the CPU time off the browser tests."""
    port = _refusing_socket().getsockname()[1]
    return (f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>;127.0.0.1")


def launch_chromium(playwright, **options):
    """Debian's Chromium, headless, with the flags that work on this kind of machine, offline."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_FLAGS, *_offline_flags()],
                                      **options)


def chromium_for_a_module():
    """A module fixture's body: Debian's Chromium for the module's tests, closed after them."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = launch_chromium(driver)
        yield browser
        browser.close()


def page_url(base: str, docname: str) -> str:
    return urllib.parse.urljoin(base, docname + ".html")


def without_fragment(url: str) -> str:
    """The page a link leads to: the URL without its ``#fragment`` and ``?query``."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def docname_of(base: str, url: str) -> str | None:
    """``book/index`` for ``<base>book/index.html#x``; None for a URL outside the site or not a page."""
    url = without_fragment(url)
    if not url.startswith(base) or not url.endswith(".html"):
        return None
    return url[len(base) : -len(".html")]


# A response that loads what was asked: 200, or 304 (the server saying that the copy the browser has
# cached is still current, once a page has asked for it before in the same browser context).
LOADED = (200, 304)


class Recorder:
    """Everything one page asks of the network and says on its console.

    A request for anything but the test server (another host, another port, a CDN) is recorded in
    ``outside``; one for another host never leaves the browser (:func:`launch_chromium`).
    """

    def __init__(self, base: str):
        self.base = base
        origin = urllib.parse.urlsplit(base)
        self._origin = (origin.scheme, origin.hostname, origin.port)
        self.requests: list[str] = []
        self.responses: list[tuple[int, str]] = []
        self.failed: list[str] = []
        self.outside: list[str] = []
        self.console_errors: list[str] = []
        self.console_warnings: list[str] = []

    def _is_local(self, url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            return True
        return (parts.scheme, parts.hostname, parts.port) == self._origin

    def _on_request(self, request):
        self.requests.append(request.url)
        if not self._is_local(request.url):
            self.outside.append(f"{request.method} {request.url} ({request.resource_type})")

    def _on_request_failed(self, request):
        if not self._is_local(request.url):
            return  # refused by the browser's proxy, already in self.outside
        self.failed.append(f"{request.method} {request.url}: {request.failure}")

    def _on_console(self, message):
        location = message.location or {}
        where = f" at {location.get('url', '?')}:{location.get('lineNumber', '?')}" if location.get("url") else ""
        text = f"console.{message.type}: {message.text}{where}"
        if message.type == "error":
            self.console_errors.append(text)
        elif message.type == "warning":
            self.console_warnings.append(text)

    def attach(self, page) -> None:
        self._handlers = {
            "request": self._on_request,
            "response": lambda response: self.responses.append((response.status, response.url)),
            "requestfailed": self._on_request_failed,
            "console": self._on_console,
            "pageerror": lambda error: self.console_errors.append(f"uncaught exception: {error}"),
            "websocket": lambda ws: self.outside.append(f"WebSocket {ws.url}"),
        }
        for event, handler in self._handlers.items():
            page.on(event, handler)

    def detach(self, page) -> None:
        """Stop recording ``page`` (which goes on to another page, recorded by another recorder)."""
        for event, handler in self._handlers.items():
            page.remove_listener(event, handler)

    def network_problems(self, *, walked: bool = False) -> list[str]:
        """Responses other than :data:`LOADED`, failed requests, and requests for another host.
        ``walked``: the pages were left as soon as they loaded (a walk from link to link), which
        cancels what a page still fetches (its favicon): a cancelled request (``net::ERR_ABORTED``)
        is then no problem; each page's own requests are checked by a visit that waits until the
        network is idle."""
        problems = [f"HTTP {status} for {url}" for status, url in self.responses if status not in LOADED]
        problems += [f"request failed: {failure}" for failure in self.failed
                     if not (walked and failure.endswith("net::ERR_ABORTED"))]
        problems += [f"request leaving the test server (blocked): {request}" for request in self.outside]
        return problems


# Installed before any script of the page runs: note when MathJax has finished its first typesetting.
MATHJAX_WATCH = """
(() => {
  const watch = () => {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(
        () => { window.__qkvMathDone = performance.now(); },
        (error) => { window.__qkvMathError = String(error); window.__qkvMathDone = performance.now(); });
      return;
    }
    const loadsMathJax = document.querySelector('script[src*="mathjax"]');
    if (document.readyState === 'complete' && !loadsMathJax) return;  // a page without math
    setTimeout(watch, 5);
  };
  watch();
})();
"""

MATHJAX_SETTLED = """() => window.__qkvMathDone !== undefined
    || (document.readyState === 'complete' && !document.querySelector('script[src*="mathjax"]'))"""

LOAD_TIMES = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return {load: nav ? nav.loadEventEnd - nav.startTime : null,
          mathDone: window.__qkvMathDone === undefined ? null : window.__qkvMathDone,
          mathError: window.__qkvMathError || null};
}"""

# Make every image load now (lazy ones included), then wait until each is decoded or has failed.
IMAGES = """async () => {
  const images = [...document.images];
  for (const img of images) img.loading = 'eager';
  for (let y = 0; y < document.documentElement.scrollHeight; y += window.innerHeight) {
    window.scrollTo(0, y);
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
  }
  window.scrollTo(0, 0);
  const timeout = (ms) => new Promise((resolve) => setTimeout(() => resolve('timed out'), ms));
  return Promise.all(images.map(async (img) => {
    const error = await Promise.race([img.decode().then(() => null, (e) => String(e)), timeout(20000)]);
    const link = img.closest('a');
    return {src: img.currentSrc || img.src || img.outerHTML.slice(0, 120), alt: img.alt,
            naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, error,
            shownWidth: img.getBoundingClientRect().width, inFigure: !!img.closest('figure'),
            figure: img.closest('figure') ? img.closest('figure').id : '', link: link ? link.href : ''};
  }));
}"""

# Typeset math, leftover TeX in the text a reader sees (code listings excluded), MathJax errors.
MATH = """(rawTexPattern) => {
  const skip = 'script,style,noscript,template,textarea,pre,code,.highlight,mjx-container';
  const rawTexRegex = new RegExp(rawTexPattern);
  const typesetter = /mathjax|katex|tex-(chtml|svg|mml)/i;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const rawTex = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.parentElement || node.parentElement.closest(skip)) continue;
    const text = node.nodeValue;
    const found = rawTexRegex.exec(text);
    if (found) {
      const around = text.slice(Math.max(0, found.index - 40), found.index + 60).replace(/\\s+/g, ' ');
      const link = node.parentElement.closest('a[href]');
      rawTex.push(around + (link ? ` (in a link to ${link.getAttribute('href')})` : ''));
    }
  }
  const title = rawTexRegex.exec(document.title);
  if (title) rawTex.push(`${document.title} (the page title, shown on the browser tab)`);
  const maths = [...document.querySelectorAll('.math')];
  return {
    mathElements: maths.length,
    untypeset: maths.filter((m) => !m.querySelector('mjx-container'))
                    .map((m) => m.textContent.trim().slice(0, 80)),
    containers: document.querySelectorAll('mjx-container').length,
    errors: [...document.querySelectorAll('mjx-merror')]
              .map((e) => e.getAttribute('data-mjx-error') || e.textContent.slice(0, 80)),
    rawTex,
    mathjaxVersion: (window.MathJax && window.MathJax.version) || null,
    // The math is typeset when the site is built: a page loads no typesetting script, and each
    // formula carries MathJax's hidden MathML for screen readers.
    typesetters: [...document.scripts].map((s) => s.src).filter((src) => typesetter.test(src))
      .concat(window.MathJax ? ['window.MathJax is defined'] : []),
    withoutMathML: [...document.querySelectorAll('mjx-container')]
      .filter((c) => !c.querySelector('mjx-assistive-mml math'))
      .map((c) => (c.closest('.math') || c).textContent.trim().slice(0, 80)),
  };
}"""

NAVIGATION = """() => ({
  sidebar: [...document.querySelectorAll('#pst-primary-sidebar a[href]')].map((a) => a.href),
  next: [...document.querySelectorAll('a.right-next')].map((a) => a.href),
  prev: [...document.querySelectorAll('a.left-prev')].map((a) => a.href),
  links: [...document.querySelectorAll('a[href]')].map((a) => a.href),
  icon: (document.querySelector('link[rel~="icon"]') || {}).href || null,
})"""

# Wrap every run of Chinese characters in a <span data-cjk-probe>, so that the fonts Chromium
# reports for the span are the fonts that drew those characters and nothing else.
CJK_PROBES = """(limit) => {
  const han = /\\p{Script=Han}/u;
  const run = /[\\p{Script=Han}\\u3000-\\u303f\\uff00-\\uffef]+/gu;
  const skip = 'script,style,noscript,template,textarea,svg,mjx-assistive-mml';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (node.parentElement && !node.parentElement.closest(skip) && han.test(node.nodeValue)) nodes.push(node);
  }
  const describe = (el) => {
    const parts = [];
    for (let e = el; e && e !== document.body && parts.length < 4; e = e.parentElement) {
      const cls = [...e.classList].filter((c) => !c.startsWith('data-')).slice(0, 2).join('.');
      parts.unshift(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (cls ? '.' + cls : ''));
    }
    return parts.join(' > ');
  };
  const probes = [];
  const seen = new Set();
  let next = 0;
  for (const node of nodes) {
    const text = node.nodeValue;
    const where = describe(node.parentElement);
    const fragment = document.createDocumentFragment();
    let last = 0;
    for (const match of text.matchAll(run)) {
      if (!han.test(match[0])) continue;
      fragment.append(text.slice(last, match.index));
      const span = document.createElement('span');
      span.textContent = match[0];
      fragment.append(span);
      last = match.index + match[0].length;
      const style = getComputedStyle(node.parentElement);
      const key = [match[0], style.fontFamily, style.fontWeight, style.fontStyle].join('|');
      if (seen.has(key) || probes.length >= limit) continue;
      seen.add(key);
      span.dataset.cjkProbe = String(next);
      probes.push({id: String(next++), text: match[0], fontFamily: style.fontFamily, where});
    }
    fragment.append(text.slice(last));
    node.replaceWith(fragment);
  }
  return probes;
}"""


@dataclasses.dataclass
class PageVisit:
    """What one page did when a reader's browser opened it."""

    docname: str
    url: str
    status: int | None
    recorder: Recorder
    load_ms: float | None = None
    math: dict = dataclasses.field(default_factory=dict)
    images: list[dict] = dataclasses.field(default_factory=list)
    cjk: list[dict] = dataclasses.field(default_factory=list)
    sidebar: list[str] = dataclasses.field(default_factory=list)
    next: list[str] = dataclasses.field(default_factory=list)
    prev: list[str] = dataclasses.field(default_factory=list)
    links: list[str] = dataclasses.field(default_factory=list)
    favicon: str | None = None
    screenshot: Path | None = None
    problems_before_checks: list[str] = dataclasses.field(default_factory=list)
    layout: dict = dataclasses.field(default_factory=dict)
    figures: dict = dataclasses.field(default_factory=dict)
    chrome: dict = dataclasses.field(default_factory=dict)
    math_fonts: dict = dataclasses.field(default_factory=dict)
    # "next", "prev" and "sidebar" (the sidebar's link to the page asked for): None when a reader could
    # click the link, else why not (:func:`clickable`)
    clickable: dict = dataclasses.field(default_factory=dict)


def _new_context(browser, **context_options):
    """A fresh browser context (empty cache and storage), 1280 px wide unless ``context_options`` say otherwise."""
    context = browser.new_context(**{"viewport": VIEWPORT, **context_options})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    return context


def new_page(browser, recorder: Recorder, **context_options):
    """A fresh browser context (:func:`_new_context`) with one page watched by ``recorder``."""
    context = _new_context(browser, **context_options)
    page = context.new_page()
    recorder.attach(page)
    return context, page


class ReaderTab:
    """One browser tab (1280 px wide unless ``context_options`` say otherwise) in which the visits
    open their pages one after the other, as a reader goes from page to page.

    The tab asks the browser not to use its cache (CDP ``Network.setCacheDisabled``), so that a page
    asks the server for everything, as on a first visit; a 304 the server may still answer counts as
    loaded (:data:`LOADED`). A new browser context for each page (an empty profile) cost the browser
    about 1.7 s of CPU time more than the page itself: its new renderer process.
    """

    def __init__(self, browser, **context_options):
        self.context = _new_context(browser, **context_options)
        self.page = self.context.new_page()
        self.page.add_init_script(MATHJAX_WATCH)
        self._cdp = self.context.new_cdp_session(self.page)  # kept attached: the setting lasts as long as it
        self._cdp.send("Network.enable")
        self._cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})

    @contextlib.contextmanager
    def recorded(self, recorder: Recorder) -> Iterator:
        """The tab's page, its requests and console recorded by ``recorder`` inside the block."""
        recorder.attach(self.page)
        try:
            yield self.page
        finally:
            recorder.detach(self.page)

    def close(self) -> None:
        self.context.close()


def visit(tab: ReaderTab, base: str, docname: str, screenshot_dir: Path | None, *,
          sidebar_target: str | None = None) -> PageVisit:
    """Open one page in ``tab`` (1280 px wide) as a reader would and collect everything the tests look at;
    ``sidebar_target``: a page whose link in the sidebar is tried too (:attr:`PageVisit.clickable`)."""
    recorder = Recorder(base)
    with tab.recorded(recorder) as page:
        context = tab.context
        result = open_typeset(page, base, docname, recorder, watch=False)
        times = page.evaluate(LOAD_TIMES)
        if times["mathError"]:
            result.problems_before_checks.append(f"MathJax failed: {times['mathError']}")
        result.load_ms = max(t for t in (times["load"], times["mathDone"]) if t is not None)
        result.images = page.evaluate(IMAGES)
        result.math = page.evaluate(MATH, RAW_TEX)
        result.math_fonts = page.evaluate(MATH_FONTS)
        result.layout = page.evaluate(LAYOUT)
        result.figures = page.evaluate(FIGURES)
        navigation = page.evaluate(NAVIGATION)
        result.sidebar, result.next, result.prev = navigation["sidebar"], navigation["next"], navigation["prev"]
        result.links = navigation["links"]
        # Headless Chromium need not fetch the favicon; a reader's browser does.
        result.favicon = navigation["icon"] or urllib.parse.urljoin(base, "/favicon.ico")
        if screenshot_dir is not None:
            result.screenshot = screenshot_dir / (docname.replace("/", "__") + ".png")
            page.screenshot(path=str(result.screenshot), full_page=FULL_PAGE_SCREENSHOTS)
        result.chrome = page.evaluate(CHROME)  # after the screenshot: it may scroll the sidebar
        # After the chrome too: trying a link scrolls it into view.
        result.clickable = {"next": clickable(page.locator("a.right-next")),
                            "prev": clickable(page.locator("a.left-prev"))}
        if sidebar_target is not None:
            link = sidebar_link(page, base, sidebar_target)
            result.clickable["sidebar"] = clickable(link) if link is not None else f"no link to {sidebar_target}"
        # Last, because it rewraps the page's text in probe spans.
        result.cjk = probe_cjk_fonts(context, page)
        page.wait_for_load_state("networkidle")  # late requests (fonts, the favicon) are recorded too
        return result


SIDEBAR_LINKS = "#pst-primary-sidebar a[href]"  # the sidebar's links, as NAVIGATION reads them
CLICK_TIMEOUT_MS = 5_000


def sidebar_link(page, base: str, docname: str):
    """The locator of the sidebar's (first) link to ``docname``, or None when the sidebar has none."""
    hrefs = page.eval_on_selector_all(SIDEBAR_LINKS, "links => links.map(a => a.href)")
    found = [i for i, href in enumerate(hrefs) if docname_of(base, href) == docname]
    return page.locator(SIDEBAR_LINKS).nth(found[0]) if found else None


def clickable(locator, timeout_ms: int = CLICK_TIMEOUT_MS) -> str | None:
    """None when a reader could click the first element of ``locator`` now, else why not. Playwright's
    trial click: the element is there, visible, steady, and the one the pointer would hit (nothing
    covers it); the click itself is not made, so the page stays."""
    if not locator.count():
        return "not on the page"
    try:
        locator.first.click(trial=True, timeout=timeout_ms)
    except Exception as error:  # noqa: BLE001 - Playwright's call log says what stood in the way
        lines = [line.strip(" -") for line in str(error).splitlines()]
        reasons = [line for line in lines if "intercepts pointer events" in line or line.startswith("element is not")]
        return reasons[-1] if reasons else lines[0]
    return None


def probe_cjk_fonts(context, page, limit: int = 400) -> list[dict]:
    """For each distinct run of Chinese text: the fonts Chromium drew it with (name, glyph count)."""
    probes = page.evaluate(CJK_PROBES, limit)
    if not probes:
        return []
    cdp = context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    for probe in probes:
        found = cdp.send("DOM.querySelector", {"nodeId": root, "selector": f'[data-cjk-probe="{probe["id"]}"]'})
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": found["nodeId"]})["fonts"]
        probe["fonts"] = fonts
    cdp.detach()
    return probes


class FontCoverage:
    """Which characters each installed font has glyphs for, as fontconfig (Chromium's source on Linux) says."""

    def __init__(self):
        if shutil.which("fc-list") is None:
            raise RuntimeError("fc-list (fontconfig) is missing: install Debian's chromium, which brings it")
        listing = subprocess.run(
            ["fc-list", "--format", "%{family}\t%{postscriptname}\t%{file}\t%{charset}\n"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        self.by_postscript: dict[str, list[tuple[int, int]]] = {}
        self.by_family: dict[str, list[list[tuple[int, int]]]] = {}
        self.by_file: dict[str, list[tuple[int, int]]] = {}
        for line in listing.splitlines():
            family, postscript, file, charset = (line.split("\t") + ["", "", "", ""])[:4]
            ranges = []
            for item in charset.split():
                low, _, high = item.partition("-")
                ranges.append((int(low, 16), int(high or low, 16)))
            self.by_file[file] = self.by_file.get(file, []) + ranges
            if postscript:
                self.by_postscript[postscript] = ranges
            for name in family.split(","):
                self.by_family.setdefault(name.strip().lower(), []).append(ranges)

    @staticmethod
    def _has(ranges, char: str) -> bool:
        code = ord(char)
        return any(low <= code <= high for low, high in ranges)

    def files_without(self, char: str) -> list[str]:
        """The installed font files that have no glyph for ``char``."""
        return [file for file, ranges in self.by_file.items() if file and not self._has(ranges, char)]

    def covers(self, font: dict, char: str) -> bool | None:
        """True/False if fontconfig knows the font Chromium reported; None if it does not (a web font)."""
        if font.get("isCustomFont"):
            return None
        ranges = self.by_postscript.get(font.get("postScriptName", ""))
        if ranges is not None:
            return self._has(ranges, char)
        faces = self.by_family.get(font.get("familyName", "").lower())
        if faces is None:
            return None
        return any(self._has(ranges, char) for ranges in faces)


# Widths a reader's screen has: a laptop (the theme shows both sidebars) and a phone.
WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
PHONE_WINDOW = {"viewport": PHONE, "is_mobile": True, "has_touch": True}  # a phone's screen, 390 px, touch

# The MathJax fonts a page drew its math in (a font face is "loaded" once the page's layout used
# it, not when a preload fetched it), as the files its stylesheets name, and the fonts it preloads.
MATH_FONTS = """async () => {
  await document.fonts.ready;
  const files = {};
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      if (!(rule instanceof CSSFontFaceRule)) continue;
      const family = rule.style.getPropertyValue('font-family').replace(/["']/g, '');
      const src = /url\\("?([^")]+)"?\\)/.exec(rule.style.getPropertyValue('src'));
      if (src) files[family] = new URL(src[1], sheet.href).href;
    }
  }
  const drawn = [...document.fonts]
    .filter((face) => face.status === 'loaded' && face.family.replace(/["']/g, '').startsWith('MJX'))
    .map((face) => files[face.family.replace(/["']/g, '')] || face.family);
  const preloaded = [...document.querySelectorAll('link[rel="preload"][as="font"]')].map((link) => link.href);
  return {drawn, preloaded};
}"""

# What does not fit its box. Code blocks, display equations and tables are measured where they are
# drawn: an element whose content is wider than the box that shows it (scrollWidth > clientWidth) is
# clipped or scrolls sideways. Display math is also measured against its container, and inline math
# against the article, since MathJax's output may spill out of a box without making it scroll. The
# page itself: the document wider than the window.
LAYOUT = """() => {
  const MIN_MATH_SCALE = 0.85;  // fit-math.js never draws an equation smaller than this
  const article = document.querySelector('.bd-article') || document.querySelector('main') || document.body;
  const describe = (el) => {
    const section = el.closest('section[id]');
    const text = (el.innerText || el.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 70);
    return (section ? '#' + section.id + ': ' : '') + text;
  };
  const over = (el, slack = 1) => el.scrollWidth > el.clientWidth + slack;
  const found = [];
  const add = (kind, el, content, box) =>
    found.push({kind, where: describe(el), content: Math.round(content), box: Math.round(box)});
  for (const pre of article.querySelectorAll('pre')) {
    if (pre.offsetParent !== null && over(pre)) add('code', pre, pre.scrollWidth, pre.clientWidth);
  }
  const articleRight = article.getBoundingClientRect().right;
  for (const mjx of article.querySelectorAll('mjx-container')) {
    if (mjx.offsetParent === null) continue;
    const math = mjx.querySelector('mjx-math') || mjx;
    const width = math.getBoundingClientRect().width;
    if (mjx.getAttribute('display') === 'true') {
      const box = mjx.clientWidth || mjx.parentElement.clientWidth;
      const scale = parseFloat(mjx.dataset.fitScale || '1');
      const scrolls = mjx.classList.contains('qkv-math-scrolls') && getComputedStyle(mjx).overflowX === 'auto';
      if (scale < MIN_MATH_SCALE - 0.001) add('equation drawn too small', mjx, scale * 100, MIN_MATH_SCALE * 100);
      if (width > box + 1 || over(mjx)) add(scrolls ? 'equation scrolls' : 'equation', mjx, width, box);
    } else if (math.getBoundingClientRect().right > articleRight + 1) {
      add('inline math', mjx, math.getBoundingClientRect().right, articleRight);
    }
  }
  for (const table of article.querySelectorAll('table')) {
    if (table.offsetParent === null) continue;
    const box = table.parentElement;
    if (over(box, 2) || table.getBoundingClientRect().width > box.clientWidth + 2) {
      add('table', table, table.getBoundingClientRect().width, box.clientWidth);
    }
  }
  const root = document.documentElement;
  const page = root.scrollWidth > root.clientWidth + 1
    ? {content: root.scrollWidth, box: root.clientWidth} : null;
  return {offenders: found, page};
}"""

# Every picture in the article: its alt text, whether it sits in a <figure>, and that figure's caption;
# and every <figure>, with or without a picture.
FIGURES = """() => {
  const article = document.querySelector('.bd-article') || document.querySelector('main') || document.body;
  const caption = (figure) => {
    const c = figure && figure.querySelector('figcaption');
    return c ? c.innerText.replace(/\\s+/g, ' ').trim() : '';
  };
  const images = [...article.querySelectorAll('img')].map((img) => {
    const figure = img.closest('figure');
    return {src: img.getAttribute('src') || '', alt: (img.getAttribute('alt') || '').trim(),
            inFigure: !!figure, caption: caption(figure)};
  });
  const figures = [...article.querySelectorAll('figure')].map((figure) => ({
    id: figure.id || '', caption: caption(figure), images: figure.querySelectorAll('img').length}));
  return {images, figures};
}"""


def visit_phone(tab: ReaderTab, base: str, docname: str, screenshot_dir: Path | None) -> PageVisit:
    """Open one page in ``tab``, a phone's screen (``ReaderTab(browser, **PHONE_WINDOW)``), and measure
    what does not fit."""
    recorder = Recorder(base)
    with tab.recorded(recorder) as page:
        result = open_typeset(page, base, docname, recorder, watch=False)
        page.evaluate("document.fonts.ready.then(() => true)")
        result.images = page.evaluate(IMAGES)  # decoded pictures have their real height
        result.layout = page.evaluate(LAYOUT)
        if screenshot_dir is not None:
            result.screenshot = screenshot_dir / ("phone-" + docname.replace("/", "__") + ".png")
            page.screenshot(path=str(result.screenshot), full_page=FULL_PAGE_SCREENSHOTS)
        page.wait_for_load_state("networkidle")  # nothing of this page is left to load into the next one's record
        return result


# The theme's own chrome at the top of the page: every search field a reader can see (the fields and
# the buttons drawn as fields, not the magnifier icon), and the sidebar's site title, with whatever
# is drawn over it at three points along its middle (null where the title itself is on top). The
# theme scrolls the sidebar to the page's own entry, which can take the title out of view: it is
# scrolled back first, as a reader would, so that only what is drawn over it counts.
CHROME = """() => {
  const seen = (el) => {
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && box.right > 0 && box.left < window.innerWidth
      && el.checkVisibility({visibilityProperty: true, opacityProperty: true});
  };
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + [...el.classList].slice(0, 3).map((c) => '.' + c).join('');
  const where = (el) => {
    const parts = [];
    for (let e = el.parentElement; e && e !== document.body && parts.length < 3; e = e.parentElement) parts.unshift(describe(e));
    return parts.join(' > ');
  };
  const fields = [...document.querySelectorAll('input[type="search"], input[name="q"], .search-button-field')]
    .filter(seen).map((el) => ({what: describe(el), where: where(el), top: Math.round(el.getBoundingClientRect().top)}));
  const title = document.querySelector('.navbar-brand .logo__title') || document.querySelector('.navbar-brand');
  if (!title || !seen(title)) return {searchFields: fields, title: null, coveredBy: []};
  title.scrollIntoView({block: 'nearest', inline: 'nearest'});
  const box = title.getBoundingClientRect();
  const y = box.top + box.height / 2;
  const coveredBy = [box.left + 2, box.left + box.width / 2, box.right - 2].map((x) => {
    const hit = document.elementFromPoint(x, y);
    if (!hit) return 'nothing: the title is outside the window';
    return title.contains(hit) || hit.contains(title) ? null : describe(hit);
  });
  return {searchFields: fields, title: title.textContent.trim(), coveredBy};
}"""


def open_typeset(page, base: str, docname: str, recorder: Recorder, *, watch: bool = True) -> PageVisit:
    """Open ``docname`` and wait until MathJax has typeset it; a failure to typeset is noted. ``watch``:
    install the script that notes when MathJax is done (a :class:`ReaderTab` has it already)."""
    if watch:
        page.add_init_script(MATHJAX_WATCH)
    url = page_url(base, docname)
    response = page.goto(url, wait_until="load")
    result = PageVisit(docname, url, response.status if response else None, recorder)
    try:
        page.wait_for_function(MATHJAX_SETTLED, timeout=PAGE_TIMEOUT_MS)
    except Exception as error:  # noqa: BLE001 - reported as a finding, the other checks still run
        result.problems_before_checks.append(f"MathJax did not finish typesetting: {error}")
    return result
