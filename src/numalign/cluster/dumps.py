"""A cluster from a real one's dumps: `kubectl get nodes -o json|yaml`, `kubectl get noderesourcetopologies
-o json|yaml` (v1alpha2, or v1alpha1 read as v1alpha2) and `kubectl get pods -A -o json|yaml` (reading:
cluster/dumpread.py; other kinds are skipped with a note). Each node's facts: cluster/nodefacts.py.

What a dump cannot tell is reconstructed, and said so here:

* Allocatable is the Node's status.allocatable (cpu, memory, hugepages, pods, extended resources).
* A node with an NRT object: one NUMA node per zone with the zone's cpu capacity (CPUs), memory and
  hugepage capacity (the Node's spread evenly when the zones carry none), its devices (every other
  resource, as healthy devices on that NUMA node) and its costs as distances. CPUs are numbered zone
  by zone; cores have two threads when the node's
  `feature.node.kubernetes.io/cpu-hardware_multithreading` label says so or, without that label, when
  every zone's CPU count is even. The kubelet configuration: the NRT's topologyManagerPolicy and scope;
  the static CPU manager when zones report cpu, reserving per zone capacity - allocatable CPUs (the
  zone's first ones); the Static memory manager when zones report memory, reserving per zone
  capacity - allocatable bytes (as systemReserved, less the kubelet's default 100Mi hard eviction).
* A node without one: a single NUMA node holding the node status capacity, the kubelet's defaults
  (no CPU or memory manager, Topology Manager policy none), its allocatable the Node's.
* Each such reconstruction is a note (Cluster.notes), one line per fact with the nodes it concerns.
* The kubelet version: each node's status.nodeInfo.kubeletVersion (a cluster mid-upgrade is simulated
  node by node at each one's own version); a node without one runs numalign's default version. A
  newer patch of a modelled minor is decided as its newest modelled patch (one note); a minor numalign
  does not model is refused, naming the node, unless --kubelet-version is given: then it is decided at
  that version (one note).
* Nodes with the same shape, configuration, kubelet version, taints and labels (hostname aside) form one
  pool; nodes keep their names.
* Pods: those with spec.nodeName that are not Succeeded or Failed are bound to their nodes, in the
  dump's order, before the simulation starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalign.adapters.kubeletversion import from_node_object
from numalign.cluster.dumpread import Notes, read_objects
from numalign.cluster.model import Cluster, NodePool, Taint
from numalign.cluster.nodefacts import NodeStatus, from_nrt, from_status
from numalign.cluster.nrt import NodeResourceTopology
from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.version import KubeletVersion
from numalign.machine.topology import Machine

HOSTNAME_LABEL = "kubernetes.io/hostname"


def cluster_from_dumps(nodes_path: Path, nrts_path: Path | None, kubelet_version: Any = None,
                       overridden: bool = False) -> Cluster:
    """`kubelet_version`: the version every node runs, over what the dump says (--kubelet-version).
    `overridden`: a --kubelet-version axis replaces every pool's version, so a node of a minor numalign
    does not model is read (decided at the axis's versions) instead of refused.
    What the dumps cannot give is in the cluster's notes (said on stderr by the commands)."""
    notes = Notes()
    nodes = read_objects(nodes_path, "Node", "kubectl get nodes -o json", notes)
    nrts: dict[str, tuple[NodeResourceTopology, str]] = {}  # node name -> (object, where it was read)
    if nrts_path is not None:
        for where, item in read_objects(nrts_path, "NodeResourceTopology",
                                        "kubectl get noderesourcetopologies -o json", notes, allow_empty=True):
            nrt = NodeResourceTopology.from_dict(item, where, lambda m: notes.add(f"{nrts_path}: {m}"))
            nrts[nrt.name] = (nrt, f"{where} ({nrt.name})")
    groups: dict[Any, tuple[NodePool, list[str]]] = {}
    for where, node in nodes:
        meta = node.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            raise InvalidInputError(f"{where}: metadata.name missing; expected a Node object")
        status = node.get("status") or {}
        capacity = status.get("capacity")
        if not isinstance(capacity, Mapping):
            raise InvalidInputError(f"{where} ({name}): status.capacity missing; expected a Node as the API "
                                    "server returns it")
        w = f"{where} ({name})"
        allocatable = status.get("allocatable")
        if not isinstance(allocatable, Mapping):
            notes.add("no status.allocatable: capacity taken as allocatable (nothing reserved)", name)
            allocatable = capacity
        status_of = NodeStatus.read(capacity, allocatable, w)
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        taints = tuple(Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
                       for t in ((node.get("spec") or {}).get("taints") or []) if isinstance(t, Mapping))
        found = nrts.get(name)
        reconstructed: tuple[str, ...] = ()
        if found is not None:
            # a fault there is the NRT dump's
            machine, config, reconstructed = from_nrt(found[0], labels, found[1], status_of, notes)
        else:
            notes.add("no NodeResourceTopology: one NUMA node holding the whole node, the kubelet's defaults "
                      "(Topology Manager none, CPU and memory managers none); give --nrts for NUMA zones", name)
            machine, config = from_status(status_of)
        max_pods = status_of.pods
        config = dataclasses.replace(config, max_pods=max_pods)
        version = kubelet_version
        if version is None:
            version = _node_version(node, w, name, overridden, notes)
        shared_labels = tuple(sorted((k, v) for k, v in labels.items() if k != HOSTNAME_LABEL))
        key = (_machine_key(machine), repr(config), taints, shared_labels, max_pods, str(version), reconstructed)
        if key not in groups:
            pool = NodePool(f"pool-{len(groups)}", 0, machine, config, max_pods, dict(shared_labels), taints,
                            kubelet_version=version, reconstructed=reconstructed)
            groups[key] = (pool, [])
        groups[key][1].append(name)
    pools = tuple(dataclasses.replace(pool, count=len(names), names=tuple(names)) for pool, names in groups.values())
    return Cluster(nodes_path.stem, pools, tuple(nrt for nrt, _ in nrts.values()), notes=notes.lines())


def _node_version(node: Mapping[str, Any], where: str, name: str, overridden: bool,
                  notes: Notes) -> KubeletVersion | None:
    """The node's status.nodeInfo.kubeletVersion as numalign models it (None: the node names none, or a
    version numalign does not model that --kubelet-version replaces)."""
    reported = from_node_object(node, where)
    if reported is None:
        return None
    try:
        version = reported.resolve(noted=False)
    except InvalidInputError:
        if not overridden:
            raise
        notes.add(f"kubelet {reported.text} is not a version numalign models: decided at --kubelet-version", name)
        return None
    said = version.newer_patch_note()
    if said is not None:
        notes.add(said, name)
    return version


def _machine_key(m: Machine) -> object:
    return (tuple((n.id, len(n.cpus), n.memory_bytes, tuple(sorted(n.hugepages.items())), n.distances)
                  for n in m.numa_nodes),
            tuple((d.resource, d.numa_nodes) for d in m.devices), len(m.cpus))


def bound_pods(path: Path, node_names: set[str], notes: Notes | None = None) -> list[tuple[str, Pod]]:
    """The pods of `kubectl get pods -A -o json|yaml` running on known nodes, in the dump's order; other
    kinds in the dump are skipped with a note in `notes`."""
    notes = Notes() if notes is None else notes
    from numalign.k8s.manifest import pod_from_dict

    out = []
    for where, item in read_objects(path, "Pod", "kubectl get pods -A -o json", notes, allow_empty=True):
        node = (item.get("spec") or {}).get("nodeName")
        phase = (item.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        if node not in node_names:
            raise InvalidInputError(f"{where}: spec.nodeName {node!r} is not a node of the cluster; "
                                    "expected the pods of the same cluster as --nodes")
        out.append((node, pod_from_dict(item, where)))
    return out
