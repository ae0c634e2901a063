"""What the tests share when ``make test`` runs them in one process per core (pytest-xdist).

Two rules keep an expensive fixture computed once per run, with nothing to edit when a test,
a chapter or a problem set is added:

- :func:`once_per_run` makes a folder once for every worker of the run: the first worker to ask
  makes it under a file lock, the others wait for it and reuse it (the book build of both
  editions). Without workers it is an ordinary session folder.
- :func:`group_by_shared_fixtures` keeps on one worker every test that shares an instance of a
  fixture of the tests wider than a function: a module's fixture (its release, its browser, its
  graded class), or a session fixture that cannot cross a process (the adversarial class, the TLS
  cluster); each value of a parametrized fixture is an instance of its own. The groups are joined
  where a test needs two of them. Each worker writes them, once it has collected the tests, to
  ``test-groups.json`` in the run's folder, and :class:`GroupScheduling` (``--dist loadgroup``)
  sends each group to one worker as a unit. Every other test goes to whichever worker is free.
  (pytest-xdist's own ``xdist_group`` marks rename the tests' node ids, which pytest 9 no longer
  lets a plugin do.)

Each worker has its own temp folders (``tmp_path``), free ports and sandbox identities; the tests
that look for sandboxes left behind count only the identities that no grader holds.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

TESTS = Path(__file__).resolve().parent

ACROSS_WORKERS = "_made_once_per_run"  # the attribute that marks a fixture made by once_per_run
GROUPS_FILE = "test-groups.json"  # in the run's folder: {node id: group} of the grouped tests


def across_workers(fixture_function: Callable) -> Callable:
    """Mark a session fixture whose result every worker reuses (it calls :func:`once_per_run`)."""
    setattr(fixture_function, ACROSS_WORKERS, True)
    return fixture_function


def once_per_run(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``name`` made by ``make(folder)`` once in this test run, however many workers run it.

    Under pytest-xdist the workers' temp folders sit side by side in one folder of the run; the
    folder is made there under a lock, and ``name.done`` says it is complete. If ``make`` fails,
    the next worker to ask tries again (and fails with its own message).
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name, numbered=True)
        make(folder)
        return folder
    run = tmp_path_factory.getbasetemp().parent
    folder, done = run / name, run / f"{name}.done"
    with open(run / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while one makes it
        if not done.is_file():
            if folder.exists():  # a failed attempt of another worker
                folder.rename(run / f"{name}.failed-{os.getpid()}")
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def _shared_instances(item) -> list[str]:
    """Names of the instances of the tests' own fixtures wider than a function that ``item`` uses."""
    found = []
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name)
        if not definitions:
            continue  # a parameter
        definition = definitions[-1]
        module = getattr(definition.func, "__module__", "") or ""
        if definition.scope == "function" or not module.startswith(TESTS.name + "."):
            continue  # pytest's own (tmp_path_factory) and function fixtures
        if getattr(definition.func, ACROSS_WORKERS, False):
            continue  # made once for all workers
        module_path = item.nodeid.partition("::")[0]  # relative to the repository
        callspec = getattr(item, "callspec", None)
        if callspec is not None and name in callspec.params:  # a parametrized fixture: one instance per value
            name = f"{name}[{callspec.indices[name]}]"
        if definition.scope == "session":
            found.append(name)
        elif definition.scope == "package":
            found.append(f"{module_path.rpartition('/')[0]}/::{name}")
        elif definition.scope == "module":
            found.append(f"{module_path}::{name}")
        else:
            found.append(f"{item.parent.nodeid}::{name}")
    return found


def group_by_shared_fixtures(items) -> dict[str, str]:
    """``{node id: group}`` of the tests that share a fixture's instance, joined into one group each."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    shared = {item.nodeid: _shared_instances(item) for item in items}
    for keys in shared.values():
        for key in keys:
            parent.setdefault(key, key)
        for key in keys[1:]:
            parent[root(key)] = root(keys[0])
    return {nodeid: root(keys[0]) for nodeid, keys in shared.items() if keys}


def write_groups(tmp_path_factory, items) -> None:
    """In a worker: write the groups of ``items`` for :class:`GroupScheduling` (every worker
    collects the same tests, and writes the same file)."""
    path = tmp_path_factory.getbasetemp().parent / GROUPS_FILE
    written = path.with_name(f"{GROUPS_FILE}.{os.getpid()}")
    written.write_text(json.dumps(group_by_shared_fixtures(items)), encoding="utf-8")
    written.replace(path)  # whole, or not at all


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, where a test's scope is its group of
    :func:`group_by_shared_fixtures`, or the test alone."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None
        self._groups_path = config._tmp_path_factory.getbasetemp() / GROUPS_FILE

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked once every worker has collected
            self._groups = json.loads(self._groups_path.read_text(encoding="utf-8"))
        return self._groups.get(nodeid, nodeid)
