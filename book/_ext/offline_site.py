"""Sphinx extension: serve MathJax from the built site, so no page loads anything from another host.

MathJax 3.2.2 comes from the pip package django-static-mathjax. It is copied into
``_static/mathjax`` when the build finishes rather than listed in ``html_static_path``,
because Jupyter Book adds a ``<script>`` tag for every ``.js`` file found there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import mathjax  # from django-static-mathjax

MATHJAX_SOURCE = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
MATHJAX_ENTRY = "mathjax/tex-chtml.js"  # relative to _static/


def use_local_mathjax(app, config):
    config.mathjax_path = MATHJAX_ENTRY


def copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "mathjax"
    if not (target / "tex-chtml.js").exists():
        shutil.copytree(MATHJAX_SOURCE, target, dirs_exist_ok=True)


def setup(app):
    app.connect("config-inited", use_local_mathjax)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
