"""qkv_book.measure: the peak memory it reports covers the arrays a call allocates; a measurement
recorded by the English build is what the translated build shows; its errors."""

from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest

from qkv_book import measure
from qkv_book.measure import best_seconds, measured_once, mem_total_bytes, peak_bytes

from .test_errors import raises


def test_peak_bytes_sees_the_numpy_arrays_a_call_allocates():
    """Two 1000 x 1000 float64 arrays alive at once: at least 16 MB, and not much more."""
    def two_matrices():
        a = np.ones((1000, 1000))
        b = a * 2.0
        return a.sum() + b.sum()

    peak = peak_bytes(two_matrices)
    assert 2 * 8_000_000 <= peak < 2 * 8_000_000 + 1_000_000, f"peak {peak:,} bytes"


def test_peak_bytes_counts_only_what_the_call_allocates():
    existing = np.ones((1000, 1000))  # allocated before: not counted
    assert peak_bytes(lambda: existing.sum()) < 100_000


def test_peak_bytes_needs_tracemalloc_to_itself():
    tracemalloc.start()
    try:
        with raises(RuntimeError, "peak_bytes needs tracemalloc to itself"):
            peak_bytes(lambda: None)
    finally:
        tracemalloc.stop()


def test_best_seconds_is_the_shortest_of_the_runs():
    calls = []
    seconds = best_seconds(lambda: calls.append(1), repeat=4)
    assert len(calls) == 4 and 0 <= seconds < 1


def test_best_seconds_needs_a_run():
    with raises(ValueError, "repeat must be at least 1, got 0"):
        best_seconds(lambda: None, repeat=0)


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="reads /proc/meminfo on Linux")
def test_mem_total_agrees_with_the_kernel_s_page_count():
    """MemTotal and the physical pages the kernel reports (sysconf) are the same memory."""
    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert mem_total_bytes() == pytest.approx(pages, rel=0.01)


def test_measured_once_outside_the_build_measures_every_time(monkeypatch):
    """In JupyterLab or a test (no build variables) each call measures; the result is what JSON keeps."""
    monkeypatch.delenv(measure.MODE_VARIABLE, raising=False)
    monkeypatch.delenv(measure.FILE_VARIABLE, raising=False)
    calls = []
    assert measured_once("x", lambda: calls.append(1) or (len(calls), 0.5)) == [1, 0.5]
    assert measured_once("x", lambda: calls.append(1) or (len(calls), 0.5)) == [2, 0.5]


def test_a_translated_build_shows_what_the_english_build_measured(monkeypatch, tmp_path):
    """Recorded by the English build (a measurement that differs at each run), replayed by the
    translation without measuring again: both get the very same numbers."""
    path = tmp_path / "book" / "attention_cost-0123456789abcdef.json"
    monkeypatch.setenv(measure.FILE_VARIABLE, str(path))
    monkeypatch.setenv(measure.MODE_VARIABLE, measure.RECORD)
    english = measured_once("times", lambda: [time.perf_counter_ns(), best_seconds(sum, range(1000))])
    assert measured_once("memory", lambda: 7) == 7
    assert path.is_file() and not list(path.parent.glob("*.partial"))

    monkeypatch.setenv(measure.MODE_VARIABLE, measure.REPLAY)

    def measure_again():
        raise AssertionError("the translation measured again")

    assert measured_once("times", measure_again) == english
    assert measured_once("memory", measure_again) == 7
    assert measured_once("times", lambda: [time.perf_counter_ns(), 0.0]) == english


def test_a_translated_build_without_the_english_measurement_says_what_to_build(monkeypatch, tmp_path):
    monkeypatch.setenv(measure.FILE_VARIABLE, str(tmp_path / "page-0123456789abcdef.json"))
    monkeypatch.setenv(measure.MODE_VARIABLE, measure.REPLAY)
    with raises(RuntimeError, "build the English edition first"):
        measured_once("times", lambda: 1.0)
    monkeypatch.setenv(measure.MODE_VARIABLE, "rerun")
    with raises(RuntimeError, "not 'rerun'"):
        measured_once("times", lambda: 1.0)
