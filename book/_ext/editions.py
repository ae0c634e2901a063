"""Sphinx extension: the website in two editions, English and 繁體中文 (Taiwan), from one source.

``make site`` runs Sphinx once per edition on the same chapters: English into ``_build/html/``,
Traditional Chinese (``-D language=zh_TW``) into ``_build/html/zh-TW/``. Sphinx translates the
pages' prose from the catalogues in ``locales/zh_TW/LC_MESSAGES/book/`` (``locales/README.md``
says how they are kept); this extension does the rest of what makes a page belong to its edition:

- the chapter kernels learn the page's language: ``QKV_LANGUAGE`` is set before any kernel
  starts, so that :mod:`qkv_book.language` draws figures and prints lines in it;
- both editions of a page show the same measurements (:func:`qkv_book.measure.measured_once`):
  before a page's kernel starts, it learns where the page's measurements are kept in the build
  folder (``_build/measurements/``, a file named after a hash of the page's source) and whether
  it records them (English) or reads what the English build recorded (a translation, built
  after it, or beside it: then a translated page that measures waits until the English build has
  read its twin); a translated page is read again when the English build records anew;
- each edition writes its executed outputs to a folder of its own (myst-nb would put the
  Chinese edition's ``jupyter_execute/`` inside the English site, one level above its output);
- every page links to its twin in the other edition: a plain relative link in the article's
  header (it works offline, from ``file://`` and on any static host), ``<link rel="alternate"
  hreflang>`` in the head, and ``lang="zh-Hant-TW"`` on the Chinese pages;
- the table of contents' captions (``_toc.yml``'s parts) are translated: sphinx-external-toc
  adds them after Sphinx's i18n transform has run;
- the theme's words come from ``locales/zh_TW/LC_MESSAGES/sphinx.po`` before the themes' own
  catalogues, since Sphinx reads the project's first; that catalogue gives every message of
  pydata-sphinx-theme (whose only Chinese is Simplified: 上一页) and of the templates in
  ``book/_templates/``, which replace the few theme components that hard-code English;
- the words of the course's own extensions (this one, ``problem_sets``) and the site's title,
  author and search-box text come from the ``course`` catalogue, through :data:`_`.
"""

from __future__ import annotations

import hashlib
import html
import os
import posixpath
import time
from pathlib import Path

from sphinx import addnodes
from sphinx.locale import get_translation
from sphinx.transforms import SphinxTransform
from sphinx.util import isurl
from sphinx.util.i18n import CatalogInfo, docname_to_domain

# Sphinx's language, the edition's folder under the English site, the HTML language tag, its name.
EDITIONS = (
    ("en", "", "en", "English"),
    ("zh_TW", "zh-TW", "zh-Hant-TW", "繁體中文"),
)
LANGUAGE_VARIABLE = "QKV_LANGUAGE"  # read by qkv_book.language in every chapter kernel
KERNEL_TAGS = {"en": "en", "zh_TW": "zh-TW"}
# Read by qkv_book.measure.measured_once in every chapter kernel (the names are its MODE_VARIABLE
# and FILE_VARIABLE; this extension does not import the course package).
MEASUREMENTS_MODE_VARIABLE = "QKV_MEASUREMENTS_MODE"
MEASUREMENTS_FILE_VARIABLE = "QKV_MEASUREMENTS_FILE"
MEASUREMENTS_FOLDER = "measurements"  # beside the doctrees, in the build folder both editions share
# Set by `make site` for a translated edition built side by side with the English one: the English
# build's process id. A translated page that measures waits until the English build has read its twin.
ENGLISH_BUILD_VARIABLE = "QKV_ENGLISH_BUILD_PID"
READ_MARK = ".read"  # beside a page's measurements: the English build has read the page (its kernel is done)
MEASURES = b"measured_once"  # what a page's source calls when it shows a measurement
COURSE_CATALOGUE = "course"  # locales/<language>/LC_MESSAGES/course.po: the extensions' own words

_ = get_translation(COURSE_CATALOGUE)


def edition(language: str | None) -> tuple[str, str, str, str]:
    """The edition built for Sphinx's ``language`` (``None`` and ``"en"`` are the English one).

    Raises:
        ValueError: for a language the site has no edition in.
    """
    for entry in EDITIONS:
        if entry[0] == (language or "en"):
            return entry
    raise ValueError(f"the site has editions in {', '.join(e[0] for e in EDITIONS)}, not {language!r}")


