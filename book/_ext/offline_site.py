"""Sphinx extension: a site that loads without errors in the browser.

Inline scripts that an extension adds after the HTML builder has started (sphinx-thebe's
``const THEBE_JS_URL = ...``, sphinx-togglebutton's selector) are written into every page
twice by Sphinx 7.4; the second ``const`` is a SyntaxError in the reader's console. Each
page keeps the first copy only.

The site's math needs nothing from another host either: it is typeset when the site is built
(``static_math.py``), and its fonts are served from the build.
"""

from __future__ import annotations


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


def setup(app):
    # After the other extensions (default priority 500) have added their per-page scripts.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
