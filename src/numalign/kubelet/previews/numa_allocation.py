"""Preview numa-allocation-strategy (KEP-6007): the Topology Manager breaks ties between equally fit
NUMA masks by how allocated their NUMA nodes already are.

What the proposal says (kubernetes/enhancements PR #6332, k/k PR #142226 with the scores of PR #141796),
and so what this module does:

* Every hint carries a utilisation Score of its NUMA node set, 0 = unscored, else in [1, 100]:
  CPU manager max(1, assigned exclusive CPUs * 100 / allocatable CPUs), memory manager
  max(1, assigned bytes * 100 / allocatable bytes) per memory resource, device manager
  max(1, allocated devices * 100 / allocatable devices) of the resource. Over a set of NUMA nodes the
  counts are summed over its nodes. (Integer division, as Go's.)
* A merged permutation's score is the weighted average of its contributors' scores (contributors
  with a mask and a score > 0; weight 1 unless numa-score-weights names the resource, 0 drops it):
  sum(w * s) / sum(w), integer division; no contributor: unscored.
* The comparison of two merged hints: preferred first (unchanged); equal masks keep the current one;
  when the strategy is not none and the masks are equally fit (same width, and with
  prefer-closest-numa-nodes the same average distance) and both are scored with different scores,
  most-allocated takes the higher and least-allocated the lower; otherwise Narrowest / Closest decide
  as today. The non-preferred case analysis around BestNonPreferredAffinityCount is unchanged and
  reaches the same comparison.

Since a merged hint's score depends on the permutation that produced it, and the first of equal masks
is kept, the merge here walks upstream's permutations in upstream's order (bounded by
MAX_PERMUTATIONS), rather than numalign's product-free merge, which assumes a total order on masks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from numalign.core.bitmask import bits_of
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.core.merge import FilteredList, filter_providers_hints, max_of_min_affinity_counts
from numalign.core.numa import NUMAInfo
from numalign.core.policies import Policy, PolicyName
from numalign.core.policies.base import MergeResult
from numalign.core.policies.single_numa_node import filter_single_numa_hints
from numalign.errors import InvalidInputError
from numalign.k8s.previews import NUMA_ALLOCATION_STRATEGY, NUMA_SCORE_WEIGHTS, parse_weights
from numalign.kubelet.cpumanager.policy import CPUPolicy
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.memorymanager.policy import MemoryPolicy

# Upstream walks every permutation; so does this preview, up to this many per merge.
MAX_PERMUTATIONS = 2_000_000
_DEFAULT_WEIGHT = 1

Scorer = Callable[[str, int], int]  # (resource, NUMA mask) -> score, 0 = unscored


def utilisation_score(assigned: int, allocatable: int) -> int:
    """max(1, assigned * 100 / allocatable); 0 (unscored) when nothing is allocatable there."""
    if allocatable <= 0:
        return 0
    return max(1, assigned * 100 // allocatable)


@dataclass(frozen=True)
class _Scored:
    mask: int | None
    preferred: bool
    score: int


def aggregate(permutation: Sequence[_Scored], names: Sequence[str | None], weights: Mapping[str, int]) -> int:
    """The merged hint's score: weighted average over scored contributors; 0 when none contributes."""
    total = weight_sum = 0
    for hint, name in zip(permutation, names, strict=True):
        if hint.mask is None or hint.score <= 0:
            continue
        w = weights.get(name or "", _DEFAULT_WEIGHT)
        if w == 0:
            continue
        total += hint.score * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


