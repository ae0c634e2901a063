"""Measure what a computation costs: its time, the peak of its numpy allocations, and the machine's memory.

The book's cost chapter measures :mod:`qkv` at build time with these helpers, and the scripts in
``bench/`` use them for the large runs. Time is the best of a few runs (the least disturbed by
other work on the machine); memory is the peak that :mod:`tracemalloc` sees, which counts every
numpy array allocated during the call (numpy reports its allocations to tracemalloc).

A measurement differs from one run to the next, and the website runs each chapter once per
edition. :func:`measured_once` makes the editions show one run: the English edition's build
measures and records, and the 繁體中文 one, built after it from the same source, reads what the
English one recorded (``book/_ext/editions.py`` tells each chapter kernel which it does, and where).
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Set by the website's build (book/_ext/editions.py) for each chapter kernel it starts.
MODE_VARIABLE = "QKV_MEASUREMENTS_MODE"  # "record" (the English edition) or "replay" (a translation)
FILE_VARIABLE = "QKV_MEASUREMENTS_FILE"  # the page's measurements, named after a hash of its source
RECORD, REPLAY = "record", "replay"


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


def measured_once(name: str, measure: Callable[[], Any]) -> Any:
    """``measure()``, or what it gave in the English edition's build of the same page.

    ``measure()`` must return what JSON can hold (numbers, lists, dicts with string keys); the result
    comes back as JSON reads it (a tuple as a list), the same in every mode, so a chapter computes
    the same from it whichever edition runs it. Outside the website's build (in JupyterLab, in a
    test) ``measure()`` simply runs. In the English build it runs and its result is recorded in the
    page's file, under ``name``; in a translated build it does not run, and the recorded result is
    returned, so both editions of the page show the same numbers.

    Raises:
        RuntimeError: in a translated build, when the English build of the same source recorded no
            ``name`` (build the English edition first: ``make site`` does), or when the build sets
            an unknown mode.
    """
    mode, path = os.environ.get(MODE_VARIABLE), os.environ.get(FILE_VARIABLE)
    if not mode or not path:
        return json.loads(json.dumps(measure()))
    path = Path(path)
    recorded = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if mode == REPLAY:
        if name not in recorded:
            raise RuntimeError(
                f"no measurement {name!r} in {path}: a translated edition shows what the English "
                "edition's build of the same source measured, so build the English edition first "
                "(make site does)")
        return recorded[name]
    if mode != RECORD:
        raise RuntimeError(f"{MODE_VARIABLE} is {RECORD!r} or {REPLAY!r}, not {mode!r}")
    recorded[name] = json.loads(json.dumps(measure()))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(recorded, indent=1), encoding="utf-8")
    partial.replace(path)  # a reader never sees half a file
    return recorded[name]
