"""How long a reader waits for a chapter's math: page ready, against plain pages, in the same run.

    .venv/bin/python bench/page_ready.py                              # the build in _build/html
    .venv/bin/python bench/page_ready.py --before /other/_build/html  # and another build, side by side
    .venv/bin/python bench/page_ready.py --rounds 9 --width 390 --pages book/multi_head

Each build is copied to a temporary folder, served on 127.0.0.1 (a port of its own) and opened
in headless Chromium (Debian's, with the browser test's flags). Every page is visited twice in a
fresh browser context: cold (nothing cached, a reader's first visit) and warm (the same page
again after a blank one: its files come from the browser's cache, as on a reader's return).
A page is ready when its load event has fired, MathJax has typeset it if the page loads MathJax,
the fonts it uses have arrived (``document.fonts.ready``), and the next frame is painted: from then
on its math is visible. The time is from the navigation's start to then.

Two plain pages, of the same theme, stylesheets and scripts, and no math:
- the site's general index (``genindex.html``, about 60 KB) of the build given by ``--site``;
- each chapter's own plain twin, the same page with every formula replaced by its TeX as plain
  text (and no font preloads), written beside it in the copy: a static page of the chapter's
  own length, so that the ratio to it is what the math costs (a long page such as the reference,
  1.2 MB of which 0.4 MB is math, takes long to lay out with or without math).
Rounds interleave every page of every build, so that a busy machine slows all of them alike; the
medians are printed, with each chapter's median over both plain pages. The load average before and
after is printed too: on a shared machine a time means little without it. Prints the figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the browser test's server and Chromium, shared with it

from tests.browser_support import launch_chromium, serve  # noqa: E402

PLAIN = "genindex"
CHAPTERS = ["book/scaled_dot_product", "book/why_sqrt_dk", "book/multi_head", "book/transformer_block",
            "book/decoding", "book/reference", "zh-TW/book/multi_head"]
TWIN = ".plain"  # book/multi_head.plain.html: the chapter with its math as TeX text
FORMULA = re.compile(r"<mjx-container\b.*?</mjx-container>", re.S)
TEX = re.compile(r'<annotation encoding="application/x-tex">(.*?)</annotation>', re.S)
FONT_PRELOAD = re.compile(r'<link rel="preload" href="[^"]*mathjax/fonts/[^"]*"[^>]*>\n?')

# Installed before the page's own scripts: note the time the page is ready (see the docstring).
READY_WATCH = """
(() => {
  const typeset = () => new Promise((resolve) => {
    const wait = () => {
      const mj = window.MathJax;
      if (mj && mj.startup && mj.startup.promise) return mj.startup.promise.then(resolve, resolve);
      if (!document.querySelector('script[src*="mathjax"]')) return resolve();  // loads no MathJax
      setTimeout(wait, 5);
    };
    wait();
  });
  window.addEventListener('load', () => {
    typeset()
      .then(() => document.fonts.ready)
      .then(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0))))
      .then(() => { window.__qkvReady = performance.now(); });
  });
})();
"""


def plain_twin(chapter_html: str) -> str:
    """The chapter's page with every formula as its TeX in plain text, and no font preloads."""

    def as_text(formula: re.Match) -> str:
        tex = TEX.search(formula.group(0))
        return f'<span class="tex">{tex.group(1) if tex else ""}</span>'

    return FONT_PRELOAD.sub("", FORMULA.sub(as_text, chapter_html))


def copy_with_twins(folder: Path, pages: list[str], into: Path) -> Path:
    """A copy of the build ``folder`` with the plain twin of each of ``pages`` beside it."""
    shutil.copytree(folder, into, symlinks=True)
    for page in pages:
        chapter = (into / f"{page}.html").read_text(encoding="utf-8")
        (into / f"{page}{TWIN}.html").write_text(plain_twin(chapter), encoding="utf-8")
    return into


