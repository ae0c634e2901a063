"""qkv_book.measure: the peak memory it reports covers the arrays a call allocates; its errors."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest

from qkv_book.measure import best_seconds, mem_total_bytes, peak_bytes

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
