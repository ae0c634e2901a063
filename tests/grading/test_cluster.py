"""A grading cluster talks only to peers holding its certificates, and hands back nothing but plain data.

A real scheduler and two workers run on 127.0.0.1 over TLS (:mod:`tests.cluster_support`),
the workers as an unprivileged local user. A peer without a certificate, or with one of
another authority, cannot connect, submit work or read results on any port they listen
on; a job's result comes back as bytes; and what a hostile peer holding a certificate
sends is never unpickled or printed raw by the grading process.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
from dataclasses import dataclass

import psutil
import pytest

from qkv_grading import cluster, private_files, run_record

from ..cluster_support import certificates, tls_cluster

pytestmark = pytest.mark.slow


@dataclass
class Task:
    """What :func:`cluster.run_jobs` reads of a task: its key and its job."""

    key: str
    job: dict | None


@pytest.fixture
def running(grading_cluster):
    return grading_cluster


def listening_ports(process: psutil.Process) -> set[int]:
    """The TCP ports on which ``process`` and its children listen."""
    ports = set()
    for each in [process, *process.children(recursive=True)]:
        try:
            ports |= {c.laddr.port for c in each.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
        except psutil.Error:
            pass
    return ports


def test_the_course_command_makes_private_certificates_for_each_part(tmp_path):
    made = certificates(tmp_path / "cluster")
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "cluster"
    for role in cluster.ROLES:
        for name in ("ca.pem", f"{role}.pem", f"{role}-key.pem"):
            assert stat.S_IMODE((folder / role / name).stat().st_mode) == 0o600, (role, name)
        assert stat.S_IMODE((folder / role).stat().st_mode) == 0o700
    assert not list(folder.rglob("*ca-key*")), "the authority's key is not kept"
    with pytest.raises(private_files.UnsafeLocation, match="exists already"):
        cluster.make_certificates(tmp_path / "cluster")


def test_a_job_runs_on_the_workers_and_comes_back_as_plain_data(running):
    tasks = [Task(key, {"problem_set": "ps0", "givens": {}, "cells": [{"id": 0, "run": "import os\nprint(os.getuid())"}]})
             for key in ("a", "b")]
    results = list(cluster.run_jobs(tasks, {"notebook_seconds": 30}, running["address"],
                                    running["certificates"] / "grader"))
    assert sorted(task.key for task, _ in results) == ["a", "b"]
    for _, data in results:
        assert isinstance(data, bytes)
        record = run_record.decode(data)
        assert record.status == "finished", record
        if running["user"] is not None:  # the workers' unprivileged user ran the sandbox
            assert record.cells[0].outputs[0].text.strip() == str(running["user"].pw_uid)


def _handshake_without_certificate(port: int) -> str:
    """Connect over TLS with no certificate of ours and try to speak: what happened."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
            with context.wrap_socket(raw) as tls_socket:
                tls_socket.sendall(b"\x00" * 64)
                data = tls_socket.recv(1024)
                return "answered" if data else "closed"
    except (ssl.SSLError, OSError) as err:
        return f"refused: {type(err).__name__}"


PAGES = ("/json/identity.json", "/metrics", "/sitemap.json")


def _plain(port: int) -> str:
    """Ask for the pages a dashboard or its HTTP server would serve, without TLS and with TLS without a
    certificate: the first page that answers with something, or "nothing". (distributed's HTTP
    server always serves /sitemap.json, the list of its pages: it must list no other.)"""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    for page in PAGES:
        for wrap in (lambda raw: raw, lambda raw: context.wrap_socket(raw)):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
                    with wrap(raw) as stream:
                        stream.sendall(f"GET {page} HTTP/1.0\r\n\r\n".encode())
                        answer = b""
                        while chunk := stream.recv(65536):
                            answer += chunk
            except (ssl.SSLError, OSError):
                continue
            head, _, body = answer.partition(b"\r\n\r\n")
            status = head.split(b"\r\n")[0]
            if not status.startswith(b"HTTP") or status.split()[1:2] == [b"404"]:
                continue
            if page == "/sitemap.json" and json.loads(body)["paths"] in ([], ["/sitemap.json"]):
                continue
            return f"{page}: {status.decode(errors='replace')} {body[:200]!r}"
    return "nothing"


