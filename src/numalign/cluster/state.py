"""The simulated cluster: every node's kubelet (a numalign Node) and the scheduler's cache of it.

The scheduler side is kept as numpy arrays (nodes x resources: allocatable, requested, the non-zero
requested cpu and memory the scorers use, pod counts) so a filter or score over a thousand nodes is a
handful of vector operations. The kubelet side is one Node per simulated node, built lazily: a node no
pod ever reaches costs only its row in the arrays.

Probes ("would this node's kubelet admit this pod now?", for the exact scheduler and for stranded
capacity) are the kubelet's admission, released again (Node.probe). Their answers are cached
per (node state, pod shape): a node's state is named by a hash chain over what was bound to and
removed from it, so nodes of one pool that went through the same history share answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from numalign.cluster.model import Cluster, NodePool
from numalign.cluster.resources import node_allocatable, non_zero_requests, pod_shape
from numalign.cluster.workload import Placement
from numalign.core.decision import DecisionRecord
from numalign.k8s.pod import Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY
from numalign.kubelet.admission.predicate import fit_requests
from numalign.kubelet.node import Node

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class PodVector:
    """A pod shape as the scheduler reads it."""

    key: tuple[object, ...]
    requests: dict[str, int]
    non_zero: tuple[int, int]
    vec: IntArray  # requests by resource index
    zero: bool  # requests nothing at all (NodeResourcesFit then checks only the pod count)
    # What the scheduler derives from the shape once (`cols`, schedulers._needs): a field rather than
    # entries in the instance __dict__, which a class compiled by mypyc (scripts/setup) does not have.
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def amounts(self) -> tuple[tuple[int, int], ...]:
        """(resource index, amount) of every resource the pod requests, as Python numbers (memoised)."""
        found: tuple[tuple[int, int], ...] | None = self.derived.get("amounts")
        if found is None:
            vec = self.vec.tolist()
            found = self.derived["amounts"] = tuple((c, vec[c]) for c in self.cols.tolist())
        return found

    @property
    def cols(self) -> IntArray:
        """The resource indices the pod requests (memoised: the filter reads them for every pod)."""
        found: IntArray | None = self.derived.get("cols")
        if found is None:
            found = self.derived["cols"] = np.flatnonzero(self.vec)
        return found


@dataclass
class SimNode:
    name: str
    pool: NodePool
    index: int
    kubelet: Node | None = None
    pods: dict[str, tuple[Pod, PodVector]] = field(default_factory=dict)
    state: int = 0  # hash chain naming the kubelet state (see module doc)

    def node(self) -> Node:
        if self.kubelet is None:
            self.kubelet = self.pool.new_node()
        return self.kubelet


class ClusterState:
    def __init__(self, cluster: Cluster, extra_resources: Iterable[str] = ()) -> None:
        self.cluster = cluster
        self.nodes: list[SimNode] = []
        allocs: list[dict[str, int]] = []
        for pool in cluster.pools:
            alloc = node_allocatable(pool.machine, pool.config)
            for name in pool.node_names():
                self.nodes.append(SimNode(name, pool, len(self.nodes), state=hash(pool.name)))
                allocs.append(alloc)
        names = {r for a in allocs for r in a} | set(extra_resources)
        names -= {RESOURCE_CPU, RESOURCE_MEMORY}
        self.resources = [RESOURCE_CPU, RESOURCE_MEMORY, *sorted(names)]
        self.index = {r: i for i, r in enumerate(self.resources)}
        n, r = len(self.nodes), len(self.resources)
        self.alloc: IntArray = np.zeros((n, r), dtype=np.int64)
        for i, a in enumerate(allocs):
            for name, v in a.items():
                self.alloc[i, self.index[name]] = v
        self.requested: IntArray = np.zeros((n, r), dtype=np.int64)
        self.non_zero: IntArray = np.zeros((n, 2), dtype=np.int64)
        self.pod_count: IntArray = np.zeros(n, dtype=np.int64)
        self.max_pods: IntArray = np.array([sn.pool.max_pods for sn in self.nodes], dtype=np.int64)
        # The same amounts per node as Python numbers, kept beside the arrays, for readers of one node at a
        # time (the schedulers' per-node updates, schedulers._update_rows): numpy's per-element reads cost more
        # than the arithmetic done with them. Both change together, in admit, remove and _add_resource only.
        self.alloc_of: list[list[int]] = self.alloc.tolist()
        self.requested_of: list[list[int]] = self.requested.tolist()
        self.non_zero_of: list[list[int]] = self.non_zero.tolist()
        self.pods_of: list[int] = self.pod_count.tolist()
        self.max_pods_of: list[int] = self.max_pods.tolist()
        self._vectors: dict[tuple[object, ...], PodVector] = {}
        self._placement_masks: dict[Placement, BoolArray] = {}
        self._probes: dict[tuple[int, tuple[object, ...]], tuple[bool, int, int]] = {}
        # Per pod shape, the probe answers of every node as arrays (valid, admitted, NUMA nodes), so the
        # exact filter reads a thousand cached answers in one vector operation.
        self._answers: dict[tuple[object, ...], tuple[BoolArray, BoolArray, IntArray]] = {}
        # For the kubelet's answers: the NUMA nodes each cached admission depends on (see _changed).
        self._needs: dict[tuple[object, ...], npt.NDArray[np.object_]] = {}
        self._cpu_numa: dict[str, dict[int, int]] = {}
        # Per bound Guaranteed pod: the NUMA nodes of its exclusive CPUs, memory and devices, and whether
        # a container of it runs in the shared pool (_note_held; the NUMA alignment report reads them).
        self.held: dict[str, tuple[frozenset[int], bool]] = {}
        self._held_answers: dict[tuple[frozenset[int], bool], tuple[frozenset[int], bool]] = {}
        self.probe_count = 0
        # The nodes whose requested amounts or pod count changed (admit, remove), in order, and a count
        # of resource columns added: what a scheduler's per-shape filter and scores need to recompute.
        self.changes: list[int] = []
        self.columns_added = 0

    # -- pods as the scheduler sees them --------------------------------------------------------------
    def vector(self, pod: Pod) -> PodVector:
        key = pod_shape(pod)
        pv = self._vectors.get(key)
        if pv is None:
            req = fit_requests(pod)
            vec = np.zeros(len(self.resources), dtype=np.int64)
            for name in req:
                if name not in self.index:
                    self._add_resource(name)
                    vec = np.zeros(len(self.resources), dtype=np.int64)
            for name, v in req.items():
                vec[self.index[name]] = v
            pv = PodVector(key, req, non_zero_requests(pod), vec, not req)
            self._vectors[key] = pv
        return pv

    def _add_resource(self, name: str) -> None:
        """A resource no node has (an unknown extended resource): every node has 0 of it."""
        self.index[name] = len(self.resources)
        self.resources.append(name)
        zeros = np.zeros((len(self.nodes), 1), dtype=np.int64)
        self.alloc = np.hstack([self.alloc, zeros])
        self.requested = np.hstack([self.requested, zeros])
        for rows in (self.alloc_of, self.requested_of):
            for row in rows:
                row.append(0)
        self.columns_added += 1
        self._vectors = {k: PodVector(v.key, v.requests, v.non_zero, np.append(v.vec, 0), v.zero)
                         for k, v in self._vectors.items()}

    def placement_mask(self, placement: Placement) -> BoolArray:
        """TaintToleration (NoSchedule, NoExecute) and NodeSelector filters; static per node."""
        mask = self._placement_masks.get(placement)
        if mask is None:
            ok = []
            for sn in self.nodes:
                labels = sn.pool.labels
                fits = all(labels.get(k) == v for k, v in placement.node_selector)
                for t in sn.pool.taints:
                    if t.effect == "PreferNoSchedule":
                        continue
                    if not any(_tolerates(tol, t.key, t.value, t.effect) for tol in placement.tolerations):
                        fits = False
                ok.append(fits)
            mask = np.array(ok, dtype=np.bool_)
            self._placement_masks[placement] = mask
        return mask

    def fit_mask(self, pv: PodVector, rows: IntArray | None = None) -> BoolArray:
        """NodeResourcesFit's filter over every node (or over the given rows only)."""
        if rows is None:
            alloc, requested, count, limit = self.alloc, self.requested, self.pod_count, self.max_pods
        else:
            alloc, requested, count, limit = self.alloc[rows], self.requested[rows], self.pod_count[rows], \
                self.max_pods[rows]
        ok: BoolArray = count + 1 <= limit
        if pv.zero:
            return ok
        cols = pv.cols
        if len(cols) == 1:
            c = int(cols[0])
            single: BoolArray = ok & (alloc[:, c] - requested[:, c] >= pv.vec[c])
            return single
        free = alloc[:, cols] - requested[:, cols]
        result: BoolArray = ok & np.all(free >= pv.vec[cols], axis=1)
        return result

    def insufficient(self, pv: PodVector, candidates: BoolArray) -> dict[str, int]:
        """Per reason, how many nodes fail (the scheduler's "0/N nodes are available" message)."""
        out: dict[str, int] = {}
        too_many = int(np.count_nonzero(self.pod_count + 1 > self.max_pods))
        if too_many:
            out["Too many pods"] = too_many
        if not pv.zero:
            for c in np.nonzero(pv.vec)[0]:
                short = int(np.count_nonzero(self.alloc[:, c] - self.requested[:, c] < pv.vec[c]))
                if short:
                    out[f"Insufficient {self.resources[c]}"] = short
        untolerated = int(np.count_nonzero(~candidates))
        if untolerated:
            out["node(s) didn't match Pod's node affinity/selector or had untolerated taint"] = untolerated
        return out

    # -- the kubelet ------------------------------------------------------------------------------
    def admit(self, i: int, pod: Pod, pv: PodVector) -> DecisionRecord:
        """The chosen node's kubelet admits or rejects; an admitted pod is bound there."""
        sn = self.nodes[i]
        rec = sn.node().admit(pod, allocations=False)  # the verdict is read; allocation() answers the rest
        if rec.result.admit:
            sn.pods[pod.uid] = (pod, pv)
            self._count(i, pv, 1)
            self.changes.append(i)
            sn.state = hash((sn.state, "+", pv.key))
            guaranteed = get_pod_qos(pod) is QOSClass.GUARANTEED
            if guaranteed or self._answers:
                footprint = self._note_held(sn, pod, guaranteed)
                if self._answers:  # only the exact and nrt schedulers keep answers to invalidate
                    self._changed(i, footprint)
        return rec

    def _count(self, i: int, pv: PodVector, sign: int) -> None:
        """Node i's requested amounts and pod count with the pod added (sign 1) or taken off (-1), in the
        arrays and in their Python copies."""
        if sign > 0:
            self.requested[i] += pv.vec
        else:
            self.requested[i] -= pv.vec
        self.non_zero[i, 0] += sign * pv.non_zero[0]
        self.non_zero[i, 1] += sign * pv.non_zero[1]
        self.pod_count[i] += sign
        row = self.requested_of[i]
        for c, amount in pv.amounts:
            row[c] += sign * amount
        row = self.non_zero_of[i]
        row[0] += sign * pv.non_zero[0]
        row[1] += sign * pv.non_zero[1]
        self.pods_of[i] += sign

    def _note_held(self, sn: SimNode, pod: Pod, guaranteed: bool) -> int:
        """What the admitted pod holds on its node, read once at its admission: the NUMA nodes whose
        kubelet-side state it changed (its footprint, returned: its exclusive CPUs, memory blocks and
        devices; -1: all of them, for a device without NUMA affinity; a pod in the shared pool with none
        of those changes no provider's state at all) and, for a Guaranteed pod, what the NUMA alignment
        report reads (`held`). What a pod holds stays as its admission left it until it is removed (the
        regular init containers' memory is given back when the pod's containers start, inside the
        admission), so the report at the end of the run reads the same as it would from the managers
        then, less the shared pool, which changes with every exclusive allocation and is read then."""
        node = sn.node()
        cpu_numa = self.cpu_numa(sn)
        # Read from the managers directly, not through Node.allocation: that builds the container's
        # whole answer (sorted CPU ids, block and device records) for the three sets read here.
        mask = 0
        no_topology = shared = False
        pinned: set[int] = set()  # the NUMA ids, -1 included, of what the kubelet placed for the pod
        uid = pod.uid
        for c in pod.all_containers():
            exclusive = node.cpu.get_cpu_set(uid, c.name)
            if exclusive is None:
                shared = True
            else:
                for cpu in exclusive:
                    if cpu in cpu_numa:
                        pinned.add(cpu_numa[cpu])
            for block in node.memory.get_memory(uid, c.name) or ():
                pinned.update(block.numa_affinity)
            for ids in (node.devices.get_container_devices(uid, c.name) or {}).values():
                for dev in ids.values():
                    if dev.topology is None:
                        no_topology = True
                    else:
                        pinned.update(dev.topology)
        for n in pinned:
            mask |= _bit(n)
        if guaranteed:
            # Few distinct answers (one NUMA node or a few, shared pool or not): one object each, so
            # 200,000 pods hold 200,000 references rather than as many sets.
            answer = (frozenset(pinned), shared)
            self.held[uid] = self._held_answers.setdefault(answer, answer)
        return -1 if no_topology else mask

    def cpu_numa(self, sn: SimNode) -> dict[int, int]:
        """Each CPU's NUMA node on the node's pool's machine (as its kubelet sees it)."""
        cpu_numa = self._cpu_numa.get(sn.pool.name)
        if cpu_numa is None:
            cpu_numa = {c.id: c.numa_node for c in sn.node().machine.cpus if c.numa_node is not None}
            self._cpu_numa[sn.pool.name] = cpu_numa
        return cpu_numa

    def _changed(self, i: int, footprint: int = -1) -> None:
        """Invalidate node i's cached answers the change can affect.

        After a removal (footprint -1) everything is asked again. After an admission with footprint F:
        * a cached rejection stands: adding a pod only takes resources away, and hint providers offer
          a subset of their earlier hints (preferred-ness does not depend on the state), so a pod the
          Topology Manager refused stays refused;
        * a cached admission under restricted or single-numa-node stands when F is disjoint from the
          NUMA nodes of its merged hint: those nodes' CPUs, memory and devices are as they were, and
          the merged hint was the best one before and is still available (other policies record all
          NUMA nodes, so any change asks again);
        * a cached admission no provider gave a hint for (a Burstable pod without devices) relied on no
          NUMA node (its needs are 0, see _ask): it stands after any admission;
        * other answers (the nrt filter's) stand only when F is empty.
        """
        for key, (valid, ok, _value) in self._answers.items():
            if not valid[i]:
                continue
            if footprint == -1:
                valid[i] = False
                continue
            needs = self._needs.get(key)
            if needs is None:
                if footprint:
                    valid[i] = False
            elif ok[i] and int(needs[i]) & footprint:
                valid[i] = False

    def remove(self, i: int, uid: str) -> None:
        sn = self.nodes[i]
        _pod, pv = sn.pods.pop(uid)
        self.held.pop(uid, None)
        position = list(sn.node().pods).index(uid)
        sn.node().remove(uid)
        self._count(i, pv, -1)
        self.changes.append(i)
        sn.state = hash((sn.state, "-", position))
        self._changed(i)

    def answers(self, pv: PodVector) -> tuple[BoolArray, BoolArray, IntArray]:
        """(valid, admitted, NUMA nodes) per node for this shape; fill invalid entries with probe()."""
        return self.answers_for(pv.key)

    def answers_for(self, key: tuple[object, ...]) -> tuple[BoolArray, BoolArray, IntArray]:
        """Per-node cached answers (valid, passes, a value) under `key`; a node's entries turn invalid
        whenever a pod is bound to or removed from it."""
        found = self._answers.get(key)
        if found is None:
            n = len(self.nodes)
            found = (np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.int64))
            self._answers[key] = found
        return found

    def probe(self, i: int, pod: Pod, pv: PodVector) -> tuple[bool, int]:
        """Would node i's kubelet admit the pod now? (admitted, NUMA nodes of the merged hints)."""
        sn = self.nodes[i]
        key = (sn.state, pv.key)
        answer = self._probes.get(key)
        if answer is None:
            answer = self._ask(sn, pod)
            self._probes[key] = answer
        valid, ok, numa = self.answers(pv)
        valid[i], ok[i], numa[i] = True, answer[0], answer[1]
        needs = self._needs.get(pv.key)
        if needs is None:
            needs = np.full(len(self.nodes), -1, dtype=np.object_)
            self._needs[pv.key] = needs
        needs[i] = answer[2]
        return answer[0], answer[1]

    def _ask(self, sn: SimNode, pod: Pod) -> tuple[bool, int, int]:
        """The kubelet's admission of the pod, released again: (admitted, NUMA count, NUMA mask the answer
        depends on, -1 for all). A pod refused before the Topology Manager ran counts no NUMA node."""
        node = sn.node()
        self.probe_count += 1
        if pod.uid in node.pods or pod.uid in node.reserved:
            # This very pod is bound here already: the question is whether another one like it fits.
            pod = pod.with_identity(uid=f"{pod.uid}~probe")
        rec = node.probe(pod, allocations=False)  # only the verdict and the merged masks are read
        if not rec.result.admit and not rec.decisions:
            return False, 0, -1
        mask = 0
        hinted = False
        for d in rec.decisions:
            if d.merged is not None and d.merged.mask is not None:
                mask |= d.merged.mask
            hinted = hinted or not d.providers or any(p.hints for p in d.providers)
        count = bin(mask).count("1") if mask else len(node.machine.numa_nodes)
        if rec.result.admit and rec.decisions and not hinted:
            # No provider had a preference for any container (no hints at all, not even a resource's
            # "don't care"): no manager looked at a NUMA node's free CPUs, memory or devices, so the
            # admission relied on none of them (its merged hint is the default one, over every node).
            # What it relied on is the predicate's fit, which the scheduler's NodeResourcesFit filter
            # checks before any cached answer is read. A Burstable pod of a generated mix is a quarter
            # of an exact run's probes otherwise, asked again after every Guaranteed pod bound there.
            return True, count, 0
        aligned = node.config.topology_manager_policy in ("restricted", "single-numa-node")
        return rec.result.admit, count, mask if (aligned and mask) else -1


def _tolerates(tol: object, key: str, value: str, effect: str) -> bool:
    from numalign.cluster.workload import Toleration

    assert isinstance(tol, Toleration)
    if tol.effect and tol.effect != effect:
        return False
    if tol.operator == "Exists":
        return tol.key in ("", key)
    return tol.key == key and tol.value == value


def _bit(node: int) -> int:
    """A NUMA node's bit in a footprint; node -1 (a machine without a node directory) has none, so it
    stands for every node (-1: everything is asked again)."""
    return 1 << node if node >= 0 else -1
