"""DRA in the simulated cluster: the scheduler's DynamicResources plugin over every node's slices.

Each pool publishes the same slices on each of its nodes (its machine's DRA devices, `draDevices`, and
`resourceSlices` files; docs/cluster-format.md). A pod with claims passes the DynamicResources filter on
a node when `allocate_claims` finds devices for them there; once the pod is bound and its kubelet admits
it, the claims hold those devices (Reserve) until the pod is deleted. A pod the kubelet rejects holds
nothing: its controller's new pod gets new claims from the template.

Speed: the allocator runs once per (pool, the devices in use on the node, the claims' specs): nodes of
one pool with the same devices in use share the answer, so a filter over a thousand nodes costs one
allocation per distinct node state. The allocation is computed on the pool's slices published for a
stand-in node name and read as the node's own (device names are the same on every node of a pool).

A claim pods name (spec.resourceClaims[].resourceClaimName) is one object: allocated once (for the first
pod that needs it, or before the run: its status.allocation in the input), then shared by every pod
naming it, which can run only on the nodes the allocation's node selector reaches (SharedClaim.reach:
the allocator's createNodeSelector, a node-local device's node or the AND of the network-attached
devices' slice selectors; the DynamicResources filter refuses the others with "resourceclaim not
available on the node"). It is deallocated when no pod reserves it any more, as the resource claim
controller does, unless it was allocated before the run (`kept`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from numalign.cluster.state import BoolArray, ClusterState
from numalign.k8s.dra.podclaims import claims_for_pod
from numalign.k8s.dra.types import DeviceAllocationResult, DRAObjects, NodeSelector, ResourceClaim, ResourceSlice
from numalign.k8s.pod import Pod
from numalign.kubelet.dramanager.manager import DRAManager
from numalign.machine.dra import machine_slices
from numalign.report.verdict import (
    ALIGNED,
    COUNT_KEYS,
    NOT_ALIGNED,
    NOTHING_PINNED,
    UNKNOWN,
    Verdict,
    worst,
)
from numalign.scheduler.dra.api import (
    CANNOT_ALLOCATE,
    AllocatedDevice,
    AllocationFailure,
    AllocationResult,
    allocate_claims,
)
from numalign.scheduler.dra.pools import NodeInfo, node_matches

STAND_IN = "numalign-pool-node"  # the node name a pool's slices are published for when allocating
# The DynamicResources filter's words for a node an allocated claim's node selector does not reach
# (dynamicresources.go Filter, every release 1.34-1.37).
NOT_AVAILABLE = "resourceclaim not available on the node"
_HOSTNAME = "kubernetes.io/hostname"  # the label the kubelet gives its node (cluster/dumps.py HOSTNAME_LABEL)


@dataclass(frozen=True)
class SharedClaim:
    """A named ResourceClaim once allocated: its allocation, the nodes it reaches (None: every node) and
    where it was allocated (`node`: the node it was allocated for, None when the input had it allocated;
    `kept`: allocated before the run, so never deallocated by it)."""

    key: str
    allocation: DeviceAllocationResult
    reach: frozenset[int] | None
    node: int | None
    kept: bool
    network: bool  # no device of it is local to one node: its devices are in use on every node


class _NodeClaims:
    """What the DRA side of one node holds: its kubelet's DRA manager (kubelet/dramanager, the claims its
    pods reserve), and those allocations as text (the cache's name for the node's state)."""

    def __init__(self) -> None:
        self.manager = DRAManager()
        self.key: tuple[str, ...] = ()

    def allocated(self) -> list[ResourceClaim]:
        return [h.claim for h in self.manager.held()]

    def refresh(self) -> None:
        self.key = tuple(sorted(repr(c.allocation) for c in self.allocated()))


@dataclass(frozen=True)
class DRAPlacement:
    """A placed pod's devices (template naming) for the alignment figures."""

    devices: tuple[AllocatedDevice, ...]