def is_translated(language: str | None) -> bool:
    """Whether ``language``'s edition is a translation (it sits in a folder of the English site)."""
    return edition(language)[1] != ""


def english_site_path(language: str | None, pagename: str) -> str:
    """Where ``pagename`` of ``language``'s edition sits, relative to the English site's root."""
    return posixpath.join(edition(language)[1], pagename)


def twin_links(pagename: str, language: str) -> list[dict]:
    """The links from ``pagename`` of the ``language`` edition to the same page in every edition.

    Each link is relative to the page (``../zh-TW/book/notation.html`` from ``book/notation.html``),
    so it works wherever the site is put, file:// included.
    """
    here = edition(language)
    page_folder = posixpath.dirname(english_site_path(language, pagename))
    links = []
    for entry in EDITIONS:
        target = english_site_path(entry[0], f"{pagename}.html")
        links.append({"language": entry[0], "hreflang": entry[2], "name": entry[3],
                      "href": posixpath.relpath(target, page_folder or "."), "current": entry == here})
    return links


def tell_the_kernels(app, config) -> None:
    """Set ``QKV_LANGUAGE`` for the chapter kernels this build starts (they inherit the environment)."""
    os.environ[LANGUAGE_VARIABLE] = KERNEL_TAGS[edition(config.language)[0]]


def measurements_file(build_folder: Path, docname: str, source: bytes) -> Path:
    """Where the measurements of ``docname`` with this ``source`` are kept: one file per page and
    version of its source (``book/attention_cost-<hash>.json``), the same for both editions."""
    digest = hashlib.sha256(source).hexdigest()[:16]
    return build_folder / MEASUREMENTS_FOLDER / f"{docname}-{digest}.json"


def tell_the_kernel_where_its_measurements_are(app, docname, source) -> None:
    """Before a page's kernel starts: the English edition records its measurements afresh (the older
    ones of the page are removed), a translation reads them, and depends on them, so that it is read
    again when the English edition records new ones. The gettext builder measures for itself."""
    if app.builder.name == "gettext":
        for variable in (MEASUREMENTS_MODE_VARIABLE, MEASUREMENTS_FILE_VARIABLE):
            os.environ.pop(variable, None)
        return
    page_source = Path(app.env.doc2path(docname)).read_bytes()
    path = measurements_file(Path(app.doctreedir).parent, docname, page_source)
    if is_translated(app.config.language):
        mode = "replay"
        english = os.environ.get(ENGLISH_BUILD_VARIABLE)
        if english and MEASURES in page_source:
            wait_for_the_english_page(path, int(english))
        if path.is_file():
            app.env.note_dependency(str(path))
    else:
        mode = "record"
        for older in path.parent.glob(f"{Path(docname).name}-{'[0-9a-f]' * 16}.json*"):
            older.unlink()  # with its read mark
        if MEASURES in page_source:
            _being_read[docname] = path
    os.environ[MEASUREMENTS_MODE_VARIABLE] = mode
    os.environ[MEASUREMENTS_FILE_VARIABLE] = str(path.resolve())


_being_read: dict[str, Path] = {}  # the English pages this process reads: docname -> measurements file