class ScoredPolicy:
    """A Topology Manager policy with numa-allocation-strategy: `inner` names the policy and its
    admission rule; the merge is upstream's permutation walk with the scored comparison."""

    def __init__(self, inner: Policy, numa: NUMAInfo, strategy: str, weights: Mapping[str, int],
                 scorer: Scorer, prefer_closest: bool) -> None:
        self.inner = inner
        self.numa = numa
        self.strategy = strategy
        self.weights = dict(weights)
        self.scorer = scorer
        # KEP-3545: prefer-closest-numa-nodes never applies under single-numa-node
        self.closest = prefer_closest and inner.name is not PolicyName.SINGLE_NUMA_NODE

    @property
    def name(self) -> PolicyName:
        return self.inner.name

    def merge(self, providers_hints: Sequence[ProviderAnswer]) -> MergeResult:
        if self.inner.name is PolicyName.NONE:
            return self.inner.merge(providers_hints)
        filtered = [FilteredList(f.provider, f.resource, _explicit(f.hints))
                    for f in filter_providers_hints(providers_hints)]
        single = self.inner.name is PolicyName.SINGLE_NUMA_NODE
        if single:
            filtered = filter_single_numa_hints(filtered)
        lists = [f.hints for f in filtered]
        b = max_of_min_affinity_counts(lists)
        best = self._walk(filtered, b)
        hint = TopologyHint(best.mask, best.preferred)
        if single and hint.mask == self.numa.default_affinity_mask:
            hint = TopologyHint(None, hint.preferred)
        admit = hint.preferred if self.inner.name is not PolicyName.BEST_EFFORT else True
        return MergeResult(hint, admit, tuple(filtered), b, ())

    def _walk(self, filtered: Sequence[FilteredList], b: int) -> _Scored:
        default = self.numa.default_affinity_mask
        names = [f.resource for f in filtered]
        scored = [[_Scored(h.mask, h.preferred,
                           0 if h.mask is None or f.resource is None else self.scorer(f.resource, h.mask))
                   for h in _explicit(f.hints)] for f in filtered]
        count = math.prod(len(s) for s in scored)
        if count > MAX_PERMUTATIONS:
            raise InvalidInputError(
                f"preview numa-allocation-strategy: {count} hint permutations to walk (upstream's merge, which "
                f"the scores need), over the preview's bound of {MAX_PERMUTATIONS}; ask with fewer NUMA nodes or "
                "devices per pod, or without the preview")
        best: _Scored | None = None
        for perm in itertools.product(*scored):
            best = self._compare(best, self._merge_permutation(perm, names, default), b)
        return best if best is not None else _Scored(default, False, 0)

    def _merge_permutation(self, perm: Sequence[_Scored], names: Sequence[str | None], default: int) -> _Scored:
        masks = [h.mask for h in perm if h.mask is not None]
        preferred = all(h.preferred for h in perm) and all(m == masks[0] for m in masks)
        merged = default
        for m in masks:
            merged &= m
        return _Scored(merged, preferred, aggregate(perm, names, self.weights))

    def _compare(self, current: _Scored | None, candidate: _Scored, b: int) -> _Scored:
        """Upstream HintMerger.compare, its comparison of masks extended by the scores."""
        cand_count = (candidate.mask or 0).bit_count()
        if cand_count == 0:
            return current if current is not None else candidate
        if current is None:
            return candidate
        if current.preferred != candidate.preferred:
            return candidate if candidate.preferred else current
        if current.preferred:
            return self._fitter(current, candidate)
        cur_count = (current.mask or 0).bit_count()
        if cur_count > b:
            return self._fitter(current, candidate)
        if cur_count == b:
            return self._fitter(current, candidate) if cand_count == b else current
        if cand_count > b:
            return current
        if cand_count == b:
            return candidate
        if cand_count != cur_count:
            return candidate if cand_count > cur_count else current
        return self._fitter(current, candidate)

    def _fitter(self, current: _Scored, candidate: _Scored) -> _Scored:
        """compareNumaAffinityMasks: equal masks keep current; equally fit masks by score; else structure."""
        cm, km = current.mask or 0, candidate.mask or 0
        if cm == km:
            return current
        if self.strategy != "none" and self._equally_fit(cm, km):
            by_score = _by_score(self.strategy, current, candidate)
            if by_score is not None:
                return by_score
        best = self.numa.closest(cm, km) if self.closest else self.numa.narrowest(cm, km)
        return current if best == cm else candidate

    def _equally_fit(self, m1: int, m2: int) -> bool:
        if m1.bit_count() != m2.bit_count():
            return False
        return not self.closest or self.numa.average_distance(m1) == self.numa.average_distance(m2)


def _by_score(strategy: str, current: _Scored, candidate: _Scored) -> _Scored | None:
    if current.score == 0 or candidate.score == 0 or current.score == candidate.score:
        return None  # unscored or tied: the structural comparison decides, as without the option
    higher = candidate if candidate.score > current.score else current
    lower = current if higher is candidate else candidate
    if strategy == "most-allocated":
        return higher
    if strategy == "least-allocated":
        return lower
    return None


def _explicit(hints: Sequence[TopologyHint] | ImplicitHints) -> tuple[TopologyHint, ...]:
    if isinstance(hints, ImplicitHints):
        if hints.materialize is None:
            raise InvalidInputError(f"preview numa-allocation-strategy: hint list {hints.label!r} cannot be "
                                    "listed; ask without the preview")
        return tuple(hints.materialize())
    return tuple(hints)


def node_scorer(cpu: CPUPolicy, memory: MemoryPolicy, devices: DeviceManager) -> Scorer:
    """Scores from the node's managers' state as it is at the moment of the merge (PR #141796 and the
    KEP's formulas); a manager that pins nothing (policy none / None) scores nothing."""

    def score(resource: str, mask: int) -> int:
        nodes = bits_of(mask)
        if resource == "cpu":
            return _cpu_score(cpu, nodes)
        if resource == "memory" or resource.startswith("hugepages-"):
            return _memory_score(memory, resource, nodes)
        return _device_score(devices, resource, set(nodes))

    return score


def _cpu_score(cpu: CPUPolicy, nodes: list[int]) -> int:
    if not cpu.pins:
        return 0
    in_nodes = cpu.topology.details.cpus_in_numa_nodes(*nodes) - cpu.reserved_cpus
    assigned = in_nodes - cpu.get_default_cpu_set()
    return utilisation_score(len(assigned), len(in_nodes))


def _memory_score(memory: MemoryPolicy, resource: str, nodes: list[int]) -> int:
    machine_state = memory.machine_state
    if not machine_state:  # the None policy's
        return 0
    allocatable = assigned = 0
    for n in nodes:
        node_state = machine_state.get(n)
        if node_state is None:
            continue
        table = node_state.table(resource)
        allocatable += table.allocatable
        assigned += table.reserved
    return utilisation_score(assigned, allocatable)


def _device_score(devices: DeviceManager, resource: str, nodes: set[int]) -> int:
    allocatable = devices.get_allocatable_devices().get(resource, {})
    here = {d for d, dev in allocatable.items() if dev.topology and nodes & set(dev.topology)}
    allocated = devices.allocated.get(resource, set())
    return utilisation_score(len(here & set(allocated)), len(here))


def scored_policy(inner: Policy, numa: NUMAInfo, previews: object, scorer: Scorer, prefer_closest: bool) -> Policy:
    """The node's policy with the preview's comparison (strategy and weights from `previews`)."""
    values: Mapping[str, str] = getattr(previews, "values", {})
    weights = parse_weights(values.get(NUMA_SCORE_WEIGHTS, ""), f"--preview {NUMA_SCORE_WEIGHTS}")
    return ScoredPolicy(inner, numa, values.get(NUMA_ALLOCATION_STRATEGY, "none"), weights, scorer, prefer_closest)
