"""A pytest plugin that records what each test and each fixture costs, for ``bench/test_suite.py``.

Loaded with ``-p bench.suite_timer`` (pytest-xdist's workers load it too) when the environment
variable ``QKV_SUITE_RECORD`` names a folder; every process writes one JSON line per record to
its own file there, and ``bench/test_suite.py`` adds them up. Records:

- ``{"kind": "test", "nodeid", "worker", "phases": {"setup"|"call"|"teardown": figures}}``
- ``{"kind": "fixture", "name", "scope", "nodeid", "worker", **figures}``: one fixture's own
  setup (the fixtures it requests are set up before it and recorded on their own);
- ``{"kind": "worker", "worker", **figures}``: the whole process, from loading this plugin to
  the end of its session.

Figures are ``wall`` seconds, ``cpu`` seconds of this process (user + sys, every thread) and
``children`` seconds (user + sys of the child processes reaped meanwhile: kernels, the book
build, sandboxes). A shared machine stretches wall time; CPU time counts the work itself.
This plugin only measures; it changes nothing in how the tests run.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

_RECORD_FOLDER = os.environ.get("QKV_SUITE_RECORD")


def _now() -> tuple[float, float, float]:
    """Wall clock, CPU seconds of this process, CPU seconds of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.perf_counter(), own.ru_utime + own.ru_stime,
            children.ru_utime + children.ru_stime)


def _since(start: tuple[float, float, float]) -> dict:
    end = _now()
    return {"wall": end[0] - start[0], "cpu": end[1] - start[1], "children": end[2] - start[2]}


class SuiteTimer:
    """Writes one JSON line per test, per fixture set-up and per process."""

    def __init__(self, folder: Path) -> None:
        self.started = _now()
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        folder.mkdir(parents=True, exist_ok=True)
        self.out = open(folder / f"{self.worker}-{os.getpid()}.jsonl", "a", encoding="utf-8")
        self.phases: dict[str, dict] = {}

    def write(self, record: dict) -> None:
        self.out.write(json.dumps({**record, "worker": self.worker}) + "\n")
        self.out.flush()

    def _phase(self, item, phase: str):
        start = _now()
        yield
        self.phases.setdefault(item.nodeid, {})[phase] = _since(start)
        if phase == "teardown":
            self.write({"kind": "test", "nodeid": item.nodeid,
                        "phases": self.phases.pop(item.nodeid)})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self._phase(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._phase(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._phase(item, "teardown")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        start = _now()
        yield
        figures = _since(start)
        if figures["wall"] >= 0.05 or figures["cpu"] + figures["children"] >= 0.05:
            self.write({"kind": "fixture", "name": fixturedef.argname, "scope": fixturedef.scope,
                        "nodeid": getattr(request.node, "nodeid", ""), **figures})

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        self.write({"kind": "worker", **_since(self.started)})
        self.out.close()


def pytest_configure(config) -> None:
    if _RECORD_FOLDER and not config.pluginmanager.has_plugin("suite-timer"):
        config.pluginmanager.register(SuiteTimer(Path(_RECORD_FOLDER)), "suite-timer")
