"""The machine model: NUMA nodes, CPUs, memory, hugepages, distances and devices. Pure values.

Theory of operation
-------------------
A `Machine` holds facts as Linux reports them (sysfs vocabulary): a CPU's `core` is its sysfs
`core_id`, unique only within its socket (and die); `l3` is the id of its L3 cache. The kubelet never
sees sysfs directly: cadvisor turns it into MachineInfo and the kubelet derives its CPU topology from
that. `Machine.cpu_infos()` reproduces that derivation exactly (see hint-providers spec §1.1):

* cadvisor groups a NUMA node's online CPUs into cores by (core_id, socket); the kubelet then names a
  core by the LOWEST logical CPU id among its threads, so core ids are unique machine-wide;
* cadvisor reports an L3 as a per-core "uncore" cache only when the number of CPUs sharing it differs
  from the number of threads of the NUMA node (len(cores) * threads of that core); an L3 that spans
  exactly the node is a node-level cache, and the kubelet then falls back to the socket id;
* CPUs that no NUMA node lists, and offline CPUs, are invisible to the kubelet.

Distance rows are indexed like `Machine.numa_nodes` (ascending node id), which is how Linux writes
`nodeN/distance`. Node ids may be sparse; nothing here renumbers them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from numalign.errors import InvalidInputError
from numalign.limits import MIN_NUMA_NODE_ID

HEALTHY = "Healthy"


@dataclass(frozen=True)
class CPU:
    """One logical CPU (a hardware thread)."""

    id: int
    socket: int
    core: int  # sysfs core_id: unique within (socket, die) only
    numa_node: int | None  # None: no NUMA node lists this CPU
    die: int = 0
    l3: int | None = None  # id of the L3 (uncore) cache, None when unknown
    online: bool = True


@dataclass(frozen=True)
class NUMANode:
    """A NUMA node. `cpus` are its ONLINE CPUs; a memory-only node (GPU memory, CXL, HBM) has none."""

    id: int
    cpus: frozenset[int]
    memory_bytes: int
    hugepages: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    distances: tuple[int, ...] | None = None  # indexed like Machine.numa_nodes

    def __post_init__(self) -> None:
        # Keep the value immutable whatever mapping the caller passed.
        object.__setattr__(self, "hugepages", MappingProxyType(dict(sorted(self.hugepages.items()))))
        object.__setattr__(self, "cpus", frozenset(self.cpus))
        if self.distances is not None:
            object.__setattr__(self, "distances", tuple(self.distances))

    def __hash__(self) -> int:
        return hash((self.id, self.cpus, self.memory_bytes, tuple(self.hugepages.items()), self.distances))

    @property
    def has_cpu(self) -> bool:
        return bool(self.cpus)

    @property
    def has_memory(self) -> bool:
        return self.memory_bytes > 0

    def hugepages_bytes(self) -> int:
        return sum(size * count for size, count in self.hugepages.items())


@dataclass(frozen=True)
class Device:
    """A device a device plugin would advertise under an extended resource name."""

    id: str
    resource: str
    numa_nodes: tuple[int, ...] | None  # None: the device reports no NUMA affinity
    pci_address: str | None = None
    vendor: str | None = None  # PCI vendor id, "0x10de"
    device_class: str | None = None  # PCI class code, "0x030200"
    health: str = HEALTHY
    # CPU-less NUMA nodes that hold the device's own memory (a GB200 GPU's HBM and MIG nodes); the
    # kubelet never reads this: pictures group those nodes under their device.
    memory_numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class DRADevice:
    """A device a DRA driver publishes in this node's ResourceSlice (machine/dra.py builds the slice).

    `numa_node` becomes the standard `resource.kubernetes.io/numaNode` attribute and `pci_address`
    `resource.kubernetes.io/pciBusID` (and, unless `pcie_root` says otherwise, `pcieRoot` of its bus);
    `attributes` are the driver's own (string, int or bool values) and `capacity` quantities as text."""

    name: str
    driver: str
    numa_node: int | None = None
    pci_address: str | None = None
    pcie_root: str | None = None
    attributes: Mapping[str, str | int | bool] = field(default_factory=lambda: MappingProxyType({}))
    capacity: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))
        object.__setattr__(self, "capacity", MappingProxyType(dict(self.capacity)))

    def __hash__(self) -> int:
        return hash((self.name, self.driver, self.numa_node, self.pci_address, self.pcie_root,
                     tuple(self.attributes.items()), tuple(self.capacity.items())))


