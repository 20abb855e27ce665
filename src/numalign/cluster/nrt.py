"""NodeResourceTopology (topology.node.k8s.io/v1alpha2) of a node, as the NFD topology-updater publishes it.

Theory of operation. The topology-updater (node-feature-discovery pkg/resourcemonitor; the
resource-topology-exporter computes the same) never sees the kubelet's state files: it reads
PodResources GetAllocatableResources once and List on every change, and sums per NUMA node:

* allocatable: the allocatable CPU ids on that node (static CPU manager: all CPUs but the reserved
  ones; none policy: no CPU at all), the memory manager's allocatable blocks (Static policy only) and
  the healthy devices reporting that node;
* capacity: allocatable plus the reserved CPUs of the node for cpu, the node's MemTotal and hugepages
  pool for memory and hugepages-*, allocatable for devices. A NUMA node with nothing allocatable
  still gets a zone holding one `cpu` entry (all its CPUs reserved);
* available: allocatable minus what the pods it watches hold. It watches Guaranteed pods that have
  a container with an integral CPU request or hold a device; from those it subtracts exclusive CPU
  ids (integral pods only), devices, and memory blocks (a block spanning several nodes drains them in
  the order listed, as the memory manager fills them).

That is all the scheduler side (scheduler-plugins NodeResourceTopologyMatch) ever learns: sums per
node, nothing of SMT, CPU manager options or which CPUs are reserved. numalign computes the object
from a Node's state directly (the same values PodResources would report), so it needs no agent.

Go map order is random in upstream's output; zones are listed by NUMA id and resources by name here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.requests import container_requests
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, hugepage_resource_name
from numalign.kubelet.node import Node
from numalign.machine.topology import Machine
from numalign.validation import expect_list

API_VERSION: Final = "topology.node.k8s.io/v1alpha2"
KIND: Final = "NodeResourceTopology"
ZONE_TYPE_NODE: Final = "Node"
TOPOLOGY_MANAGER_POLICY_ATTRIBUTE: Final = "topologyManagerPolicy"
TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE: Final = "topologyManagerScope"

# NFD pkg/topologypolicy DetectTopologyPolicy: the deprecated topologyPolicies value per (scope, policy).
_DEPRECATED_POLICY: Final = {
    ("pod", "single-numa-node"): "SingleNUMANodePodLevel",
    ("pod", "restricted"): "RestrictedPodLevel",
    ("pod", "best-effort"): "BestEffortPodLevel",
    ("container", "single-numa-node"): "SingleNUMANodeContainerLevel",
    ("container", "restricted"): "RestrictedContainerLevel",
    ("container", "best-effort"): "BestEffortContainerLevel",
}


def zone_name(numa_id: int) -> str:
    return f"node-{numa_id}"


def detect_topology_policy(policy: str, scope: str) -> str:
    return _DEPRECATED_POLICY.get((scope, policy), "None")


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    name: str
    capacity: int
    allocatable: int
    available: int


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    type: str
    resources: tuple[ResourceInfo, ...]
    costs: tuple[tuple[str, int], ...] = ()

    def resource(self, name: str) -> ResourceInfo | None:
        for r in self.resources:
            if r.name == name:
                return r
        return None


@dataclass(frozen=True, slots=True)
class NodeResourceTopology:
    name: str
    zones: tuple[Zone, ...]
    attributes: tuple[tuple[str, str], ...] = ()
    topology_policies: tuple[str, ...] = ()

    def attribute(self, name: str) -> str | None:
        for k, v in self.attributes:
            if k == name:
                return v
        return None

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server returns it (quantities as DecimalSI strings)."""

        def qty(v: int) -> str:
            return str(Quantity.from_int(v, QuantityFormat.DECIMAL_SI))

        obj: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": self.name}}
        if self.topology_policies:
            obj["topologyPolicies"] = list(self.topology_policies)
        obj["zones"] = [
            {
                "name": z.name,
                "type": z.type,
                **({"costs": [{"name": n, "value": v} for n, v in z.costs]} if z.costs else {}),
                "resources": [
                    {"name": r.name, "capacity": qty(r.capacity), "allocatable": qty(r.allocatable),
                     "available": qty(r.available)}
                    for r in z.resources
                ],
            }
            for z in self.zones
        ]
        if self.attributes:
            obj["attributes"] = [{"name": k, "value": v} for k, v in self.attributes]
        return obj

    @classmethod
    def from_dict(cls, obj: Any, where: str) -> NodeResourceTopology:
        """Read one object (a `kubectl get noderesourcetopologies -o json` item)."""
        if not isinstance(obj, Mapping) or obj.get("kind", KIND) != KIND:
            raise InvalidInputError(f"{where}: expected a {KIND} object, got {_kind_of(obj)}; pass the output of "
                                    "`kubectl get noderesourcetopologies -o json`")
        api = obj.get("apiVersion", API_VERSION)
        if api != API_VERSION:
            raise InvalidInputError(f"{where}: apiVersion {api!r}; expected {API_VERSION} (v1alpha1 objects "
                                    "are not read: upgrade the exporter, which publishes v1alpha2)")
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"{where}: metadata.name missing; expected the node's name")
        zones = []
        for i, z in enumerate(expect_list(obj.get("zones"), f"{where} ({name}).zones")):
            zw = f"{where} ({name}).zones[{i}]"
            if not isinstance(z, Mapping) or not isinstance(z.get("name"), str):
                raise InvalidInputError(f"{zw}: expected an object with name and type, got {z!r}")
            res = []
            for j, r in enumerate(expect_list(z.get("resources"), f"{zw}.resources")):
                rw = f"{zw}.resources[{j}]"
                if not isinstance(r, Mapping) or not isinstance(r.get("name"), str):
                    raise InvalidInputError(f"{rw}: expected {{name, capacity, allocatable, available}}, got {r!r}")
                vals = [_qty(r.get(k), f"{rw}.{k}", r["name"]) for k in ("capacity", "allocatable", "available")]
                res.append(ResourceInfo(r["name"], *vals))
            costs = tuple((str(c["name"]), int(c["value"])) for c in expect_list(z.get("costs"), f"{zw}.costs")
                          if isinstance(c, Mapping) and "name" in c and "value" in c)
            zones.append(Zone(z["name"], str(z.get("type", "")), tuple(res), costs))
        raw_attrs = expect_list(obj.get("attributes"), f"{where}.attributes")
        attrs = tuple((str(a["name"]), str(a["value"])) for a in raw_attrs
                      if isinstance(a, Mapping) and "name" in a and "value" in a)
        policies = tuple(str(p) for p in expect_list(obj.get("topologyPolicies"), f"{where}.topologyPolicies"))
        return cls(name, tuple(zones), attrs, policies)


