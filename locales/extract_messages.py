"""Write the message templates (``.pot``) that Sphinx's gettext builder does not write.

    python locales/extract_messages.py SITE_DIR KERNEL_DIR EXERCISES_DIR   # `make translations` runs this

``sphinx-build -b gettext`` extracts every page's prose into ``SITE_DIR/book/<page>.pot``. The
other catalogues speak to a reader of the site or to a student, and this script extracts them
with Babel:

- ``SITE_DIR/sphinx.pot``: the theme's words. pydata-sphinx-theme's own template
  (``pydata_sphinx_theme/locale/sphinx.pot``, whose only Chinese catalogue is Simplified) and
  every ``_()`` of the templates in ``book/_templates/``;
- ``SITE_DIR/course.pot``: the words of the course's Sphinx extensions (``book/_ext``, every
  ``_()``), and the site's title and author from ``_config.yml``;
- ``KERNEL_DIR/qkv_book.pot``: what the chapter kernels show in words: every ``_()`` and
  ``ngettext()`` in ``src/qkv_book/`` and in the code cells of the chapters (``book/*.md``).
  Its catalogues ship in the course package, ``src/qkv_book/locales/``;
- ``EXERCISES_DIR/messages/qkv_exercises.pot``: what the problem sets' checks say to a student
  (every ``_()``, ``N_()`` and ``ngettext()`` in ``src/qkv_exercises/``, a slip's advice and an
  option's text included) and what the feedback pages say (every ``_()``, ``N_()``, ``Note()`` and
  ``PluralNote()`` in ``src/qkv_grading/``: the page's words, the grader's verdicts and notes).
  Its catalogues ship in the course package too, ``src/qkv_exercises/locales/``;
- ``EXERCISES_DIR/notebooks/<problem set>.pot``: the markdown of each problem set's source
  notebook, block by block (:func:`qkv_grading.translation.markdown_messages`). Its catalogues
  live in the course folder, ``exercises/locales/``, where the release and the grader read them.

The templates carry a fixed creation date (as ``make translations`` gives Sphinx's), so that
updating unchanged catalogues changes nothing in them. Prints what it wrote; the catalogues
themselves are updated from these templates by ``sphinx-intl update`` (see ``locales/README.md``).
"""

from __future__ import annotations

import argparse
import io
import sys
from datetime import datetime, timezone
from pathlib import Path

import yaml
from babel.messages.catalog import Catalog
from babel.messages.extract import extract, extract_from_file
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
FIXED_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)  # as SOURCE_DATE_EPOCH=1767225600 gives Sphinx
KEYWORDS = {"_": None, "N_": None, "gettext": None, "ngettext": (1, 2)}
# qkv_exercises: a slip's advice (the second argument of Slip) is a message too
EXERCISE_KEYWORDS = {**KEYWORDS, "Slip": (2,)}
# qkv_grading: a note on a submission that the feedback page shows (qkv_grading.notes)
GRADING_KEYWORDS = {**KEYWORDS, "Note": None, "PluralNote": (1, 2)}


def new_catalogue(project: str) -> Catalog:
    return Catalog(project=project, creation_date=FIXED_DATE, revision_date=FIXED_DATE, fuzzy=False)


def add_python(catalogue: Catalog, path: Path, source: str | None = None, keywords: dict = KEYWORDS) -> None:
    """Add the ``_()``/``ngettext()`` messages of a Python file (or of ``source``, code read from ``path``)."""
    if source is None:
        found = extract_from_file("python", str(path), keywords=keywords)
    else:
        found = extract("python", io.BytesIO(source.encode("utf-8")), keywords=keywords)
    for _line, message, _comments, _context in found:
        catalogue.add(message)


def theme_catalogue() -> Catalog:
    import pydata_sphinx_theme

    catalogue = new_catalogue("Attention by Hand: the theme")
    with open(Path(pydata_sphinx_theme.__file__).parent / "locale" / "sphinx.pot", "rb") as pot:
        for message in read_po(pot):
            if message.id:
                catalogue.add(message.id)
    for template in sorted((ROOT / "book" / "_templates").glob("*.html")):
        with template.open("rb") as source:
            for _line, message, _comments, _context in extract("jinja2.ext:babel_extract", source,
                                                               keywords=KEYWORDS):
                catalogue.add(message)
    return catalogue


def course_catalogue() -> Catalog:
    catalogue = new_catalogue("Attention by Hand: the site")
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    for key in ("title", "author"):
        catalogue.add(config[key])
    for path in sorted((ROOT / "book" / "_ext").glob("*.py")):
        add_python(catalogue, path)
    return catalogue


def kernel_catalogue() -> Catalog:
    import jupytext

    catalogue = new_catalogue("Attention by Hand: figures, printed lines and widgets")
    for path in sorted((ROOT / "src" / "qkv_book").glob("*.py")):
        add_python(catalogue, path)
    for chapter in sorted((ROOT / "book").glob("*.md")):
        notebook = jupytext.read(chapter)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                add_python(catalogue, chapter, cell.source)
    return catalogue


def exercises_catalogue() -> Catalog:
    catalogue = new_catalogue("Attention by Hand: the problem sets' checks and feedback")
    for path in sorted((ROOT / "src" / "qkv_exercises").rglob("*.py")):
        add_python(catalogue, path, keywords=EXERCISE_KEYWORDS)
    for path in sorted((ROOT / "src" / "qkv_grading").glob("*.py")):
        add_python(catalogue, path, keywords=GRADING_KEYWORDS)
    return catalogue


def problem_set_catalogues() -> dict[str, Catalog]:
    """One template per problem set of the course: its notebook's markdown, block by block."""
    import json

    from qkv_grading.pipeline import Course
    from qkv_grading.translation import markdown_messages

    course = Course(ROOT / "exercises")
    found = {}
    for name in course.problem_sets():
        catalogue = new_catalogue(f"Attention by Hand: {name}")
        for path in sorted((course.root / "source" / name).glob("*.ipynb")):
            for message in markdown_messages(json.loads(path.read_text(encoding="utf-8"))):
                catalogue.add(message)
        found[name] = catalogue
    return found


def write(catalogue: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        write_po(out, catalogue, width=0, sort_output=False)
    print(f"{path}: {len(catalogue)} messages")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site_dir", type=Path, help="the gettext build's folder: sphinx.pot, course.pot")
    parser.add_argument("kernel_dir", type=Path, help="the folder for qkv_book.pot")
    parser.add_argument("exercises_dir", type=Path,
                        help="the folder for messages/qkv_exercises.pot and notebooks/<problem set>.pot")
    args = parser.parse_args()
    write(theme_catalogue(), args.site_dir / "sphinx.pot")
    write(course_catalogue(), args.site_dir / "course.pot")
    write(kernel_catalogue(), args.kernel_dir / "qkv_book.pot")
    write(exercises_catalogue(), args.exercises_dir / "messages" / "qkv_exercises.pot")
    for name, catalogue in problem_set_catalogues().items():
        write(catalogue, args.exercises_dir / "notebooks" / f"{name}.pot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
