"""How many more copies of a pod fit: NUMA-exact (each node's kubelet admits copy after copy until it
rejects one or the scheduler's fit check fails) beside the topology-unaware count (free requests
divided by the pod's requests, the way cluster-capacity and a sum of requests count), per node pool.

Nodes in the same state (every empty node of a pool) are counted once: a copy's admission depends
only on the node's state, so the answer is shared.

A claim the pod names (resourceClaimName) is one object every copy shares: it is allocated once, as the
scheduler allocates it for the first copy (or as the input's status.allocation has it), and copies are
counted only on the nodes that allocation reaches; elsewhere the DynamicResources filter says
"resourceclaim not available on the node". Claims made from a template are each copy's own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from numalign.cluster.model import Cluster
from numalign.cluster.state import ClusterState
from numalign.cluster.workload import Placement
from numalign.k8s.pod import Pod


@dataclass(frozen=True)
class PoolCapacity:
    pool: str
    nodes: int
    exact: int  # copies numalign's admission accepts, summed over the pool's nodes
    by_requests: int  # copies the topology-unaware sum of requests allows
    limited_by: dict[str, int]  # what stopped the exact count: reason -> nodes
    kubelet_version: str = ""  # the version the pool's kubelets decided as
    previews: dict[str, str] = dataclasses.field(default_factory=dict)  # previews on (kubelet/previews)
    # where DRA stopped the count with "cannot allocate all claims": why (scheduler/dra/explain.py, the
    # reasons `admit` gives), each reason with its number of nodes
    why: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SharedClaimPin:
    """A claim the copies share (resourceClaimName) and the nodes its one allocation pins them to.
    `allocated`: "input" (its status.allocation), "firstCopy" (allocated for the first copy on `node`, as
    the scheduler would) or "none" (no node takes the first copy: nothing pinned). `nodes`: the nodes the
    allocation reaches, in the cluster's order; None: every node (no node selector)."""

    claim: str
    allocated: str
    node: str = ""
    devices: tuple[str, ...] = ()
    nodes: tuple[str, ...] | None = ()

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "allocated": self.allocated, **({"node": self.node} if self.node else {}),
                "devices": list(self.devices), "everyNode": self.nodes is None,
                **({"nodes": list(self.nodes)} if self.nodes is not None else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SharedClaimPin:
        return cls(d["claim"], d["allocated"], d.get("node", ""), tuple(d["devices"]),
                   None if d["everyNode"] else tuple(d.get("nodes", ())))

    def text(self) -> str:
        """One line: how the claim was allocated and where it pins the copies."""
        if self.allocated == "none":
            return (f"shared claim {self.claim}: every copy shares it, but no node takes the first copy (the "
                    "claim allocated and the copy admitted): nothing fits (LIMITED BY says why)")
        how = ("allocated in the input (status.allocation)" if self.allocated == "input" else
               f"allocated once, for the first copy, on {self.node}")
        devices = f" ({', '.join(self.devices)})" if self.devices else ""
        if self.nodes is None:
            where = "available on every node"
        elif not self.nodes:
            where = "its node selector reaches no node of the cluster: no copy fits"
        else:
            shown = ", ".join(self.nodes[:8]) + (f" and {len(self.nodes) - 8} more" if len(self.nodes) > 8 else "")
            where = f"pins every copy to {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}: {shown}"
        return f"shared claim {self.claim}: {how}{devices}; {where}"


@dataclass(frozen=True)
class CapacityCount:
    pools: list[PoolCapacity]
    shared: tuple[SharedClaimPin, ...] = ()


def node_capacity(state: ClusterState, i: int, pod: Pod, dra: Any = None) -> tuple[int, int, str, tuple[str, ...]]:
    """(exact copies, copies by requests, what stopped the exact count, and where that is the allocator's
    "cannot allocate all claims" why, as explained for the node as the copies left it) for node i; the
    node is left as it was."""
    pv = state.vector(pod)
    free = state.alloc[i] - state.requested[i]
    by_requests = int(state.max_pods[i] - state.pod_count[i])
    limit = "Too many pods"
    for c in range(len(pv.vec)):
        if pv.vec[c] > 0:
            n = int(free[c] // pv.vec[c])
            if n < by_requests:
                by_requests, limit = n, f"Insufficient {state.resources[c]}"
    by_requests = max(by_requests, 0)
    placed: list[str] = []
    reason = limit
    why: tuple[str, ...] = ()
    try:
        for k in range(by_requests):
            copy = dataclasses.replace(pod, name=f"{pod.name}-copy-{k}", uid=f"{pod.uid}-copy-{k}")
            if dra is not None:  # the DynamicResources filter: the copy's claims must be allocatable here
                only = np.zeros(len(state.nodes), dtype=np.bool_)
                only[i] = True
                ok, failures = dra.mask(copy, only)
                if not ok[i]:
                    from numalign.scheduler.dra.api import CANNOT_ALLOCATE

                    reason = next(iter(failures), CANNOT_ALLOCATE)
                    if reason == CANNOT_ALLOCATE:
                        why = tuple(dra.why_on(i, copy))
                    break
                dra.before_admit(i, copy)  # the preview dra-topology-hints only
            rec = state.admit(i, copy, pv)
            if not rec.result.admit:
                reason = rec.result.reason or "rejected"
                break
            if dra is not None:
                dra.commit(i, copy)
            placed.append(copy.uid)
    finally:
        for uid in reversed(placed):
            if dra is not None:
                dra.release(i, uid)
            state.remove(i, uid)
    return len(placed), by_requests, reason, why


def capacity(cluster: Cluster, pod: Pod, placement: Placement | None = None,
             running: list[tuple[str, Pod]] | None = None, dra_objects: Any = None) -> list[PoolCapacity]:
    """Per pool (count_capacity's pools)."""
    return count_capacity(cluster, pod, placement, running, dra_objects).pools


def count_capacity(cluster: Cluster, pod: Pod, placement: Placement | None = None,
                   running: list[tuple[str, Pod]] | None = None, dra_objects: Any = None) -> CapacityCount:
    """Per pool; `running` pods (node name, pod) are bound first, as a cluster dump has them. A pod with
    ResourceClaims (their classes and templates in `dra_objects`) also needs its claims allocated on the
    node, copy after copy (cluster/dra.py); a claim it names is allocated once for all copies (`shared`)."""
    from numalign.cluster.dra import ClusterDRA
    from numalign.cluster.simulate import bind_preexisting

    placement = placement or Placement()
    state = ClusterState(cluster, pod_resources(pod))
    bind_preexisting(state, running or [])
    mask = state.placement_mask(placement)
    dra = ClusterDRA.for_run(state, [pod], dra_objects, {p.name: p.dra_slices for p in cluster.pools})
    shared: tuple[SharedClaimPin, ...] = ()
    reach: frozenset[int] | None = None
    if dra is not None and any(pc.resource_claim_name for pc in pod.resource_claims):
        shared = _pin_shared(state, dra, pod, mask)
        reach = dra.claims(pod)[2]
    memo: dict[tuple[int, bool], tuple[int, int, str, tuple[str, ...]]] = {}
    out = []
    for pool in cluster.pools:
        exact = by_req = 0
        limited: dict[str, int] = {}
        why: dict[str, int] = {}
        for sn in (n for n in state.nodes if n.pool is pool):
            if not mask[sn.index]:
                limited["untolerated taint or node selector"] = limited.get("untolerated taint or node selector", 0) + 1
                continue
            # A shared claim's reach splits nodes of one state: those it reaches and those it does not.
            key = (sn.state, reach is None or sn.index in reach)
            got = memo.get(key)
            if got is None:
                got = node_capacity(state, sn.index, pod, dra)
                memo[key] = got
            exact += got[0]
            by_req += got[1]
            limited[got[2]] = limited.get(got[2], 0) + 1
            for reason in got[3]:
                why[reason] = why.get(reason, 0) + 1
        out.append(PoolCapacity(pool.name, pool.count, exact, by_req, dict(sorted(limited.items())),
                                str(pool.version), pool.previews.to_dict(), why))
    return CapacityCount(out, shared)


def _pin_shared(state: ClusterState, dra: Any, pod: Pod, mask: np.ndarray[Any, Any]) -> tuple[SharedClaimPin, ...]:
    """Allocate the claims the pod names and nobody allocated yet, as kube-scheduler's default profile would
    for the first copy (its filters, DynamicResources included, its scores, ties broken by seed 1): the
    claims are allocated on the node it picks. Where that node's kubelet rejects the copy, no pod reserves
    the claims, so the resource claim controller deallocates them and the next copy is scheduled anew: the
    next pick, past every node in the same state. Then, per named claim, what pins the copies."""
    from numalign.cluster.dra import STAND_IN
    from numalign.cluster.schedulers import DefaultScheduler

    named = [f"{pod.namespace}/{pc.resource_claim_name}" for pc in pod.resource_claims if pc.resource_claim_name]
    dra.claims(pod)  # the input's allocated claims are shared from here on
    first = dataclasses.replace(pod, name=f"{pod.name}-copy-0", uid=f"{pod.uid}-copy-0")
    if any(key not in dra.shared for key in named):
        sched = DefaultScheduler(state, 1)
        pv = state.vector(first)
        left = mask.copy()
        while left.any():
            ok, _failures = dra.mask(first, left)
            sel = sched.select(first, pv, left & ok)
            if sel.node is None:
                break
            i = sel.node
            dra.before_admit(i, first)  # the preview dra-topology-hints only
            rec = state.admit(i, first, pv)
            if rec.result.admit:
                state.remove(i, first.uid)
                dra.allocate_shared(i, first)
                break
            same = state.nodes[i].state
            for sn in state.nodes:
                if sn.state == same:
                    left[sn.index] = False
    out = []
    for key in named:
        sc = dra.shared.get(key)
        if sc is None:
            out.append(SharedClaimPin(key, "none"))
            continue
        node = "" if sc.node is None else state.nodes[sc.node].name
        devices = tuple(f"{r.driver}/{node if r.pool == STAND_IN else r.pool}/{r.device}"
                        for r in sc.allocation.results)
        nodes = None if sc.reach is None else tuple(sn.name for sn in state.nodes if sn.index in sc.reach)
        out.append(SharedClaimPin(key, "input" if sc.node is None else "firstCopy", node, devices, nodes))
    return tuple(out)


def pod_resources(pod: Pod) -> set[str]:
    return {r for c in pod.all_containers() for r in (*c.requests, *c.limits)}
