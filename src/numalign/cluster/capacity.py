"""How many more copies of a pod fit: NUMA-exact (each node's kubelet admits copy after copy until it
rejects one or the scheduler's fit check fails) beside the topology-unaware count (free requests
divided by the pod's requests, the way cluster-capacity and a sum of requests count), per node pool.

Nodes in the same state (every empty node of a pool) are counted once: a copy's admission depends
only on the node's state, so the answer is shared.
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
    """Per pool; `running` pods (node name, pod) are bound first, as a cluster dump has them. A pod with
    ResourceClaims (their classes and templates in `dra_objects`) also needs its claims allocated on the
    node, copy after copy (cluster/dra.py)."""
    from numalign.cluster.dra import ClusterDRA
    from numalign.cluster.simulate import bind_preexisting

    placement = placement or Placement()
    state = ClusterState(cluster, pod_resources(pod))
    bind_preexisting(state, running or [])
    mask = state.placement_mask(placement)
    dra = ClusterDRA.for_run(state, [pod], dra_objects, {p.name: p.dra_slices for p in cluster.pools})
    memo: dict[int, tuple[int, int, str, tuple[str, ...]]] = {}
    out = []
    for pool in cluster.pools:
        exact = by_req = 0
        limited: dict[str, int] = {}
        why: dict[str, int] = {}
        for sn in (n for n in state.nodes if n.pool is pool):
            if not mask[sn.index]:
                limited["untolerated taint or node selector"] = limited.get("untolerated taint or node selector", 0) + 1
                continue
            key = sn.state
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
    return out


def pod_resources(pod: Pod) -> set[str]:
    return {r for c in pod.all_containers() for r in (*c.requests, *c.limits)}
