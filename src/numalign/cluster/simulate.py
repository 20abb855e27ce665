"""One simulation run: a workload's timeline played against a cluster by one scheduler, every chosen
node's kubelet (numalign) admitting or rejecting.

A pod the kubelet rejects fails with the kubelet's reason; its controller recreates it (a new pod,
new uid) and the scheduler places it again, up to `max_retries` times; then it counts as failed.
Pods no node passes the filters for stay pending; they are tried again after every deletion (the
scheduler's queue moves them back on cluster events) and count as unschedulable if still pending at
the end. Everything is a function of the inputs and the seed: same seed, same result.
"""

from __future__ import annotations

import contextlib
import gc
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from numalign.cluster.model import Cluster
from numalign.cluster.occupancy import numa_occupancy
from numalign.cluster.rejections import RejectionTally
from numalign.cluster.result import NUMAAlignment, ResourceFigures, RunConfig, RunResult
from numalign.cluster.schedulers import SCORING_STRATEGIES, DefaultScheduler, ExactScheduler
from numalign.cluster.state import ClusterState, PodVector
from numalign.cluster.workload import Placement, Workload
from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.previews import Previews
from numalign.k8s.qos import QOSClass, get_pod_qos

if TYPE_CHECKING:
    from numalign.cluster.dra import ClusterDRA

SCHEDULERS = ("default", "nrt", "exact")
SCORING = {
    "default": SCORING_STRATEGIES,
    "exact": (*SCORING_STRATEGIES, "LeastNUMANodes"),
    "nrt": ("LeastAllocated", "MostAllocated", "BalancedAllocation", "LeastNUMANodes"),
}
DEFAULT_MAX_RETRIES = 3


@dataclass(frozen=True)
class RunSpec:
    scheduler: str
    scoring: str = "LeastAllocated"
    kubelet_flags: tuple[tuple[str, str], ...] = ()
    kubelet_version: str | None = None  # X.Y[.Z] every pool runs; None: each pool its own
    previews: str | None = None  # NAME=VALUE items joined by ';' ('' none); None: each pool its own

    def __reduce__(self) -> tuple[type[RunSpec], tuple[object, ...]]:
        # Pickled as a constructor call (--jobs and --dask send runs to other processes): mypyc's compiled
        # class (scripts/setup) is otherwise restored field by field through the frozen __setattr__, which
        # refuses.
        return RunSpec, (self.scheduler, self.scoring, self.kubelet_flags, self.kubelet_version, self.previews)

    def cluster(self, cluster: Cluster) -> Cluster:
        """The cluster this run decides on: its kubelet flags, version and previews applied."""
        version = None
        if self.kubelet_version is not None:
            from numalign.k8s.version import resolve

            version = resolve(self.kubelet_version, "kubelet version axis")
        previews = None
        if self.previews is not None:
            previews = Previews.parse([p for p in self.previews.split(";") if p.strip()], "preview axis")
        return cluster.with_kubelet_flags(list(self.kubelet_flags)).with_kubelet_version(version, previews)

    def check(self, where: str) -> None:
        if self.scheduler not in SCHEDULERS:
            raise InvalidInputError(f"{where}: scheduler {self.scheduler!r}; expected one of {', '.join(SCHEDULERS)}")
        if self.scoring not in SCORING[self.scheduler]:
            raise InvalidInputError(f"{where}: scoring {self.scoring!r} is not a strategy of the {self.scheduler} "
                                    f"scheduler; expected one of {', '.join(SCORING[self.scheduler])}")


def make_scheduler(name: str, state: ClusterState, seed: int, scoring: str) -> DefaultScheduler:
    if name == "exact":
        return ExactScheduler(state, seed, scoring)
    if name == "nrt":
        from numalign.cluster.nrtmatch import NRTScheduler

        return NRTScheduler(state, seed, scoring)
    return DefaultScheduler(state, seed, scoring)


@dataclass
class _Pending:
    group: str
    pod: Pod
    placement: Placement
    attempt: int = 0