def test_no_port_of_the_cluster_talks_to_a_peer_without_a_certificate(running):
    ports = listening_ports(psutil.Process(running["scheduler"].pid))
    for worker in running["workers"]:
        ports |= listening_ports(psutil.Process(worker.pid))
    assert len(ports) >= 5, f"a scheduler, two nannies and two workers listen: {ports}"
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(ports)) as pool:
        probes = {port: (pool.submit(_plain, port), pool.submit(_handshake_without_certificate, port))
                  for port in sorted(ports)}
        found = {port: (page.result(), tls.result()) for port, (page, tls) in probes.items()}
    assert all(page == "nothing" and tls != "answered" for page, tls in found.values()), found


def test_a_client_without_a_certificate_or_of_another_authority_cannot_submit_or_read(running, tmp_path):
    code = ("import sys\nfrom distributed import Client\nfrom qkv_grading import cluster\n"
            "security = cluster.security(sys.argv[2]) if len(sys.argv) > 2 else None\n"
            "try:\n    client = Client(sys.argv[1], security=security, timeout=8)\n"
            "except Exception as err:\n    print('refused', type(err).__name__)\n    sys.exit(0)\n"
            "print('CONNECTED', client.submit(sum, [1, 2]).result(timeout=10), list(client.who_has()))\n")
    other = tmp_path / "other"
    assert certificates(other).returncode == 0
    for extra in ([], [str(other / "grader")]):
        tried = subprocess.run([sys.executable, "-c", code, running["address"], *extra], capture_output=True,
                               text=True, timeout=120)
        assert "CONNECTED" not in tried.stdout and "refused" in tried.stdout, tried.stdout + tried.stderr[-2000:]
    plain = running["address"].replace("tls://", "tcp://")
    tried = subprocess.run([sys.executable, "-c", code, plain], capture_output=True, text=True, timeout=120)
    assert "CONNECTED" not in tried.stdout, tried.stdout


def test_the_grader_refuses_an_address_without_tls(tmp_path):
    with pytest.raises(cluster.ClusterError, match="must start with tls://"):
        cluster.check_address("tcp://127.0.0.1:8786")


HOSTILE = '''
"""A worker holding the cluster's certificate that turns on the grader: pickles that would run code
there, a forged result type, terminal escapes in a print event."""
import os
import pickle

MARKER = {marker!r}


class Bomb:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


def dask_setup(worker):
    import distributed.worker_state_machine as machine
    import qkv_grading.cluster as cluster

    bomb = pickle.dumps(Bomb())
    real_dumps = machine.pickle.dumps
    machine.pickle.dumps = lambda obj, *a, **k: bomb if isinstance(obj, type) else real_dumps(obj, *a, **k)

    def hostile(job, limits):
        worker.log_event("print", {{"args": ("\\x1b[2J\\x1b[31mall grades are 100\\x1b[0m",)}})
        if job["cells"][0]["run"] == "bomb":
            return Bomb()
        return b'{{"lines": [], "exit": 0}}'

    cluster.run_on_worker = hostile
'''


def test_what_a_hostile_peer_with_a_certificate_sends_never_runs_in_the_grading_process(tmp_path):
    marker = tmp_path / "the-grader-ran-a-peers-pickle"
    preload = tmp_path / "preload" / "hostile_worker.py"
    preload.parent.mkdir()
    preload.write_text(HOSTILE.format(marker=str(marker)), encoding="utf-8")
    preload.parent.chmod(0o755)
    preload.chmod(0o644)
    code = ("import sys\nfrom types import SimpleNamespace as Task\nfrom qkv_grading import cluster, run_record\n"
            "tasks = [Task(key=k, job={'givens': {}, 'cells': [{'id': 0, 'run': run}]}) for k, run in "
            "(('a', 'bomb'), ('b', 'ok'))]\n"
            "for task, data in cluster.run_jobs(tasks, {'notebook_seconds': 20}, sys.argv[1], sys.argv[2]):\n"
            "    try:\n        found = run_record.decode(data).status\n"
            "    except run_record.RecordRefused as err:\n        found = 'refused'\n"
            "    print('RESULT', task.key, found)\n")
    with tls_cluster(tmp_path / "hostile", workers=1, preload=preload) as found:
        tried = subprocess.run([sys.executable, "-c", code, found["address"], str(found["certificates"] / "grader")],
                               capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "a pickle from a peer ran in the grading process"
    printed = tried.stdout + tried.stderr
    assert "\x1b[" not in printed, "a peer's terminal escapes reached the console raw"
    results = dict(line.split()[1:] for line in tried.stdout.splitlines() if line.startswith("RESULT "))
    assert results == {"a": "sandbox_failed", "b": "refused"}, printed[-3000:]
    assert os.geteuid() != 0 or found["user"] is not None
