"""The NodeResourceTopology the NFD topology-updater publishes for a node: one rule for every path.

Theory of operation. The topology-updater (node-feature-discovery v0.18, pkg/resourcemonitor and
pkg/nfd-topology-updater; the resource-topology-exporter computes the same) never sees the kubelet's
state files. It reads PodResources GetAllocatableResources once and List on every change:

* PodResourcesScanner.Scan walks List. A pod is watched (isWatchable) when the API server says it is
  Guaranteed, or when any of its containers holds a device. A watched pod contributes, per container,
  its CPU ids when the pod is Guaranteed and some container (init containers included) requests an
  integral number of CPUs, every device, and every memory block of non-zero size. Containers with
  none of those are dropped. So the memory the memory manager pins for a Guaranteed pod with a
  fractional CPU is counted (its CPUs run on the shared pool and are not), and a Burstable pod's
  devices are counted.
* NodeResourcesAggregator.Aggregate sums per NUMA node. allocatable: the allocatable CPU ids on that
  node (static CPU manager: all but the reserved ones; none policy: none), the memory manager's
  allocatable blocks (Static policy only) and the healthy devices reporting it. capacity: allocatable
  plus the node's reserved CPUs for cpu, the node's MemTotal and hugepage pools for memory and
  hugepages-*, allocatable for devices; a NUMA node with nothing allocatable still gets a zone holding
  one `cpu` entry. available: allocatable less what the watched pods hold: a CPU or a device on the
  NUMA node the allocatable list puts it on, a memory block draining its NUMA nodes in the order
  listed (as the memory manager fills them).
* Attributes: topologyManagerPolicy and topologyManagerScope from the kubelet configuration, then the
  pod-set fingerprint of every pod List returned (`nodeTopologyPodsFingerprint`, cluster/podfingerprint.py;
  `--pods-fingerprint` is on by default), only when List returned at least one pod; the deprecated
  topologyPolicies value beside them.

The three ways numalign builds the object all end in `export` with a list of `ListedPod`, as List
would report them: a Node (`nrt POD.yaml`, `nrt --state-dir`, `serve --nrt-file`, the simulator), or
a PodResources socket (`nrt --pod-resources-socket`, cluster/nrt_podresources.py). Where the pod
object is at hand its QoS class is read from it, as the topology-updater reads it from the API
server; where only PodResources (or the kubelet's checkpoints) know the pod, the QoS is inferred from
what the kubelet gave it: it gives exclusive CPUs (GetExclusiveCPUs, the only CPUs List reports) only
to a Guaranteed pod's containers with integral CPUs, and memory blocks only to Guaranteed pods. A
Guaranteed pod holding neither contributes nothing either way, so both readings subtract the same
amounts. Pods only the checkpoints know have no name, so then no fingerprint can be computed and none
is published, unless a PodResources List captured beside the state (a node snapshot's
podresources/pods.json) names them: then the fingerprint signs exactly the pods that List reported
(every pod, watched or not, as NFD's Scan signs them before it filters) plus those admitted here.

Deliberate differences: zones are named by NUMA id and listed in id order with resources by name
(upstream iterates Go maps, and indexes its zones by position in the machine's node list, which
differs from the id on machines with sparse NUMA ids); the `cpu_core`/`cpu_atom` attributes of hybrid
Intel CPUs are not published (the machine model does not describe core types).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalign.cluster.nrt import (
    TOPOLOGY_MANAGER_POLICY_ATTRIBUTE,
    TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE,
    ZONE_TYPE_NODE,
    NodeResourceTopology,
    ResourceInfo,
    Zone,
    detect_topology_policy,
    zone_name,
)
from numalign.cluster.podfingerprint import ATTRIBUTE as FINGERPRINT_ATTRIBUTE
from numalign.cluster.podfingerprint import fingerprint
from numalign.k8s.pod import Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.requests import container_requests
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, hugepage_resource_name
from numalign.kubelet.node import Node
from numalign.machine.topology import Machine

# What PodResources reports: memory blocks are (type, size, NUMA ids), devices (resource, id, NUMA ids
# or None). A container is (exclusive CPU ids, [(resource, device id)], memory blocks).
MemoryBlockView = tuple[str, int, Sequence[int]]
ContainerView = tuple[Sequence[int], Sequence[tuple[str, str]], Sequence[MemoryBlockView]]


@dataclass(frozen=True, slots=True)
class ListedPod:
    """One pod of a PodResources List answer, with the pod object when it is known."""

    namespace: str | None  # None: only the kubelet's checkpoints know the pod (by UID)
    name: str | None
    containers: tuple[ContainerView, ...]
    pod: Pod | None = None  # the object the API server would give the scanner (its QoS class)


def is_watchable(listed: ListedPod) -> tuple[bool, bool]:
    """PodResourcesScanner.isWatchable: (watched, its exclusive CPUs are counted)."""
    has_device = any(devices for _, devices, _ in listed.containers)
    if listed.pod is None:
        guaranteed = any(cpus or memory for cpus, _, memory in listed.containers)
        exclusive = any(cpus for cpus, _, _ in listed.containers)
    else:
        guaranteed = get_pod_qos(listed.pod) is QOSClass.GUARANTEED
        exclusive = guaranteed and _has_integral_cpus(listed.pod)
    return guaranteed or has_device, exclusive


def _has_integral_cpus(pod: Pod) -> bool:
    """checkPodExclusiveCPUs: hasIntegralCPUs (Value()*1000 == MilliValue(), Value rounding up) for
    any init or app container."""
    for c in (*pod.init_containers, *pod.containers):
        cpu = container_requests(c).get(RESOURCE_CPU)
        if cpu is not None and cpu.value() * 1000 == cpu.milli_value():
            return True
    return False


def scan(pods: Iterable[ListedPod]) -> list[list[ContainerView]]:
    """PodResourcesScanner.Scan: what each watched pod's containers contribute (empty ones dropped)."""
    out: list[list[ContainerView]] = []
    for listed in pods:
        watched, exclusive = is_watchable(listed)
        if not watched:
            continue
        containers: list[ContainerView] = []
        for cpus, devices, memory in listed.containers:
            counted_cpus = list(cpus) if exclusive else []
            blocks = [b for b in memory if b[1]]
            if counted_cpus or devices or blocks:
                containers.append((counted_cpus, list(devices), blocks))
        if containers:
            out.append(containers)
    return out