class ClusterDRA:
    def __init__(self, state: ClusterState, objects: DRAObjects, pool_slices: Mapping[str, Sequence[ResourceSlice]]):
        self.state = state
        self.objects = objects
        self.slices: dict[str, list[ResourceSlice]] = {}
        for pool in state.cluster.pools:
            own = machine_slices(pool.machine, STAND_IN)
            extra = [dataclasses.replace(s, node_name=STAND_IN) if s.node_name else s
                     for s in pool_slices.get(pool.name, ())]
            self.slices[pool.name] = [*own, *extra]
        self.nodes = [_NodeClaims() for _ in state.nodes]
        self._cache: dict[tuple[str, tuple[str, ...], str], AllocationResult | AllocationFailure] = {}
        self.placed: dict[str, tuple[int, AllocationResult]] = {}  # pod uid -> (node, allocation)
        # Claims a pod names (resourceClaimName) are shared: allocated once for every pod using them; claim
        # key -> the allocation and the nodes it reaches; and the pods reserving each (pod uid -> keys).
        self.shared: dict[str, SharedClaim] = {}
        self._users: dict[str, set[str]] = {}
        self._uses: dict[str, tuple[str, ...]] = {}
        self.allocations = 0  # allocator runs (the cache's misses)

    @classmethod
    def for_run(cls, state: ClusterState, pods: Sequence[Pod], objects: DRAObjects | None,
                pool_slices: Mapping[str, Sequence[ResourceSlice]]) -> ClusterDRA | None:
        """None when no pod uses a claim: the simulation then runs as without DRA."""
        if not any(p.resource_claims for p in pods):
            return None
        return cls(state, objects or DRAObjects(), pool_slices)

    def claims(self, pod: Pod) -> tuple[list[ResourceClaim], str, frozenset[int] | None]:
        """The pod's claims (a shared one as allocated already), their cache key, and the nodes its shared
        claims' allocations all reach (None: any node)."""
        out = []
        reach: frozenset[int] | None = None
        named = _named(pod)
        for c in claims_for_pod(pod, self.objects):
            if c.key in named:
                shared = self.shared.get(c.key)
                if shared is None and c.allocation is not None:
                    shared = self.shared[c.key] = SharedClaim(c.key, c.allocation, self._selected(c.allocation),
                                                              None, True, False)
                if shared is not None:
                    c = replace(c, allocation=shared.allocation)
                    if shared.reach is not None:
                        reach = shared.reach if reach is None else reach & shared.reach
            out.append(c)
        return out, repr([(c.spec, c.allocation) for c in out]), reach

    def _selected(self, allocation: DeviceAllocationResult) -> frozenset[int] | None:
        """The nodes an input's status.allocation.nodeSelector matches (None: no selector, every node)."""
        if allocation.node_selector is None:
            return None
        return self._matching([allocation.node_selector])

    def _matching(self, selectors: Sequence[NodeSelector]) -> frozenset[int]:
        """The nodes every selector matches, on each node's labels: its pool's and, as the kubelet labels
        every node, kubernetes.io/hostname (its name; a nodes dump's own value is the same unless the
        kubelet ran with --hostname-override), which a pool's labels cannot hold."""
        return frozenset(sn.index for sn in self.state.nodes
                         if all(node_matches(NodeInfo(sn.name, {**sn.pool.labels, _HOSTNAME: sn.name}), None, False,
                                             sel)
                                for sel in selectors))

    def _reach(self, i: int, allocation: DeviceAllocationResult) -> tuple[frozenset[int] | None, bool]:
        """The nodes an allocation made on node i reaches, as the allocator's createNodeSelector has it: a
        device local to one node restricts it to that node; otherwise every network-attached device's
        node selector applies (allNodes: none); and whether it is network-attached."""
        slices = self.slices[self.state.nodes[i].pool.name]
        selectors: list[NodeSelector] = []
        for r in allocation.results:
            found = next(((s, d) for s in slices if s.driver == r.driver and s.pool.name == r.pool
                          for d in s.devices if d.name == r.device), None)
            if found is None:
                continue
            sl, dev = found
            node_name, selector = (dev.node_name, dev.node_selector) if sl.per_device_node_selection else (
                sl.node_name, sl.node_selector)
            if node_name:
                return frozenset((i,)), False
            if selector is not None:
                selectors.append(selector)
        return (self._matching(selectors) if selectors else None), True

    def allocate_shared(self, i: int, pod: Pod) -> bool:
        """Allocate the pod's named claims not allocated yet for node i, as the scheduler does for the
        first pod that needs them, without placing the pod (`capacity` counts its copies afterwards); they
        stay allocated for the rest of the run. False when they do not fit there."""
        claims, claims_key, _reach = self.claims(pod)
        answer = self._answer(i, claims, claims_key)
        if isinstance(answer, AllocationFailure):
            return False
        self._share(i, pod, [replace(own, allocation=c.allocation)
                             for c, own in zip(answer.claims, claims, strict=True)], kept=True)
        return True

    def _share(self, i: int, pod: Pod, mine: Sequence[ResourceClaim], kept: bool = False) -> None:
        named = _named(pod)
        for c in mine:
            if c.key in named and c.key not in self.shared and c.allocation is not None:
                reach, network = self._reach(i, c.allocation)
                self.shared[c.key] = SharedClaim(c.key, c.allocation, reach, i, kept, network)

    def _network_held(self, i: int) -> list[ResourceClaim]:
        """Network-attached shared claims node i's DRA manager does not hold: their devices are in use
        there too."""
        held = {h.key for h in self.nodes[i].manager.held()}
        return [ResourceClaim(name=sc.key.partition("/")[2], namespace=sc.key.partition("/")[0],
                              allocation=sc.allocation)
                for sc in self.shared.values() if sc.network and sc.key not in held]

    def _answer(self, i: int, claims: list[ResourceClaim], claims_key: str) -> AllocationResult | AllocationFailure:
        sn = self.state.nodes[i]
        held = self.nodes[i]
        network = self._network_held(i)
        key = (sn.pool.name, held.key + tuple(c.key for c in network), claims_key)
        found = self._cache.get(key)
        if found is None:
            self.allocations += 1
            found = allocate_claims(claims, self.slices[sn.pool.name], self.objects.classes, node=STAND_IN,
                                    node_labels=dict(sn.pool.labels), allocated=[*held.allocated(), *network],
                                    version=sn.pool.version)
            self._cache[key] = found
        return found

    def mask(self, pod: Pod, candidates: BoolArray) -> tuple[BoolArray, Counter[str]]:
        """The DynamicResources filter over the candidate nodes: which pass, and per allocator message how
        many fail (the scheduler's "N cannot allocate all claims")."""
        claims, claims_key, reach = self.claims(pod)
        ok = np.zeros(len(self.state.nodes), dtype=np.bool_)
        failures: Counter[str] = Counter()
        for i in np.flatnonzero(candidates):
            if reach is not None and int(i) not in reach:
                failures[NOT_AVAILABLE] += 1  # the shared claim's allocation does not reach the node
                continue
            answer = self._answer(int(i), claims, claims_key)
            if isinstance(answer, AllocationFailure):
                failures[answer.message] += 1
            else:
                ok[i] = True
        return ok, failures

    def before_admit(self, i: int, pod: Pod) -> None:
        """With the preview dra-topology-hints on the node's pool, its kubelet's Topology Manager learns
        the NUMA nodes of the pod's devices (kubelet/previews/dra_hints.py) before admitting it."""
        from numalign.k8s.previews import DRA_TOPOLOGY_HINTS

        sn = self.state.nodes[i]
        if not sn.pool.previews.on(DRA_TOPOLOGY_HINTS):
            return
        from numalign.answer.dra_alignment import hint_nodes
        from numalign.kubelet.previews.dra_hints import DRAHintProvider
        from numalign.scheduler.dra.scheduling import PodClaims

        claims, claims_key, _reach = self.claims(pod)
        answer = self._answer(i, claims, claims_key)
        if isinstance(answer, AllocationFailure):
            return
        node = sn.node()
        provider = next((p for p in node.tm.providers if isinstance(p, DRAHintProvider)), None)
        if provider is None:
            provider = DRAHintProvider()
            node.tm.add_hint_provider(provider)
        # The answer may be shared with an earlier pod of the same claims (the cache): its claims name the
        # devices, position by position the pod's own.
        outcome = PodClaims(pod, tuple(c.claim for c in answer.claims), answer)
        provider.set_pod(pod.uid, hint_nodes(sn.pool.machine, outcome))

    def commit(self, i: int, pod: Pod) -> None:
        """Reserve: the bound and admitted pod's claims hold their devices on node i."""
        claims, claims_key, _reach = self.claims(pod)
        answer = self._answer(i, claims, claims_key)
        if isinstance(answer, AllocationFailure):
            return
        named = _named(pod)
        # The answer may be shared with an earlier pod of the same claims (the cache): its claims name the
        # devices, position by position the pod's own, which keep their names.
        mine = [replace(own, allocation=c.allocation) for c, own in zip(answer.claims, claims, strict=True)]
        self.nodes[i].manager.reserve(pod, mine)
        self._share(i, pod, mine)
        for key in named:
            self._users.setdefault(key, set()).add(pod.uid)
        self._uses[pod.uid] = tuple(named)
        self.nodes[i].refresh()
        self.placed[pod.uid] = (i, answer)

    def why(self, pod: Pod) -> list[str]:
        """Why the pod's claims cannot be allocated (scheduler/dra/explain.py), on every node where the
        allocator answers `cannot allocate all claims` as the nodes stand now: each reason once, with the
        nodes it holds on per pool. A claim a template makes is named by its template, so the pods of one
        workload give the same lines."""
        from numalign.scheduler.dra.explain import explain
        from numalign.scheduler.dra.features import features_for

        claims, claims_key, _reach = self.claims(pod)
        labels = _claim_labels(pod, claims)
        found: dict[str, Counter[str]] = {}  # reason -> pool -> nodes
        seen: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for i, sn in enumerate(self.state.nodes):
            answer = self._answer(i, claims, claims_key)
            if not isinstance(answer, AllocationFailure) or answer.message != CANNOT_ALLOCATE:
                continue
            key = (sn.pool.name, self.nodes[i].key)
            reasons = seen.get(key)
            if reasons is None:
                from numalign.scheduler.dra.allocator import AllocatedState

                why = explain(claims, self.slices[sn.pool.name], self.objects.classes,
                              NodeInfo(STAND_IN, dict(sn.pool.labels)),
                              AllocatedState([*self.nodes[i].allocated(), *self._network_held(i)]),
                              features_for(sn.pool.version))
                reasons = seen[key] = [_relabel(r, labels) for r in why.reasons]
            for r in reasons:
                found.setdefault(r, Counter())[sn.pool.name] += 1
        return [f"{r} (on {', '.join(f'{n} node(s) of pool {p}' for p, n in sorted(pools.items()))})"
                for r, pools in found.items()]

    def why_on(self, i: int, pod: Pod) -> list[str]:
        """Why the pod's claims cannot be allocated on node i as it stands now (the reasons `admit` gives,
        scheduler/dra/explain.py), a template's claim named by its template."""
        from numalign.scheduler.dra.allocator import AllocatedState
        from numalign.scheduler.dra.explain import explain
        from numalign.scheduler.dra.features import features_for

        claims, _key, _reach = self.claims(pod)
        sn = self.state.nodes[i]
        why = explain(claims, self.slices[sn.pool.name], self.objects.classes, NodeInfo(STAND_IN, dict(sn.pool.labels)),
                      AllocatedState([*self.nodes[i].allocated(), *self._network_held(i)]),
                      features_for(sn.pool.version))
        labels = _claim_labels(pod, claims)
        return [_relabel(r, labels) for r in why.reasons]

    def release(self, i: int, uid: str) -> None:
        """The pod is deleted: its reservations end; a claim no pod reserves any more is deallocated."""
        self.nodes[i].manager.release(uid)
        for key in self._uses.pop(uid, ()):
            users = self._users.get(key, set())
            users.discard(uid)
            shared = self.shared.get(key)
            if not users and shared is not None and not shared.kept:
                del self.shared[key]  # no pod reserves it: the resource claim controller deallocates it
        self.nodes[i].refresh()
        self.placed.pop(uid, None)


