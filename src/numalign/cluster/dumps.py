"""A cluster from a real one's dumps: `kubectl get nodes -o json`, `kubectl get noderesourcetopologies -o
json` (v1alpha2) and `kubectl get pods -A -o json`.

What a dump cannot tell is reconstructed, and said so here:

* A node with an NRT object: one NUMA node per zone with the zone's cpu capacity (CPUs), memory and
  hugepage capacity, its devices (every other resource, as healthy devices on that NUMA node) and its
  costs as distances. CPUs are numbered zone by zone; cores have two threads when the node's
  `feature.node.kubernetes.io/cpu-hardware_multithreading` label says so or, without that label, when
  every zone's CPU count is even. The kubelet configuration: the NRT's topologyManagerPolicy and scope;
  the static CPU manager when zones report cpu, reserving per zone capacity - allocatable CPUs (the
  zone's first ones); the Static memory manager when zones report memory, reserving per zone
  capacity - allocatable bytes (as systemReserved, less the kubelet's default 100Mi hard eviction).
* A node without one: a single NUMA node holding the node status capacity, the kubelet's defaults
  (no CPU or memory manager, Topology Manager policy none).
* The kubelet version: each node's status.nodeInfo.kubeletVersion (a cluster mid-upgrade is simulated
  node by node at each one's own version); a node without one runs numalign's default version. A
  version numalign does not model is refused, naming the node (give --kubelet-version to override).
* Nodes with the same shape, configuration, kubelet version, taints and labels (hostname aside) form one
  pool; nodes keep their names.
* Pods: those with spec.nodeName that are not Succeeded or Failed are bound to their nodes, in the
  dump's order, before the simulation starts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalign.adapters.kubeletversion import from_node_object
from numalign.cluster.model import Cluster, NodePool, Taint
from numalign.cluster.nrt import NodeResourceTopology
from numalign.errors import InvalidInputError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_read import config_from_dict
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity
from numalign.machine.topology import CPU, Device, Machine, NUMANode

SMT_LABEL = "feature.node.kubernetes.io/cpu-hardware_multithreading"
HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_EVICTION = 100 * 1024 * 1024


def _read_list(path: Path, kind: str, command: str) -> list[Any]:
    from numalign.adapters.textfiles import read_text_file

    text = read_text_file(path, f"the {kind} dump", f"the output of `{command}`", InvalidInputError)
    try:
        obj = json.loads(text)
    except ValueError:
        raise InvalidInputError(f"{path}: not JSON; expected the output of `{command}` (JSON, not YAML or a "
                                "table)") from None
    items = obj.get("items") if isinstance(obj, Mapping) else None
    if not isinstance(items, list):
        got = obj.get("kind") if isinstance(obj, Mapping) else type(obj).__name__
        raise InvalidInputError(f"{path}: expected a List with items (the output of `{command}`), got {got!r}")
    for i, item in enumerate(items):
        k = item.get("kind") if isinstance(item, Mapping) else None
        if k not in (kind, None):
            raise InvalidInputError(f"{path}: items[{i}] is a {k}, not a {kind}; is this the output of `{command}`?")
    return items


def _qty(v: Any, where: str) -> int:
    return Quantity.parse(v, where).value()


def cluster_from_dumps(nodes_path: Path, nrts_path: Path | None, kubelet_version: Any = None) -> Cluster:
    """`kubelet_version`: the version every node runs, over what the dump says (--kubelet-version)."""
    nodes = _read_list(nodes_path, "Node", "kubectl get nodes -o json")
    if not nodes:
        raise InvalidInputError(f"{nodes_path}: no nodes in the list; expected `kubectl get nodes -o json` of a "
                                "cluster with nodes")
    nrts: dict[str, tuple[NodeResourceTopology, str]] = {}  # node name -> (object, where it was read)
    if nrts_path is not None:
        for i, item in enumerate(_read_list(nrts_path, "NodeResourceTopology",
                                            "kubectl get noderesourcetopologies -o json")):
            nrt = NodeResourceTopology.from_dict(item, f"{nrts_path}: items[{i}]")
            nrts[nrt.name] = (nrt, f"{nrts_path}: items[{i}] ({nrt.name})")
    groups: dict[Any, tuple[NodePool, list[str]]] = {}
    for i, node in enumerate(nodes):
        where = f"{nodes_path}: items[{i}]"
        meta = node.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            raise InvalidInputError(f"{where}: metadata.name missing; expected a Node object")
        status = node.get("status") or {}
        capacity = status.get("capacity")
        if not isinstance(capacity, Mapping):
            raise InvalidInputError(f"{where} ({name}): status.capacity missing; expected a Node as the API "
                                    "server returns it")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        taints = tuple(Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
                       for t in ((node.get("spec") or {}).get("taints") or []) if isinstance(t, Mapping))
        found = nrts.get(name)
        w = f"{where} ({name})"
        if found is not None:
            machine, config = _from_nrt(found[0], labels, found[1])  # a fault there is the NRT dump's
        else:
            machine, config = _from_capacity(capacity, w)
        max_pods = _qty(capacity.get("pods", 110), f"{w}: status.capacity.pods")
        config = dataclasses.replace(config, max_pods=max_pods)
        version = kubelet_version
        if version is None:
            reported = from_node_object(node, w)
            version = None if reported is None else reported.resolve()
        shared_labels = tuple(sorted((k, v) for k, v in labels.items() if k != HOSTNAME_LABEL))
        key = (_machine_key(machine), repr(config), taints, shared_labels, max_pods, str(version))
        if key not in groups:
            pool = NodePool(f"pool-{len(groups)}", 0, machine, config, max_pods, dict(shared_labels), taints,
                            kubelet_version=version)
            groups[key] = (pool, [])
        groups[key][1].append(name)
    pools = tuple(dataclasses.replace(pool, count=len(names), names=tuple(names)) for pool, names in groups.values())
    return Cluster(nodes_path.stem, pools, tuple(nrt for nrt, _ in nrts.values()))


def _machine_key(m: Machine) -> object:
    return (tuple((n.id, len(n.cpus), n.memory_bytes, tuple(sorted(n.hugepages.items())), n.distances)
                  for n in m.numa_nodes),
            tuple((d.resource, d.numa_nodes) for d in m.devices), len(m.cpus))


def _from_capacity(capacity: Mapping[str, Any], where: str) -> tuple[Machine, KubeletConfig]:
    cpus = max(_qty(capacity.get("cpu", 0), f"{where}: status.capacity.cpu"), 1)
    memory = _qty(capacity.get("memory", 0), f"{where}: status.capacity.memory")
    hugepages: dict[int, int] = {}
    devices = []
    for name, v in capacity.items():
        if name.startswith("hugepages-"):
            size = Quantity.parse(name[len("hugepages-"):], where).value()
            total = _qty(v, f"{where}: status.capacity.{name}")
            if size and total:
                hugepages[size] = total // size
        elif "/" in name:
            for k in range(_qty(v, f"{where}: status.capacity.{name}")):
                devices.append(Device(f"{name.split('/')[-1]}-{k}", name, (0,)))
    cpu_list = tuple(CPU(c, 0, c, 0) for c in range(cpus))
    node = NUMANode(0, frozenset(range(cpus)), memory, hugepages, (10,))
    return Machine("from-node-status", (node,), cpu_list, tuple(devices)), KubeletConfig()


def _from_nrt(nrt: NodeResourceTopology, labels: Mapping[str, str], where: str) -> tuple[Machine, KubeletConfig]:
    from numalign.cluster.nrtmatch import numa_zones, topology_manager_conf

    zones = sorted(numa_zones(nrt, milli_cpu=False), key=lambda z: z.numa_id)
    if not zones:
        raise InvalidInputError(f"{where}: no NUMA zones (type Node, name node-N); "
                                "expected the objects the NFD topology-updater or the exporter publish")
    by_name = {z.name: z for z in nrt.zones}
    info = {z.numa_id: {r.name: r for r in by_name[f"node-{z.numa_id}"].resources} for z in zones}
    counts = {nid: (res["cpu"].capacity if "cpu" in res else 0) for nid, res in info.items()}
    smt = labels.get(SMT_LABEL)
    threads = 2 if (smt == "true" or (smt is None and all(c % 2 == 0 for c in counts.values()))) else 1
    cpus: list[CPU] = []
    node_cpus: dict[int, list[int]] = {}
    next_id = 0
    reserved: list[int] = []
    for socket_core, (nid, n) in enumerate(counts.items()):
        ids = list(range(next_id, next_id + n))
        next_id += n
        node_cpus[nid] = ids
        for k, cpu in enumerate(ids):
            cpus.append(CPU(cpu, 0, socket_core * 10_000 + k // threads, nid))
        cpu_info = info[nid].get("cpu")
        if cpu_info is not None:
            reserved += ids[: max(cpu_info.capacity - cpu_info.allocatable, 0)]
    ids = [z.numa_id for z in zones]
    numa_nodes = []
    devices = []
    reserved_memory: list[dict[str, Any]] = []
    for z in zones:
        res = info[z.numa_id]
        mem = res.get("memory")
        hugepages = {}
        for name, r in res.items():
            if name.startswith("hugepages-"):
                size = Quantity.parse(name[len("hugepages-"):], where).value()
                if size:
                    hugepages[size] = r.capacity // size
            elif name not in ("cpu", "memory"):
                for k in range(r.capacity):
                    devices.append(Device(f"{name.split('/')[-1]}-n{z.numa_id}-{k}", name, (z.numa_id,)))
        distances = tuple(z.costs.get(j, 10 if j == z.numa_id else 20) for j in ids) if z.costs else None
        numa_nodes.append(NUMANode(z.numa_id, frozenset(node_cpus[z.numa_id]), mem.capacity if mem else 0,
                                   hugepages, distances))
        # capacity is MemTotal (hugepage pools included); the memory manager's allocatable leaves out
        # the pools and the reservation, so the reservation is what remains.
        pools = sum(size * pages for size, pages in hugepages.items())
        if mem is not None and mem.capacity - pools > mem.allocatable:
            reserved_memory.append({"numaNode": z.numa_id,
                                    "limits": {"memory": str(mem.capacity - pools - mem.allocatable)}})
    conf = topology_manager_conf(nrt)
    cfg: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "topologyManagerPolicy": conf.policy, "topologyManagerScope": conf.scope,
    }
    if any("cpu" in r for r in info.values()):
        cfg["cpuManagerPolicy"] = "static"
        cfg["reservedSystemCPUs"] = ",".join(map(str, reserved or [0]))
    if any("memory" in r for r in info.values()):
        total = sum(int(r["limits"]["memory"]) for r in reserved_memory)
        if total <= DEFAULT_EVICTION:
            total = DEFAULT_EVICTION + (1 << 20)
            reserved_memory = [{"numaNode": ids[0], "limits": {"memory": str(total)}}]
        cfg["memoryManagerPolicy"] = "Static"
        cfg["systemReserved"] = {"memory": str(total - DEFAULT_EVICTION)}
        cfg["reservedMemory"] = reserved_memory
    machine = Machine(nrt.name, tuple(numa_nodes), tuple(sorted(cpus, key=lambda c: c.id)), tuple(devices))
    try:
        config = config_from_dict(cfg, f"{where}: kubelet configuration rebuilt from this NRT")
        config.validate()
    except InvalidInputError as e:
        raise InvalidInputError(f"{where}: cannot rebuild a kubelet configuration from this NodeResourceTopology "
                                f"({e}); describe the pool in a cluster.yaml instead") from None
    return machine, config


def bound_pods(path: Path, node_names: set[str]) -> list[tuple[str, Pod]]:
    """The pods of `kubectl get pods -A -o json` running on known nodes, in the dump's order."""
    from numalign.k8s.manifest import pod_from_dict

    out = []
    for i, item in enumerate(_read_list(path, "Pod", "kubectl get pods -A -o json")):
        node = (item.get("spec") or {}).get("nodeName")
        phase = (item.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        if node not in node_names:
            raise InvalidInputError(f"{path}: items[{i}]: spec.nodeName {node!r} is not a node of the cluster; "
                                    "expected the pods of the same cluster as --nodes")
        out.append((node, pod_from_dict(item, f"{path}: items[{i}]")))
    return out