def export(
    machine: Machine,
    name: str,
    policy: str,
    scope: str,
    allocatable_cpus: Iterable[int],
    allocatable_memory: Iterable[MemoryBlockView],
    allocatable_devices: Iterable[tuple[str, str, Sequence[int] | None]],
    pods: Sequence[ListedPod],
    listed_names: Sequence[tuple[str, str]] | None = None,
) -> NodeResourceTopology:
    """The object the topology-updater publishes for GetAllocatableResources and List. `listed_names`:
    the (namespace, name) of every pod List reports, when they are known apart from `pods` (a snapshot's
    PodResources capture names the pods the checkpoints know only by UID); the fingerprint signs them."""
    zones = aggregate(machine, allocatable_cpus, allocatable_memory, allocatable_devices, scan(pods))
    names: Sequence[tuple[str | None, str | None]] = (
        [(p.namespace, p.name) for p in pods] if listed_names is None else listed_names)
    pods_fingerprint = None
    if names and all(ns is not None and n is not None for ns, n in names):
        pods_fingerprint = fingerprint((str(ns), str(n)) for ns, n in names)
    return published(name, policy, scope, zones, pods_fingerprint)


def published(name: str, policy: str, scope: str, zones: tuple[Zone, ...],
              pods_fingerprint: str | None) -> NodeResourceTopology:
    """The object with its attributes: the fingerprint only when List named every pod (None: none)."""
    attributes = [(TOPOLOGY_MANAGER_POLICY_ATTRIBUTE, policy), (TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE, scope)]
    if pods_fingerprint is not None:
        attributes.append((FINGERPRINT_ATTRIBUTE, pods_fingerprint))
    return NodeResourceTopology(name, zones, tuple(attributes), (detect_topology_policy(policy, scope),))


# ---- a Node's List, as PodResources would report it ------------------------------------------------


def node_resource_topology(node: Node, name: str,
                           listed_names: Sequence[tuple[str, str]] | None = None) -> NodeResourceTopology:
    """The object the topology-updater would publish for this node now (`listed_names`: see export)."""
    cpus, memory, devices = node_allocatable_resources(node)
    config = node.config
    return export(node.machine, name, config.topology_manager_policy, config.topology_manager_scope,
                  cpus, memory, devices, node_pods(node), listed_names)


def node_allocatable_resources(node: Node) -> tuple[list[int], list[MemoryBlockView],
                                                    list[tuple[str, str, Sequence[int] | None]]]:
    """GetAllocatableResources of a Node: CPU ids, memory blocks, devices."""
    cpus: list[int] = sorted(node.cpu.get_allocatable_cpus())
    memory: list[MemoryBlockView] = [(b.type, b.size, list(b.numa_affinity))
                                     for b in node.memory.get_allocatable_memory()]
    devices: list[tuple[str, str, Sequence[int] | None]] = [
        (resource, dev_id, dev.topology)
        for resource, devs in node.devices.get_allocatable_devices().items() for dev_id, dev in devs.items()]
    return cpus, memory, devices


