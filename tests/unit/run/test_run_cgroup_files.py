"""The cgroup v2 side of `numalign run` on files it is given: mount discovery, file names, values, and
what is said when nothing can be applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalign.run.affinity import PlacementError
from numalign.run.cgroup import CgroupLimits, cgroup2_mounts, create, find_cgroup2_mount, hugetlb_size_name

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = """\
30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
90 23 0:26 / /srv/my\\040cgroups rw - cgroup2 none rw
"""


def test_the_cgroup2_mount_is_found_where_the_host_mounts_it(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(HYBRID)
    assert find_cgroup2_mount(info) == Path("/sys/fs/cgroup/unified")
    info.write_text(UNIFIED)
    assert cgroup2_mounts(info) == [Path("/sys/fs/cgroup"), Path("/srv/my cgroups")]
    info.write_text(HYBRID.splitlines()[0] + "\n")
    assert find_cgroup2_mount(info) is None


@pytest.mark.parametrize(("size", "name"), [(2 << 20, "2MB"), (1 << 30, "1GB"), (64 << 10, "64KB"),
                                            (16 << 30, "16GB"), (32 << 20, "32MB")])
def test_hugetlb_file_names_are_the_kernels(size: int, name: str) -> None:
    assert hugetlb_size_name(size) == name


def test_limits_become_the_files_the_runtime_writes() -> None:
    limits = CgroupLimits(frozenset({3, 1, 2, 7}), frozenset({1}), 64 << 20, {1 << 30: 2 << 30})
    assert limits.files([2 << 20, 1 << 30]) == [
        ("cpuset", "cpuset.cpus", "1-3,7"),
        ("cpuset", "cpuset.mems", "1"),
        ("memory", "memory.max", str(64 << 20)),
        ("hugetlb", "hugetlb.2MB.max", "0"),  # not asked for: none may be used
        ("hugetlb", "hugetlb.1GB.max", str(2 << 30)),
    ]
    # No memory pinned by the memory manager, no limit: those files are left alone.
    assert [f for _, f, _ in CgroupLimits(frozenset({0})).files([])] == ["cpuset.cpus"]


def test_without_a_cgroup2_mount_every_control_is_named_once_with_why(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(HYBRID.splitlines()[0] + "\n")
    setup = create(CgroupLimits(frozenset({1}), frozenset({0}), 1 << 20), "pod", None, info)
    assert setup.cgroup is None and setup.applied == []
    assert setup.note() == ("cgroup: cpuset.cpus, cpuset.mems, memory.max not applied: no cgroup2 file system is "
                            "mounted (see /proc/self/mountinfo); mount one at /sys/fs/cgroup or boot with "
                            "systemd.unified_cgroup_hierarchy=1")


def test_a_parent_outside_every_cgroup2_mount_is_refused(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(UNIFIED)
    with pytest.raises(PlacementError, match=r"--cgroup-parent /tmp/x: not inside a cgroup2 file system \(mounted: "
                       r"/sys/fs/cgroup, /srv/my cgroups\)"):
        create(CgroupLimits(frozenset({1})), "pod", Path("/tmp/x"), info)


def test_on_a_unified_hierarchy_controllers_are_enabled_down_to_the_parent_and_limits_written(tmp_path: Path) -> None:
    """A cgroup2 tree laid out as files (the kernel's own is not writable by every test machine): each
    level from the mount to the parent enables what the child needs, then the child gets its limits."""
    mount = tmp_path / "cgroup"
    mount.mkdir()
    (mount / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    (mount / "cgroup.subtree_control").write_text("memory\n")
    info = tmp_path / "mountinfo"
    info.write_text(f"30 23 0:26 / {mount} rw - cgroup2 cgroup2 rw\n")
    parent = mount / "jobs" / "numalign"
    setup = create(CgroupLimits(frozenset({2, 3}), frozenset({1}), 64 << 20), "uid-1", parent, info)
    assert setup.cgroup is not None and setup.cgroup.path == parent / "uid-1"
    assert setup.note() is None  # everything applied
    child = parent / "uid-1"
    hugetlb = sorted(p.name for p in child.glob("hugetlb.*.max"))  # one per size this kernel offers
    # One controller per write, in the order cpuset, memory, hugetlb; a plain file keeps the last write.
    # The mount enabled memory already, so it is not written there.
    last = "+hugetlb\n" if hugetlb else "+memory\n"
    assert (mount / "cgroup.subtree_control").read_text() == ("+hugetlb\n" if hugetlb else "+cpuset\n")
    assert (mount / "jobs" / "cgroup.subtree_control").read_text() == last
    assert (parent / "cgroup.subtree_control").read_text() == last
    assert (child / "cpuset.cpus").read_text() == "2-3\n"
    assert (child / "cpuset.mems").read_text() == "1\n"
    assert (child / "memory.max").read_text() == f"{64 << 20}\n"
    assert setup.applied[:3] == ["cpuset.cpus", "cpuset.mems", "memory.max"]
    assert sorted(f for f in setup.applied if f.startswith("hugetlb.")) == hugetlb
    assert all((child / f).read_text() == "0\n" for f in hugetlb)  # none asked for


def test_a_parent_that_cannot_be_created_is_named_once(tmp_path: Path) -> None:
    mount = tmp_path / "cgroup"
    mount.mkdir()
    (mount / "cgroup.controllers").write_text("cpuset memory\n")
    (mount / "blocked").write_text("a file where a directory should be\n")
    info = tmp_path / "mountinfo"
    info.write_text(f"30 23 0:26 / {mount} rw - cgroup2 cgroup2 rw\n")
    setup = create(CgroupLimits(frozenset({0}), None, 1 << 20), "uid-2", mount / "blocked" / "numalign", info)
    assert setup.cgroup is None
    note = setup.note()
    assert note is not None and note.startswith("cgroup: cpuset.cpus, memory.max not applied: ")
    assert "--cgroup-parent" in note