@dataclass(frozen=True)
class CPUInfo:
    """What the kubelet's CPU manager knows about one CPU (topology.CPUInfo plus its id)."""

    id: int
    socket: int
    numa_node: int
    core: int  # lowest CPU id among the core's threads
    uncore: int  # L3 id when cadvisor reports it as an uncore cache, else the socket id


@dataclass(frozen=True)
class CadvisorCounts:
    """What cadvisor's MachineInfo says beside the per-CPU facts, which topology.Discover takes as they
    are (machines read from sysfs or from MachineInfo JSON carry them; a machine file does not, and its
    counts are derived from its CPUs).

    They differ from what the CPUs alone give on real machines: NumSockets comes from /proc/cpuinfo, so
    a socket whose CPUs are all offline still counts; a CPU or core listed under two NUMA nodes counts
    in both; and the kubelet keeps each node's distance row as sysfs writes it (one entry per online
    node), indexed by node id, which with sparse ids is not the node's position."""

    num_cpus: int  # MachineInfo.NumCores: the logical CPUs of every node's cores (Discover's NumCPUs)
    num_cores: int  # the cores every node lists, summed (Discover's NumCores)
    num_sockets: int  # MachineInfo.NumSockets
    distances: Mapping[int, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    # MachineInfo.MemoryCapacity (/proc/meminfo MemTotal), the node's memory capacity; None when not
    # known (then the NUMA nodes' memory). Without a node directory the nodes hold no memory at all.
    memory_capacity: int | None = None
    # MachineInfo.NumPhysicalCores (/proc/cpuinfo "core id"s); None when not known (then counted from the CPUs)
    num_physical_cores: int | None = None
    # MachineInfo.HugePages: (page size KiB, pages) of sys/kernel/mm/hugepages, in cadvisor's order; None
    # when not known (a machine file, older MachineInfo JSON: then the nodes' pages summed)
    hugepages: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        rows = {int(k): tuple(v) for k, v in self.distances.items()}
        object.__setattr__(self, "distances", MappingProxyType(rows))

    def __hash__(self) -> int:
        return hash((self.num_cpus, self.num_cores, self.num_sockets, tuple(sorted(self.distances.items())),
                     self.memory_capacity, self.num_physical_cores, self.hugepages))


@dataclass(frozen=True)
class Machine:
    name: str
    numa_nodes: tuple[NUMANode, ...]
    cpus: tuple[CPU, ...]
    devices: tuple[Device, ...] = ()
    offline_cpus: frozenset[int] = frozenset()  # offline CPUs whose topology is unknown
    cadvisor: CadvisorCounts | None = None  # read from cadvisor (sysfs, MachineInfo): its own counts
    dra_devices: tuple[DRADevice, ...] = ()  # devices DRA drivers publish (ResourceSlices), not device plugins

    def __post_init__(self) -> None:
        object.__setattr__(self, "numa_nodes", tuple(self.numa_nodes))
        object.__setattr__(self, "cpus", tuple(sorted(self.cpus, key=lambda c: c.id)))  # canonical order
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "offline_cpus", frozenset(self.offline_cpus))
        object.__setattr__(self, "dra_devices", tuple(self.dra_devices))
        _validate(self)

    # ---- lookups -------------------------------------------------------------------------------

    def numa_ids(self) -> list[int]:
        return [n.id for n in self.numa_nodes]

    def cadvisor_numa_order(self) -> list[int]:
        """Node ids in the order cadvisor lists them: Go's filepath.Glob sorts "nodeN" names as
        strings, so node10 comes before node2. The kubelet's NUMAInfo keeps this order."""
        return sorted(self.numa_ids(), key=lambda i: f"node{i}")

    def node(self, node_id: int) -> NUMANode:
        found = self._nodes_by_id.get(node_id)
        if found is None:
            raise InvalidInputError(
                f"machine {self.name!r}: no NUMA node {node_id}; the machine has nodes {self.numa_ids()}"
            )
        return found

    def cpu(self, cpu_id: int) -> CPU:
        found = self._cpus_by_id.get(cpu_id)
        if found is None:
            raise InvalidInputError(f"machine {self.name!r}: no CPU {cpu_id}")
        return found

    def numa_of(self, cpu_id: int) -> int | None:
        """The NUMA node CPU `cpu_id` belongs to (None: no node lists it)."""
        return self.cpu(cpu_id).numa_node

    def numa_nodes_of(self, cpu_ids: Iterable[int]) -> set[int]:
        """The NUMA nodes holding any of `cpu_ids` (CPUs no node lists are left out)."""
        return {n for n in (self.cpu(c).numa_node for c in cpu_ids) if n is not None}

    def cpus_on(self, node_id: int) -> frozenset[int]:
        """The online CPUs of NUMA node `node_id` (empty for a memory-only node or an unknown id)."""
        found = self._nodes_by_id.get(node_id)
        return frozenset() if found is None else found.cpus

    # Machines are immutable, so each index is built once, on first use: lookups in the answers run per
    # pod, NUMA node and container, and a linear scan there made admit on 64 nodes quadratic.
    @cached_property
    def _cpus_by_id(self) -> Mapping[int, CPU]:
        return MappingProxyType({c.id: c for c in self.cpus})

    @cached_property
    def _nodes_by_id(self) -> Mapping[int, NUMANode]:
        return MappingProxyType({n.id: n for n in self.numa_nodes})

    @cached_property
    def _online_cpus(self) -> frozenset[int]:
        return frozenset(c.id for c in self.cpus if c.online)

    def capacity_cpus(self) -> int:
        """The node's cpu capacity: cadvisor's NumCores when read from cadvisor (every CPU it counted,
        placed in a NUMA node or not), else the online CPUs."""
        return len(self.online_cpus()) if self.cadvisor is None else self.cadvisor.num_cpus

    def capacity_memory(self) -> int:
        """The node's memory capacity: cadvisor's MemoryCapacity when known, else the NUMA nodes' memory."""
        if self.cadvisor is not None and self.cadvisor.memory_capacity is not None:
            return self.cadvisor.memory_capacity
        return sum(n.memory_bytes for n in self.numa_nodes)

    def online_cpus(self) -> frozenset[int]:
        return self._online_cpus

    def all_offline_cpus(self) -> frozenset[int]:
        return self.offline_cpus | frozenset(c.id for c in self.cpus if not c.online)

    def sockets(self) -> list[int]:
        return sorted({c.socket for c in self.cpus if c.online})

    def physical_cores(self) -> list[frozenset[int]]:
        """Online threads grouped by (NUMA node, socket, die, core_id): the machine's physical cores,
        ordered by their lowest CPU id. The node is part of the key because old kernels number cores
        per die without exporting die ids (AMD Magny-Cours: one die per node)."""
        groups: dict[tuple[int, int, int, int], set[int]] = {}
        for c in self.cpus:
            if c.online:
                node = -1 if c.numa_node is None else c.numa_node
                groups.setdefault((node, c.socket, c.die, c.core), set()).add(c.id)
        return sorted((frozenset(g) for g in groups.values()), key=min)

    def kubelet_distances(self) -> dict[int, tuple[int, ...]] | None:
        """The distance rows as the kubelet's NUMAInfo keeps them: {node id: row indexed by node id}.
        cadvisor's raw rows when the machine was read from cadvisor; else this machine's own rows
        spread out by id (ids without a node read 0). None when some node has no row."""
        if self.cadvisor is not None:
            rows = self.cadvisor.distances
            return dict(rows) if all(n.id in rows for n in self.numa_nodes) else None
        matrix = self.distance_matrix()
        if matrix is None:
            return None
        ids = self.numa_ids()
        if not ids or min(ids) < 0:
            return {} if not ids else None  # rows are indexed by id: no row can place node -1
        width = max(ids) + 1
        out: dict[int, tuple[int, ...]] = {}
        for node, row in matrix.items():
            full = [0] * width
            for pos, target in enumerate(ids):
                full[target] = row[pos]
            out[node] = tuple(full)
        return out

    def distance_matrix(self) -> dict[int, list[int]] | None:
        """{node id: row}, rows indexed like `numa_ids()`; None unless every node has a row."""
        if any(n.distances is None for n in self.numa_nodes):
            return None
        return {n.id: list(n.distances or ()) for n in self.numa_nodes}

    def memory_by_node(self) -> dict[int, int]:
        return {n.id: n.memory_bytes for n in self.numa_nodes}

    def hugepages_by_node(self) -> dict[int, dict[int, int]]:
        """{node id: {page size in bytes: total pages}} (memory manager §2.2)."""
        return {n.id: dict(n.hugepages) for n in self.numa_nodes}

    def devices_by_resource(self) -> dict[str, list[Device]]:
        out: dict[str, list[Device]] = {}
        for d in self.devices:
            out.setdefault(d.resource, []).append(d)
        return out

    # ---- the kubelet's view --------------------------------------------------------------------

    def cpu_infos(self) -> list[CPUInfo]:
        """One record per CPU the kubelet sees, ascending by id (cadvisor + topology.Discover)."""
        return list(self._cpu_infos)

    @cached_property
    def _cpu_infos(self) -> tuple[CPUInfo, ...]:
        # Machines are immutable, so the derivation is computed once per machine.
        by_id = {c.id: c for c in self.cpus}
        l3_sharers: dict[int, int] = {}
        for c in self.cpus:
            if c.online and c.l3 is not None:
                l3_sharers[c.l3] = l3_sharers.get(c.l3, 0) + 1
        out: list[CPUInfo] = []
        for node in self.cadvisor_nodes():
            threads_by_core: dict[tuple[int, int], list[int]] = {}
            for cpu_id in node.cpus:
                c = by_id[cpu_id]
                threads_by_core.setdefault((c.core, c.socket), []).append(cpu_id)
            n_cores = len(threads_by_core)
            for (_, socket), threads in threads_by_core.items():
                # cadvisor reads caches through the core's first thread in directory (string) order.
                first = by_id[min(threads, key=lambda t: f"cpu{t}")]
                uncore = socket
                if first.l3 is not None and l3_sharers.get(first.l3, 0) != n_cores * len(threads):
                    uncore = first.l3
                core_id = min(threads)
                out.extend(CPUInfo(t, socket, node.id, core_id, uncore) for t in threads)
        return tuple(sorted(out, key=lambda i: i.id))

    def cadvisor_nodes(self) -> list[NUMANode]:
        return [self.node(i) for i in self.cadvisor_numa_order()]