def node_pods(node: Node) -> list[ListedPod]:
    """The node's pods as List reports them: the pods numalign admitted (sidecars and app containers;
    regular init containers have finished), then the pods only the kubelet's checkpoints hold
    resources for (a kubelet's own state directory), unnamed."""
    out = [listed_pod(node, pod) for pod in node.pods.values()]
    for uid, names in sorted(held_containers(node).items()):
        if uid not in node.pods:
            out.append(ListedPod(None, None, _checkpointed_containers(node, uid, sorted(names))))
    return out


def listed_pod(node: Node, pod: Pod) -> ListedPod:
    """An admitted pod as List reports it: its sidecars and app containers."""
    reported = [c for c in pod.init_containers if c.is_sidecar] + list(pod.containers)
    return ListedPod(pod.namespace, pod.name, tuple(_container_view(node, pod.uid, c.name) for c in reported), pod)


def _checkpointed_containers(node: Node, uid: str, names: Sequence[str]) -> tuple[ContainerView, ...]:
    """A pod only the checkpoints know: which of its containers are init containers they do not say,
    and an app container reuses a finished init container's CPUs and devices (both entries stay in
    the checkpoints; the memory manager drops the init container's blocks). So each CPU and device is
    counted once per pod. An init container's CPUs no app container reused stay counted: List would
    not report them, but the kubelet does not hand them out either."""
    seen_cpus: set[int] = set()
    seen_devices: set[tuple[str, str]] = set()
    out = []
    for name in names:
        cpus, devices, memory = _container_view(node, uid, name)
        new_cpus = [c for c in cpus if c not in seen_cpus]
        new_devices = [d for d in devices if d not in seen_devices]
        seen_cpus.update(new_cpus)
        seen_devices.update(new_devices)
        out.append((new_cpus, new_devices, memory))
    return tuple(out)


def held_containers(node: Node) -> dict[str, set[str]]:
    """Pod UID -> the containers the CPU, memory and device managers' states hold anything for."""
    held: list[Any] = [node.memory.assignments, node.devices.pod_devices.devs, node.cpu.snapshot().entries]
    out: dict[str, set[str]] = {}
    for by_uid in held:
        for uid, containers in by_uid.items():
            out.setdefault(uid, set()).update(containers)
    return out


def _container_view(node: Node, uid: str, container: str) -> ContainerView:
    cpus = sorted(node.cpu.get_exclusive_cpus(uid, container))
    devices = [(resource, dev_id)
               for resource, ids in (node.devices.get_container_devices(uid, container) or {}).items()
               for dev_id in ids]
    memory = [(b.type, b.size, list(b.numa_affinity)) for b in node.memory.get_memory(uid, container) or []]
    return cpus, devices, memory


# ---- NodeResourcesAggregator ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AllocatableTable:
    """GetAllocatableResources as the aggregator reads it, before any pod is subtracted: per NUMA node
    and resource (capacity, allocatable), which NUMA node owns each CPU and device, and each zone's
    costs. Fixed for a node while its allocatable resources are (NodeExporter keeps one)."""

    ids: tuple[int, ...]
    rows: dict[int, dict[str, tuple[int, int]]]
    cpu_owner: dict[int, int]
    device_owner: dict[str, dict[str, int]]
    costs: dict[int, tuple[tuple[str, int], ...]]
    zones: dict[tuple[int, ...], Zone] = field(default_factory=dict)  # made by available_zones, per amounts


# Zones kept per AllocatableTable (a few NUMA nodes' states each; cleared when full).
_ZONES_KEPT = 4096