def mark_the_page_read(app, doctree) -> None:
    """In the English edition, once a page is read (its kernel has run): leave its read mark beside its
    measurements, for a translated edition that is built at the same time."""
    path = _being_read.pop(app.env.docname, None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{path}{READ_MARK}").touch()


def wait_for_the_english_page(measurements: Path, english_build: int, poll: float = 0.2) -> None:
    """Wait until the English build (process ``english_build``) has read the page whose measurements
    are kept in ``measurements``, or has ended; a translated page then shows what it measured (and
    its kernel says so clearly when the English build ended without measuring)."""
    mark = Path(f"{measurements}{READ_MARK}")
    while not mark.exists() and process_is_running(english_build):
        time.sleep(poll)


def process_is_running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (on Linux, one that ended but was not yet
    waited for counts as ended)."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except FileNotFoundError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def translate_configuration(app, config) -> None:
    """The site's title, author and search-box text in the edition's language."""
    if not is_translated(config.language):
        return
    config.html_title = str(_(config.html_title))
    config.author = str(_(config.author))
    config.html_theme_options = {**config.html_theme_options, "search_bar_text": str(_("Search..."))}


def own_output_folder(app) -> None:
    """Put a translated edition's executed outputs beside the English ones' (``_build/jupyter_execute``),
    not inside the English site; runs after myst-nb has chosen its folder from the output path."""
    config = getattr(app.env, "mystnb_config", None)
    if config is None or not is_translated(app.config.language):
        return
    folder = Path(app.doctreedir).parent / f"jupyter_execute-{app.config.language}"
    app.env.mystnb_config = config.copy(output_folder=str(folder.resolve()))


class TranslateTocCaptions(SphinxTransform):
    """Translate the captions of the toctrees that sphinx-external-toc inserts (after Sphinx's i18n)."""

    default_priority = 101  # sphinx-external-toc's InsertToctrees is 100

    def apply(self, **kwargs) -> None:
        if not is_translated(self.config.language) or self.app.builder.name == "gettext":
            return
        from translation_check import catalogue_entries, locale_folder, report_untranslated

        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        po_path = locale_folder(self.app) / "LC_MESSAGES" / f"{domain}.po"
        entries = catalogue_entries(po_path)
        for toctree in self.document.findall(addnodes.toctree):
            caption = toctree.get("caption")
            if not caption:
                continue
            translation, fuzzy = entries.get(caption, ("", False))
            if translation and not fuzzy:
                toctree["caption"] = translation
            else:
                report_untranslated(self.app, self.env.docname, caption, toctree)


def add_edition_links(app, pagename, templatename, context, doctree) -> None:
    """Give the page its ``lang``, its ``hreflang`` alternates and the links of the language switch."""
    here = edition(app.config.language)
    links = twin_links(pagename, here[0])
    context["language"] = here[2]
    context["edition_links"] = [link for link in links if not link["current"]]
    alternates = "".join(f'<link rel="alternate" hreflang="{link["hreflang"]}" href="{link["href"]}" />\n'
                         for link in links)
    context["metatags"] = context.get("metatags", "") + alternates


def register_course_catalogue(app) -> None:
    """Compile ``course.po`` (when it changed) and let :data:`_` read it."""
    language = app.config.language
    if not is_translated(language):
        return
    for directory in app.config.locale_dirs:
        base = Path(app.srcdir) / directory
        catalogue = CatalogInfo(str(base / language / "LC_MESSAGES"), COURSE_CATALOGUE, app.config.source_encoding)
        if Path(catalogue.po_path).is_file():
            if catalogue.is_outdated():
                catalogue.write_mo(language, app.config.gettext_allow_fuzzy_translations)
            app.add_message_catalog(COURSE_CATALOGUE, str(base))


ROOT_PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<title>{title}</title>
{icon}<meta http-equiv="Refresh" content="0; url={target}">
</head>
<body><p><a href="{target}">{title}</a></p></body>
</html>
"""


def write_root_page(app, exception) -> None:
    """The edition's ``index.html``, which sends the reader on to the first page, as sphinx-external-toc's
    would (it writes one only where there is none), in the edition's language and with the site's icon:
    without one, the browser asks for ``/favicon.ico`` while it waits, and logs the site's 404."""
    if exception is not None or app.builder.format != "html" or app.config.root_doc == "index":
        return
    favicon = app.config.html_favicon or ""  # a URL, or a file that Sphinx copies into _static/ (by its name)
    href = favicon if isurl(favicon) else f"_static/{posixpath.basename(favicon)}"
    icon = f'<link rel="icon" href="{html.escape(href)}">\n' if favicon else ""
    page = ROOT_PAGE.format(lang=edition(app.config.language)[2], title=html.escape(str(app.config.html_title)),
                            icon=icon, target=html.escape(app.builder.get_target_uri(app.config.root_doc)))
    Path(app.outdir, "index.html").write_text(page, encoding="utf-8")


def setup(app):
    register_course_catalogue(app)
    app.connect("build-finished", write_root_page, priority=400)  # before sphinx-external-toc's (500)
    app.connect("config-inited", tell_the_kernels)
    app.connect("config-inited", translate_configuration, priority=900)
    app.connect("builder-inited", own_output_folder, priority=900)  # after myst-nb's (500)
    app.connect("source-read", tell_the_kernel_where_its_measurements_are)
    app.connect("doctree-read", mark_the_page_read)
    app.connect("html-page-context", add_edition_links)
    app.add_transform(TranslateTocCaptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
