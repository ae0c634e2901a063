"""qkv_book speaks the reader's language: chosen in the notebook or by QKV_LANGUAGE, English by default,
from catalogues that ship in the course package, never from a stale (fuzzy) translation."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from qkv_book import language

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def no_language_chosen(monkeypatch):
    monkeypatch.delenv(language.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(language, "_chosen", None)


def test_english_is_the_default_and_needs_no_catalogue():
    assert language.current_language() == "en"
    assert language._("key (attended to)") == "key (attended to)"


def test_the_environment_chooses_and_the_notebook_overrides_it(monkeypatch):
    monkeypatch.setenv("QKV_LANGUAGE", "zh-TW")
    assert language.current_language() == "zh-TW"
    assert language._("key (attended to)") == "鍵（被注意的 token）"
    assert language.set_language("en") == "en"
    assert language._("key (attended to)") == "key (attended to)"
    assert language.set_language(None) == "zh-TW"


@pytest.mark.parametrize("spelled", ["zh_TW", "zh-tw", "zh-Hant-TW", " zh-TW "])
def test_the_usual_spellings_of_traditional_chinese_are_understood(spelled):
    assert language.language_tag(spelled) == "zh-TW"


def test_a_language_the_course_does_not_speak_is_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match=r"speaks 'en' and 'zh-TW', not 'fr'"):
        language.set_language("fr")
    monkeypatch.setenv("QKV_LANGUAGE", "zh_CN")
    with pytest.raises(ValueError, match="not 'zh_CN'"):
        language.current_language()


def test_a_figure_draws_its_own_words_in_the_readers_language(monkeypatch):
    import qkv_book.plots

    weights = np.array([[0.5, 0.5], [0.25, 0.75]])
    english = qkv_book.plots.head_grid(weights[None], ["外送", "晚到"]).axes[0]
    monkeypatch.setenv("QKV_LANGUAGE", "zh-TW")
    chinese = qkv_book.plots.head_grid(weights[None], ["外送", "晚到"]).axes[0]
    assert (english.get_title(), english.get_xlabel()) == ("head 1", "key (attended to)")
    assert (chinese.get_title(), chinese.get_xlabel()) == ("第 1 個頭", "鍵（被注意的 token）")


def test_the_inference_and_training_figures_draw_their_own_words_in_the_readers_language(monkeypatch):
    """Axis labels, legends and titles that these modules write themselves follow QKV_LANGUAGE; the
    numbers in them are the same in both languages."""
    import qkv
    import qkv_book.inference_plots
    import qkv_book.training_plots

    def drawn():
        mask = qkv.sliding_window_mask(6, 2) & qkv.causal_mask(6)
        window = qkv_book.inference_plots.mask_grids({"": mask})
        steps = qkv_book.training_plots.difference_error([0.1, 0.01], [1e-3, 1e-5]).axes[0]
        bars = qkv_book.training_plots.ablation_bars(["a"], [0.5], full=0.97).axes[0]
        return (window.axes[0].get_title().strip(), steps.get_xlabel(),
                bars.get_legend().get_texts()[0].get_text())

    english = drawn()
    monkeypatch.setenv("QKV_LANGUAGE", "zh-TW")
    assert english == ("11 of 36 pairs", "step $h$", "whole model: 97%")
    assert drawn() == ("36 對中的 11 對", "步長 $h$", "完整模型：97%")


def test_a_fuzzy_translation_is_not_used(tmp_path):
    folder = tmp_path / "locales" / "zh_TW" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "demo.po").write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                                    'msgid "weight"\nmsgstr "權重"\n\n'
                                    '#, fuzzy\nmsgid "score"\nmsgstr "舊的分數"\n', encoding="utf-8")
    translations = language.translations(str(tmp_path), "demo", "zh-TW")
    assert translations.gettext("weight") == "權重"
    assert translations.gettext("score") == "score"


def test_the_catalogues_ship_in_the_course_package():
    """pyproject.toml's package data takes every qkv_book catalogue into the wheel."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["qkv_book"]
    package = ROOT / "src" / "qkv_book"
    shipped = {path for pattern in patterns for path in package.glob(pattern)}
    assert set(package.rglob("*.po")) <= shipped and shipped, shipped