def _named(pod: Pod) -> set[str]:
    """The keys of the claims the pod names (resourceClaimName), not made from a template for it."""
    return {f"{pod.namespace}/{pc.resource_claim_name}" for pc in pod.resource_claims if pc.resource_claim_name}


def _claim_labels(pod: Pod, claims: Sequence[ResourceClaim]) -> dict[str, str]:
    """claim key -> how a line names it: a template's claim by its template (its name is the pod's)."""
    out = {}
    for ref, claim in zip(pod.resource_claims, claims, strict=False):
        if ref.resource_claim_template_name:
            out[claim.key] = f"{ref.name} (template {pod.namespace}/{ref.resource_claim_template_name})"
    return out


def _relabel(reason: str, labels: Mapping[str, str]) -> str:
    for key, label in labels.items():
        reason = reason.replace(f"claim {key},", f"claim {label},")
    return reason


def reasons_with_dra(reasons: Mapping[str, int], failures: Counter[str]) -> dict[str, int]:
    """The scheduler's per-reason node counts with the DynamicResources filter's: nodes it failed were
    folded into the placement mask, so they are taken out of the affinity/taint count."""
    out = dict(reasons)
    failed = sum(failures.values())
    key = "node(s) didn't match Pod's node affinity/selector or had untolerated taint"
    if key in out:
        left = out[key] - failed
        if left > 0:
            out[key] = left
        else:
            del out[key]
    out.update(failures)
    return out