def _kind_of(obj: Any) -> str:
    return f"kind {obj.get('kind')!r}" if isinstance(obj, Mapping) else type(obj).__name__


def _qty(v: Any, where: str, resource: str) -> int:
    if v is None:
        raise InvalidInputError(f"{where}: missing; expected a quantity")
    q = Quantity.parse(v, where)
    # cpu is counted in whole CPUs by the exporters; other resources in units (bytes, devices).
    return q.value()


def _watched(pod: Pod, has_device: bool) -> tuple[bool, bool]:
    """PodResourcesScanner.isWatchable: (watched, integral-guaranteed)."""
    if get_pod_qos(pod) is not QOSClass.GUARANTEED:
        return False, False
    integral = False
    for c in (*pod.init_containers, *pod.containers):
        cpu = container_requests(c).get(RESOURCE_CPU)
        # hasIntegralCPUs: Value()*1000 == MilliValue() (Value rounds up).
        if cpu is not None and cpu.value() * 1000 == cpu.milli_value():
            integral = True
            break
    return integral or has_device, integral


# What the aggregation reads, as PodResources reports it: memory blocks are (type, size, NUMA ids),
# devices (resource, id, NUMA ids or None). A watched pod is (integral, its containers), each container
# (exclusive CPU ids, [(resource, device id)], memory blocks).
MemoryBlockView = tuple[str, int, Sequence[int]]
ContainerView = tuple[Sequence[int], Sequence[tuple[str, str]], Sequence[MemoryBlockView]]
WatchedPod = tuple[bool, Sequence[ContainerView]]


def node_resource_topology(node: Node, name: str) -> NodeResourceTopology:
    """The object the topology-updater would publish for this node now."""
    cpus: list[int] = sorted(node.cpu.get_allocatable_cpus())
    memory = [(b.type, b.size, list(b.numa_affinity)) for b in node.memory.get_allocatable_memory()]
    devices = [(resource, dev_id, dev.topology)
               for resource, devs in node.devices.get_allocatable_devices().items() for dev_id, dev in devs.items()]
    pods = [w for pod in node.pods.values() if (w := _watched_view(node, pod)) is not None]
    config = node.config
    return aggregate(node.machine, name, config.topology_manager_policy, config.topology_manager_scope,
                     cpus, memory, devices, pods)


