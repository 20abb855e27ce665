"""A dumped node's machine and kubelet configuration, from its Node status and, when there is one, its
NodeResourceTopology. The dump's numbers are kept true; what it cannot give is reconstructed and noted.

* Allocatable comes from status.allocatable (the kubelet's own figure: capacity less kubeReserved,
  systemReserved and the hard eviction threshold), not capacity: the difference becomes systemReserved
  cpu and memory with no eviction threshold of its own, so numalign's allocatable equals the Node's.
  Hugepages and extended resources are the allocatable amounts; pods is allocatable pods.
* NRT zones without cpu (CPU manager none) or without memory and hugepages (memory manager None: most
  clusters, since the exporters read them from the PodResources API, which reports memory only under
  the Static policy) are completed from the Node: its CPUs and memory spread evenly over the zones.
  Without this every pod would be "Insufficient memory" on such a node.
* When zones report cpu, the CPU manager is static and reservedSystemCPUs the first CPUs of each zone
  (capacity - allocatable of each): the count is the NRT's, the ids are reconstructed (`reconstructed`
  names such settings, so tables can say so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from numalign.cluster.dumpread import Notes
from numalign.cluster.nrt import NodeResourceTopology
from numalign.errors import InvalidInputError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_read import config_from_dict
from numalign.k8s.quantity import Quantity
from numalign.machine.topology import CPU, Device, Machine, NUMANode

SMT_LABEL: Final = "feature.node.kubernetes.io/cpu-hardware_multithreading"
DEFAULT_EVICTION: Final = 100 * 1024 * 1024
DEFAULT_MAX_PODS: Final = 110


def _qty(v: Any, where: str) -> Quantity:
    return Quantity.parse(v, where)


@dataclass(frozen=True)
class NodeStatus:
    """What status.capacity and status.allocatable say, in the scheduler's units (cpu in millicores)."""

    cpu_capacity_milli: int
    cpu_allocatable_milli: int
    memory_capacity: int
    memory_allocatable: int
    hugepages: Mapping[int, int]  # page size -> allocatable pages
    extended: Mapping[str, int]  # resource -> allocatable count
    pods: int

    @classmethod
    def read(cls, capacity: Mapping[str, Any], allocatable: Mapping[str, Any], where: str) -> NodeStatus:
        def get(part: Mapping[str, Any], name: str, default: Any, field: str) -> Quantity:
            return _qty(part.get(name, default), f"{where}: status.{field}.{name}")

        cpu_cap = get(capacity, "cpu", 0, "capacity").milli_value()
        cpu_alloc = get(allocatable, "cpu", capacity.get("cpu", 0), "allocatable").milli_value()
        mem_cap = get(capacity, "memory", 0, "capacity").value()
        mem_alloc = get(allocatable, "memory", capacity.get("memory", 0), "allocatable").value()
        hugepages: dict[int, int] = {}
        extended: dict[str, int] = {}
        for name in allocatable:
            if name.startswith("hugepages-"):
                size = Quantity.parse(name[len("hugepages-"):], f"{where}: status.allocatable.{name}").value()
                total = get(allocatable, name, 0, "allocatable").value()
                if size and total:
                    hugepages[size] = total // size
            elif "/" in name:
                extended[str(name)] = get(allocatable, name, 0, "allocatable").value()
        pods = get(allocatable, "pods", capacity.get("pods", DEFAULT_MAX_PODS), "allocatable").value()
        return cls(cpu_cap, min(cpu_alloc, cpu_cap), mem_cap, min(mem_alloc, mem_cap), hugepages, extended, pods)

    @property
    def cpus(self) -> int:
        """Whole online CPUs (capacity is cadvisor's NumCores)."""
        return max(-(-self.cpu_capacity_milli // 1000), 1)

    def pool_bytes(self) -> int:
        return sum(size * pages for size, pages in self.hugepages.items())

    def reservation(self, cpu: bool, memory: bool) -> dict[str, Any]:
        """systemReserved (KubeletConfiguration fields) making numalign's allocatable the Node's: the
        whole reservation in one place, with no eviction threshold of its own."""
        reserved: dict[str, str] = {}
        if cpu and self.cpus * 1000 > self.cpu_allocatable_milli:
            reserved["cpu"] = f"{self.cpus * 1000 - self.cpu_allocatable_milli}m"
        if memory:
            # numalign (as the kubelet) takes the hugepage pools out of memory allocatable itself
            rest = self.memory_capacity - self.pool_bytes() - self.memory_allocatable
            if rest > 0:
                reserved["memory"] = str(rest)
        return {"systemReserved": reserved, "evictionHard": {}}


def _config(fields: Mapping[str, Any], where: str) -> KubeletConfig:
    cfg = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **fields}
    try:
        config = config_from_dict(cfg, f"{where}: kubelet configuration rebuilt from this dump")
        config.validate()
    except InvalidInputError as e:
        raise InvalidInputError(f"{where}: cannot rebuild a kubelet configuration from this dump ({e}); "
                                "describe the pool in a cluster.yaml instead") from None
    return config


def _devices(status: NodeStatus, numa_ids: list[int], skip: set[str]) -> list[Device]:
    """Extended resources of the Node not in the NRT: spread over the NUMA nodes in turn."""
    out = []
    for name, count in status.extended.items():
        if name in skip:
            continue
        for k in range(count):
            out.append(Device(f"{name.split('/')[-1]}-{k}", name, (numa_ids[k % len(numa_ids)],)))
    return out


def from_status(status: NodeStatus) -> tuple[Machine, KubeletConfig]:
    """A node without an NRT: one NUMA node holding the node, the kubelet's defaults, the Node's allocatable."""
    cpus = status.cpus
    cpu_list = tuple(CPU(c, 0, c, 0) for c in range(cpus))
    node = NUMANode(0, frozenset(range(cpus)), status.memory_capacity, dict(status.hugepages), (10,))
    machine = Machine("from-node-status", (node,), cpu_list, tuple(_devices(status, [0], set())))
    return machine, _config(status.reservation(cpu=True, memory=True), "node status")


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def from_nrt(
    nrt: NodeResourceTopology, labels: Mapping[str, str], where: str, status: NodeStatus, notes: Notes
) -> tuple[Machine, KubeletConfig, tuple[str, ...]]:
    """A node with an NRT: its NUMA zones, completed from the Node where they are silent. Returns the
    machine, the configuration and the names of the settings whose values are reconstructed."""
    from numalign.cluster.nrtmatch import numa_zones, topology_manager_conf

    zones = sorted(numa_zones(nrt, milli_cpu=False), key=lambda z: z.numa_id)
    if not zones:
        raise InvalidInputError(f"{where}: no NUMA zones (type Node, name node-N); "
                                "expected the objects the NFD topology-updater or the exporter publish")
    by_name = {z.name: z for z in nrt.zones}
    info = {z.numa_id: {r.name: r for r in by_name[f"node-{z.numa_id}"].resources} for z in zones}
    ids = [z.numa_id for z in zones]
    has_cpu = any("cpu" in r for r in info.values())
    has_memory = any("memory" in r for r in info.values())
    has_hugepages = any(n.startswith("hugepages-") for r in info.values() for n in r)
    name = nrt.name
    if has_cpu:
        counts = {nid: (res["cpu"].capacity if "cpu" in res else 0) for nid, res in info.items()}
    else:
        counts = dict(zip(ids, _spread(status.cpus, len(ids)), strict=True))
        notes.add("NRT zones carry no cpu (CPU manager none): the Node's CPUs spread evenly over the NUMA zones "
                  "(reconstructed)", name)
    smt = labels.get(SMT_LABEL)
    threads = 2 if (smt == "true" or (smt is None and all(c % 2 == 0 for c in counts.values()))) else 1
    if smt is None:
        notes.add(f"no {SMT_LABEL} label: CPU ids and core siblings reconstructed zone by zone "
                  f"({threads} thread{'s' if threads > 1 else ''} per core)", name)
    cpus: list[CPU] = []
    node_cpus: dict[int, list[int]] = {}
    next_id = 0
    reserved: list[int] = []
    for socket_core, (nid, n) in enumerate(counts.items()):
        cpu_ids = list(range(next_id, next_id + n))
        next_id += n
        node_cpus[nid] = cpu_ids
        for k, cpu in enumerate(cpu_ids):
            cpus.append(CPU(cpu, 0, socket_core * 10_000 + k // threads, nid))
        cpu_info = info[nid].get("cpu")
        if cpu_info is not None:
            reserved += cpu_ids[: max(cpu_info.capacity - cpu_info.allocatable, 0)]
    memory = dict(zip(ids, _spread(status.memory_capacity, len(ids)), strict=True))
    if not has_memory:
        notes.add("NRT zones carry no memory (memory manager None): the Node's memory spread evenly over the "
                  "NUMA zones (reconstructed)", name)
    if not has_hugepages and status.hugepages:
        notes.add("NRT zones carry no hugepages: the Node's pages spread evenly over the NUMA zones "
                  "(reconstructed)", name)
    numa_nodes = []
    devices = []
    reserved_memory: list[dict[str, Any]] = []
    for i, z in enumerate(zones):
        res = info[z.numa_id]
        mem = res.get("memory")
        hugepages: dict[int, int] = {}
        if has_hugepages:
            for rname, r in res.items():
                if rname.startswith("hugepages-"):
                    size = Quantity.parse(rname[len("hugepages-"):], where).value()
                    if size:
                        hugepages[size] = r.capacity // size
        else:
            for size, pages in status.hugepages.items():
                hugepages[size] = _spread(pages, len(zones))[i]
        for rname, r in res.items():
            if rname not in ("cpu", "memory") and not rname.startswith("hugepages-"):
                for k in range(r.capacity):
                    devices.append(Device(f"{rname.split('/')[-1]}-n{z.numa_id}-{k}", rname, (z.numa_id,)))
        distances = tuple(z.costs.get(j, 10 if j == z.numa_id else 20) for j in ids) if z.costs else None
        zone_memory = mem.capacity if mem else memory[z.numa_id]
        numa_nodes.append(NUMANode(z.numa_id, frozenset(node_cpus[z.numa_id]), zone_memory, hugepages, distances))
        # capacity is MemTotal (hugepage pools included); the memory manager's allocatable leaves out
        # the pools and the reservation, so the reservation is what remains.
        pools = sum(size * pages for size, pages in hugepages.items())
        if mem is not None and mem.capacity - pools > mem.allocatable:
            reserved_memory.append({"numaNode": z.numa_id,
                                    "limits": {"memory": str(mem.capacity - pools - mem.allocatable)}})
    devices += _devices(status, ids, {d.resource for d in devices})
    conf = topology_manager_conf(nrt)
    cfg: dict[str, Any] = {"topologyManagerPolicy": conf.policy, "topologyManagerScope": conf.scope}
    reconstructed: tuple[str, ...] = ()
    if has_cpu:
        cfg["cpuManagerPolicy"] = "static"
        cfg["reservedSystemCPUs"] = ",".join(map(str, reserved or [0]))
        reconstructed = ("reservedSystemCPUs",)
        notes.add("reservedSystemCPUs: the count is the NRT's, the CPU ids are reconstructed (the first CPUs of "
                  "each zone; the node's own are in its kubelet configuration)", name)
        by_nrt = (len(cpus) - len(reserved or [0])) * 1000
        if by_nrt != status.cpu_allocatable_milli:
            notes.add(f"the Node's allocatable cpu ({status.cpu_allocatable_milli}m) differs from its NRT zones' "
                      f"({by_nrt}m): the NRT's reserved CPUs are used", name)
    if has_memory:
        total = sum(int(r["limits"]["memory"]) for r in reserved_memory)
        if total <= DEFAULT_EVICTION:
            total = DEFAULT_EVICTION + (1 << 20)
            reserved_memory = [{"numaNode": ids[0], "limits": {"memory": str(total)}}]
        cfg["memoryManagerPolicy"] = "Static"
        cfg["systemReserved"] = {"memory": str(total - DEFAULT_EVICTION)}
        cfg["reservedMemory"] = reserved_memory
    else:
        # memory manager None: node allocatable is the Node's (and cpu too when the zones say nothing)
        status_for = dataclasses.replace(status, hugepages={s: sum(n.hugepages.get(s, 0) for n in numa_nodes)
                                                            for s in {s for n in numa_nodes for s in n.hugepages}})
        fields = status_for.reservation(cpu=not has_cpu, memory=True)
        cfg["systemReserved"] = fields["systemReserved"]
        cfg["evictionHard"] = fields["evictionHard"]
    machine = Machine(nrt.name, tuple(numa_nodes), tuple(sorted(cpus, key=lambda c: c.id)), tuple(devices))
    return machine, _config(cfg, where), reconstructed

