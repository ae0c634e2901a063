"""Grading on a Dask cluster: TLS with certificates both ways, and nothing but plain data crossing back.

``python -m qkv_grading certificates [FOLDER]`` (:func:`make_certificates`) makes a
certificate authority and, signed by it, one key and certificate for each part of the
cluster, each in a folder of its own to copy to its machine::

    FOLDER/                      (default: the course's .grading/cluster/)
    ├── ca.pem                   the authority's certificate; its key is not kept
    ├── scheduler/  ca.pem  scheduler.pem  scheduler-key.pem  dask.yaml
    ├── worker/     ca.pem  worker.pem     worker-key.pem     dask.yaml
    └── grader/     ca.pem  grader.pem     grader-key.pem     dask.yaml   (stays with the course)

Every folder is made afresh and private, every file 0600 (:mod:`qkv_grading.private_files`).
The scheduler and the workers are started with their folder (``--tls-ca-file``, ``--tls-cert``,
``--tls-key``, and ``DASK_CONFIG`` for :data:`DASK_SETTINGS`, see the instructors' page); the
grader connects with its own (:func:`security`). distributed then requires a certificate
signed by this authority on both ends of every connection: a peer without one cannot
connect, submit work or read results.

What crosses, in :func:`run_jobs`: to the workers, a reference to :func:`run_on_worker` and
each job's plain data (its cells and numbers; nothing of the gradebook, the key or the
course); back, the bytes :func:`run_on_worker` returns (the result of
:func:`qkv_grading.sandbox.run_job` as JSON) and nothing else. The grading process never
unpickles what a peer sends (:func:`refusing_pickles`: results are read with msgpack only,
straight from the workers, and distributed's pickle loading raises while the client runs),
never prints a peer's text raw, and decodes each result as data, bounded in size. A peer
that holds a certificate is part of the cluster: it can run code on the workers (as their
user) and hand back any answer for the jobs it runs, so the keys stay on the cluster's
machines, readable by their own user only.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import private_files

ROLES = ("scheduler", "worker", "grader")
# What every part of the cluster runs with (``DASK_CONFIG=<its folder>``): no connection without TLS,
# and no page of the scheduler's or workers' HTTP servers (the dashboard, JSON, metrics), which
# would answer anyone without a certificate.
DASK_SETTINGS = """\
# Written by `python -m qkv_grading certificates`: the settings of every part of the grading cluster.
distributed:
  comm:
    require-encryption: true
  scheduler:
    http:
      routes: []
  worker:
    http:
      routes: []