def run_one(cluster: Cluster, workload: Workload, spec: RunSpec, seed: int,
            max_retries: int = DEFAULT_MAX_RETRIES, progress: Callable[[int], None] | None = None) -> RunResult:
    with collector_paused():
        return _run(cluster, workload, spec, seed, max_retries, progress)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's full (oldest-generation) collections deferred for the run; the young ones go on.

    A run builds a heap of long-lived objects (a kubelet per node, each pod's state) that every full
    collection walks again: about a quarter of a 1,000-node run's CPU time. Turning the collector off
    altogether is not safe: the implicit hint search (5 or more NUMA nodes) and
    distribute-cpus-across-numa leave a reference cycle per call, which only the collector frees, so
    memory would grow with every admission and probe (about 40 KB an admission on epyc-nps4). Young
    collections free those cycles, since they die young; a full collection still runs after
    _FULL_COLLECTION_EVERY middle-generation collections, so even cycles that outlive them stay
    bounded. The thresholds are restored afterwards, on every path."""
    old = gc.get_threshold()
    gc.set_threshold(old[0], old[1], _FULL_COLLECTION_EVERY)
    try:
        yield
    finally:
        gc.set_threshold(*old)


# Default CPython runs a full collection after 10 collections of the middle generation (further
# limited to when the survivors grew by a quarter). 100,000 (about 700 million allocations) leaves none
# inside a run of 10,000 nodes x 200,000 pods, where 1,000 left one: 4.4 s of walking a 1.4 GB heap of
# live kubelets, with the same peak memory and as many cycles left at the end (docs/performance.md).
_FULL_COLLECTION_EVERY = 100_000


def _run(cluster: Cluster, workload: Workload, spec: RunSpec, seed: int, max_retries: int,
         progress: Callable[[int], None] | None) -> RunResult:
    cluster = spec.cluster(cluster)
    extra = {r for g in workload.groups for p in g.pods for c in p.all_containers() for r in c.requests}
    state = ClusterState(cluster, extra)
    sched = make_scheduler(spec.scheduler, state, seed, spec.scoring)
    bound: dict[str, tuple[int, str]] = {}  # uid -> (node, group)
    queue: deque[_Pending] = deque()
    waiting: dict[str, tuple[_Pending, str]] = {}  # uid -> (pod, reason) for unschedulable pods
    rejections: Counter[str] = Counter()
    messages = RejectionTally()  # one message per reason for the report, bounded (cluster/rejections.py)
    rejected_pods: set[str] = set()
    gave_up: list[_Pending] = []
    retries = failed = deleted = done = 0
    created = 0
    preexisting, preexisting_rejected = bind_preexisting(state, workload.bound, bound)
    # The DynamicResources plugin's filter and Reserve, for pods with claims (None: no pod has any). Its
    # module (the structured allocator, CEL, the DRA types) is imported only then: 0.15-0.2 s of a run.
    dra: ClusterDRA | None = None
    pods = [p for g in workload.groups for p in g.pods]
    if any(p.resource_claims for p in pods):
        from numalign.cluster.dra import ClusterDRA

        dra = ClusterDRA.for_run(state, pods, workload.dra, {p.name: p.dra_slices for p in cluster.pools})

    def schedule() -> None:
        nonlocal retries, failed, done
        while queue:
            item = queue.popleft()
            pod = item.pod
            pv = state.vector(pod)
            mask = state.placement_mask(item.placement)
            dra_failures = None
            if dra is not None and pod.resource_claims:
                dra_ok, dra_failures = dra.mask(pod, mask)
                mask = mask & dra_ok
            sel = sched.select(pod, pv, mask)
            if sel.node is None:
                if dra_failures is None:
                    reasons = sel.reasons
                else:
                    from numalign.cluster.dra import reasons_with_dra

                    reasons = reasons_with_dra(sel.reasons, dra_failures)
                waiting[pod.uid] = (item, ", ".join(sorted(reasons)) or "no nodes")
                continue
            if dra is not None and pod.resource_claims:
                dra.before_admit(sel.node, pod)  # the preview dra-topology-hints only
            rec = state.admit(sel.node, pod, pv)
            if rec.result.admit:
                if dra is not None and pod.resource_claims:
                    dra.commit(sel.node, pod)
                bound[pod.uid] = (sel.node, item.group)
                done += 1
                if progress is not None:
                    progress(done)
                continue
            rejections[rec.result.reason] += 1
            messages.add(rec.result.reason, rec.result.message, state.nodes[sel.node].name, pod.key)
            rejected_pods.add(_origin(item))
            if item.attempt >= max_retries:
                failed += 1
                gave_up.append(item)
                continue
            retries += 1
            again = pod.with_identity(name=f"{_origin_name(item)}-r{item.attempt + 1}",
                                      uid=f"{_origin(item)}-r{item.attempt + 1}")
            queue.append(_Pending(item.group, again, item.placement, item.attempt + 1))

    for event in workload.timeline():
        group = workload.group(event.name)
        assert group is not None
        if event.op == "create":
            for pod in group.pods:
                created += 1
                queue.append(_Pending(group.name, pod, group.placement))
        else:
            for uid, (node, g) in list(bound.items()):
                if g == group.name:
                    if dra is not None:
                        dra.release(node, uid)
                    state.remove(node, uid)
                    del bound[uid]
                    deleted += 1
            for uid, (item, _reason) in list(waiting.items()):
                if item.group == group.name:
                    del waiting[uid]
                    deleted += 1
            # Cluster events move unschedulable pods back to the active queue.
            for uid in list(waiting):
                queue.append(waiting.pop(uid)[0])
        schedule()
    reasons = Counter(reason for _item, reason in waiting.values())
    # Stranded capacity is measured against every pod shape of the workload, whatever is left pending:
    # the same yardstick for every run, so schedulers compare (see _resources).
    shapes = [(p, g.placement) for g in workload.groups for p in g.pods]
    # Before _resources: its stranded-capacity probes admit and release workload shapes on the nodes.
    dra_figures = None if dra is None else _dra_figures(dra, workload, bound, waiting)
    occupancy = numa_occupancy(state)
    return RunResult(
        config=_run_config(spec, cluster),
        pods=created,
        placed=len(bound) - preexisting,  # the workload's pods; a dump's running pods are counted apart
        unschedulable=len(waiting),
        unschedulable_reasons=dict(sorted(reasons.items())),
        kubelet_rejections=dict(sorted(rejections.items())),
        rejection_examples=messages.examples(),
        rejected_pods=len(rejected_pods),
        retries=retries,
        failed=failed,
        deleted=deleted,
        alignment=_alignment(state, bound),
        resources=_resources(state, shapes),
        preexisting=preexisting,
        preexisting_rejected=preexisting_rejected,
        numa_occupancy=occupancy,
        dra=dra_figures,
    )


def bind_preexisting(state: ClusterState, pods: list[tuple[str, Pod]],
                     bound: dict[str, tuple[int, str]] | None = None) -> tuple[int, int]:
    """Admit a dump's running pods on their nodes, in order: (admitted, rejected)."""
    index = {sn.name: sn.index for sn in state.nodes}
    admitted = rejected = 0
    for node, pod in pods:
        i = index[node]
        rec = state.admit(i, pod, state.vector(pod))
        if rec.result.admit:
            admitted += 1
            if bound is not None:
                bound[pod.uid] = (i, "")
        else:
            rejected += 1
    return admitted, rejected


def _origin(item: _Pending) -> str:
    return item.pod.uid.rsplit("-r", 1)[0] if item.attempt else item.pod.uid


def _origin_name(item: _Pending) -> str:
    return item.pod.name.rsplit("-r", 1)[0] if item.attempt else item.pod.name


def per_pool(values: list[str]) -> str:
    """One setting over the pools: its value when they share it, else each distinct value in pool order
    joined by "|" (a mixed cluster's run is not labelled with its first pool's settings)."""
    return "|".join(dict.fromkeys(values))


def _options(values: list[dict[str, str]]) -> dict[str, str]:
    keys = dict.fromkeys(k for v in values for k in sorted(v))
    return {k: per_pool([v.get(k, "-") for v in values]) for k in keys}


def _run_config(spec: RunSpec, cluster: Cluster) -> RunConfig:
    configs = [p.config for p in cluster.pools]
    previews: dict[str, str] = {}
    for p in cluster.pools:
        previews.update(p.previews.to_dict())
    return RunConfig(spec.scheduler, spec.scoring, per_pool([c.topology_manager_policy for c in configs]),
                     per_pool([c.topology_manager_scope for c in configs]),
                     _options([dict(c.topology_manager_policy_options) for c in configs]),
                     per_pool([c.cpu_manager_policy for c in configs]),
                     _options([dict(c.cpu_manager_policy_options) for c in configs]),
                     per_pool([c.memory_manager_policy for c in configs]),
                     cluster.versions(), previews, spec.kubelet_version is not None)


def _alignment(state: ClusterState, bound: dict[str, tuple[int, str]]) -> NUMAAlignment:
    from numalign.cluster.fewest import fewest_numa_nodes, needs, zone_allocatable

    hist: Counter[int] = Counter()
    guaranteed = single = fewest = 0
    zones_of: dict[str, list[dict[str, int]]] = {}
    least: dict[tuple[str, tuple[object, ...]], int] = {}
    # A CPU set's NUMA nodes, per set: every container in the shared pool holds the same large set (the
    # CPU manager hands out its pool object until an exclusive allocation changes it), so it is read once.
    numa_of_set: dict[int, tuple[frozenset[int], frozenset[int]]] = {}
    for uid, (i, _g) in bound.items():
        sn = state.nodes[i]
        pod = sn.pods[uid][0]
        if get_pod_qos(pod) is not QOSClass.GUARANTEED:
            continue
        guaranteed += 1
        # What the kubelet placed for the pod (its exclusive CPUs, memory and devices), read at its
        # admission (ClusterState._note_held); every NUMA node it uses adds the shared pool's as it is now.
        pinned, shared = state.held[uid]
        numa = pinned
        if shared:
            node = sn.node()
            cpu_numa = state.cpu_numa(sn)
            pool: set[int] = set()
            for c in pod.all_containers():
                if node.cpu.get_cpu_set(uid, c.name) is not None:
                    continue
                held = node.cpu.cpus_for_container(uid, c.name)
                known = numa_of_set.get(id(held))
                if known is None or known[0] is not held:
                    if len(numa_of_set) > 4096:
                        numa_of_set.clear()
                    known = (held, frozenset(cpu_numa[cpu] for cpu in held if cpu in cpu_numa))
                    numa_of_set[id(held)] = known
                pool.update(known[1])
            numa = pinned | pool
        hist[len(numa)] += 1
        single += len(numa) == 1
        key = (sn.pool.name, sn.pods[uid][1].key)
        if key not in least:
            if sn.pool.name not in zones_of:
                zones_of[sn.pool.name] = zone_allocatable(sn.pool.new_node())
            least[key] = fewest_numa_nodes(zones_of[sn.pool.name], needs(pod))
        # A pod needing no NUMA-bound resource is on the fewest possible wherever it runs.
        fewest += least[key] == 0 or len(pinned) <= least[key]
    return NUMAAlignment(guaranteed, single, dict(sorted(hist.items())), fewest)


def _resources(state: ClusterState, shapes: list[tuple[Pod, Placement]]) -> dict[str, ResourceFigures]:
    """Per resource: allocatable, requested, and stranded: the free amount (allocatable less requests)
    on nodes whose kubelet, in the end state, would admit no pod shape of the workload (each shape
    with its tolerations and node selector, passing the scheduler's fit check and the kubelet's
    admission). Capacity no pod of this workload could use; the same shapes for every run."""
    usable = np.zeros(len(state.nodes), dtype=np.bool_)
    vectors: list[tuple[Pod, PodVector, Placement]] = []
    seen = set()
    for pod, placement in shapes:
        pv = state.vector(pod)
        if (pv.key, placement) not in seen:
            seen.add((pv.key, placement))
            vectors.append((pod, pv, placement))
    for pod, pv, placement in vectors:
        fits = state.fit_mask(pv) & state.placement_mask(placement) & ~usable
        # The shape under a uid no pod has: a probe admits and then releases its pod, and releasing a
        # bound pod's own uid would release that pod's CPUs, memory and devices.
        shape = pod.with_identity(uid=f"stranded-probe-{len(seen)}-{pod.uid}")
        for i in np.nonzero(fits)[0]:
            if state.probe(int(i), shape, pv)[0]:
                usable[i] = True
    free = state.alloc - state.requested
    out = {}
    for r, name in enumerate(state.resources):
        alloc = int(state.alloc[:, r].sum())
        if alloc == 0:
            continue
        out[name] = ResourceFigures(alloc, int(state.requested[:, r].sum()), int(free[~usable, r].sum()))
    return out


def _dra_figures(dra: Any, workload: Workload, bound: dict[str, tuple[int, str]],
                 waiting: dict[str, tuple[_Pending, str]]) -> Any:
    from numalign.cluster.dra import figures

    pods = sum(1 for g in workload.groups for p in g.pods if p.resource_claims)
    pending = [(item.pod, reason) for item, reason in waiting.values() if item.pod.resource_claims]
    return figures(dra, pods, bound, pending)