def _watched_view(node: Node, pod: Pod) -> WatchedPod | None:
    # PodResources List reports sidecars and app containers (regular init containers have finished).
    reported = [c for c in pod.init_containers if c.is_sidecar] + list(pod.containers)
    devices = {c.name: node.devices.get_container_devices(pod.uid, c.name) or {} for c in reported}
    watched, integral = _watched(pod, any(devices.values()))
    if not watched:
        return None
    containers: list[ContainerView] = []
    for c in reported:
        cpus = sorted(node.cpu.get_exclusive_cpus(pod.uid, c.name))
        devs = [(resource, dev_id) for resource, ids in devices[c.name].items() for dev_id in ids]
        memory = [(b.type, b.size, list(b.numa_affinity)) for b in node.memory.get_memory(pod.uid, c.name) or []]
        containers.append((cpus, devs, memory))
    return integral, containers


def aggregate(
    machine: Machine,
    name: str,
    policy: str,
    scope: str,
    allocatable_cpus: Iterable[int],
    allocatable_memory: Iterable[MemoryBlockView],
    allocatable_devices: Iterable[tuple[str, str, Sequence[int] | None]],
    pods: Iterable[WatchedPod],
) -> NodeResourceTopology:
    """NodeResourcesAggregator.Aggregate over GetAllocatableResources and the watched pods of List."""
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
            device_owner.setdefault(resource, {})[dev_id] = numa
    reserved_cpus = {n: sum(1 for c, m in cpu_numa.items() if m == n and c not in cpu_owner) for n in ids}
    memory_capacity = _memory_capacity(machine)

    table: dict[int, dict[str, list[int]]] = {}  # numa -> resource -> [capacity, allocatable, available]
    for numa in ids:
        nres = allocatable.get(numa)
        if nres is None:
            table[numa] = {RESOURCE_CPU: [reserved_cpus[numa], 0, 0]}
            continue
        row: dict[str, list[int]] = {}
        for resource, amount in nres.items():
            if resource == RESOURCE_CPU:
                cap = amount + reserved_cpus[numa]
            elif resource == RESOURCE_MEMORY or resource.startswith("hugepages-"):
                cap = memory_capacity.get(numa, {}).get(resource, amount)
            else:
                cap = amount
            row[resource] = [cap, amount, amount]
        table[numa] = row
    for integral, containers in pods:
        for cpus, devs, memory in containers:
            if integral:
                for cpu in cpus:
                    _take_one(table, cpu_owner.get(cpu), RESOURCE_CPU)
            for resource, dev_id in devs:
                _take_one(table, device_owner.get(resource, {}).get(dev_id), resource)
            for mem_type, size, numas in memory:
                if size:
                    _take_memory(table, mem_type, size, numas)

    distances = machine.distance_matrix()
    zones = []
    for numa in ids:
        costs: tuple[tuple[str, int], ...] = ()
        if distances is not None and numa in distances:
            costs = tuple((zone_name(ids[j]), d) for j, d in enumerate(distances[numa]))
        resources = tuple(ResourceInfo(r, *vals) for r, vals in sorted(table[numa].items()))
        zones.append(Zone(zone_name(numa), ZONE_TYPE_NODE, resources, costs))
    return NodeResourceTopology(
        name,
        tuple(zones),
        ((TOPOLOGY_MANAGER_POLICY_ATTRIBUTE, policy), (TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE, scope)),
        (detect_topology_policy(policy, scope),),
    )


def _memory_capacity(machine: Machine) -> dict[int, dict[str, int]]:
    """getMemoryResourcesCapacity: MemTotal and each hugepage pool (pages x size) per NUMA node."""
    out: dict[int, dict[str, int]] = {}
    for n in machine.numa_nodes:
        row = {RESOURCE_MEMORY: n.memory_bytes}
        for size, pages in n.hugepages.items():
            row[hugepage_resource_name(size)] = size * pages
        out[n.id] = row
    return out


def _take_one(table: dict[int, dict[str, list[int]]], numa: int | None, resource: str) -> None:
    if numa is None:
        return  # upstream logs "unknown resource" and skips it
    row = table.get(numa, {}).get(resource)
    if row is not None:
        row[2] -= 1


def _take_memory(table: dict[int, dict[str, list[int]]], resource: str, size: int, numas: Sequence[int]) -> None:
    """updateMemoryAvailable: drain the listed nodes in order until the block is accounted for."""
    for numa in numas:
        if size == 0:
            return
        row = table.get(numa, {}).get(resource)
        if row is None:
            if numa in table:
                return  # upstream: resource missing under this zone, stop
            continue
        if row[2] == 0:
            continue
        if size >= row[2]:
            size -= row[2]
            row[2] = 0
        else:
            row[2] -= size
            size = 0
