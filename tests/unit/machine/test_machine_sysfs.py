"""Discovery from small synthetic sysfs trees, from this machine's /sys, and load_machine's sources."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from numalign.adapters.sysfs import discover_sysfs, discover_sysfs_hwloc, load_machine
from numalign.errors import DiscoveryError, InvalidInputError
from numalign.machine.cadvisor import machine_to_cadvisor
from numalign.machine.examples import example
from numalign.machine.fileformat import machine_to_text


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _fake(root: Path, *, nodes: bool = True) -> Path:
    """2 nodes x 2 cores x 2 threads (CPUs n, n+4 are siblings); CPU 7 offline without topology;
    L3 per node; hugepages; one NVIDIA GPU on node 1 and one NIC with no NUMA info."""
    s = "sys/devices/system"
    _w(root, f"{s}/cpu/online", "0-6\n")
    for cpu in range(8):
        if cpu == 7:
            _w(root, f"{s}/cpu/cpu7/online", "0\n")
            continue
        core = cpu % 4
        t = f"{s}/cpu/cpu{cpu}/topology"
        _w(root, f"{t}/core_id", f"{core % 2}\n")
        _w(root, f"{t}/physical_package_id", f"{core // 2}\n")
        _w(root, f"{t}/thread_siblings", f"{(1 << core) | (1 << (core + 4)):x}\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index0/level", "1\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index0/type", "Data\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index0/id", f"{core}\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index0/size", "32K\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index0/shared_cpu_map", f"{(1 << core) | (1 << (core + 4)):x}\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index3/level", "3\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index3/type", "Unified\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index3/id", f"{core // 2}\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index3/size", "16384K\n")
        _w(root, f"{s}/cpu/cpu{cpu}/cache/index3/shared_cpu_map", "33\n" if core < 2 else "cc\n")
    if nodes:
        _w(root, f"{s}/node/online", "0-1\n")
        _w(root, f"{s}/node/possible", "0-1\n")
        for n, mask in ((0, "33"), (1, "cc")):
            _w(root, f"{s}/node/node{n}/cpumap", f"00000000,000000{mask}\n")
            _w(
                root,
                f"{s}/node/node{n}/meminfo",
                f"Node {n} MemTotal:       {(n + 1) * 1024} kB\nNode {n} MemFree: 1 kB\n",
            )
            _w(root, f"{s}/node/node{n}/distance", "10 21\n" if n == 0 else "21 10\n")
            _w(root, f"{s}/node/node{n}/hugepages/hugepages-2048kB/nr_hugepages", f"{n + 5}\n")
            _w(root, f"{s}/node/node{n}/hugepages/hugepages-1048576kB/nr_hugepages", "1\n")
            for cpu in range(8):  # the kernel's nodeN/cpuM links, which cadvisor reads
                if int(mask, 16) >> cpu & 1:
                    (root / f"{s}/node/node{n}/cpu{cpu}").symlink_to(f"../../cpu/cpu{cpu}")
    else:
        _w(root, "proc/meminfo", "MemTotal:       4096 kB\n")
        _w(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "7\n")
    pci = "sys/devices/pci0000:00"
    for addr, vendor, cls, numa in (
        ("0000:3b:00.0", "0x10de", "0x030200", "1"),
        ("0000:3c:00.0", "0x8086", "0x020000", "-1"),
        ("0000:00:1f.2", "0x8086", "0x010601", "0"),  # SATA: not a resource
    ):
        _w(root, f"{pci}/{addr}/vendor", vendor + "\n")
        _w(root, f"{pci}/{addr}/class", cls + "\n")
        _w(root, f"{pci}/{addr}/numa_node", numa + "\n")
        link = root / "sys/bus/pci/devices" / addr
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../../../devices/pci0000:00") / addr)
    return root


def test_discover_synthetic_machine(tmp_path: Path) -> None:
    m = discover_sysfs(_fake(tmp_path), name="fake")
    assert m.name == "fake"
    assert m.numa_ids() == [0, 1]
    assert m.node(0).cpus == {0, 1, 4, 5} and m.node(1).cpus == {2, 3, 6}
    assert m.node(1).memory_bytes == 2048 * 1024
    assert dict(m.node(1).hugepages) == {2 << 20: 6, 1 << 30: 1}
    assert m.distance_matrix() == {0: [10, 21], 1: [21, 10]}
    assert 7 not in {c.id for c in m.cpus}  # offline: cadvisor leaves it out
    assert m.cpu(6).core == 0 and m.cpu(6).socket == 1
    assert [sorted(c) for c in m.physical_cores()] == [[0, 4], [1, 5], [2, 6], [3]]
    hw = discover_sysfs_hwloc(tmp_path, name="fake")  # hwloc keeps the offline CPU, without topology
    assert hw.offline_cpus == {7} and hw.cpu(6).l3 == 1
    infos = {i.id: i for i in m.cpu_infos()}
    assert infos[5].core == 1 and infos[6].core == 2
    assert {i.uncore for i in infos.values()} == {0, 1}  # L3 == node: node cache, socket id used
    assert [(d.id, d.resource, d.numa_nodes) for d in m.devices] == [
        ("0000:3b:00.0", "nvidia.com/gpu", (1,)),
        ("0000:3c:00.0", "intel.com/sriov_netdevice", None),
    ]


def test_hwloc_reading_of_a_kernel_without_numa_gets_one_node(tmp_path: Path) -> None:
    m = discover_sysfs_hwloc(_fake(tmp_path, nodes=False))
    assert m.numa_ids() == [0]
    assert m.node(0).cpus == {0, 1, 2, 3, 4, 5, 6}
    assert m.node(0).memory_bytes == 4096 * 1024 and dict(m.node(0).hugepages) == {2 << 20: 7}
    assert m.node(0).distances is None


def test_hwloc_reading_narrows_distance_rows_over_possible_nodes(tmp_path: Path) -> None:
    root = _fake(tmp_path)
    s = root / "sys/devices/system/node"
    (s / "possible").write_text("0-2\n")
    (s / "node0/distance").write_text("10 21 31\n")
    (s / "node1/distance").write_text("21 10 31\n")
    assert discover_sysfs_hwloc(root).distance_matrix() == {0: [10, 21], 1: [21, 10]}
    # The kubelet keeps the raw rows, indexed by node id: columns 0 and 1 of each.
    assert discover_sysfs(root).distance_matrix() == {0: [10, 21], 1: [21, 10]}


@pytest.mark.parametrize(
    ("rel", "text", "message"),
    [
        ("sys/devices/system/node/node0/distance", "10 21 30\n", "node0/distance: 3 distances [10, 21, 30]"),
        ("sys/devices/system/node/node1/cpumap", "zz\n", "node1/cpumap: cannot read 'zz' as a CPU mask"),
        ("sys/devices/system/cpu/cpu2/topology/core_id", "two\n", "cpu2/topology/core_id: cannot read 'two'"),
        ("sys/devices/system/node/online", "0-2\n", "lists nodes [2] that have no"),
        ("sys/devices/system/cpu/cpu4/topology/core_id", "1\n", "CPUs 1 and 4 both report package 0"),
        ("sys/devices/system/node/node0/meminfo", "nothing\n", "node0/meminfo: no 'MemTotal: N kB' line"),
    ],
)
def test_hwloc_reading_names_broken_files(tmp_path: Path, rel: str, text: str, message: str) -> None:
    root = _fake(tmp_path)
    (root / rel).write_text(text)
    with pytest.raises(DiscoveryError) as e:
        discover_sysfs_hwloc(root)
    assert message in str(e.value)


def test_hwloc_reading_ignores_an_overlapping_node(tmp_path: Path) -> None:
    root = _fake(tmp_path)
    (root / "sys/devices/system/node/node1/cpumap").write_text("ff\n")
    m = discover_sysfs_hwloc(root)
    assert m.numa_ids() == [0]
    assert m.node(0).distances == (10,)
    assert m.cpu(2).numa_node is None


def test_empty_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="Any CPU is not available"):
        discover_sysfs(tmp_path)
    with pytest.raises(DiscoveryError, match="no cpuN directories; point --sysfs-root"):
        discover_sysfs_hwloc(tmp_path)


def test_this_machine() -> None:
    m = discover_sysfs("/")
    infos = m.cpu_infos()
    assert infos, "the kubelet would see no CPU"
    online = m.online_cpus()
    assert {i.id for i in infos} <= online
    assert sum(len(n.cpus) for n in m.numa_nodes) == len(infos)
    assert all(n.memory_bytes > 0 for n in m.numa_nodes if n.has_cpu)
    assert set(os.sched_getaffinity(0)) <= online  # we run on online CPUs
    assert len(online) == os.cpu_count()  # sysconf(_SC_NPROCESSORS_ONLN) reads the same sysfs
    assert m.sockets() and all(c.numa_node in m.numa_ids() for c in m.cpus if c.online)


# ---- load_machine ------------------------------------------------------------------------------------


def test_load_machine_sources(tmp_path: Path) -> None:
    gb = example("gb200")
    assert load_machine("gb200") is gb
    (tmp_path / "m.json").write_text(machine_to_text(gb, "json"))
    (tmp_path / "m.yaml").write_text(machine_to_text(gb, "yaml"))
    assert load_machine(str(tmp_path / "m.json")) == gb
    assert load_machine(str(tmp_path / "m.yaml")) == gb
    (tmp_path / "mi.json").write_text(json.dumps(machine_to_cadvisor(gb)))
    assert load_machine(str(tmp_path / "mi.json")).cpu_infos() == gb.cpu_infos()

    fake = _fake(tmp_path / "dump" / "host1")
    from_dir = load_machine(str(tmp_path / "dump"))
    assert from_dir.numa_ids() == [0, 1]
    assert load_machine(str(fake)).cpu_infos() == from_dir.cpu_infos()
    tarball = tmp_path / "host1.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(fake, arcname="host1")
    from_tar = load_machine(str(tarball))
    assert from_tar.name == "host1"
    assert from_tar.cpu_infos() == from_dir.cpu_infos() and from_tar.devices == from_dir.devices


def test_load_machine_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"not a built-in machine .*dual-socket.* and no such file"):
        load_machine(str(tmp_path / "missing.yaml"))
    (tmp_path / "bad.yaml").write_text("numa_nodes: 3\ncpus: []\n")
    with pytest.raises(InvalidInputError, match=r"bad\.yaml: numa_nodes: expected a list"):
        load_machine(str(tmp_path / "bad.yaml"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DiscoveryError, match="no sys/ directory inside"):
        load_machine(str(tmp_path / "empty"))
    (tmp_path / "bad.tar").write_bytes(b"not a tarball")
    with pytest.raises(InvalidInputError, match=r"bad\.tar: not a tar archive"):
        load_machine(str(tmp_path / "bad.tar"))


def test_a_dump_tarball_is_extracted_only_where_discovery_reads(tmp_path: Path) -> None:
    """A must-gather sysinfo.tgz holds ~11,000 files and discovery reads a few thousand: only those are
    written (the rest cost seconds), and the machine is the same as from the whole tree."""
    from support.sysfs_tree import write_sysfs

    from numalign.adapters.sysfs import extracted_dump

    root = write_sysfs(tmp_path / "tree", gpus={"0000:3b:00.0": 1})
    unread = ["sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "sys/class/net/eth0/mtu",
              "proc/interrupts", "sys/devices/system/cpu/cpu0/cache/index0/ways_of_associativity",
              "sys/devices/system/node/node0/vmstat", "sys/devices/system/cpu/cpu0/topology/cluster_id"]
    for rel in unread:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("1\n")
    archive = tmp_path / "sysinfo.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(root / "sys", arcname="sys")
        tf.add(root / "proc", arcname="proc")
    top = extracted_dump(archive)
    assert not [rel for rel in unread if (top / rel).exists()]
    assert (top / "sys/devices/system/cpu/cpu0/topology/core_id").is_file()
    whole = load_machine(str(root))
    assert load_machine(str(archive)).numa_nodes == whole.numa_nodes
    assert load_machine(str(archive)).devices == whole.devices