def page_ready_ms(browser, url: str, width: int) -> tuple[float, float]:
    """Navigation start to page ready (see the docstring) of a cold, then a warm visit to ``url`` (ms)."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(READY_WATCH)
        times = []
        for _ in ("cold", "warm"):
            page.goto(url, wait_until="load", timeout=120_000)
            page.wait_for_function("() => window.__qkvReady !== undefined", timeout=120_000)
            times.append(page.evaluate("() => window.__qkvReady"))
            page.goto("about:blank")
        return times[0], times[1]
    finally:
        context.close()


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="the build to measure")
    parser.add_argument("--before", type=Path, help="another build (say, main's) measured in the same run")
    parser.add_argument("--rounds", type=int, default=7, help="visits of every page (default 7)")
    parser.add_argument("--width", type=int, default=1280, help="the window's width in px (default 1280)")
    parser.add_argument("--pages", nargs="+", default=CHAPTERS, help="the chapters (docnames) to open")
    args = parser.parse_args()

    builds = {"after": args.site} | ({"before": args.before} if args.before else {})
    for name, folder in builds.items():
        missing = [p for p in [PLAIN, *args.pages] if not (folder / f"{p}.html").is_file()]
        if missing:
            parser.error(f"{folder} has no {', '.join(missing)} (.html): build the site first (make site)")
    print(f"{args.rounds} rounds at {args.width} px; before: {load()}", flush=True)
    pages = [PLAIN] + [page + kind for page in args.pages for kind in ("", TWIN)]
    times: dict[tuple[str, str, str], list[float]] = {}
    with contextlib.ExitStack() as stack, sync_playwright() as driver:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="page-ready-")))
        bases = {
            name: stack.enter_context(serve(copy_with_twins(folder, args.pages, scratch / name)))
            for name, folder in builds.items()
        }
        browser = launch_chromium(driver)
        visits = [(name, page) for page in pages for name in builds]
        page_ready_ms(browser, bases["after"] + PLAIN + ".html", args.width)  # Chromium's own start-up
        for _ in range(args.rounds):
            for name, page in visits:
                cold, warm = page_ready_ms(browser, f"{bases[name]}{page}.html", args.width)
                times.setdefault((name, page, "cold"), []).append(cold)
                times.setdefault((name, page, "warm"), []).append(warm)
        browser.close()
    print(f"after: {load()}")
    for cache in ("cold", "warm"):
        report(times, builds, args.pages, cache, args.rounds)


def report(times, builds, chapters: list[str], cache: str, rounds: int) -> None:
    """The medians of one kind of visit (cold or warm), and their ratios to the plain pages."""
    median = {key[:2]: statistics.median(values) for key, values in times.items() if key[2] == cache}
    index = median[("after", PLAIN)]
    print(f"\n{cache} visits: page ready, median of {rounds} (ms); over the plain index ({PLAIN} of "
          f"--site: {index:.0f} ms) and over the chapter's plain twin (its math as TeX text)")
    print(f"{'page':32}" + "".join(f"{name + ' ms':>12}{'/index':>8}{'/twin':>7}{'twin ms':>9}"
                                  for name in builds))
    print(f"{PLAIN:32}" + "".join(f"{median[(name, PLAIN)]:12.0f}{median[(name, PLAIN)] / index:8.2f}{'':16}"
                                  for name in builds))
    for page in chapters:
        cells = []
        for name in builds:
            chapter, twin = median[(name, page)], median[(name, page + TWIN)]
            cells.append(f"{chapter:12.0f}{chapter / index:8.2f}{chapter / twin:7.2f}{twin:9.0f}")
        print(f"{page:32}" + "".join(cells))
    for name in builds:
        over_index = [median[(name, page)] / index for page in chapters]
        over_twin = [median[(name, page)] / median[(name, page + TWIN)] for page in chapters]
        print(f"{name}: chapters' median {statistics.median(over_index):.2f}x the plain index (worst "
              f"{max(over_index):.2f}x), {statistics.median(over_twin):.2f}x their plain twins "
              f"(worst {max(over_twin):.2f}x)")


if __name__ == "__main__":
    main()
