"""A real Dask cluster on 127.0.0.1 over TLS, set up as the instructors' page says, for the cluster's tests.

:func:`tls_cluster` makes the certificates with the course command (``python -m qkv_grading
certificates``), starts ``dask scheduler`` and ``dask worker`` processes with their own
certificates and settings (``DASK_CONFIG``), the workers as an unprivileged
local user when the tests run as root (:mod:`tests.local_users`), waits for the workers, and
stops everything on leaving. :func:`grading_cluster` is one such cluster of two workers, shared by
the session's tests that need one (:class:`SharedCluster`, registered in ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .local_users import GRADER, give, local_user, run_as

DASK = str(Path(sys.executable).parent / "dask")


def certificates(folder: Path) -> subprocess.CompletedProcess:
    """The course command that makes the cluster's certificates in ``folder``."""
    return subprocess.run([sys.executable, "-m", "qkv_grading", "certificates", str(folder), "--host", "127.0.0.1"],
                          capture_output=True, text=True, timeout=120)


def tls(folder: Path, role: str) -> list[str]:
    return ["--tls-ca-file", str(folder / role / "ca.pem"), "--tls-cert", str(folder / role / f"{role}.pem"),
            "--tls-key", str(folder / role / f"{role}-key.pem")]


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def tls_cluster(where: Path, workers: int = 2, preload: Path | None = None) -> Iterator[dict]:
    """``{"address", "certificates", "scheduler", "workers"}`` of a running cluster (see the module docstring)."""
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    where.chmod(0o755)  # the workers' user enters it; what is private in it is private on its own
    made = certificates(where / "certificates")
    assert made.returncode == 0, made.stderr
    folder = where / "certificates"
    user = local_user(GRADER) if os.geteuid() == 0 else None
    started: list[subprocess.Popen] = []
    try:
        scheduler_file = where / "scheduler.json"
        started.append(subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--dashboard-address",
             "127.0.0.1:0", "--protocol", "tls",
             "--scheduler-file", str(scheduler_file), *tls(folder, "scheduler")],
            env={**os.environ, "DASK_CONFIG": str(folder / "scheduler")}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
        deadline = time.monotonic() + 60
        while not scheduler_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        space = where / "worker-space"
        space.mkdir()
        worker_folder = where / "worker-certificates"  # as copied to a worker's machine, its user's own
        shutil.copytree(folder / "worker", worker_folder / "worker")
        if user is not None:
            give(worker_folder, user)
            give(space, user)
        command = [DASK, "worker", address, "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
                   "--dashboard-address", "127.0.0.1:0", "--local-directory", str(space), *tls(worker_folder, "worker"),
                   *(["--preload", str(preload)] if preload else [])]
        settings = {"DASK_CONFIG": str(worker_folder / "worker")}
        logs = [where / f"worker-{n}.log" for n in range(workers)]
        for log in logs:
            with log.open("w") as stream:
                if user is None:
                    started.append(subprocess.Popen(command, env={**os.environ, **settings}, start_new_session=True,
                                                    stdout=subprocess.DEVNULL, stderr=stream))
                else:
                    started.append(run_as(user, command, reachable=[where, *([preload.parent] if preload else [])],
                                          env={**settings, "HOME": str(space)}, background=True,
                                          start_new_session=True, stdout=subprocess.DEVNULL, stderr=stream))
        try:
            _wait_for_workers(address, folder / "grader", workers)
        except Exception as err:
            raise AssertionError(f"the workers did not start: {err}\n" + "\n".join(
                log.read_text(errors="replace")[-2000:] for log in logs)) from None
        yield {"address": address, "certificates": folder, "scheduler": started[0], "workers": started[1:],
               "user": user}
    finally:
        for process in reversed(started):
            _stop(process)


class SharedCluster:
    """The session's TLS cluster of two workers (:func:`tls_cluster`): started for the first test that
    needs it, stopped as soon as the next test of this process does not (:func:`stop_unless_needed`),
    and started again for a later one that does. An idle cluster costs the machine about a seventh
    of a core (the timers of its scheduler and workers), for as long as the session lasts."""

    def __init__(self, tmp_path_factory):
        self.factory = tmp_path_factory
        self.stack: contextlib.ExitStack | None = None
        self.found: dict | None = None

    def get(self) -> dict:
        if self.found is None:
            stack = contextlib.ExitStack()
            self.found = stack.enter_context(tls_cluster(self.factory.mktemp("cluster")))
            self.stack = stack
        return self.found

    def stop(self) -> None:
        stack, self.stack, self.found = self.stack, None, None
        if stack is not None:
            stack.close()


_shared: SharedCluster | None = None


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """The session's :class:`SharedCluster` (a session fixture, so that its tests run in one process)."""
    global _shared
    _shared = SharedCluster(tmp_path_factory)
    try:
        yield _shared
    finally:
        _shared.stop()
        _shared = None


@pytest.fixture
def grading_cluster(shared_cluster):
    """A TLS cluster of two workers, shared by the tests of the session that need one, one after another."""
    return shared_cluster.get()


def stop_unless_needed(nextitem) -> None:
    """Stop the shared cluster when the test that runs next (``nextitem``, None at the end) does not use it."""
    if _shared is not None and (nextitem is None or "grading_cluster" not in nextitem.fixturenames):
        _shared.stop()


def _wait_for_workers(address: str, grader: Path, count: int) -> None:
    from distributed import Client

    from qkv_grading import cluster

    with Client(address, security=cluster.security(grader), timeout=60) as client:
        client.wait_for_workers(count, timeout=120)
