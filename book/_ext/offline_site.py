"""Sphinx extension: a site that works offline and loads without errors in the browser.

MathJax 3.2.2 comes from the pip package django-static-mathjax. It is copied into
``_static/mathjax`` when the build finishes rather than listed in ``html_static_path``,
because Jupyter Book adds a ``<script>`` tag for every ``.js`` file found there.

Inline scripts that an extension adds after the HTML builder has started (sphinx-thebe's
``const THEBE_JS_URL = ...``, sphinx-togglebutton's selector) are written into every page
twice by Sphinx 7.4; the second ``const`` is a SyntaxError in the reader's console. Each
page keeps the first copy only.

MathJax is loaded on every page, not only on pages with equations: the search page has no math of
its own but typesets the math in the results it adds (``_static/search-math.js``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import mathjax  # from django-static-mathjax

MATHJAX_SOURCE = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
MATHJAX_ENTRY = "mathjax/tex-chtml.js"  # relative to _static/


def use_local_mathjax(app, config):
    config.mathjax_path = MATHJAX_ENTRY


def _script_key(script):
    """What makes two script tags the same: the file (None and "" both mean inline) and the attributes."""
    attributes = getattr(script, "attributes", {})
    return (str(getattr(script, "filename", script) or ""), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    unique = []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def typeset_search_results(app, pagename, templatename, context, doctree):
    if pagename == "search":
        app.add_js_file("search-math.js")


def copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "mathjax"
    if not (target / "tex-chtml.js").exists():
        shutil.copytree(MATHJAX_SOURCE, target, dirs_exist_ok=True)


def setup(app):
    app.connect("config-inited", use_local_mathjax)
    # MathJax on every page, not only on pages with equations: the search results show math.
    app.set_html_assets_policy("always")
    app.connect("html-page-context", typeset_search_results)
    # After the other extensions (default priority 500) have added their per-page scripts.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