# ---- figures -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DRAFigures:
    """The DRA pods of a run: placed, unschedulable by the allocator's reason, and how many placed ones
    have every device on a NUMA node holding both their CPUs and memory (answer/dra_alignment.py)."""

    pods: int                    # workload pods with claims
    placed: int
    unschedulable: dict[str, int]  # allocator message -> pods pending with it
    # placed pods by their verdict (report/verdict.py): devices with their CPUs and memory or not, NUMA
    # node unknown, nothing pinned
    aligned: int
    not_aligned: int
    nothing_pinned: int
    unknown: int
    allocations: int = 0         # allocator runs
    # why the unschedulable pods' claims do not fit (scheduler/dra/explain.py): reason -> pods with it
    why: dict[str, int] = dataclasses.field(default_factory=dict)
    # placed pods whose devices depend on the order of a Go map of pools (kubelet 1.34, 1.35 pools:
    # their scheduler ranges over one; api.map_order_note), and the first such pod's note
    map_order_pods: int = 0
    map_order_example: str = ""

    def __reduce__(self) -> tuple[type[DRAFigures], tuple[object, ...]]:
        # Pickled as a constructor call (a worker process sends its run back): mypyc's compiled class
        # (scripts/setup) is otherwise restored field by field through the frozen __setattr__, which refuses.
        return DRAFigures, tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    @property
    def aligned_share(self) -> float | None:
        """Of the placed DRA pods, those whose devices share a NUMA node with their CPUs and memory
        (None when none was placed)."""
        return self.aligned / self.placed if self.placed else None

    def to_dict(self) -> dict[str, Any]:
        return {"pods": self.pods, "placed": self.placed, "unschedulable": dict(self.unschedulable),
                **{COUNT_KEYS[v]: n for v, n in self.by_verdict().items()},
                "alignedShare": None if self.aligned_share is None else round(self.aligned_share, 6),
                "allocations": self.allocations, "why": dict(self.why),
                **({"mapOrder": {"pods": self.map_order_pods, "example": self.map_order_example}}
                   if self.map_order_pods else {})}

    def by_verdict(self) -> dict[Verdict, int]:
        return {ALIGNED: self.aligned, NOT_ALIGNED: self.not_aligned, NOTHING_PINNED: self.nothing_pinned,
                UNKNOWN: self.unknown}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DRAFigures:
        """Also a document of before the verdicts' one vocabulary (`apart`, `unpinned`)."""
        return cls(d["pods"], d["placed"], dict(d["unschedulable"]), d["aligned"],
                   d.get("notAligned", d.get("apart", 0)), d.get("nothingPinned", d.get("unpinned", 0)),
                   d["unknown"], d.get("allocations", 0), dict(d.get("why") or {}),
                   (d.get("mapOrder") or {}).get("pods", 0), (d.get("mapOrder") or {}).get("example", ""))


