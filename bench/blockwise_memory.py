"""Blockwise attention at an n where the full n x n matrix would not fit in this machine's memory.

    .venv/bin/python bench/blockwise_memory.py                      # n chosen from MemTotal
    .venv/bin/python bench/blockwise_memory.py --n 16384 --block-size 1024

Without --n, n is the smallest power of two for which one n x n float64 matrix is larger than the
machine's memory (MemTotal in /proc/meminfo); full attention would need about three of them. Runs ``qkv.blockwise_attention`` once on random
Q, K, V of shape (n, d) and prints: n, the bytes one n x n float64 matrix would need, MemTotal,
the peak of the numpy allocations during the run (tracemalloc), the peak resident memory of the
whole process (ru_maxrss), the time, and the largest difference between a few output rows and the
full computation (``qkv.scaled_dot_product_attention``) done for those rows only. Asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
import tracemalloc

import numpy as np

import qkv
from qkv_book.measure import mem_total_bytes

GiB = 2**30


def max_rss_bytes() -> int:
    """Peak resident memory of this process so far (ru_maxrss is in KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, help="tokens (default: the full matrix outgrows MemTotal)")
    parser.add_argument("--d", type=int, default=64, help="d_k = d_v (default 64, as in one head)")
    parser.add_argument("--block-size", type=int, default=2048)
    parser.add_argument("--check-rows", type=int, default=4, help="output rows checked in full")
    args = parser.parse_args()

    mem_total = mem_total_bytes()
    n = args.n or 2 ** math.ceil(math.log2(math.sqrt(mem_total / 8)))
    full_matrix = n * n * 8
    rng = np.random.default_rng(0)
    Q, K, V = rng.standard_normal((3, n, args.d))  # (n, d) each
    rss_before = max_rss_bytes()

    tracemalloc.start()
    started = time.perf_counter()
    output, logsumexp = qkv.blockwise_attention(Q, K, V, args.block_size)
    seconds = time.perf_counter() - started
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = max_rss_bytes()

    rows = np.unique(np.r_[0, n - 1, rng.integers(0, n, size=max(0, args.check_rows - 2))])
    expected, _ = qkv.scaled_dot_product_attention(Q[rows], K, V)  # (rows, d): only those rows
    difference = float(np.abs(output[rows] - expected).max())

    figures = [
        ("n (tokens)", f"{n:,}"),
        ("d_k = d_v", f"{args.d}"),
        ("block size", f"{args.block_size}"),
        ("one n x n float64 matrix", f"{full_matrix:,} bytes ({full_matrix / GiB:.1f} GiB)"),
        ("MemTotal of this machine", f"{mem_total:,} bytes ({mem_total / GiB:.1f} GiB)"),
        ("the matrix / MemTotal", f"{full_matrix / mem_total:.2f}"),
        ("Q, K, V and the output", f"{(Q.nbytes * 3 + output.nbytes) / 2**20:.0f} MiB"),
        ("peak numpy memory in the run", f"{traced_peak / 2**20:.0f} MiB (tracemalloc)"),
        ("peak resident memory", f"{rss_before / 2**20:.0f} MiB before the run, "
                                 f"{rss_after / 2**20:.0f} MiB after (ru_maxrss)"),
        ("time", f"{seconds:.1f} s"),
        ("rows checked against full", f"{len(rows)} rows {rows.tolist()}"),
        ("largest difference", f"{difference:.2e}"),
    ]
    width = max(len(name) for name, _ in figures)
    for name, value in figures:
        print(f"{name:>{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