def allocatable_table(
    machine: Machine,
    allocatable_cpus: Iterable[int],
    allocatable_memory: Iterable[MemoryBlockView],
    allocatable_devices: Iterable[tuple[str, str, Sequence[int] | None]],
) -> AllocatableTable:
    """The first half of NodeResourcesAggregator.Aggregate: capacity and allocatable per NUMA node."""
    ids = machine.numa_ids()
    cpu_numa = {c.id: c.numa_node for c in machine.cpus if c.online and c.numa_node is not None}
    allocatable: dict[int, dict[str, int]] = {}
    cpu_owner: dict[int, int] = {}
    for cpu in allocatable_cpus:
        numa = cpu_numa.get(cpu)
        if numa is not None:
            res = allocatable.setdefault(numa, {})
            res[RESOURCE_CPU] = res.get(RESOURCE_CPU, 0) + 1
            cpu_owner[cpu] = numa
    for mem_type, size, numas in allocatable_memory:
        for numa in numas:
            res = allocatable.setdefault(numa, {})
            res[mem_type] = res.get(mem_type, 0) + size
    device_owner: dict[str, dict[str, int]] = {}
    for resource, dev_id, topology in allocatable_devices:
        for numa in topology or ():
            res = allocatable.setdefault(numa, {})
            res[resource] = res.get(resource, 0) + 1
            device_owner.setdefault(resource, {})[dev_id] = numa  # makeResourceMap: the last node listed
    reserved_cpus = {n: sum(1 for c, m in cpu_numa.items() if m == n and c not in cpu_owner) for n in ids}
    memory_capacity = _memory_capacity(machine)

    rows: dict[int, dict[str, tuple[int, int]]] = {}  # numa -> resource -> (capacity, allocatable)
    for numa in ids:
        nres = allocatable.get(numa)
        if nres is None:
            rows[numa] = {RESOURCE_CPU: (reserved_cpus[numa], 0)}
            continue
        row: dict[str, tuple[int, int]] = {}
        for resource, amount in nres.items():
            if resource == RESOURCE_CPU:
                cap = amount + reserved_cpus[numa]
            elif resource == RESOURCE_MEMORY or resource.startswith("hugepages-"):
                cap = memory_capacity.get(numa, {}).get(resource, amount)
            else:
                cap = amount
            row[resource] = (cap, amount)
        rows[numa] = row
    distances = machine.distance_matrix()
    costs: dict[int, tuple[tuple[str, int], ...]] = {}
    for numa in ids:
        costs[numa] = ()
        if distances is not None and numa in distances:
            costs[numa] = tuple((zone_name(ids[j]), d) for j, d in enumerate(distances[numa]))
    return AllocatableTable(tuple(ids), rows, cpu_owner, device_owner, costs)


def available_zones(allocatable: AllocatableTable, pods: Iterable[Sequence[ContainerView]]) -> tuple[Zone, ...]:
    """The second half of Aggregate: the scanned pods subtracted, in order, from allocatable."""
    rows = allocatable.rows
    table = {numa: {r: amount for r, (_cap, amount) in row.items()} for numa, row in rows.items()}  # available
    cpu_owner, device_owner = allocatable.cpu_owner, allocatable.device_owner
    for containers in pods:
        for cpus, devs, memory in containers:
            for cpu in cpus:
                _take_one(table, cpu_owner.get(cpu), RESOURCE_CPU)
            for resource, dev_id in devs:
                _take_one(table, device_owner.get(resource, {}).get(dev_id), resource)
            for mem_type, size, numas in memory:
                _take_memory(table, mem_type, size, numas)
    # A zone is a value: one NUMA node with the same amounts available is the same zone, kept per table
    # (a node exported again after a change reuses its untouched NUMA nodes' zones).
    made = allocatable.zones
    zones = []
    for numa in allocatable.ids:
        available = table[numa]
        key = (numa, *available.values())
        zone = made.get(key)
        if zone is None:
            row = rows[numa]
            resources = tuple(ResourceInfo(r, *row[r], available[r]) for r in sorted(row))
            zone = Zone(zone_name(numa), ZONE_TYPE_NODE, resources, allocatable.costs[numa])
            if len(made) >= _ZONES_KEPT:
                made.clear()
            made[key] = zone
        zones.append(zone)
    return tuple(zones)


def aggregate(
    machine: Machine,
    allocatable_cpus: Iterable[int],
    allocatable_memory: Iterable[MemoryBlockView],
    allocatable_devices: Iterable[tuple[str, str, Sequence[int] | None]],
    pods: Iterable[Sequence[ContainerView]],
) -> tuple[Zone, ...]:
    """NodeResourcesAggregator.Aggregate over GetAllocatableResources and the scanned pods."""
    return available_zones(allocatable_table(machine, allocatable_cpus, allocatable_memory, allocatable_devices),
                           pods)


def _memory_capacity(machine: Machine) -> dict[int, dict[str, int]]:
    """getMemoryResourcesCapacity: MemTotal and each hugepage pool (pages x size) per NUMA node."""
    out: dict[int, dict[str, int]] = {}
    for n in machine.numa_nodes:
        row = {RESOURCE_MEMORY: n.memory_bytes}
        for size, pages in n.hugepages.items():
            row[hugepage_resource_name(size)] = size * pages
        out[n.id] = row
    return out


def _take_one(table: dict[int, dict[str, int]], numa: int | None, resource: str) -> None:
    if numa is None:
        return  # upstream logs "unknown resource" and skips it
    row = table.get(numa)
    if row is not None and resource in row:
        row[resource] -= 1


def _take_memory(table: dict[int, dict[str, int]], resource: str, size: int, numas: Sequence[int]) -> None:
    """updateMemoryAvailable: drain the listed nodes in order until the block is accounted for."""
    for numa in numas:
        if size == 0:
            return
        row = table.get(numa)
        if row is None or resource not in row:
            if row is not None:
                return  # upstream: resource missing under this zone, stop
            continue
        available = row[resource]
        if available == 0:
            continue
        if size >= available:
            size -= available
            row[resource] = 0
        else:
            row[resource] = available - size
            size = 0
