"""scheduler-plugins' NodeResourceTopologyMatch (pkg/noderesourcetopology): its Filter and Score over
the NodeResourceTopology objects of cluster/nrt.py, and the `nrt` scheduler built on them.

Kept as upstream has it, inexactness included: the plugin sees per-NUMA sums of available resources
(nothing of SMT, CPU manager options, reserved CPU ids or which CPUs are free), assumes the kubelet
picks the lowest NUMA node that fits, and filters only for the single-numa-node policy.

Filter (filter.go): BestEffort pods without extended resources pass. For single-numa-node, container
scope checks each init container, then each app container (subtracting its requests from the NUMA
node chosen, the lowest that fits, NUMA-affine resources only for Guaranteed pods); pod scope checks
the pod's effective request once. A NUMA node fits a resource when its `available` covers the
request; a non-Guaranteed pod's cpu, memory and hugepages always fit; a requested resource missing
from the node's allocatable fails; one no zone reports is skipped if it is host-level (not native, or
ephemeral storage). Other policies pass every node.

Score (score.go and its strategies): non-Guaranteed pods score 100. LeastAllocated, MostAllocated and
BalancedAllocation score each NUMA node on the container's (or pod's) requests against its available
amounts, take the lowest non-zero NUMA score and average over containers; only for single-numa-node.
LeastNUMANodes (least_numa.go, any policy) scores by how few NUMA nodes could hold the requests,
with a bonus when those have the minimal average distance.

The simulation publishes each node's NRT after every change (the passthrough cache: no staleness,
so the reserve plugin's over-reservation never comes into play). Go map iteration order is random
upstream; it changes no verdict here, and resources are visited in sorted order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from numalign.cluster.nrt import (
    TOPOLOGY_MANAGER_POLICY_ATTRIBUTE,
    TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE,
    ZONE_TYPE_NODE,
    NodeResourceTopology,
    Zone,
)
from numalign.cluster.nrt_live import NodeExporter
from numalign.cluster.schedulers import MAX_NODE_SCORE, DefaultScheduler, num_feasible_nodes_to_find
from numalign.cluster.state import BoolArray, ClusterState, IntArray, PodVector
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.requests import container_requests
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, is_hugepage_resource_name, is_native_resource_name

MAX_NUMA_ID: Final = 64
DEFAULT_MAX_NUMA_NODES: Final = 8
MAX_DISTANCE_VALUE: Final = 255
ATTRIBUTE_MAX_NUMA_NODES: Final = "topologyManagerMaxNUMANodes"
_POLICIES: Final = ("none", "best-effort", "restricted", "single-numa-node")
_DEPRECATED: Final = {
    "SingleNUMANodePodLevel": ("single-numa-node", "pod"),
    "SingleNUMANodeContainerLevel": ("single-numa-node", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "RestrictedContainerLevel": ("restricted", "container"),
}

Resources = dict[str, int]  # cpu in millicores, everything else in units
# util.ResourceList(nodeInfo.GetAllocatable()) always lists these, at zero if the node has none.
_ALWAYS_LISTED: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


@dataclass
class NUMAZone:
    numa_id: int
    resources: Resources  # available
    costs: dict[int, int]


@dataclass(frozen=True)
class TopologyManagerConf:
    policy: str = "none"
    scope: str = "container"
    max_numa_nodes: int = DEFAULT_MAX_NUMA_NODES


def _zone_id(name: str) -> int | None:
    """numanode.NameToID: "node-N"."""
    prefix, _, num = name.partition("-")
    if prefix != "node" or not num.isdigit():
        return None
    return int(num)


def topology_manager_conf(nrt: NodeResourceTopology) -> TopologyManagerConf:
    """nodeconfig.TopologyManagerFromNodeResourceTopology: deprecated topologyPolicies, then attributes."""
    policy, scope, max_numa = "none", "container", DEFAULT_MAX_NUMA_NODES
    if nrt.topology_policies and nrt.topology_policies[0] in _DEPRECATED:
        policy, scope = _DEPRECATED[nrt.topology_policies[0]]
    for name, value in nrt.attributes:
        if name == TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE and value in ("container", "pod"):
            scope = value
        elif name == TOPOLOGY_MANAGER_POLICY_ATTRIBUTE and value in _POLICIES:
            policy = value
        elif name == ATTRIBUTE_MAX_NUMA_NODES and value.isdigit() and int(value) > 1:
            max_numa = min(int(value), 1024)
    return TopologyManagerConf(policy, scope, max_numa)


# Parsed zones and container requests, kept per object (by identity, the object held so its id stays
# its own): the scheduler filters and scores the same NRT and the same pod's containers on many nodes
# and many cycles, and parsing zone names and quantities dominated the nrt scheduler's profile.
_CACHE_LIMIT: Final = 2048  # about two exports per node of the bench cluster: stale NRTs are let go
_ZONES: dict[tuple[int, bool], tuple[NodeResourceTopology, list[tuple[int, Resources, dict[int, int]]]]] = {}
_REQUESTS: dict[int, tuple[Container, Resources]] = {}
_ZONE: dict[tuple[int, bool], tuple[Zone, tuple[int, Resources, dict[int, int]] | None]] = {}
_ZONE_LIMIT: Final = 8192


def numa_zones(nrt: NodeResourceTopology, milli_cpu: bool = True) -> list[NUMAZone]:
    """createNUMANodeList: zones of type Node with a valid id; resources are the `available` amounts.
    The zones are fresh objects on every call (callers subtract from them)."""
    found = _ZONES.get((id(nrt), milli_cpu))
    if found is None or found[0] is not nrt:
        if len(_ZONES) >= _CACHE_LIMIT:
            _ZONES.clear()
        found = (nrt, _parse_zones(nrt, milli_cpu))
        _ZONES[(id(nrt), milli_cpu)] = found
    return [NUMAZone(numa, dict(res), dict(costs)) for numa, res, costs in found[1]]


def _parse_zones(nrt: NodeResourceTopology, milli_cpu: bool) -> list[tuple[int, Resources, dict[int, int]]]:
    out = []
    for zone in nrt.zones:
        parsed = _parse_zone(zone, milli_cpu)
        if parsed is not None:
            out.append(parsed)
    return out


def _parse_zone(zone: Zone, milli_cpu: bool) -> tuple[int, Resources, dict[int, int]] | None:
    """One zone parsed (None: not a NUMA zone), kept per Zone object: the simulator's NRTs share the
    zones of NUMA nodes whose amounts are unchanged (cluster/nrt_live.py). Read only by the caller."""
    found = _ZONE.get((id(zone), milli_cpu))
    if found is not None and found[0] is zone:
        return found[1]
    parsed: tuple[int, Resources, dict[int, int]] | None = None
    numa = _zone_id(zone.name) if zone.type == ZONE_TYPE_NODE else None
    if numa is not None and numa <= MAX_NUMA_ID:
        res = {r.name: (r.available * 1000 if r.name == RESOURCE_CPU and milli_cpu else r.available)
               for r in zone.resources}
        costs = {}
        for name, value in zone.costs:
            cid = _zone_id(name)
            if cid is not None and cid <= MAX_NUMA_ID:
                costs[cid] = value
        parsed = (numa, res, costs)
    if len(_ZONE) >= _ZONE_LIMIT:
        _ZONE.clear()
    _ZONE[(id(zone), milli_cpu)] = (zone, parsed)
    return parsed


def _requests(c: Container) -> Resources:
    found = _REQUESTS.get(id(c))
    if found is None or found[0] is not c:
        from numalign.cluster.resources import amount

        if len(_REQUESTS) >= _CACHE_LIMIT:
            _REQUESTS.clear()
        found = (c, {name: amount(name, q) for name, q in container_requests(c).items()})
        _REQUESTS[id(c)] = found
    return dict(found[1])


def effective_request(pod: Pod) -> Resources:
    """util.GetPodEffectiveRequest: app containers summed, the largest init container per resource, overhead."""
    from numalign.cluster.resources import amount

    init: Resources = {}
    for c in pod.init_containers:
        for name, v in _requests(c).items():
            init[name] = max(init.get(name, v), v)
    res: Resources = {}
    for c in pod.containers:
        for name, v in _requests(c).items():
            res[name] = res.get(name, 0) + v
    for name, v in init.items():
        if name not in res or v > res[name]:
            res[name] = v
    for name, q in pod.overhead.items():
        res[name] = res.get(name, 0) + amount(name, q)
    return res


def _is_host_level(resource: str) -> bool:
    return resource in ("ephemeral-storage", "storage") or not is_native_resource_name(resource)


def _is_numa_affine(resource: str) -> bool:
    return resource in (RESOURCE_CPU, RESOURCE_MEMORY) or is_hugepage_resource_name(resource)


def _suitable(qos: QOSClass, resource: str, quantity: int, numa_quantity: int) -> bool:
    if qos is not QOSClass.GUARANTEED and _is_numa_affine(resource):
        return True
    return numa_quantity >= quantity


def resources_available_in_any_numa_node(
    qos: QOSClass, zones: Sequence[NUMAZone], node_allocatable: Mapping[str, int], resources: Resources
) -> tuple[int, bool]:
    """(the NUMA id the kubelet would pick, whether any NUMA node holds every resource)."""
    bitmask = (1 << MAX_NUMA_ID) - 1  # Fill(): every NUMA node possible until a resource says otherwise
    for resource, quantity in sorted(resources.items()):
        if quantity == 0:
            continue
        if resource not in node_allocatable and resource not in _ALWAYS_LISTED:
            return -1, False
        has_affinity = False
        resource_mask = 0
        for zone in zones:
            if resource not in zone.resources:
                continue
            has_affinity = True
            if _suitable(qos, resource, quantity, zone.resources[resource]):
                resource_mask |= 1 << zone.numa_id
        if not has_affinity and _is_host_level(resource):
            continue
        bitmask &= resource_mask
        if bitmask == 0:
            return -1, False
    return (bitmask & -bitmask).bit_length() - 1, True


def _subtract(zones: Sequence[NUMAZone], numa_id: int, qos: QOSClass, requests: Resources) -> None:
    for zone in zones:
        if zone.numa_id != numa_id:
            continue
        for name, qty in requests.items():
            if qos is not QOSClass.GUARANTEED and _is_numa_affine(name):
                continue
            if qty == 0 or name not in zone.resources:
                continue
            zone.resources[name] -= qty


def filter_node(pod: Pod, nrt: NodeResourceTopology | None, node_allocatable: Mapping[str, int]) -> str | None:
    """None when the node passes, else upstream's Unschedulable message."""
    qos = get_pod_qos(pod)
    if qos is QOSClass.BEST_EFFORT and not _includes_non_native(pod):
        return None
    if nrt is None:
        return None
    conf = topology_manager_conf(nrt)
    if conf.policy != "single-numa-node":
        return None
    zones = numa_zones(nrt)
    if conf.scope == "pod":
        _, ok = resources_available_in_any_numa_node(qos, zones, node_allocatable, effective_request(pod))
        return None if ok else "cannot align pod"
    for c in pod.init_containers:
        _, ok = resources_available_in_any_numa_node(qos, zones, node_allocatable, _requests(c))
        if not ok:
            return "cannot align " + ("restartable init" if c.is_sidecar else "init") + " container"
    for c in pod.containers:
        requests = _requests(c)
        numa_id, ok = resources_available_in_any_numa_node(qos, zones, node_allocatable, requests)
        if not ok:
            return "cannot align container"
        _subtract(zones, numa_id, qos, requests)
    return None