def _fail(m: Machine, what: str) -> InvalidInputError:
    return InvalidInputError(f"machine {m.name!r}: {what}")


def _dupes(ids: Iterable[int]) -> list[int]:
    return sorted(i for i, n in Counter(ids).items() if n > 1)


def _validate(m: Machine) -> None:
    # No nodes, or node -1, is how cadvisor reads a machine without a node directory (no package id at
    # all; an unknown package id): the kubelet runs on both, so the model holds both (docs/machine-format.md,
    # "Machines without NUMA nodes"); the managers refuse the configurations the kubelet cannot run.
    node_ids = [n.id for n in m.numa_nodes]
    if any(i < MIN_NUMA_NODE_ID for i in node_ids):
        raise _fail(m, f"NUMA node ids {node_ids} include {min(node_ids)}; expected ids >= 0 (or -1, cadvisor's "
                    "node for an unknown physical package)")
    if d := _dupes(node_ids):
        raise _fail(m, f"NUMA node ids {d} appear more than once; expected unique ids")
    if node_ids != sorted(node_ids):
        raise _fail(m, f"NUMA nodes are listed as {node_ids}; expected ascending ids (rows index by position)")
    known = set(node_ids)
    for n in m.numa_nodes:
        if n.memory_bytes < 0:
            raise _fail(m, f"NUMA node {n.id} has memory_bytes {n.memory_bytes}; expected >= 0")
        for size, count in n.hugepages.items():
            if size <= 0 or count < 0:
                raise _fail(
                    m,
                    f"NUMA node {n.id} hugepages {size}: {count}; expected a positive page size in bytes "
                    "and a page count >= 0",
                )
        if n.distances is not None:
            if node_ids[0] < 0:
                raise _fail(m, f"NUMA node {n.id} has distances, but the machine has node -1, which no distance "
                            "row can index (cadvisor gives such machines no distances); drop the distances")
            if len(n.distances) != len(node_ids):
                raise _fail(
                    m,
                    f"NUMA node {n.id} has {len(n.distances)} distances {list(n.distances)}; expected one per "
                    f"NUMA node ({len(node_ids)}, in the order {node_ids})",
                )
            if any(x <= 0 for x in n.distances):
                raise _fail(m, f"NUMA node {n.id} distances {list(n.distances)}; expected positive values")
    cpu_ids = [c.id for c in m.cpus]
    if d := _dupes(cpu_ids):
        raise _fail(m, f"CPU ids {d} appear more than once; expected unique ids")
    if overlap := sorted(m.offline_cpus & set(cpu_ids)):
        raise _fail(m, f"offline_cpus {overlap} also appear in cpus; list them once (cpus with online: false)")
    for c in m.cpus:
        # Socket and core ids stay as the kernel reports them, -1 ("unknown") included, as the kubelet keeps them.
        if c.id < 0 or c.die < 0:
            raise _fail(m, f"CPU {c.id} has a negative id or die; expected ids >= 0")
        if c.numa_node is not None and c.numa_node not in known:
            raise _fail(m, f"CPU {c.id} names NUMA node {c.numa_node}, which is not one of {node_ids}")
    expected: dict[int, set[int]] = {i: set() for i in node_ids}
    for c in m.cpus:
        if c.online and c.numa_node is not None:
            expected[c.numa_node].add(c.id)
    for n in m.numa_nodes:
        if set(n.cpus) != expected[n.id]:
            raise _fail(
                m,
                f"NUMA node {n.id} lists CPUs {sorted(n.cpus)} but the online CPUs naming it are "
                f"{sorted(expected[n.id])}; make the node's cpus and each CPU's numa_node agree",
            )
    dev_ids = [(d.resource, d.id) for d in m.devices]
    if len(set(dev_ids)) != len(dev_ids):
        raise _fail(m, "a device id appears twice under one resource; expected unique ids per resource")
    for dev in m.devices:
        if not dev.id or not dev.resource:
            raise _fail(m, f"device {dev.id!r} of resource {dev.resource!r}; expected a non-empty id and resource")
        if dev.numa_nodes is not None:
            if unknown := [i for i in dev.numa_nodes if i not in known]:
                raise _fail(m, f"device {dev.id!r} names NUMA nodes {unknown}, which are not one of {node_ids}")
            if not dev.numa_nodes:
                raise _fail(m, f"device {dev.id!r} has an empty numa_nodes list; use null for no topology")
    dra_ids = [(d.driver, d.name) for d in m.dra_devices]
    if d2 := sorted(x for x, n in Counter(dra_ids).items() if n > 1):
        raise _fail(m, f"DRA device {d2[0][1]!r} of driver {d2[0][0]!r} appears twice; expected unique names "
                    "per driver")
    for dd in m.dra_devices:
        if dd.numa_node is not None and dd.numa_node not in known:
            raise _fail(m, f"DRA device {dd.name!r} names NUMA node {dd.numa_node}, which is not one of {node_ids}")
