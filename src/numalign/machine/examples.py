"""Built-in example machines, selectable by name wherever a machine is accepted.

They are built the way Linux numbers real servers: the first hardware thread of every core comes
first (socket by socket, NUMA node by NUMA node), then the SMT siblings in the same order; sysfs
core ids restart at 0 on every socket; L3 ids count up machine-wide. Sizes and distances are those of
real parts (SLIT values as the firmware of such machines reports them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from numalign.errors import InvalidInputError
from numalign.machine.topology import CPU, Device, Machine, NUMANode

GiB = 1 << 30
MiB = 1 << 20
HUGE_2M = 2 * MiB
HUGE_1G = GiB

NVIDIA = "0x10de"
INTEL = "0x8086"
MELLANOX = "0x15b3"
CLASS_3D = "0x030200"
CLASS_ETHERNET = "0x020000"


@dataclass(frozen=True)
class _Layout:
    sockets: int
    nodes_per_socket: int
    cores_per_node: int
    threads: int
    cores_per_l3: int  # cores sharing one L3
    memory_per_node: int
    hugepages: dict[int, int]


def _cpu_nodes(lay: _Layout, distance: Callable[[int, int], int]) -> tuple[list[NUMANode], list[CPU]]:
    n_nodes = lay.sockets * lay.nodes_per_socket
    n_cores = n_nodes * lay.cores_per_node
    cpus: list[CPU] = []
    node_cpus: dict[int, set[int]] = {i: set() for i in range(n_nodes)}
    for g in range(n_cores):  # g = global core index
        node = g // lay.cores_per_node
        socket = node // lay.nodes_per_socket
        core_in_socket = g - socket * lay.nodes_per_socket * lay.cores_per_node
        l3 = g // lay.cores_per_l3
        for t in range(lay.threads):
            cpu_id = g + t * n_cores
            cpus.append(CPU(cpu_id, socket, core_in_socket, node, 0, l3))
            node_cpus[node].add(cpu_id)
    nodes = [
        NUMANode(
            id=i,
            cpus=frozenset(node_cpus[i]),
            memory_bytes=lay.memory_per_node,
            hugepages=dict(lay.hugepages),
            distances=tuple(distance(i, j) for j in range(n_nodes)),
        )
        for i in range(n_nodes)
    ]
    return nodes, sorted(cpus, key=lambda c: c.id)


def _pci(bus: int, fn: int = 0) -> str:
    return f"0000:{bus:02x}:00.{fn}"


def _dev(resource: str, bus: int, node: int | None, vendor: str, cls: str, fn: int = 0) -> Device:
    addr = _pci(bus, fn)
    return Device(addr, resource, None if node is None else (node,), addr, vendor, cls)


def dual_socket() -> Machine:
    """2 x 32-core SMT2 Xeon in SNC2 mode: 4 NUMA nodes, 128 CPUs, 1 TiB, a GPU and two SR-IOV NIC
    functions per NUMA node."""
    lay = _Layout(2, 2, 16, 2, 32, 256 * GiB, {HUGE_2M: 4096, HUGE_1G: 16})

    def dist(i: int, j: int) -> int:
        return 10 if i == j else 11 if i // 2 == j // 2 else 21

    nodes, cpus = _cpu_nodes(lay, dist)
    devices = []
    for node in range(4):
        devices.append(_dev("nvidia.com/gpu", 0x17 + 0x40 * node, node, NVIDIA, CLASS_3D))
        for fn in range(2):
            devices.append(_dev("intel.com/sriov_netdevice", 0x18 + 0x40 * node, node, INTEL, CLASS_ETHERNET, fn))
    return Machine("dual-socket", tuple(nodes), tuple(cpus), tuple(devices))


def epyc_nps4() -> Machine:
    """2 x 64-core SMT2 EPYC (Milan-like) in NPS4: 8 NUMA nodes, L3 per 8-core CCX, 256 CPUs, a GPU on
    NUMA nodes 1, 3, 5 and 7, four SR-IOV RDMA functions on nodes 0 and 4."""
    lay = _Layout(2, 4, 16, 2, 8, 64 * GiB, {HUGE_2M: 1024, HUGE_1G: 8})

    def dist(i: int, j: int) -> int:
        return 10 if i == j else 12 if i // 4 == j // 4 else 32

    nodes, cpus = _cpu_nodes(lay, dist)
    devices = [_dev("nvidia.com/gpu", 0x01 + 0x20 * n, n, NVIDIA, CLASS_3D) for n in (1, 3, 5, 7)]
    devices += [
        _dev("mellanox.com/sriov_rdma", 0x41 + 0x80 * s, 4 * s, MELLANOX, CLASS_ETHERNET, fn)
        for s in (0, 1)
        for fn in range(4)
    ]
    return Machine("epyc-nps4", tuple(nodes), tuple(cpus), tuple(devices))


def snc_16() -> Machine:
    """4 x 32-core SMT2 Xeon in SNC4: 16 NUMA nodes, 256 CPUs, one L3 per socket."""
    lay = _Layout(4, 4, 8, 2, 32, 64 * GiB, {HUGE_2M: 2048, HUGE_1G: 4})

    def dist(i: int, j: int) -> int:
        return 10 if i == j else 12 if i // 4 == j // 4 else 21

    nodes, cpus = _cpu_nodes(lay, dist)
    devices = [
        _dev("intel.com/sriov_netdevice", 0x18 + 0x40 * s, 4 * s, INTEL, CLASS_ETHERNET, fn)
        for s in range(4)
        for fn in range(2)
    ]
    return Machine("snc-16", tuple(nodes), tuple(cpus), tuple(devices))


def gb200() -> Machine:
    """A GB200-like compute tray: 2 Grace CPUs (72 cores each, one node each, 480 GiB LPDDR) and 4
    GPUs whose memory the driver exposes as CPU-less NUMA nodes, 8 per GPU (one holds the HBM, the
    others are reserved for MIG partitions): 2 + 32 = 34 NUMA nodes."""
    lay = _Layout(2, 1, 72, 1, 72, 480 * GiB, {HUGE_2M: 8192, HUGE_1G: 64})
    n_nodes = 34

    def dist(i: int, j: int) -> int:
        if i == j:
            return 10
        if i < 2 and j < 2:
            return 40
        return 80

    cpu_nodes, cpus = _cpu_nodes(lay, lambda i, j: dist(i, j))
    nodes = [
        NUMANode(n.id, n.cpus, n.memory_bytes, dict(n.hugepages), tuple(dist(n.id, j) for j in range(n_nodes)))
        for n in cpu_nodes
    ]
    for gpu in range(4):
        for part in range(8):
            node_id = 2 + gpu * 8 + part
            memory = 186 * GiB if part == 0 else 0
            nodes.append(NUMANode(node_id, frozenset(), memory, {}, tuple(dist(node_id, j) for j in range(n_nodes))))
    # A GB200 tray's GPUs sit in PCI domains 0008, 0009, 0018 and 0019 (bus 01), so a real driver's slice
    # (its pciBusID attributes) finds them here with their NUMA node.
    devices = [
        dataclasses.replace(_dev("nvidia.com/gpu", 0x01 + 0x08 * gpu, gpu // 2, NVIDIA, CLASS_3D),
                            id=f"{domain}:01:00.0", pci_address=f"{domain}:01:00.0",
                            memory_numa_nodes=tuple(range(2 + gpu * 8, 10 + gpu * 8)))
        for gpu, domain in enumerate(("0008", "0009", "0018", "0019"))
    ]
    devices += [
        _dev("mellanox.com/sriov_rdma", 0x03 + 0x08 * nic, nic // 2, MELLANOX, CLASS_ETHERNET) for nic in range(4)
    ]
    return Machine("gb200", tuple(nodes), tuple(cpus), tuple(devices))


def numa_64() -> Machine:
    """8 sockets x 8 NUMA nodes x 8 SMT2 cores: 64 NUMA nodes, 1024 CPUs, L3 per 4 cores; sockets on
    a ring (neighbours 21, farther 31)."""
    lay = _Layout(8, 8, 8, 2, 4, 32 * GiB, {HUGE_2M: 1024, HUGE_1G: 4})

    def dist(i: int, j: int) -> int:
        si, sj = i // 8, j // 8
        if i == j:
            return 10
        if si == sj:
            return 12
        return 21 if (si - sj) % 8 in (1, 7) else 31

    nodes, cpus = _cpu_nodes(lay, dist)
    devices = [_dev("nvidia.com/gpu", 0x10 + s, 8 * s + 3, NVIDIA, CLASS_3D) for s in range(8)]
    return Machine("numa-64", tuple(nodes), tuple(cpus), tuple(devices))


EXAMPLES: dict[str, Callable[[], Machine]] = {
    "dual-socket": dual_socket,
    "epyc-nps4": epyc_nps4,
    "snc-16": snc_16,
    "gb200": gb200,
    "numa-64": numa_64,
}
DEFAULT_MACHINE = "dual-socket"

_cache: dict[str, Machine] = {}


def example_names() -> list[str]:
    return list(EXAMPLES)


def example(name: str = DEFAULT_MACHINE) -> Machine:
    """A built-in machine by name (machines are immutable, so one instance is shared)."""
    if name not in EXAMPLES:
        raise InvalidInputError(f"unknown built-in machine {name!r}; choose one of {', '.join(EXAMPLES)}")
    if name not in _cache:
        _cache[name] = EXAMPLES[name]()
    return _cache[name]


def first_core(machine: Machine) -> list[int]:
    """The threads of the core holding the machine's lowest online CPU: what the built-in example
    configuration reserves (reservedSystemCPUs), as one would leave the first core to the system."""
    lowest = min(machine.online_cpus(), default=0)
    return next((sorted(core) for core in machine.physical_cores() if lowest in core), [lowest])
