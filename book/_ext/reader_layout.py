"""Sphinx extension: every page fits its reader's screen.

Adds ``_static/fit-math.js`` to every page: a display equation wider than its column (on a
phone, say) is drawn smaller until it fits, down to 85 % of its size, and scrolls sideways in
its own box beyond that, since MathJax 3 cannot break a line. The rest of the layout is in
``_static/course.css``; ``tests/test_site_browser.py`` measures the result at 1280 and at 390
pixels.
"""

from __future__ import annotations


def setup(app):
    app.add_js_file("fit-math.js")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
