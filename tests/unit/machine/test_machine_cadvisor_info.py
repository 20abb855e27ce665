"""MachineInfo fields as cadvisor reads them from sysfs and /proc (scripts/conformance --areas discover
found each of these against the real cadvisor of kubelet 1.33-1.37)."""

from __future__ import annotations

from pathlib import Path

from numalign.adapters.sysfs import discover_sysfs
from numalign.machine.cadvisor import machine_from_cadvisor, machine_to_cadvisor


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _machine(root: Path, *, cpuinfo: str | None, machine_hugepages: bool) -> Path:
    """One node, two packages of two cores (core ids 0 and 1 in each), one thread per core."""
    s = "sys/devices/system"
    for cpu in range(4):
        _w(root, f"{s}/cpu/cpu{cpu}/topology/core_id", f"{cpu % 2}\n")
        _w(root, f"{s}/cpu/cpu{cpu}/topology/physical_package_id", f"{cpu // 2}\n")
        (root / f"{s}/node/node0").mkdir(parents=True, exist_ok=True)
        (root / f"{s}/node/node0/cpu{cpu}").symlink_to(f"../../cpu/cpu{cpu}")
    _w(root, f"{s}/node/node0/meminfo", "Node 0 MemTotal:       1024 kB\n")
    _w(root, f"{s}/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "3\n")
    _w(root, f"{s}/node/node0/hugepages/hugepages-1048576kB/nr_hugepages", "1\n")
    _w(root, "proc/meminfo", "MemTotal:       2048 kB\n")
    if cpuinfo is not None:
        _w(root, "proc/cpuinfo", cpuinfo)
    if machine_hugepages:
        _w(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "8\n")
        _w(root, "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "2\n")
    return root


def test_machine_hugepages_are_sys_kernel_mm_hugepages_in_directory_order(tmp_path: Path) -> None:
    info = machine_to_cadvisor(discover_sysfs(_machine(tmp_path, cpuinfo=None, machine_hugepages=True)))
    # issue 33 (c): the kubelet reads MachineInfo.HugePages for its hugepages capacity
    assert info["hugepages"] == [{"page_size": 1048576, "num_pages": 2}, {"page_size": 2048, "num_pages": 8}]
    # the node's list in cadvisor's order too: hugepages-1048576kB sorts before hugepages-2048kB
    assert info["topology"][0]["hugepages"] == [{"page_size": 1048576, "num_pages": 1},
                                                {"page_size": 2048, "num_pages": 3}]
    # and it survives a round trip through cadvisor JSON
    again = machine_to_cadvisor(machine_from_cadvisor(info, "test"))
    assert again["hugepages"] == info["hugepages"]


def test_no_hugepages_directory_means_no_machine_hugepages(tmp_path: Path) -> None:
    info = machine_to_cadvisor(discover_sysfs(_machine(tmp_path, cpuinfo=None, machine_hugepages=False)))
    assert info["hugepages"] == []


def test_physical_cores_are_cpuinfo_core_ids_across_packages(tmp_path: Path) -> None:
    cpuinfo = "".join(f"processor\t: {c}\nphysical id\t: {c // 2}\ncore id\t\t: {c % 2}\n\n" for c in range(4))
    info = machine_to_cadvisor(discover_sysfs(_machine(tmp_path, cpuinfo=cpuinfo, machine_hugepages=False)))
    # machine.GetPhysicalCores counts distinct "core id" lines: core 0 of both packages is one
    assert info["num_physical_cores"] == 2


def test_physical_cores_fall_back_to_sysfs_core_and_package_ids(tmp_path: Path) -> None:
    info = machine_to_cadvisor(discover_sysfs(_machine(tmp_path, cpuinfo="processor\t: 0\n", machine_hugepages=False)))
    assert info["num_physical_cores"] == 4
