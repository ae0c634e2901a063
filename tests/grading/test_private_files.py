"""What another local user plants where the grader keeps its state is refused, never used and never followed.

The neighbour is a real unprivileged user (:mod:`tests.local_users`) who writes into a shared,
sticky temp folder (as /tmp is) before the grader looks there.
"""

from __future__ import annotations

import os

import pytest

from qkv_grading import identities, private_files
from qkv_grading.private_files import UnsafeLocation

from ..local_users import NEIGHBOUR, local_user, run_as


@pytest.fixture
def shared(tmp_path):
    """A temp folder every user may write to, sticky like /tmp, and a file of root's the neighbour would like
    truncated."""
    folder = tmp_path / "shared-tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text("the grader's own file", encoding="utf-8")
    return folder, victim


def plant(shared_folder, script: str) -> None:
    """Run ``script`` (sh) as the neighbour, in ``shared_folder``."""
    neighbour = local_user(NEIGHBOUR)
    done = run_as(neighbour, ["/bin/sh", "-c", f"cd {shared_folder} && {script}"], reachable=[shared_folder],
                  capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_folder_planted_by_another_user_is_refused_with_its_owner(shared):
    folder, victim = shared
    plant(folder, f"mkdir -m 0700 state && ln -s {victim} state/uid-70001.lock")
    with pytest.raises(UnsafeLocation, match=rf"state is a folder of uid {local_user(NEIGHBOUR).pw_uid}"):
        private_files.open_folder(folder / "state")
    with pytest.raises(UnsafeLocation):
        identities.Identity(registry=folder / "state")
    assert victim.read_text(encoding="utf-8") == "the grader's own file"


def test_a_link_planted_in_place_of_a_folder_is_never_followed(shared, tmp_path):
    folder, victim = shared
    target = tmp_path / "roots-folder"
    target.mkdir(mode=0o700)
    plant(folder, f"ln -s {target} state")
    with pytest.raises(UnsafeLocation, match="state is a link"):
        private_files.open_folder(folder / "state")
    with pytest.raises(UnsafeLocation, match="exists already"):
        private_files.make_folder(folder / "state")
    assert list(target.iterdir()) == [], "nothing was made through the link"


def test_a_link_in_the_graders_own_folder_is_not_opened_and_its_target_not_truncated(shared):
    folder, victim = shared
    fd = private_files.open_folder(folder / "mine")
    try:
        os.symlink(victim, folder / "mine" / "uid-70001.lock")
        with pytest.raises(UnsafeLocation, match="cannot be opened"):
            private_files.open_file(fd, "uid-70001.lock")
        os.link(victim, folder / "mine" / "hard.lock")
        with pytest.raises(UnsafeLocation, match="one name"):
            private_files.open_file(fd, "hard.lock")
    finally:
        os.close(fd)
    assert victim.read_text(encoding="utf-8") == "the grader's own file"


def test_a_folder_others_may_read_or_a_parent_others_may_replace_it_in_is_refused(shared, tmp_path):
    folder, _ = shared
    (folder / "open").mkdir(mode=0o755)
    (folder / "open").chmod(0o755)
    with pytest.raises(UnsafeLocation, match="mode 0755"):
        private_files.open_folder(folder / "open")
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # writable by all, not sticky: anyone may rename what is in it
    with pytest.raises(UnsafeLocation, match="another user could replace"):
        private_files.make_folder(loose / "state")


def test_the_registry_of_identities_is_made_private_and_reused_when_it_is(shared):
    folder, _ = shared
    with identities.Identity(registry=folder / "registry") as first:
        with identities.Identity(registry=folder / "registry") as second:
            assert first != second
    info = os.stat(folder / "registry")
    assert (info.st_uid, info.st_mode & 0o777) == (os.geteuid(), 0o700)
    assert all((os.stat(p).st_mode & 0o777) == 0o600 for p in (folder / "registry").iterdir())


def test_a_new_file_is_written_afresh_or_not_at_all(tmp_path):
    folder = private_files.make_folder(tmp_path / "certificates")
    private_files.write_new_file(folder, "key.pem", b"secret")
    assert (os.stat(folder / "key.pem").st_mode & 0o777) == 0o600
    with pytest.raises(UnsafeLocation, match="exists already"):
        private_files.write_new_file(folder, "key.pem", b"other")
    assert (folder / "key.pem").read_bytes() == b"secret"
