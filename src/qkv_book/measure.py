"""Measure what a computation costs: its time, the peak of its numpy allocations, and the machine's memory.

The book's cost chapter measures :mod:`qkv` at build time with these helpers, and the scripts in
``bench/`` use them for the large runs. Time is the best of a few runs (the least disturbed by
other work on the machine); memory is the peak that :mod:`tracemalloc` sees, which counts every
numpy array allocated during the call (numpy reports its allocations to tracemalloc).
"""

from __future__ import annotations

import os
import time
import tracemalloc


def best_seconds(function, *args, repeat: int = 3, **kwargs) -> float:
    """The shortest wall-clock time of ``repeat`` calls of ``function(*args, **kwargs)``, in seconds."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function(*args, **kwargs)
        times.append(time.perf_counter() - started)
    return min(times)


def peak_bytes(function, *args, **kwargs) -> int:
    """The peak of the memory allocated during ``function(*args, **kwargs)``, in bytes, above what
    was allocated before the call (numpy arrays included); the result of the call is dropped."""
    if tracemalloc.is_tracing():
        raise RuntimeError("peak_bytes needs tracemalloc to itself; it is already tracing")
    tracemalloc.start()
    try:
        function(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def mem_total_bytes() -> int:
    """The machine's memory in bytes: MemTotal of /proc/meminfo (Linux), else the physical pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024  # the file counts kB, meaning KiB
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
