"""The website's two editions, English and 繁體中文: twins of every page, linked both ways, with the
same numbers, the Chinese one all in Traditional Chinese of Taiwan, and found by its own search.

Most tests read the site that ``make site`` builds (the ``built_site`` fixture: both editions).
The last ones build a one-page translated notebook of their own, to check the ``{eval}`` values
of a translated paragraph and the warnings about what is left untranslated.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import subprocess
import sys
import textwrap
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Comment, Doctype

from .browser_support import chromium_for_a_module, serve, toc_docnames

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

from translation_check import PENDING, read_pending  # noqa: E402

PAGES = toc_docnames(ROOT / "_toc.yml")
GENERATED = ["search", "genindex"]
PENDING_PAGES = set(read_pending(ROOT / "locales" / "zh_TW" / PENDING))
FINISHED = [page for page in PAGES if page not in PENDING_PAGES]
ZH = "zh-TW"
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

pytestmark = pytest.mark.slow


def soup(path: Path) -> BeautifulSoup:
    """The page at ``path``, parsed once per test process (the reference page takes seconds): callers
    read it and never change it; :func:`prose` and :func:`chrome_texts` change a copy of their own."""
    stat = path.stat()
    return _parsed(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=48)
def _parsed(path: Path, mtime_ns: int, size: int) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def page_path(site: Path, docname: str, edition: str = "") -> Path:
    return site / edition / f"{docname}.html"


def resolve(page: str, href: str) -> str:
    """The site path (``zh-TW/book/notation.html``) a relative ``href`` of ``page`` leads to."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(page), urllib.parse.urlsplit(href).path))


@pytest.mark.parametrize("docname", PAGES + GENERATED)
def test_every_page_has_a_twin_and_links_to_it_both_ways(built_site, docname):
    for here, there, hreflang in (("", ZH, "zh-Hant-TW"), (ZH, "", "en")):
        page = posixpath.join(here, f"{docname}.html")
        html = soup(built_site / page)
        twin = posixpath.join(there, f"{docname}.html")
        assert (built_site / twin).is_file(), f"{page} has no twin {twin}"
        switch = html.select("a.language-switch")
        assert [resolve(page, a["href"]) for a in switch] == [twin], f"{page}: language switch {switch}"
        assert switch[0]["hreflang"] == hreflang
        alternates = {link["hreflang"]: resolve(page, link["href"])
                      for link in html.select('link[rel="alternate"][hreflang]')}
        assert alternates == {"en": posixpath.join("", f"{docname}.html"),
                              "zh-Hant-TW": posixpath.join(ZH, f"{docname}.html")}, f"{page}: {alternates}"


@pytest.mark.parametrize(("edition", "lang", "title"), [("", "en", "Attention by Hand"),
                                                         (ZH, "zh-Hant-TW", "親手算注意力")])
def test_the_root_of_each_edition_sends_the_reader_to_its_first_page_in_its_language_with_the_icon(
        built_site, edition, lang, title):
    """``index.html`` at an edition's root (where a reader lands on the bare address) names the site's icon,
    which is in the build: without one, the browser asks for ``/favicon.ico``, which is not, and logs a 404."""
    root = built_site / edition
    html = soup(root / "index.html")
    assert html.html["lang"] == lang
    assert html.title.get_text() == title
    refresh = html.select_one('meta[http-equiv="Refresh"]')["content"]
    assert refresh == f"0; url={PAGES[0]}.html" and (root / f"{PAGES[0]}.html").is_file(), refresh
    icons = [link["href"] for link in html.select('link[rel="icon"]')]
    assert icons == ["_static/favicon.svg"] and (root / icons[0]).is_file(), icons


@pytest.mark.parametrize("docname", PAGES)
def test_each_edition_says_its_language(built_site, docname):
    assert soup(page_path(built_site, docname)).html["lang"] == "en"
    assert soup(page_path(built_site, docname, ZH)).html["lang"] == "zh-Hant-TW"


def article(html: BeautifulSoup):
    found = html.select_one("article.bd-article")
    assert found is not None
    return found


