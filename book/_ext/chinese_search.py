"""Sphinx extension: the 繁體中文 edition's search finds Chinese words, with nothing to download.

Sphinx 7.4 searches Chinese (``zh``, which ``zh_TW`` falls back to) by cutting the text into
words with jieba when jieba is installed, and otherwise indexes only its Latin words: a page
would never be found by its Chinese words. jieba's dictionary is of Simplified Chinese, and
the browser's side would still get the whole query as one "word" (Sphinx's ``splitQuery``
cuts at spaces and punctuation only, and Chinese has neither between its words), which
must then be a word of the index as it stands.

This search language cuts every run of Chinese characters the same way on both sides, into
its single characters and its overlapping pairs (``多頭注意力`` -> 多, 頭, 注, 意, 力, 多頭,
頭注, 注意, 意力), the way search engines index text without spaces. A query of one character
looks that character up; a longer one looks up each of its pairs, and Sphinx keeps the pages
that hold them all. Latin words (``Query``, ``softmax``, ``qkv``) are indexed and stemmed as
Sphinx's Chinese search does. No dictionary, so nothing is read or fetched at build time.
"""

from __future__ import annotations

import re

from sphinx.search import languages
from sphinx.search.zh import SearchChinese

# CJK unified ideographs, extension A, compatibility ideographs, and the supplementary planes.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_RUNS = re.compile(f"([{HAN}]+)")
_WORDS = re.compile(r"\w+")

# The browser's side: the same cut of the query, in place of Sphinx's default splitQuery.
JS_SPLITTER = r"""
function splitQuery(query) {
  const han = /([\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\u{20000}-\u{3134F}]+)/u;
  const terms = [];
  for (const word of query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)) {
    for (const part of word.split(han)) {
      if (!part) continue;
      if (!han.test(part)) { terms.push(part); continue; }
      const chars = Array.from(part);
      if (chars.length === 1) { terms.push(part); continue; }
      for (let i = 0; i + 1 < chars.length; i++) terms.push(chars[i] + chars[i + 1]);
    }
  }
  return terms;
}
"""


def han_terms(run: str) -> list[str]:
    """The index terms of a run of Chinese characters: each character, then each overlapping pair."""
    return list(run) + [run[i:i + 2] for i in range(len(run) - 1)]


class SearchTraditionalChinese(SearchChinese):
    """Chinese of Taiwan: characters and their pairs, no word dictionary."""

    lang = "zh_TW"
    language_name = "Traditional Chinese"
    js_splitter_code = JS_SPLITTER

    def init(self, options: dict[str, str]) -> None:
        super().init({})  # no jieba dictionary: it would not be used
        # Sphinx keeps the Latin words seen so far in a list that it searches for every word it stems:
        # quadratic in the site's size (most of the edition's writing time). A set answers the same.
        self.latin_terms: set[str] = set()

    def split(self, input: str) -> list[str]:
        terms: list[str] = []
        for word in _WORDS.findall(input):
            for part in _RUNS.split(word):
                if not part:
                    continue
                if _RUNS.fullmatch(part):
                    terms.extend(han_terms(part))
                else:
                    terms.append(part)
                    self.latin_terms.add(part)
        return terms

    def word_filter(self, stemmed_word: str) -> bool:
        if _RUNS.fullmatch(stemmed_word):
            return True  # one character is a word in Chinese (鍵, 值)
        return len(stemmed_word) > 1 and stemmed_word not in self.stopwords


def setup(app):
    languages["zh_TW"] = SearchTraditionalChinese
    return {"parallel_read_safe": True, "parallel_write_safe": True}