def _includes_non_native(pod: Pod) -> bool:
    return any(not is_native_resource_name(r) for c in pod.all_containers() for r in c.requests)


# -- scoring -----------------------------------------------------------------------------------------


def _value(name: str, amount: int) -> int:
    """resource.Quantity.Value() of an amount in scheduler units (cpu rounds up to whole CPUs)."""
    return -(-amount // 1000) if name == RESOURCE_CPU else amount


def _least_allocated(requested: Resources, available: Resources) -> int:
    total = weights = 0
    for name in sorted(requested):
        req, cap = requested[name], available.get(name, 0)
        c, r = _value(name, cap), _value(name, req)
        score = 0 if cap == 0 or req > cap else (c - r) * MAX_NODE_SCORE // c
        total += score
        weights += 1
    return total // weights if weights else 0


def _most_allocated(requested: Resources, available: Resources) -> int:
    total = weights = 0
    for name in sorted(requested):
        req, cap = requested[name], available.get(name, 0)
        score = 0 if cap == 0 or req > cap else _value(name, req) * MAX_NODE_SCORE // _value(name, cap)
        total += score
        weights += 1
    return total // weights if weights else 0


def _balanced_allocation(requested: Resources, available: Resources) -> int:
    fractions = []
    for name in sorted(requested):
        cap = _value(name, available.get(name, 0))
        fraction = 1.0 if cap == 0 else _value(name, requested[name]) / cap
        if fraction > 1:
            return 0
        fractions.append(fraction)
    if len(fractions) < 2:
        # gonum's stat.Variance divides by n-1: NaN for one value, and Go's int64(NaN) is not a score.
        # Upstream then hands the framework an out-of-range score; numalign scores such nodes 0.
        return 0
    mean = sum(fractions) / len(fractions)
    variance = sum((f - mean) ** 2 for f in fractions) / (len(fractions) - 1)
    return int((1 - variance) * MAX_NODE_SCORE)


STRATEGIES: Final = {
    "LeastAllocated": _least_allocated,
    "MostAllocated": _most_allocated,
    "BalancedAllocation": _balanced_allocation,
}


def _score_for_each_numa_node(requested: Resources, zones: Sequence[NUMAZone], strategy: str) -> int:
    fn = STRATEGIES[strategy]
    min_score = 0
    for zone in zones:
        s = fn(requested, zone.resources)
        if min_score == 0 or (s != 0 and s < min_score):
            min_score = s
    return min_score


def score_node(pod: Pod, nrt: NodeResourceTopology | None, strategy: str) -> int:
    if get_pod_qos(pod) is not QOSClass.GUARANTEED:
        return MAX_NODE_SCORE
    if nrt is None:
        return 0
    conf = topology_manager_conf(nrt)
    zones = numa_zones(nrt)
    if strategy == "LeastNUMANodes":
        return _least_numa_score(pod, conf, zones)
    if conf.policy != "single-numa-node":
        return 0
    if conf.scope == "pod":
        return _score_for_each_numa_node(effective_request(pod), zones, strategy)
    containers = [*pod.init_containers, *pod.containers]
    scores = [_score_for_each_numa_node(_requests(c), zones, strategy) for c in containers]
    return int(sum(scores) / len(scores)) if scores else 0


def _only_non_numa(zones: Sequence[NUMAZone], resources: Resources) -> bool:
    return not any(name in z.resources for name in resources for z in zones)


def _least_numa_score(pod: Pod, conf: TopologyManagerConf, zones: list[NUMAZone]) -> int:
    qos = QOSClass.GUARANTEED
    if conf.scope == "pod":
        resources = effective_request(pod)
        if _only_non_numa(zones, resources):
            return MAX_NODE_SCORE
        found = _numa_nodes_required(qos, zones, resources)
        if found is None:
            return 0
        return _normalize(len(found[0]), found[1], conf.max_numa_nodes)
    most, all_min = 0, True
    for c in [*pod.init_containers, *pod.containers]:
        requests = _requests(c)
        if _only_non_numa(zones, requests):
            continue
        found = _numa_nodes_required(qos, zones, requests)
        if found is None:
            return 0
        nodes, is_min = found
        all_min = all_min and is_min
        most = max(most, len(nodes))
        _subtract_from_numas(requests, zones, nodes)
    if most == 0:
        return MAX_NODE_SCORE
    return _normalize(most, all_min, conf.max_numa_nodes)


def _normalize(count: int, is_min_avg_distance: bool, highest_numa_id: int) -> int:
    per = MAX_NODE_SCORE // highest_numa_id
    score = MAX_NODE_SCORE - count * per
    return score + per // 2 if is_min_avg_distance else score


def _avg_distance(zones: Sequence[NUMAZone], combo: Sequence[int]) -> float:
    if not combo:
        return float(MAX_DISTANCE_VALUE)
    total = 0
    for a in combo:
        for b in combo:
            total += zones[a].costs.get(zones[b].numa_id, MAX_DISTANCE_VALUE)
    return float(np.float32(total) / np.float32(len(combo) * len(combo)))  # upstream divides float32s


def _numa_nodes_required(
    qos: QOSClass, zones: Sequence[NUMAZone], resources: Resources
) -> tuple[list[int], bool] | None:
    """The fewest NUMA nodes (as NUMA ids) whose summed availability holds the resources, and whether
    they have the minimal average distance among combinations of that size."""
    for size in range(1, len(zones) + 1):
        combos = list(itertools.combinations(range(len(zones)), size))
        min_avg = min((_avg_distance(zones, c) for c in combos), default=float(MAX_DISTANCE_VALUE))
        best: tuple[int, ...] | None = None
        best_distance = 256.0
        for combo in combos:
            if not all(name in zones[i].resources for i in combo for name in resources):
                continue
            combined: Resources = {}
            for i in combo:
                for name, v in zones[i].resources.items():
                    combined[name] = combined.get(name, 0) + v
            if not all(q == 0 or _suitable(qos, name, q, combined.get(name, 0)) for name, q in resources.items()):
                continue
            distance = _avg_distance(zones, combo)
            if distance == min_avg:
                return [zones[i].numa_id for i in combo], True
            if distance < best_distance:
                best_distance, best = distance, combo
        if best is not None:
            return [zones[i].numa_id for i in best], False
    return None


def _subtract_from_numas(resources: Resources, zones: Sequence[NUMAZone], numa_ids: Sequence[int]) -> None:
    """subtractFromNUMAs (indexes zones by NUMA id, as upstream does)."""
    for name, quantity in resources.items():
        for nid in numa_ids:
            if quantity == 0:
                break
            if nid >= len(zones):
                continue
            avail = zones[nid].resources.get(name)
            if avail is None:
                continue
            if quantity >= avail:
                quantity -= avail
                zones[nid].resources[name] = 0
            else:
                zones[nid].resources[name] = avail - quantity
                quantity = 0


# -- the scheduler -----------------------------------------------------------------------------------


class NRTScheduler(DefaultScheduler):
    """The default filters and scores plus NodeResourceTopologyMatch (filter, and score with weight 1)."""

    name = "nrt"

    def __init__(self, state: ClusterState, seed: int, scoring: str = "LeastAllocated") -> None:
        super().__init__(state, seed, "LeastAllocated")
        self.strategy = scoring
        self._nrt: dict[int, tuple[int, NodeResourceTopology]] = {}
        self._allocatable: dict[str, dict[str, int]] = {}
        self._exporters: dict[int, NodeExporter] = {}  # per node, its NRT brought up to date (nrt_live)

    def nrt_of(self, i: int) -> NodeResourceTopology:
        sn = self.state.nodes[i]
        cached = self._nrt.get(i)
        if cached is not None and cached[0] == sn.state:
            return cached[1]
        exporter = self._exporters.get(i)
        if exporter is None:
            exporter = self._exporters[i] = NodeExporter(sn.node(), sn.name)
        nrt = exporter.export()
        self._nrt[i] = (sn.state, nrt)
        return nrt

    def allocatable_of(self, i: int) -> dict[str, int]:
        sn = self.state.nodes[i]
        found = self._allocatable.get(sn.pool.name)
        if found is None:
            from numalign.cluster.resources import node_allocatable

            found = node_allocatable(sn.pool.machine, sn.pool.config)
            self._allocatable[sn.pool.name] = found
        return found

    def _filter(self, i: int, pod: Pod, pv: PodVector) -> tuple[bool, int]:
        message = filter_node(pod, self.nrt_of(i), self.allocatable_of(i))
        score = score_node(pod, self.nrt_of(i), self.strategy) if message is None else 0
        return message is None, score

    def feasible(self, pod: Pod, pv: PodVector, mask: BoolArray) -> tuple[IntArray, int]:
        n = len(self.state.nodes)
        k = num_feasible_nodes_to_find(self.percentage, n)
        order = (self.next_start + np.arange(n)) % n
        key = ("nrt", self.strategy, pv.key)
        valid, ok, value = self.state.answers_for(key)
        in_order = mask[order]
        while True:
            v, o = valid[order], ok[order]
            pos = np.nonzero(in_order & (~v | o))[0][:k + 1]
            unknown = pos[~v[pos]]
            if len(unknown) == 0:
                break
            for p in unknown:
                i = int(order[p])
                answer = self._filter(i, pod, pv)
                valid[i], ok[i], value[i] = True, answer[0], answer[1]
        hits = np.nonzero(in_order & valid[order] & ok[order])[0]
        self._rejected_by_nrt = int(np.count_nonzero(in_order & valid[order] & ~ok[order]))
        if len(hits) > k:
            processed = int(hits[k])
            hits = hits[:k]
        else:
            processed = n
        idx: IntArray = order[hits]
        self._scores = value
        return idx, processed

    def scores(self, pod: Pod, pv: PodVector, idx: IntArray) -> IntArray:
        total: IntArray = super().scores(pod, pv, idx) + self._scores[idx]
        return total

    def reasons(self, pod: Pod, pv: PodVector, placement_mask: BoolArray) -> dict[str, int]:
        out = super().reasons(pod, pv, placement_mask)
        if self._rejected_by_nrt:
            out["node(s) NodeResourceTopologyMatch cannot align"] = self._rejected_by_nrt
        return out