def eval_values(html: BeautifulSoup) -> Counter:
    """The values that ``{eval}`` put into the prose (myst-nb's inline outputs), as text."""
    return Counter(span.get_text() for span in article(html).select("p span.output, li span.output, "
                                                                     "td span.output, h1 span.output"))


def numbers(value: str) -> tuple[str, ...]:
    """The numbers of a computed value, in order: ``"head 1 (0.88)"`` and ``"第 1 個頭（分數 0.88）"``
    both give ``("1", "0.88")``. A value may hold words, which each edition's kernel writes in its
    own language (``_("{seconds:.0f} seconds")``); its numbers are the same in both."""
    return tuple(re.findall(r"[-−]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?%?", value))


@pytest.mark.parametrize("docname", FINISHED)
def test_a_translated_page_shows_the_numbers_of_its_english_twin(built_site, docname):
    """Every number the English prose computes ({eval}) is in the Chinese prose too, none empty."""
    english, chinese = (eval_values(soup(page_path(built_site, docname, edition))) for edition in ("", ZH))
    assert not [value for value in chinese.elements() if not value.strip()], f"{docname}: an empty {{eval}}"
    english_numbers, chinese_numbers = (Counter(map(numbers, values.elements())) for values in (english, chinese))
    assert chinese_numbers == english_numbers, \
        f"{docname}: English {sorted(english.elements())}, 繁體中文 {sorted(chinese.elements())}"


def printed_numbers(html: BeautifulSoup) -> list[list[str]]:
    """The numbers of what each cell printed, cell by cell, in sorted order: its words are in the
    page's language, and Chinese may put them in another order ("4 of 72" is "72 個中的 4 個")."""
    return [sorted(numbers(output.get_text())) for output in article(html).select("div.cell_output pre")]


@pytest.mark.parametrize("docname", FINISHED)
def test_a_translated_page_prints_the_numbers_of_its_english_twin(built_site, docname):
    """What the cells print has the same numbers in both editions, measured times and memory
    included: the Chinese edition shows the English edition's measurements (qkv_book.measure)."""
    english, chinese = (printed_numbers(soup(page_path(built_site, docname, edition))) for edition in ("", ZH))
    assert chinese == english, f"{docname}: the printed numbers differ between the editions"


@pytest.mark.parametrize(("docname", "times"), [("book/attention_cost", 4), ("book/decoding", 10)])
def test_the_pages_that_time_qkv_print_their_times_in_both_editions(built_site, docname, times):
    """The pages whose numbers differ from run to run: their tables of times are there, in both."""
    for edition in ("", ZH):
        text = article(soup(page_path(built_site, docname, edition))).get_text()
        assert len(re.findall(r"\d+\.\d+ ms", text)) == times, f"{edition or 'en'}/{docname}: the timed sizes"


def prose(html: BeautifulSoup) -> list[tuple[str, str]]:
    """``(tag, text)`` of each paragraph, list item, heading, caption and alt text of the article,
    with its code, math and computed outputs left out (they are not translated), and its tables
    (the glossary's English column is English on purpose)."""
    body = BeautifulSoup(str(article(html)), "html.parser")
    for hidden in body.select("code, pre, .math, span.output, .cell_output, .headerlink, script, table"):
        hidden.decompose()
    drop_parameter_names_and_types(body)
    found = [(tag.name, tag.get_text(" ", strip=True)) for tag in body.select("p, li, h1, h2, h3, h4, figcaption")]
    found += [("alt", img.get("alt", "")) for img in article(html).select("img")]
    return [(tag, text) for tag, text in found if text]


RETURN_TYPE = {"Return type", "回傳型別"}


