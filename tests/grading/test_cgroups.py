"""Where a sandbox's control group is made, on a cgroup v2 machine and a v1 one, and with what limits.

This machine's own kind is used by the sandbox's tests (tests/grading/test_sandbox.py); here
both kinds are laid out as folders of files, as the kernel shows them, so that the choice of
the parent folder and the files written are seen for each kind.
"""

from __future__ import annotations

import os

from qkv_grading import cgroups


def _v2_tree(root, handed_down: str):
    grader = root / "system.slice" / "grading.service"
    grader.mkdir(parents=True)
    (root / "system.slice" / "cgroup.subtree_control").write_text(handed_down)
    (grader / "cgroup.procs").write_text("1234\n")
    return grader


def test_on_cgroup_v2_the_groups_go_beside_the_graders_own_when_its_parent_hands_the_controllers_down(tmp_path):
    grader = _v2_tree(tmp_path, "cpu memory pids\n")
    found = cgroups._v2([(str(tmp_path), "cgroup2", {"rw"})], {"": "/system.slice/grading.service"})
    assert found == cgroups.Hierarchy(2, (grader.parent,))


def test_on_cgroup_v2_without_the_memory_controller_there_is_no_group_and_the_reason_says_so(tmp_path):
    _v2_tree(tmp_path, "cpu pids\n")
    found = cgroups._v2([(str(tmp_path), "cgroup2", {"rw"})], {"": "/system.slice/grading.service"})
    assert isinstance(found, str) and "does not hand the memory and pids controllers down" in found


def test_on_cgroup_v1_the_groups_go_under_the_graders_own_in_the_memory_and_pids_hierarchies(tmp_path):
    for controller in ("memory", "pids"):
        (tmp_path / controller / "grading").mkdir(parents=True)
        (tmp_path / controller / "grading" / "cgroup.procs").write_text("")
    mounts = [(str(tmp_path / "memory"), "cgroup", {"rw", "memory"}), (str(tmp_path / "pids"), "cgroup", {"pids"})]
    found = cgroups._v1(mounts, {"memory": "/grading", "pids": "/grading", "": "/"})
    assert found == cgroups.Hierarchy(1, (tmp_path / "memory" / "grading", tmp_path / "pids" / "grading"))


def test_the_limits_are_written_in_each_kinds_own_files(tmp_path):
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "memory.swap.max").write_text("max")
    cgroups.SandboxGroup(cgroups.Hierarchy(2, (tmp_path,)), (tmp_path / "v2",))._limit(1 << 30, 10)
    assert [(tmp_path / "v2" / f).read_text() for f in ("memory.max", "memory.swap.max", "pids.max")] == [
        str(1 << 30), "0", "10"]
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    memory.mkdir(), pids.mkdir()
    (memory / "memory.memsw.limit_in_bytes").write_text("max")
    cgroups.SandboxGroup(cgroups.Hierarchy(1, (tmp_path, tmp_path)), (memory, pids))._limit(1 << 30, 10)
    assert [(memory / f).read_text() for f in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")] == [
        str(1 << 30)] * 2
    assert (pids / "pids.max").read_text() == "10"


def test_a_sandboxs_command_moves_itself_into_every_folder_of_its_group_before_bwrap_starts(tmp_path):
    group = cgroups.SandboxGroup(cgroups.Hierarchy(1, (tmp_path, tmp_path)), (tmp_path / "m", tmp_path / "p"))
    prefix = group.enter()
    assert prefix[:2] == ["/bin/sh", "-c"] and prefix[-3:] == [str(tmp_path / "m" / "cgroup.procs"),
                                                               str(tmp_path / "p" / "cgroup.procs"), "--"]


def test_the_empty_groups_of_a_grader_that_was_killed_are_removed_and_no_others(tmp_path):
    abandoned, running = tmp_path / "qkv-sandbox-999999999-abc", tmp_path / f"qkv-sandbox-{os.getpid()}-def"
    abandoned.mkdir(), running.mkdir()
    cgroups._remove_abandoned(cgroups.Hierarchy(1, (tmp_path,)))
    assert not abandoned.exists() and running.exists()
