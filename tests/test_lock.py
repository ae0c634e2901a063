"""The environment is the lock: every installed package is in requirements.txt at the version it
names, and every locked package is installed.

requirements.in holds the top-level pins by hand; `make lock` resolves them, with the course
package's own dependencies (pyproject.toml), into requirements.txt, every package with its hashes;
`make` installs that file in pip's hash-checking mode, then the course package itself, editable.
These tests read the environment they run in (the one `make` made) with importlib.metadata.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys
import sysconfig
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .conftest import ROOT

LOCK = ROOT / "requirements.txt"
INPUT = ROOT / "requirements.in"
COURSE_PACKAGE = "qkv"  # installed editable from this repository, beside the lock
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


@functools.cache
def locked() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{name: (version, hashes)}`` of every package requirements.txt pins, names canonicalised."""
    found: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonicalize_name(pin[1])
            assert name not in found, f"requirements.txt pins {name} twice"
            found[name] = (pin[2], [])
        elif line.strip().startswith("--hash=") and name is not None:
            found[name][1].append(line.strip().split("=", 1)[1].rstrip(" \\"))
        elif line and not line.startswith((" ", "#")):
            raise AssertionError(f"requirements.txt has a line that is not a pin: {line!r}")
    assert len(found) > 100, f"requirements.txt pins only {len(found)} packages: is it the lock?"
    return {name: (version, tuple(hashes)) for name, (version, hashes) in found.items()}


@functools.cache
def installed() -> dict[str, str]:
    """``{name: version}`` of every distribution installed in this interpreter's environment (its
    site-packages; not the copies a package vendors and puts on sys.path, as setuptools does)."""
    folders = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {canonicalize_name(d.metadata["Name"]): d.version
            for d in importlib.metadata.distributions(path=folders)}


def test_every_installed_package_is_in_the_lock_at_its_version():
    """Nothing is installed that the lock does not name, nor at another version (the course
    package aside)."""
    lock = locked()
    extra = sorted(f"{name}=={version}" for name, version in installed().items()
                   if name != COURSE_PACKAGE and name not in lock)
    assert not extra, f"installed but not in requirements.txt: {extra}"
    differ = sorted(f"{name}: {version} installed, {lock[name][0]} locked"
                    for name, version in installed().items()
                    if name in lock and Version(version) != Version(lock[name][0]))
    assert not differ, f"installed at another version than the lock's: {differ}"


def test_every_locked_package_is_installed():
    """The install brought everything the lock names."""
    have = installed()
    missing = sorted(name for name in locked() if name not in have)
    assert not missing, f"in requirements.txt but not installed: {missing}"


def test_every_locked_package_has_a_hash():
    """Each pin carries the sha256 of the files it may install, so pip's hash-checking mode
    takes no other."""
    without = sorted(name for name, (_, hashes) in locked().items() if not hashes)
    assert not without, f"pins without a hash: {without}"
    bad = sorted(f"{name}: {h}" for name, (_, hashes) in locked().items() for h in hashes
                 if not re.fullmatch(r"sha256:[0-9a-f]{64}", h))
    assert not bad, f"hashes that are not sha256: {bad}"


def test_the_lock_is_for_this_python_and_names_no_path_url_or_editable():
    """The lock was resolved for the Python that runs the course (3.11), and every line that is
    not a comment or a hash is a plain ``name==version`` pin: no ``-e``, no path, no URL, no index
    of this machine (pip's own configuration says where the files lie)."""
    header = LOCK.read_text(encoding="utf-8").splitlines()[:3]
    python = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    assert any(f"pip-compile with {python}" in line for line in header), (
        f"requirements.txt was not made by pip-compile with {python}: {header}")
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith(("#", "--hash=")):
            assert PIN.match(line) and "@" not in line and "/" not in line, (
                f"requirements.txt: {line!r} is not a plain pin")


def test_torch_is_the_cpu_build_on_disk():
    """torch is locked as its CPU build, a single file, and that build is what is installed."""
    version, hashes = locked()["torch"]
    assert version.endswith("+cpu") and len(hashes) == 1, f"torch=={version} with {len(hashes)} hashes"
    assert installed()["torch"] == version


def test_the_lock_holds_every_top_level_pin_of_its_input():
    """requirements.txt was made from this requirements.in: each pin there is in the lock at the
    same version."""
    lock = locked()
    pins = []
    for line in INPUT.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            pins.append(requirement)
            assert str(requirement.specifier).startswith("=="), (
                f"requirements.in: {line} is not pinned with ==")
    stale = [f"{r.name}{r.specifier}: locked {lock.get(canonicalize_name(r.name), ('none',))[0]}"
             for r in pins if canonicalize_name(r.name) not in lock
             or Version(lock[canonicalize_name(r.name)][0]) not in r.specifier]
    assert not stale, f"requirements.txt is out of date with requirements.in (run `make lock`): {stale}"


def test_the_students_wheel_keeps_lower_bounds_that_the_lock_meets():
    """pyproject.toml's dependencies are lower bounds, not pins, and the lock's versions meet them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dependencies = [Requirement(d) for d in project["dependencies"]]
    assert dependencies
    pinned = [str(d) for d in dependencies
              if any(s.operator in ("==", "===", "~=", "<", "<=") for s in d.specifier)]
    assert not pinned, f"the students' wheel pins or caps what it should only bound from below: {pinned}"
    lock = locked()
    unmet = [str(d) for d in dependencies if canonicalize_name(d.name) not in lock
             or Version(lock[canonicalize_name(d.name)][0]) not in d.specifier]
    assert not unmet, f"the lock does not meet the course package's dependencies: {unmet}"