def drop_parameter_names_and_types(body: BeautifulSoup) -> None:
    """The reference page's field lists without what is code there: each parameter's name and type
    (``heads (tuple[Head, ...])``, before the `` – `` of its description) and the return type."""
    for term in body.select("dl.field-list > dt"):
        if term.get_text(strip=True).rstrip(":") in RETURN_TYPE:
            description = term.find_next_sibling("dd")
            if description is not None:
                description.decompose()
    for paragraph in body.select("dl.field-list li > p, dl.field-list dd > p"):
        if paragraph.contents and getattr(paragraph.contents[0], "name", None) == "strong":
            for node in list(paragraph.contents):
                if isinstance(node, str) and " – " in node:
                    node.replace_with(node.split(" – ", 1)[1])
                    break
                node.extract()


def reads_as_english(text: str) -> bool:
    """Three or more English words and fewer Chinese characters than a quarter of their letters. An
    acronym or a name with a capital inside (BERT, GPT, ViT, LN) is a name that Chinese keeps, not
    an English word."""
    words = [word for word in re.findall(r"[A-Za-z]{2,}", text) if not re.search(r".[A-Z]", word)]
    return len(words) >= 3 and 4 * len(HAN.findall(text)) < sum(map(len, words))


def test_the_english_check_tells_english_from_chinese():
    assert reads_as_english("The keys $K^{(1)}$ of 外送 晚到 補償 are computed by head 1.")
    assert not reads_as_english("token 以矩陣 的形式進來，每個 token 一列。三個學習得到的矩陣把每一列變成一個查詢")
    assert not reads_as_english("Nadaraya-Watson：以核函數加權、對觀測值取平均作為預測")
    assert not reads_as_english("False 表示 post-LN（原始的 Transformer、BERT），True 表示 pre-LN（GPT-2、ViT）")
    assert reads_as_english("BERT and GPT-2 use this form; ViT does too.")


def test_the_english_check_leaves_out_parameter_names_and_types():
    html = BeautifulSoup('<article class="bd-article"><dl class="field-list"><dt>參數:</dt><dd><ul>'
                         '<li><p><strong>heads</strong> (<em>tuple</em><em>[</em><em>Head</em><em>]</em>)</p></li>'
                         '<li><p><strong>norm_first</strong> (<em>bool</em>) – True means pre-LN, as in GPT-2</p></li>'
                         '</ul></dd><dt>回傳型別:</dt><dd><p>list[tuple[str, <em>ndarray</em>]]</p></dd></dl>'
                         '</article>', "html.parser")
    assert prose(html) == [("li", "True means pre-LN, as in GPT-2"), ("p", "True means pre-LN, as in GPT-2")]


@pytest.mark.parametrize("docname", FINISHED)
def test_a_finished_page_has_no_english_paragraph_and_no_broken_markup(built_site, docname):
    paragraphs = prose(soup(page_path(built_site, docname, ZH)))
    english = [f"{tag}: {text[:90]}" for tag, text in paragraphs if reads_as_english(text)]
    assert not english, f"{ZH}/{docname} reads as English:\n" + "\n".join(english)
    text = " ".join(text for _tag, text in paragraphs)
    broken = [mark for mark in ("**", "{eval}", "{doc}", "](", "``") if mark in text]
    assert not broken, f"{ZH}/{docname}: markup left as text: {broken}"


def simplified_only() -> set[str]:
    from zhon import cedict

    return set(cedict.simplified) - set(cedict.traditional)


# Latin words the theme may show on a Chinese page: the other edition's name, key and file names.
CHROME_WORDS = {"English", "Ctrl", "PDF", "md", "pdf", "ipynb", "JavaScript"}


def chrome_texts(html: BeautifulSoup) -> list[str]:
    """What the theme writes around the article: texts, titles, labels and placeholders. The titles
    of pages and sections in the tables of contents are the pages' own (a pending page's are
    English), and print-only parts are never shown."""
    body = BeautifulSoup(str(html), "html.parser")
    for node in body.find_all(string=lambda s: isinstance(s, (Comment, Doctype))):
        node.extract()
    for hidden in body.select("head, script, style, article.bd-article, .onlyprint, .prev-next-title"):
        hidden.decompose()
    for link in body.select("a.reference.internal"):  # a page's or a section's title
        link.string = ""
    texts = [s.strip() for s in body.find_all(string=True) if s.strip()]
    for tag in body.find_all(True):
        texts += [tag[attribute] for attribute in ("title", "aria-label", "placeholder", "data-bs-title")
                  if tag.get(attribute)]
    return texts


