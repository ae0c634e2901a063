"""The instructor's side of manual grading, for the tests: a real formgrader, and a browser that watches.

- :func:`formgrader`: a Jupyter server with nbgrader's extensions (as ``jupyter lab`` starts
  it in the course folder), on 127.0.0.1 with a random token, settings of its own;
- :class:`Watch`: everything one page does: every request (a request the page was not expected
  to make is blocked and recorded), every dialog, every console message and uncaught error;
- :data:`INSPECT`: what a student's script would have left in the page (the marks of
  :mod:`tests.hostile_markup`), and every element or attribute through which one could run.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from .browser_support import fetch, jupyter


@contextlib.contextmanager
def formgrader(course: Path, home: Path) -> Iterator[tuple[str, str]]:
    """A Jupyter server serving ``course``, started in it (so that formgrader reads its nbgrader_config.py),
    with nothing of this machine's Jupyter settings; yields ``(base URL, token)``."""
    env = {"JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data")}
    with jupyter("server", course, home, env=env) as (base, token):
        yield base, token


def api(base: str, token: str, path: str) -> tuple[int, bytes]:
    """GET ``path`` of the Jupyter server, as the instructor (with the token)."""
    return fetch(f"{base}{path}{'&' if '?' in path else '?'}token={token}")


class Watch:
    """Every request, dialog and console message of one page; requests not ``allowed`` are blocked."""

    def __init__(self, allowed):
        self.allowed = allowed  # URL -> bool
        self.blocked: list[str] = []
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.failed: list[str] = []

    def _route(self, route, request):
        if self.allowed(request.url):
            route.continue_()
        else:
            self.blocked.append(f"{request.method} {request.url} ({request.resource_type})")
            route.abort("blockedbyclient")

    def _dialog(self, dialog):
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def attach(self, page) -> None:
        page.route("**/*", self._route)
        page.on("dialog", self._dialog)
        page.on("console", lambda message: self.console.append(
            f"console.{message.type}: {message.text} ({message.location.get('url', '')[:80]})"))
        page.on("pageerror", lambda error: self.console.append(f"uncaught: {error}"))
        page.on("requestfailed", lambda request: self.allowed(request.url) and
                self.failed.append(f"{request.url}: {request.failure}"))
        page.on("response", lambda response: response.status >= 400 and
                self.failed.append(f"HTTP {response.status} {response.url}"))
        page.on("websocket", lambda socket: self.blocked.append(f"WebSocket {socket.url}"))
        page.on("popup", lambda popup: self.blocked.append(f"popup {popup.url}"))

    def problems(self) -> list[str]:
        """Everything a page that runs only its own scripts would never do."""
        return ([f"request not needed (blocked): {r}" for r in self.blocked]
                + [f"dialog: {d}" for d in self.dialogs] + [f"console: {c}" for c in self.console]
                + [f"failed: {f}" for f in self.failed])


def same_server(base: str, *prefixes: str):
    """A test of URLs: on the server at ``base``, under one of the path ``prefixes``."""
    origin = urllib.parse.urlsplit(base)

    def allowed(url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        if (parts.scheme, parts.netloc) != (origin.scheme, origin.netloc):
            return parts.scheme == "data"
        path = urllib.parse.unquote(parts.path)
        return any(path.startswith(prefix) for prefix in prefixes)

    return allowed


def under_folders(*folders: Path):
    """A test of URLs: a file under one of ``folders`` (or a ``data:`` URL)."""
    roots = [str(Path(f).resolve()) + os.sep for f in folders]

    def allowed(url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "data":
            return True
        path = urllib.parse.unquote(parts.path)
        return parts.scheme == "file" and any(path.startswith(root) for root in roots)

    return allowed


# Wait until MathJax has typeset the page (or there is none), so that what it drew is inspected too.
SETTLED = """async () => {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) { await mj.startup.promise; }
  await new Promise((resolve) => setTimeout(resolve, 300));
}"""

# What a page holds that a script of the student's would have left, or could run through.
INSPECT = """() => {
  const body = document.body;
  const inMath = (el) => el.closest('mjx-container, #MJX-SVG-global-cache') !== null;
  const found = {handlers: [], scriptUrls: [], live: [], styled: [], foreignLinks: [], pictures: []};
  for (const el of document.querySelectorAll('*')) {
    for (const attribute of el.attributes) {
      const name = attribute.name.toLowerCase(), value = attribute.value.replace(/\\s/g, '').toLowerCase();
      if (name.startsWith('on')) found.handlers.push(`${el.tagName} ${name}=${attribute.value.slice(0, 60)}`);
      if (/^(javascript|vbscript|data:text\\/html)/.test(value)) found.scriptUrls.push(`${el.tagName} ${name}=${value.slice(0, 60)}`);
    }
  }
  const live = 'script, iframe, frame, object, embed, form, base, meta, link, style, video, audio, source, details, noscript, svg, math';
  for (const el of body.querySelectorAll(live)) if (!inMath(el)) found.live.push(el.outerHTML.slice(0, 100));
  const shown = ['.text_cell_render', '.output_subarea'];
  const within = (...what) => shown.flatMap((s) => what.map((w) => `${s} ${w}`)).join(', ');
  for (const el of body.querySelectorAll(within('[style]', '[id]', '[class]'))) {
    if (inMath(el)) continue;
    const classes = [...el.classList].filter((c) => !/^(highlight|hl-[\\w+-]+|[a-z]{1,3}[0-9]?|ansi-[\\w-]+|qkv-[\\w-]+)$/.test(c));
    if (el.hasAttribute('style') || el.id || classes.length) found.styled.push(el.outerHTML.slice(0, 100));
  }
  for (const a of body.querySelectorAll(within('a[href]'))) {
    if (!/^(https?:|mailto:)/i.test(a.getAttribute('href'))) found.foreignLinks.push(a.outerHTML.slice(0, 100));
  }
  for (const el of body.querySelectorAll('mjx-container [style]')) {
    if (/position|url\\(/i.test(el.getAttribute('style'))) found.styled.push(el.outerHTML.slice(0, 100));
  }
  for (const img of body.querySelectorAll('img')) {
    if (img.hasAttribute('src') && !img.getAttribute('src').startsWith('data:image/')) found.pictures.push(img.outerHTML.slice(0, 100));
  }
  return {
    title: document.title, pwned: body.hasAttribute('data-pwned'),
    marked: document.querySelectorAll('#pwned, .pwned-class').length,
    mathjax: (window.MathJax && window.MathJax.version) || null,
    typeset: document.querySelectorAll('mjx-container').length,
    text: body.innerText,
    ...found,
  };
}"""