def figures(dra: ClusterDRA, pods: int, bound: Mapping[str, tuple[int, str]],
            pending: Sequence[tuple[Pod, str]]) -> DRAFigures:
    """`pending`: DRA pods still unschedulable with their reasons (the filters' messages)."""
    from numalign.answer.dra_alignment import container_alignment

    verdicts: Counter[Verdict] = Counter()
    placed = 0
    map_order: list[str] = []
    for uid, (i, answer) in dra.placed.items():
        if uid not in bound:
            continue
        placed += 1
        sn = dra.state.nodes[i]
        pod = sn.pods[uid][0]
        if answer.map_order:
            map_order.append(f"pod {pod.key} on {sn.name}: {answer.map_order}")
        node = sn.node()
        by_claim = {pc.name: c.claim.key for pc, c in zip(pod.resource_claims, answer.claims, strict=True)}
        found: list[Verdict] = []
        for c in pod.all_containers():
            keys = {by_claim.get(ref.name) for ref in c.claims}
            devs = tuple(d for d in answer.devices if d.claim in keys)
            if not devs:
                continue
            alloc = node.allocation(uid, c.name)
            found.append(container_alignment(sn.pool.machine, c.name, devs, alloc).verdict)
        verdicts[worst(found)] += 1
    unschedulable: Counter[str] = Counter()
    why: Counter[str] = Counter()
    explained: dict[str, list[str]] = {}  # the claims' specs -> reasons: a workload's pods share them
    for pod, reason in pending:
        unschedulable[reason] += 1
        if CANNOT_ALLOCATE not in reason:
            continue
        spec = repr([(ref.resource_claim_template_name, c.spec) for ref, c in
                     zip(pod.resource_claims, claims_for_pod(pod, dra.objects), strict=False)])
        if spec not in explained:
            explained[spec] = dra.why(pod)
        why.update(explained[spec])
    return DRAFigures(pods, placed, dict(sorted(unschedulable.items())), verdicts[ALIGNED],
                      verdicts[NOT_ALIGNED], verdicts[NOTHING_PINNED], verdicts[UNKNOWN], dra.allocations,
                      dict(sorted(why.items())), len(map_order), map_order[0] if map_order else "")