@pytest.mark.parametrize("docname", PAGES + GENERATED)
def test_the_theme_speaks_traditional_chinese_on_every_chinese_page(built_site, docname):
    html = soup(page_path(built_site, docname, ZH))
    chrome = chrome_texts(html)
    simplified = simplified_only()
    found = sorted({char for char in html.get_text() + " ".join(chrome) if char in simplified})
    assert not found, f"{ZH}/{docname}: Simplified characters {found}"
    english = sorted({word for text in chrome for word in re.findall(r"[A-Za-z]{2,}", text)} - CHROME_WORDS)
    assert not english, f"{ZH}/{docname}: the theme's words in English: {english}"


def test_previous_and_next_are_in_traditional_chinese(built_site):
    html = soup(page_path(built_site, "book/qkv_roles", ZH))
    labels = [a.get("title", "") for a in html.select(".prev-next-area a")]
    assert labels == ["上一頁", "下一頁"], labels


# --------------------------------------------------------------------------- search

def title_terms(title: str) -> str:
    """The Chinese of a page title, its runs of characters as search terms: "每個 的三種角色"."""
    return " ".join(re.findall(r"[\u3400-\u4dbf\u4e00-\u9fff]+", title))


@pytest.fixture(scope="module")
def chromium():
    yield from chromium_for_a_module()


SEARCH_DONE = ("() => { const s = document.querySelector('#search-results p.search-summary');"
               " return s && s.innerText.trim() !== ''; }")


class SearchPage:
    """The site's search page in the browser: the first query comes in its address
    (``search.html?q=...``, as the search box sends it); each later one goes to the same
    page's ``Search.performSearch``, which the address's query runs too, so that the
    search index (megabytes in the Chinese edition) is loaded once."""

    def __init__(self, browser, base: str):
        self.base, self.page = base, browser.new_page()

    def find(self, query: str) -> list[str]:
        """The pages (``book/notation``) the search lists for ``query``."""
        if self.page.url.startswith(self.base + "search.html"):
            self.page.evaluate("query => { document.getElementById('search-results').replaceChildren();"
                               " Search.performSearch(query); }", query)
        else:
            self.page.goto(self.base + "search.html?q=" + urllib.parse.quote(query))
        self.page.wait_for_function(SEARCH_DONE, timeout=30_000)
        links = self.page.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.href)")
        return [urllib.parse.urlsplit(link).path.removeprefix(urllib.parse.urlsplit(self.base).path)
                .removesuffix(".html") for link in links]

    def close(self) -> None:
        self.page.close()


def search(browser, base: str, query: str) -> list[str]:
    """The pages (``book/notation``) the site's search page lists for ``query``."""
    page = SearchPage(browser, base)
    try:
        return page.find(query)
    finally:
        page.close()


def test_each_finished_chapter_is_found_by_the_chinese_words_of_its_title(built_site, chromium):
    problems = []
    with serve(built_site / ZH) as base:
        page = SearchPage(chromium, base)
        try:
            for docname in FINISHED:
                title = soup(page_path(built_site, docname, ZH)).select_one("article h1").get_text().rstrip("#")
                query = title_terms(title)
                assert query, f"{ZH}/{docname}: no Chinese in its title {title!r}"
                found = page.find(query)
                if docname not in found:
                    problems.append(f"{query!r} (title {title!r}) finds {found}, not {docname}")
            found = page.find("鍵")  # one character is a word too
            if "book/notation" not in found:
                problems.append(f"'鍵' finds {found}, not book/notation")
        finally:
            page.close()
    assert not problems, "\n".join(problems)


def test_the_english_search_finds_english_words_and_not_the_chinese_edition(built_site, chromium):
    with serve(built_site) as base:
        found = search(chromium, base, "projection")
    assert "book/qkv_roles" in found, found
    assert not [page for page in found if page.startswith(ZH)], found


