"""How long a reader waits for a chapter's math: page ready, against a plain page, in the same run.

    .venv/bin/python bench/page_ready.py                              # the build in _build/html
    .venv/bin/python bench/page_ready.py --before /other/_build/html  # and another build, side by side
    .venv/bin/python bench/page_ready.py --rounds 9 --width 390

Each build is served on 127.0.0.1 (a port of its own) and opened in headless Chromium (Debian's,
with the browser test's flags), every visit in a fresh browser context, so nothing is cached
between visits: a reader's first visit.
A page is ready when its load event has fired, MathJax has typeset it if the page loads MathJax,
the fonts it uses have arrived (``document.fonts.ready``), and the next frame is painted: from then
on its math is visible. The time is from the navigation's start to then.

The plain page is the site's general index (``genindex.html``) of the build given by ``--site``:
the same theme, stylesheets and scripts as a chapter, and no math. Rounds interleave every page
of every build, so that a busy machine slows all of them alike; the medians are printed, and each
chapter's median over the plain page's. The load average before and after is printed too: on a
shared machine a time means little without it. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the browser test's server and Chromium, shared with it

from tests.browser_support import launch_chromium, serve  # noqa: E402

PLAIN = "genindex"
CHAPTERS = ["book/scaled_dot_product", "book/why_sqrt_dk", "book/multi_head", "book/transformer_block",
            "book/decoding", "book/reference"]

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


def page_ready_ms(browser, url: str, width: int) -> float:
    """Navigation start to page ready (see the docstring) of one first visit to ``url``, in ms."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(READY_WATCH)
        page.goto(url, wait_until="load", timeout=120_000)
        page.wait_for_function("() => window.__qkvReady !== undefined", timeout=120_000)
        return page.evaluate("() => window.__qkvReady")
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
    times: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack, sync_playwright() as driver:
        bases = {name: stack.enter_context(serve(folder)) for name, folder in builds.items()}
        browser = launch_chromium(driver)
        visits = [(name, page) for page in [PLAIN, *args.pages] for name in builds]
        page_ready_ms(browser, bases["after"] + PLAIN + ".html", args.width)  # Chromium's own start-up
        for _ in range(args.rounds):
            for name, page in visits:
                ms = page_ready_ms(browser, f"{bases[name]}{page}.html", args.width)
                times.setdefault((name, page), []).append(ms)
        browser.close()
    print(f"after: {load()}\n")
    plain = statistics.median(times[("after", PLAIN)])
    print(f"page ready, median of {args.rounds} (ms), and over the plain page ({PLAIN} of --site: "
          f"{plain:.0f} ms)")
    print(f"{'page':32} " + "".join(f"{name:>18}" for name in builds))
    for page in [PLAIN, *args.pages]:
        cells = []
        for name in builds:
            median = statistics.median(times[(name, page)])
            cells.append(f"{median:8.0f} ({median / plain:4.2f}x)")
        print(f"{page:32} " + "".join(f"{cell:>18}" for cell in cells))
    for name in builds:
        medians = [statistics.median(times[(name, page)]) for page in args.pages]
        print(f"{name}: chapters' median {statistics.median(medians):.0f} ms, "
              f"{statistics.median(medians) / plain:.2f}x the plain page, worst {max(medians) / plain:.2f}x")


if __name__ == "__main__":
    main()