"""
VALID_DAYS = 400  # a term, and some
SCHEME = "tls://"


class ClusterError(RuntimeError):
    """The cluster cannot be used as asked (an address without TLS, missing certificates): the message says how."""


# --------------------------------------------------------------------------- certificates


def _name(text: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Attention by Hand grading"),
                      x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_certificate(certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return certificate.public_bytes(serialization.Encoding.PEM)


def _certificate(subject: str, key, issuer: str, issuer_key, *, authority: bool, hosts: tuple[str, ...] = ()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=authority, path_length=0 if authority else None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if authority:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        names = [x509.DNSName(f"qkv-grading-{subject}")]
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        # Every part both listens and connects (workers to each other), so each key serves both ends.
        builder = (builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=True, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False),
            critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False))
    return builder.sign(issuer_key, hashes.SHA256())


def make_certificates(folder: Path | str, hosts: tuple[str, ...] = ()) -> dict[str, Path]:
    """Make the authority and a key and certificate per role in ``folder`` (which must not exist).

    ``hosts`` (names or addresses of the cluster's machines) are written into the
    certificates for the record; distributed checks the authority's signature, not names.
    Returns ``{role: its folder}``. Raises :class:`private_files.UnsafeLocation` when
    ``folder`` exists or could be replaced by another user.
    """
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    private_files.make_folder(folder)
    authority_key = ec.generate_private_key(ec.SECP256R1())
    authority = _certificate("authority", authority_key, "authority", authority_key, authority=True)
    private_files.write_new_file(folder, "ca.pem", _pem_certificate(authority))
    made = {}
    for role in ROLES:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _certificate(role, key, "authority", authority_key, authority=False, hosts=tuple(hosts))
        place = private_files.make_folder(folder / role)
        private_files.write_new_file(place, "ca.pem", _pem_certificate(authority))
        private_files.write_new_file(place, f"{role}.pem", _pem_certificate(certificate))
        private_files.write_new_file(place, f"{role}-key.pem", _pem_key(key))
        private_files.write_new_file(place, "dask.yaml", DASK_SETTINGS.encode("utf-8"))
        made[role] = place
    return made  # the authority's key is dropped here: nothing can be signed by it again


def role_files(folder: Path | str, role: str) -> tuple[Path, Path, Path]:
    """``(ca.pem, <role>.pem, <role>-key.pem)`` of the role's folder, checked to exist and be private."""
    folder = Path(folder)
    files = (folder / "ca.pem", folder / f"{role}.pem", folder / f"{role}-key.pem")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ClusterError(f"no certificates of the {role} in {folder} (missing {', '.join(missing)}): make them with "
                           "`python -m qkv_grading certificates` and see the instructors' page")
    key_mode = files[2].stat().st_mode & 0o077
    if key_mode:
        raise ClusterError(f"{files[2]} may be read by other users (mode {files[2].stat().st_mode & 0o777:04o}): "
                           "chmod 600 it")
    return files


def security(folder: Path | str, role: str = "grader"):
    """distributed's :class:`Security` for ``role``: its key and certificate, the authority, TLS required."""
    from distributed.security import Security

    authority, certificate, key = role_files(folder, role)
    kind = "client" if role == "grader" else role
    return Security(tls_ca_file=str(authority), require_encryption=True,
                    **{f"tls_{kind}_cert": str(certificate), f"tls_{kind}_key": str(key)})


# --------------------------------------------------------------------------- the worker's side


def run_on_worker(job: dict, limits: dict) -> bytes:
    """What a worker runs for one job: :func:`qkv_grading.sandbox.run_job`, whose run record is bytes.

    Never raises: an exception would travel back pickled, and the grader reads no pickle.
    """
    from . import run_record, sandbox

    try:
        return bytes(sandbox.run_job(job, limits))
    except Exception as err:  # the worker's machinery failed, not the submission
        return run_record.failed(f"the worker failed: {type(err).__name__}: {str(err)[:300]}")


# --------------------------------------------------------------------------- the grader's side


def _refuse(*args, **kwargs):
    raise ValueError("the grading process does not unpickle what a cluster peer sends")


@contextlib.contextmanager
def refusing_pickles():
    """While the client runs, distributed's pickle loading in this process raises instead, and the
    client subscribes to no peer's ``print`` or ``warn`` events.

    distributed unpickles, on the client, results serialized with pickle, a result's type
    (``key-in-memory``), exceptions and warnings, and any message part a peer marks as
    pickled; and a ``print`` event from any worker is printed as it comes. Results come
    back with msgpack (:func:`run_jobs`), so none of that is needed.
    """
    import distributed.client
    import distributed.protocol.pickle

    client = distributed.client.Client
    saved = distributed.protocol.pickle.loads, distributed.client.loads, client._default_event_handlers
    distributed.protocol.pickle.loads = distributed.client.loads = _refuse
    client._default_event_handlers = {}
    try:
        yield
    finally:
        distributed.protocol.pickle.loads, distributed.client.loads, client._default_event_handlers = saved


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class _PlainText(logging.Filter):
    """distributed's log lines reach the instructor's terminal: a peer's text in them is shown escaped."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, None
        record.msg, record.args = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text), ()
        return True


def received(data, limit_bytes: int) -> bytes:
    """What a worker sent, if it is bytes of at most ``limit_bytes`` (decoded later as a run record, within
    bounds, by :func:`qkv_grading.run_record.decode`); else a ``sandbox_failed`` record saying what came."""
    from . import run_record

    if not isinstance(data, bytes):
        return run_record.failed(f"a worker of the cluster sent {type(data).__name__}, not bytes")
    if len(data) > limit_bytes:
        return run_record.failed(f"a worker of the cluster sent {len(data)} bytes, more than a record may have")
    return data


def check_address(address: str) -> None:
    if not address.startswith(SCHEME):
        raise ClusterError(f"the Dask scheduler's address must start with {SCHEME} (found {address!r}): grading runs "
                           "on a cluster only over TLS with certificates; see the instructors' page")


def run_jobs(tasks: Iterable, limits: dict, address: str, certificates: Path | str) -> Iterator[tuple[object, bytes]]:
    """Run each task's job (``task.key``, ``task.job``) on the cluster at ``address``; yield ``(task, record
    bytes)`` as each finishes.

    ``certificates`` is the grader's folder (``ca.pem``, ``grader.pem``, ``grader-key.pem``).
    ``tasks`` is read only as the cluster's threads come free (two jobs ahead per thread), and
    each job is dropped once sent. Results are read straight from the workers with msgpack,
    under :func:`refusing_pickles`; a failure of the cluster is a ``sandbox_failed`` record.
    """
    from distributed import Client, as_completed

    from . import run_record

    check_address(address)
    secure = security(certificates, "grader")
    limit_bytes = int(limits.get("answer_bytes", 64 << 20)) + (4 << 20)
    plain = _PlainText()
    handlers = [h for name in ("distributed", "") for h in logging.getLogger(name or None).handlers]
    for handler in handlers:
        handler.addFilter(plain)
    try:
        with refusing_pickles(), Client(address, security=secure, timeout=30, serializers=["msgpack"],
                                        deserializers=["msgpack"], direct_to_workers=True) as client:
            tasks, running, queue = iter(tasks), {}, as_completed()
            ahead = 2 * max(1, sum(client.nthreads().values()))

            def submit() -> bool:
                task = next(tasks, None)
                if task is None:
                    return False
                future = client.submit(run_on_worker, task.job, limits, key=f"qkv-grade-{task.key}", pure=False)
                running[future], task.job = task, None
                queue.add(future)
                return True

            while len(running) < ahead and submit():
                pass
            try:
                for future in queue:
                    task = running.pop(future)
                    try:
                        data = received(future.result(), limit_bytes)
                    except Exception as err:  # the cluster failed (a worker lost, a refused message)
                        data = run_record.failed(f"the cluster failed: {type(err).__name__}")
                    future.release()
                    submit()
                    yield task, data
            finally:
                client.cancel(list(running))
    finally:
        for handler in handlers:
            handler.removeFilter(plain)