# --------------------------------------------------------------------------- a small translated book

NOTEBOOK = """\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      name: python3
      display_name: Python 3
    ---

    # The answer

    ```{code-cell} ipython3
    answer = 6 * 7
    ```

    The answer is {eval}`answer`, twice {eval}`2 * answer`.

    A paragraph whose translation is stale.

    A paragraph nobody translated.
    """

CATALOGUE = """\
    msgid ""
    msgstr ""
    "Content-Type: text/plain; charset=UTF-8\\n"

    msgid "The answer"
    msgstr "答案"

    msgid "The answer is {eval}`answer`, twice {eval}`2 * answer`."
    msgstr "答案是 {eval}`answer`，兩倍是 {eval}`2 * answer`。"

    #, fuzzy
    msgid "A paragraph whose translation is stale."
    msgstr "過時的翻譯。"
    """

CONF = """\
    extensions = ["myst_nb", "translation_check"{more}]
    nb_execution_mode = "inline"
    nb_eval_name_regex = r"^[^\\n]+$"  # as the book's _config.yml
    language = "zh_TW"
    locale_dirs = ["locales"]
    gettext_compact = False
    exclude_patterns = ["_build", "locales"]
    """


def build_small_book(folder: Path, *, remembered_eval: bool, pending: bool) -> tuple[str, str]:
    """Build the one-page book in ``folder`` in 繁體中文; its page's HTML and Sphinx's warnings."""
    (folder / "locales" / "zh_TW" / "LC_MESSAGES").mkdir(parents=True, exist_ok=True)
    (folder / "page.md").write_text(textwrap.dedent(NOTEBOOK), encoding="utf-8")
    (folder / "index.md").write_text("# Index\n\n```{toctree}\npage\n```\n", encoding="utf-8")
    (folder / "locales" / "zh_TW" / "LC_MESSAGES" / "page.po").write_text(textwrap.dedent(CATALOGUE),
                                                                         encoding="utf-8")
    (folder / "locales" / "zh_TW" / "LC_MESSAGES" / "index.po").write_text(
        'msgid ""\nmsgstr ""\n\nmsgid "Index"\nmsgstr "索引"\n', encoding="utf-8")
    (folder / "locales" / "zh_TW" / PENDING).write_text("page\n" if pending else "", encoding="utf-8")
    more = ', "translated_eval"' if remembered_eval else ""
    (folder / "conf.py").write_text(textwrap.dedent(CONF).format(more=more), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "book" / "_ext"))
    result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-E", "-q", ".", "_build/html"],
                            cwd=folder, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    html = (folder / "_build" / "html" / "page.html").read_text(encoding="utf-8")
    return BeautifulSoup(html, "html.parser").select_one("section").get_text(" ", strip=True), result.stderr


def test_an_eval_in_a_translated_paragraph_shows_its_value_and_the_untranslated_are_named(tmp_path):
    text, warnings = build_small_book(tmp_path / "book", remembered_eval=True, pending=False)
    assert re.search(r"答案是 ?42 ?，兩倍是 ?84 ?。", text), text
    assert "only a fuzzy (stale) translation in locales/zh_TW/LC_MESSAGES/page.po for 'A paragraph whose " \
           "translation is stale.'" in warnings, warnings
    assert "no translation in locales/zh_TW/LC_MESSAGES/page.po for 'A paragraph nobody translated.'" in warnings
    assert "The answer" not in text


def test_without_the_remembered_values_a_translated_eval_is_empty_and_a_pending_page_is_quiet(tmp_path):
    """The snag itself, with myst-nb's own role: if this fails, myst-nb keeps the values of a
    translated paragraph by itself, and ``translated_eval`` can go."""
    text, warnings = build_small_book(tmp_path / "book", remembered_eval=False, pending=True)
    assert "答案是" in text and "42" not in text, text
    assert "untranslated" not in warnings and "no translation" not in warnings, warnings
