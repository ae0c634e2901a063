"""Sphinx extension: let Sphinx read the chapters in several processes (``sphinx-build -j``).

Sphinx reads pages in parallel only when every loaded extension declares that it is safe to;
one that declares nothing makes Sphinx warn (an error with ``-W``) and read one page at a
time. Two extensions that Jupyter Book loads declare nothing (their ``setup`` returns no
metadata), and both were read for this:

- sphinx-multitoc-numbering 0.1.3, loaded by sphinx-external-toc: it replaces
  ``TocTreeCollector.assign_section_numbers``, which Sphinx calls once, in the main process,
  after it has merged what the reading processes found;
- sphinx-jupyterbook-latex 1.0.0: its two read-time transforms change only the page being
  read; everything else it does runs only for the LaTeX builder.

Neither keeps state from one page to the next, so both are declared safe for parallel reading,
for the versions read only: another version keeps its own declaration (or its silence, and
Sphinx's warning comes back until it is read again). Writing in parallel is Sphinx's default.
"""

from __future__ import annotations

REVIEWED = {"sphinx_multitoc_numbering": "0.1.3", "sphinx_jupyterbook_latex": "1.0.0"}


def declare_reviewed_extensions(app, config) -> None:
    """Mark the reviewed extensions, at the reviewed versions, as safe for parallel reading."""
    for name, version in REVIEWED.items():
        extension = app.extensions.get(name)
        if extension is None or extension.parallel_read_safe is not None:
            continue
        if getattr(extension.module, "__version__", None) == version:
            extension.parallel_read_safe = True


def setup(app):
    # config-inited comes after every extension in `extensions` has been set up.
    app.connect("config-inited", declare_reviewed_extensions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
