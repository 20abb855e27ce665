"""Emulated schedulers: `default` (kube-scheduler), `exact` (numalign's admission as a filter) and `nrt`
(scheduler-plugins' NodeResourceTopologyMatch, in nrtmatch.py).

The scheduling cycle follows kube-scheduler (pkg/scheduler/schedule_one.go):

1. numFeasibleNodesToFind: all nodes below 100; otherwise percentageOfNodesToScore of them (adaptive
   when 0: 50 - nodes/125 percent, at least 5 percent), and never fewer than 100.
2. findNodesThatPassFilters: nodes are visited from nextStartNodeIndex round the list; the search stops
   once that many feasible nodes are found; nextStartNodeIndex then advances by the nodes processed.
   Upstream checks nodes in 16 goroutines, so which extra nodes it processed before the stop is a
   race; the emulation visits them in order (the deterministic limit of that race).
3. Scores: NodeResourcesFit's scoring strategy (LeastAllocated by default, MostAllocated,
   RequestedToCapacityRatio) over cpu and memory with weight 1 each, from the non-zero requested
   amounts, plus NodeResourcesBalancedAllocation (weight 1; skipped for pods that request no cpu or
   memory). Plugins that score every node alike here (TaintToleration without PreferNoSchedule taints,
   NodeAffinity without preferences, ImageLocality) are left out; PodTopologySpread's system default
   constraints are not modelled.
4. selectHost: the highest total; ties broken uniformly at random (upstream's reservoir sampling) with
   a seeded generator. A single feasible node is taken without scoring, as upstream does.

Filters: NodeResourcesFit (pods limit, then requests against allocatable - requested, every resource
the pod requests, hugepages and extended resources included), TaintToleration and NodeSelector.
`exact` adds one filter after those: the node's kubelet (numalign) would admit the pod on its current
state; it scores as `default` does, or by the fewest NUMA nodes the admission would use.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from numalign.cluster.state import BoolArray, ClusterState, IntArray, PodVector
from numalign.k8s.pod import Pod

MAX_NODE_SCORE: Final = 100
MIN_FEASIBLE_NODES_TO_FIND: Final = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: Final = 5
SCORING_STRATEGIES: Final = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
# RequestedToCapacityRatio's shape when none is given: bin packing (score rises with utilisation),
# the example of the scheduler's documentation.
DEFAULT_RTCR_SHAPE: Final = ((0, 0), (100, 10))


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = 50 - num_all_nodes // 125
        percentage = max(percentage, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * percentage // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class _ShapeRows:
    """One pod shape's NodeResourcesFit filter and base scores over every node, as of the state's first
    `seen` changes (ClusterState.changes) and `columns` added resource columns."""

    seen: int
    columns: int
    fit: BoolArray
    score: IntArray


# Pod shapes whose filter and scores are kept (the oldest is dropped beyond it): a workload of many
# distinct shapes must not hold nodes x shapes arrays. A generated mix has a handful of shapes.
_SHAPES_KEPT: Final = 64


@dataclass(frozen=True)
class _Needs:
    """What _update_rows reads of a pod shape, as Python numbers."""

    fit: tuple[tuple[int, int], ...]  # (resource column, amount) NodeResourcesFit checks
    non_zero: tuple[int, int]
    cpu: int
    memory: int


def _needs(pv: PodVector) -> _Needs:
    found: _Needs | None = pv.derived.get("needs")
    if found is None:
        cols = [] if pv.zero else pv.cols.tolist()
        vec = pv.vec.tolist()
        found = pv.derived["needs"] = _Needs(tuple((c, vec[c]) for c in cols), pv.non_zero,
                                             pv.requests.get("cpu", 0), pv.requests.get("memory", 0))
    return found


@dataclass(frozen=True)
class Selection:
    node: int | None
    feasible: int  # feasible nodes found (before the cut-off stopped the search, if it did)
    reasons: dict[str, int]  # when unschedulable: nodes per failure reason


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """helper.BuildBrokenLinearFunction over scaled points (scores already x10)."""
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=np.bool_)
    for i, (u, s) in enumerate(shape):
        hit = ~done & (p <= u)
        if i == 0:
            out[hit] = s
        else:
            u0, s0 = shape[i - 1]
            out[hit] = s0 + (s - s0) * (p[hit] - u0) // (u - u0)
        done |= hit
    return out


class DefaultScheduler:
    name = "default"

    def __init__(self, state: ClusterState, seed: int, scoring: str = "LeastAllocated",
                 percentage_of_nodes_to_score: int = 0,
                 rtcr_shape: Sequence[tuple[int, int]] = DEFAULT_RTCR_SHAPE) -> None:
        self.state = state
        self.rng = random.Random(seed)
        self.scoring = scoring
        self.percentage = percentage_of_nodes_to_score
        self.next_start = 0
        # Shape points scaled as upstream: utilisation 0-100, score x (MaxNodeScore / MaxCustomPriorityScore).
        self.rtcr_shape = tuple((u, s * (MAX_NODE_SCORE // 10)) for u, s in rtcr_shape)
        self._positive: tuple[IntArray, bool] | None = None  # see _all_positive
        self._shapes: dict[tuple[object, ...], _ShapeRows] = {}

    def _rows(self, pv: PodVector) -> _ShapeRows:
        """The shape's filter and scores over every node, brought up to date. A scheduling cycle changes
        one node (the pod bound there), so only the rows of the nodes changed since this shape was last
        scheduled are computed again, with the very formulas (per node, so the same numbers) used over
        all nodes. Most of a large cluster's filtering and scoring is this bookkeeping otherwise."""
        st = self.state
        found = self._shapes.get(pv.key)
        seen = len(st.changes)
        if found is None or found.columns != st.columns_added:
            every = np.arange(len(st.nodes))
            found = _ShapeRows(seen, st.columns_added, st.fit_mask(pv), self._base_scores(pv, every))
            self._shapes.pop(pv.key, None)
            if len(self._shapes) >= _SHAPES_KEPT:
                del self._shapes[next(iter(self._shapes))]
            self._shapes[pv.key] = found
        elif found.seen != seen:
            changed = st.changes[found.seen:seen]
            if len(changed) * 4 > len(st.nodes):
                found.fit = st.fit_mask(pv)
                found.score = self._base_scores(pv, np.arange(len(st.nodes)))
            elif self.scoring == "LeastAllocated" and self._all_positive():
                self._update_rows(_needs(pv), set(changed), found)
            else:
                rows = np.unique(np.array(changed, dtype=np.int64))
                found.fit[rows] = st.fit_mask(pv, rows)
                found.score[rows] = self._base_scores(pv, rows)
            found.seen = seen
        return found

    def _update_rows(self, need: _Needs, nodes: set[int], rows: _ShapeRows) -> None:
        """These nodes' NodeResourcesFit filter and LeastAllocated + BalancedAllocation score, in Python
        numbers: the same operations, in the same order and precision (float64), as the vector forms
        (fit_mask, fit_scores' LeastAllocated fast path and balanced_scores' with every allocatable
        positive), which cost more in numpy's per-call overhead than they compute for a few nodes. The
        node's amounts are read from the state's Python copies of the arrays (ClusterState.alloc_of ...).
        One loop with the shape's needs read once: 1.4 million rows in a run of 200,000 pods."""
        st = self.state
        alloc_of, requested_of, non_zero_of = st.alloc_of, st.requested_of, st.non_zero_of
        pods_of, max_pods_of = st.pods_of, st.max_pods_of
        fit_needs = need.fit
        need_cpu, need_mem = need.non_zero
        cpu, mem = need.cpu, need.memory
        balanced = bool(cpu or mem)
        fit, score = rows.fit, rows.score
        for i in nodes:
            alloc, requested = alloc_of[i], requested_of[i]
            fits = pods_of[i] + 1 <= max_pods_of[i]
            if fits:
                for c, amount in fit_needs:
                    if alloc[c] - requested[c] < amount:
                        fits = False
                        break
            alloc_cpu, alloc_mem = alloc[0], alloc[1]
            non_zero = non_zero_of[i]
            used_cpu, used_mem = non_zero[0] + need_cpu, non_zero[1] + need_mem
            total = ((0 if used_cpu > alloc_cpu else (alloc_cpu - used_cpu) * MAX_NODE_SCORE // alloc_cpu)
                     + (0 if used_mem > alloc_mem else (alloc_mem - used_mem) * MAX_NODE_SCORE // alloc_mem)) // 2
            if balanced:
                f_cpu = min(float(requested[0] + cpu) / float(alloc_cpu), 1.0)
                f_mem = min(float(requested[1] + mem) / float(alloc_mem), 1.0)
                total += int((1 - abs((f_cpu - f_mem) / 2)) * MAX_NODE_SCORE)
            fit[i] = fits
            score[i] = total

    # -- filtering ----------------------------------------------------------------------------------
    def candidates(self, pv: PodVector, placement_mask: BoolArray) -> BoolArray:
        return self._rows(pv).fit & placement_mask

    def feasible(self, pod: Pod, pv: PodVector, mask: BoolArray) -> tuple[IntArray, int]:
        """Feasible node indices in visiting order (cut off), and how many nodes were processed."""
        n = len(self.state.nodes)
        k = num_feasible_nodes_to_find(self.percentage, n)
        s = self.next_start
        chosen = _first(mask, s, k + 1)
        if len(chosen) > k:
            # Upstream cancels the search when feasible node k+1 turns up; the nodes before it were
            # processed (k feasible, the rest infeasible), that one is not counted.
            processed = (int(chosen[k]) - s) % n
            chosen = chosen[:k]
        else:
            processed = n
        return chosen, processed

    # -- scoring ------------------------------------------------------------------------------------
    def _all_positive(self) -> bool:
        """Every node has some allocatable cpu and memory (fixed for a run: resources a pod adds come
        after these two columns). Then the scores below skip the per-node test of it."""
        if self._positive is None or self._positive[0] is not self.state.alloc:
            self._positive = (self.state.alloc, bool(np.all(self.state.alloc[:, :2] > 0)))
        return self._positive[1]

    def fit_scores(self, pv: PodVector, idx: IntArray) -> IntArray:
        st = self.state
        req = st.non_zero[idx] + np.array(pv.non_zero, dtype=np.int64)
        alloc = st.alloc[idx, :2]
        if self.scoring == "LeastAllocated" and self._all_positive():
            # The general case below with every resource valid: the mean of the two scores.
            fast: IntArray = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // alloc).sum(axis=1) // 2
            return fast
        valid = alloc > 0
        safe = np.where(valid, alloc, 1)
        if self.scoring == "MostAllocated":
            per = np.minimum(req, alloc) * MAX_NODE_SCORE // safe
        elif self.scoring == "RequestedToCapacityRatio":
            util = np.where(req > alloc, 100, req * 100 // safe)
            per = broken_linear(self.rtcr_shape, util)
            # resourceScore > 0 only counts (and weighs) resources that score above zero.
            valid = valid & (per > 0)
            weights = valid.sum(axis=1)
            total = np.where(valid, per, 0).sum(axis=1)
            mean = np.floor(total / np.maximum(weights, 1) + 0.5)  # math.Round of a positive value
            rounded: IntArray = np.where(weights > 0, mean, 0).astype(np.int64)
            return rounded
        else:
            per = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // safe)
        weights = valid.sum(axis=1)
        total = np.where(valid, per, 0).sum(axis=1)
        out: IntArray = np.where(weights > 0, total // np.maximum(weights, 1), 0)
        return out

    def balanced_scores(self, pv: PodVector, idx: IntArray) -> IntArray:
        st = self.state
        pod_req = np.array([pv.requests.get("cpu", 0), pv.requests.get("memory", 0)], dtype=np.int64)
        if not pod_req.any():
            return np.zeros(len(idx), dtype=np.int64)  # Skip for best-effort pods (kubernetes#129138)
        req = st.requested[idx, :2] + pod_req
        alloc = st.alloc[idx, :2]
        if self._all_positive():
            frac = np.minimum(req / alloc, 1.0)
            fast: IntArray = ((1 - np.abs((frac[:, 0] - frac[:, 1]) / 2)) * MAX_NODE_SCORE).astype(np.int64)
            return fast
        valid = alloc > 0
        frac = np.minimum(req / np.where(valid, alloc, 1), 1.0)
        both = valid.all(axis=1)
        std = np.where(both, np.abs((frac[:, 0] - frac[:, 1]) / 2), 0.0)
        out: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        return out

    def _base_scores(self, pv: PodVector, idx: IntArray) -> IntArray:
        total: IntArray = self.fit_scores(pv, idx) + self.balanced_scores(pv, idx)
        return total

    def scores(self, pod: Pod, pv: PodVector, idx: IntArray) -> IntArray:
        """NodeResourcesFit's and NodeResourcesBalancedAllocation's scores of the nodes idx."""
        score: IntArray = self._rows(pv).score[idx]
        return score

    # -- the cycle ----------------------------------------------------------------------------------
    def select(self, pod: Pod, pv: PodVector, placement_mask: BoolArray) -> Selection:
        n = len(self.state.nodes)
        mask = self.candidates(pv, placement_mask)
        idx, processed = self.feasible(pod, pv, mask)
        self.next_start = (self.next_start + processed) % n if n else 0
        if len(idx) == 0:
            return Selection(None, 0, self.reasons(pod, pv, placement_mask))
        if len(idx) == 1:
            return Selection(int(idx[0]), 1, {})
        scores = self.scores(pod, pv, idx)
        best = np.nonzero(scores == scores.max())[0]
        pick = best[self.rng.randrange(len(best))] if len(best) > 1 else best[0]
        return Selection(int(idx[pick]), len(idx), {})

    def reasons(self, pod: Pod, pv: PodVector, placement_mask: BoolArray) -> dict[str, int]:
        return self.state.insufficient(pv, placement_mask)


def _first(flags: BoolArray, start: int, count: int) -> IntArray:
    """The indices of the first `count` true flags met going from `start` round the list, in that order.

    Read window by window (the first twice the count wide, each next twice the last): a filter wants
    its k + 1 first feasible nodes (501 of 10,000 at most), usually found within the first window, and
    reading every flag to the end of the list cost 20-30 us a pod at 10,000 nodes."""
    n = len(flags)
    width = max(2 * count, _FIRST_WINDOW)
    parts: list[IntArray] = []
    got = 0
    for low, high in ((start, n), (0, start)):
        pos = low
        while pos < high and got < count:
            stop = min(pos + width, high)
            found: IntArray = np.flatnonzero(flags[pos:stop])[:count - got]
            if len(found):
                parts.append(found + pos)
                got += len(found)
            pos = stop
            width *= 2
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)


# The first window _first reads (flags): small enough to be cheap, wide enough for a few feasible nodes.
_FIRST_WINDOW: Final = 256


class ExactScheduler(DefaultScheduler):
    """`default` plus a filter: numalign's admission on the node's current state must admit the pod."""

    name = "exact"

    # The parameters spelled out rather than passed on as **kw: mypyc's compiled build (scripts/setup) passed
    # an empty **kw as the next positional argument ("int object expected; got dict").
    def __init__(self, state: ClusterState, seed: int, scoring: str = "LeastAllocated",
                 percentage_of_nodes_to_score: int = 0,
                 rtcr_shape: Sequence[tuple[int, int]] = DEFAULT_RTCR_SHAPE) -> None:
        self.fewest_numa = scoring == "LeastNUMANodes"
        super().__init__(state, seed, "LeastAllocated" if self.fewest_numa else scoring, percentage_of_nodes_to_score,
                         rtcr_shape)
        self._numa: dict[int, int] = {}
        self._rejected_by_kubelet = 0

    def feasible(self, pod: Pod, pv: PodVector, mask: BoolArray) -> tuple[IntArray, int]:
        """The default filters, then the kubelet's answer, visiting nodes in order until k pass. Cached
        answers are read as vectors; only nodes whose state changed since are probed again.

        Nodes are visited from next_start round the list. The vectors stay in node order and only the
        indices wanted are found, in visiting order (_first): gathering every array into visiting order
        cost a dozen copies of the node count per pod, most of this filter's time at 10,000 nodes."""
        st = self.state
        n = len(st.nodes)
        k = num_feasible_nodes_to_find(self.percentage, n)
        s = self.next_start
        valid, ok, numa = st.answers(pv)
        # The nodes still in the running: passing the filters before this one, and not known to be refused
        # by their kubelet. A probe changes only its node's answer, so a refusal is struck out here
        # rather than the whole vector computed again.
        candidates = mask & (~valid | ok)
        while True:
            hits = _first(candidates, s, k + 1)  # k, and the one whose discovery stops the search
            unknown = hits[~valid[hits]]
            if len(unknown) == 0:
                break
            for i in unknown.tolist():
                if not st.probe(i, pod, pv)[0]:
                    candidates[i] = False
        # Every node found is known and admitted now, and every candidate before the last found is among
        # them: they are the first k + 1 the kubelet admits (the nodes processed hold no unknown one).
        if len(hits) > k:
            processed = (int(hits[k]) - s) % n
            hits = hits[:k]
        else:
            processed = n
        # The kubelet's refusals among the nodes processed (positions s .. s + processed round the list):
        # the nodes passing the filters before this one there, less those it admits (the hits).
        end = s + processed
        count = np.count_nonzero(mask[s:min(end, n)])
        if end > n:
            count += np.count_nonzero(mask[:end - n])
        self._rejected_by_kubelet = int(count) - len(hits)
        self._numa = {int(i): int(numa[i]) for i in hits} if self.fewest_numa else {}
        return hits, processed

    def scores(self, pod: Pod, pv: PodVector, idx: IntArray) -> IntArray:
        if self.fewest_numa:
            # LeastNUMANodes-like: fewer NUMA nodes score higher; the default score breaks ties.
            numa = np.array([self._numa[int(i)] for i in idx], dtype=np.int64)
            base = super().scores(pod, pv, idx)
            out: IntArray = (MAX_NODE_SCORE - numa) * 1000 + base
            return out
        return super().scores(pod, pv, idx)

    def reasons(self, pod: Pod, pv: PodVector, placement_mask: BoolArray) -> dict[str, int]:
        out = super().reasons(pod, pv, placement_mask)
        if self._rejected_by_kubelet:
            out["node(s) whose kubelet would reject the pod"] = self._rejected_by_kubelet
        return out
