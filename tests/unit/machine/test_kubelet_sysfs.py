"""Small sysfs trees read as cadvisor and the kubelet read them, for the cases the dumps do not show,
and bounded reads: a sysfs file that never ends is refused with one line, never read to exhaustion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numalign.adapters.sysfs import discover_sysfs, discover_sysfs_hwloc
from numalign.errors import DiscoveryError
from numalign.machine.topology import Machine


def _tree(root: Path, cpus: dict[int, tuple[int, int, int, str]], *, links: bool = True) -> Path:
    """cpus: id -> (node, package, core_id, thread_siblings mask)."""
    system = root / "sys/devices/system"
    (system / "cpu").mkdir(parents=True)
    (system / "cpu/online").write_text(f"0-{max(cpus)}\n")
    nodes = sorted({n for n, *_ in cpus.values()})
    for n in nodes:
        d = system / f"node/node{n}"
        d.mkdir(parents=True)
        (d / "meminfo").write_text(f"Node {n} MemTotal:       1048576 kB\n")
        (d / "distance").write_text(" ".join("10" if m == n else "20" for m in nodes) + "\n")
        mask = sum(1 << c for c, (node, *_) in cpus.items() if node == n)
        (d / "cpumap").write_text(f"{mask:x}\n")
    for c, (node, pkg, core, sib) in cpus.items():
        topo = system / f"cpu/cpu{c}/topology"
        topo.mkdir(parents=True)
        (topo / "core_id").write_text(f"{core}\n")
        (topo / "physical_package_id").write_text(f"{pkg}\n")
        (topo / "thread_siblings").write_text(f"{sib}\n")
        if links:
            (system / f"node/node{node}/cpu{c}").symlink_to(f"../../cpu/cpu{c}")
    return root


def test_package_minus_one_is_kept_as_socket_minus_one(tmp_path: Path) -> None:
    m = discover_sysfs(_tree(tmp_path, {0: (0, -1, 0, "1"), 1: (0, -1, 1, "2")}))
    assert {i.socket for i in m.cpu_infos()} == {-1}
    assert {i.uncore for i in m.cpu_infos()} == {-1}  # no L3: the uncore id falls back on the socket id
    assert {c.socket for c in discover_sysfs_hwloc(tmp_path).cpus} == {0}  # hwloc makes it 0


def test_inconsistent_core_ids_are_paired_as_cadvisor_pairs_them(tmp_path: Path) -> None:
    # CPUs 0 and 1 share package and core_id but thread_siblings says they are different cores
    root = _tree(tmp_path, {0: (0, 0, 0, "1"), 1: (0, 0, 0, "2"), 2: (0, 0, 1, "4")})
    m = discover_sysfs(root)
    cores = {i.id: i.core for i in m.cpu_infos()}
    assert cores == {0: 0, 1: 0, 2: 2}  # 0 and 1 are threads of one core for the kubelet
    with pytest.raises(DiscoveryError, match="thread_siblings puts them in different cores"):
        discover_sysfs_hwloc(root)


def test_a_cpu_without_core_id_is_skipped(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: (0, 0, 0, "1"), 1: (0, 0, 1, "2")})
    (root / "sys/devices/system/cpu/cpu1/topology/core_id").unlink()
    m = discover_sysfs(root)
    assert [c.id for c in m.cpus] == [0] and m.node(0).cpus == frozenset({0})


def test_node_membership_comes_from_links_not_cpumap(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: (0, 0, 0, "1"), 1: (1, 0, 1, "2")})
    # cpumap of node 0 also claims CPU 1; the links say node 1
    (root / "sys/devices/system/node/node0/cpumap").write_text("3\n")
    m = discover_sysfs(root)
    assert m.cpu(1).numa_node == 1 and m.node(0).cpus == frozenset({0})


def test_distance_rows_stay_raw(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: (0, 0, 0, "1"), 1: (1, 1, 0, "2")})
    (root / "sys/devices/system/node/node0/distance").write_text("10 21\n")
    (root / "sys/devices/system/node/node1/distance").write_text("21 10\n")
    assert discover_sysfs(root).distance_matrix() == {0: [10, 21], 1: [21, 10]}
    (root / "sys/devices/system/node/node1/distance").write_text("21  10\n")  # cadvisor splits on one space
    with pytest.raises(DiscoveryError, match="cannot convert '' to int"):
        discover_sysfs(root)


@pytest.mark.parametrize("victim", [
    "sys/devices/system/node/node0/meminfo",
    "sys/devices/system/cpu/cpu1/topology/core_id",
    "sys/devices/system/node/node0/distance",
    "sys/devices/system/cpu/online",
])
@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_a_file_that_never_ends_is_refused_with_one_line(tmp_path: Path, victim: str, kind: str) -> None:
    root = _tree(tmp_path, {0: (0, 0, 0, "1"), 1: (0, 0, 1, "2")})
    path = root / victim
    path.unlink()
    if kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    with pytest.raises(DiscoveryError) as e:
        discover_sysfs(root)
    text = str(e.value)
    assert "\n" not in text and victim.split("/")[-1] in text
    assert ("character device" if kind == "zero" else "FIFO") in text


def test_a_cache_file_that_never_ends_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: (0, 0, 0, "1")})
    index = root / "sys/devices/system/cpu/cpu0/cache/index3"
    index.mkdir(parents=True)
    for name, value in (("id", "0"), ("size", "32768K"), ("type", "Unified"), ("shared_cpu_map", "1")):
        (index / name).write_text(value + "\n")
    (index / "level").symlink_to("/dev/zero")
    with pytest.raises(DiscoveryError, match="level: is a character device"):
        discover_sysfs(root)


def test_the_machine_has_the_cadvisor_shape(tmp_path: Path) -> None:
    m = discover_sysfs(_tree(tmp_path, {0: (0, 0, 0, "1"), 1: (1, 1, 0, "2")}))
    assert isinstance(m, Machine)
    assert m.memory_by_node() == {0: 1 << 30, 1: 1 << 30}
