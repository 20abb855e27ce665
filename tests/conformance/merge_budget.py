"""The admit area's merge budget on numalign's side (conformance/admit_merge_budget.go has the why).

The real Topology Manager merges by walking every permutation of its providers' hint lists; on 8 NUMA
nodes one merge can be 255^4 of them. The harness counts, before each merge, the permutations it will
walk (the product of filterProvidersHints' list lengths, after filterSingleNumaHints under
single-numa-node); a case may spend MERGE_BUDGET in all, and the merge that would go beyond it is not
run: the case ends with {"merge_over_budget": N} at that admission. numalign merges without walking the
product, so here its providers are wrapped to count the same lists, upstream's explicit ones, and the
Topology Manager stops at the same merge. The count is itself compared: a provider listing another
number of hints than upstream's shows as a difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager.manager import TopologyManager
from numalign.kubelet.topologymanager.provider import HintProvider

# conformance/admit_merge_budget.go's mergeBudget: permutations per case.
MERGE_BUDGET = 1_000_000

# From this many NUMA nodes on, one walk of every mask (bitmask.IterateBitMasks: 2^N - 1 of them) is beyond
# the harness's hang guard (20 s of CPU) however fast upstream walks them: 2^25 - 1 is 33.5 million masks.
MASK_WALK_NUMA_NODES = 25


class OverBudgetError(Exception):
    """The merge about to run walks `permutations` permutations upstream, beyond the case's budget."""

    def __init__(self, permutations: int) -> None:
        super().__init__(f"the merge walks {permutations} permutations, beyond the case's budget")
        self.permutations = permutations


class _Counter:
    def __init__(self, policy: str) -> None:
        self.single_numa = policy == "single-numa-node"
        self.spent = 0
        self.pending = 1

    def length(self, hints: Sequence[TopologyHint] | None) -> int:
        if hints is None:
            return 1  # {nil, preferred}: kept by every policy
        if not hints:
            return 0 if self.single_numa else 1  # {nil, not preferred}: single-numa-node drops it
        if not self.single_numa:
            return len(hints)
        kept = 0  # a plain loop: this runs per provider per admission, inside numalign's timed side
        for h in hints:
            if h.preferred and (h.mask is None or h.mask.bit_count() == 1):
                kept += 1
        return kept

    def seen(self, hints: ProviderHints | ProviderAnswer, last: bool) -> None:
        """Count one provider's lists (an explicit answer: every value a list or None)."""
        if hints:
            for resource_hints in hints.values():
                assert not isinstance(resource_hints, ImplicitHints)
                self.pending *= self.length(resource_hints)
        if last:
            self.close()

    def close(self) -> None:
        """The last provider has answered: the merge's permutations are spent, or the case ends."""
        n, self.pending = self.pending, 1
        if n <= 1:
            return  # one permutation (or none) is free, as in the harness (a resourceless probe spends nothing)
        if self.spent + n > MERGE_BUDGET:
            raise OverBudgetError(n)
        self.spent += n


def _explicit(answer: ProviderAnswer) -> bool:
    if answer:
        for h in answer.values():
            if isinstance(h, ImplicitHints):
                return False
    return True


class _Counted:
    """A provider as numalign's Topology Manager sees it, counting upstream's lists before the merge.

    An answer that is already explicit (machines below the implicit size) is counted as it is; an
    implicit one is counted from the provider's explicit lists (get_topology_hints, upstream's own
    generator), asked for the same state just before.

    Inside numalign's timed side (benchmarks/admissions_go.py), per provider per admission: what is not
    counted (Allocate, the release, the device manager's steps) is the inner provider's own bound method,
    set on this object, so the scope calls the provider itself; the count of an explicit answer is done
    in the one method the scope calls."""

    def __init__(self, inner: HintProvider, counter: _Counter, last: bool) -> None:
        self._inner = inner
        self._counter = counter
        self._last = last
        self.name = inner.name
        # The inner provider's implicit answers, looked up once (None: it gives explicit lists only).
        self._implicit = getattr(inner, "implicit_topology_hints", None)
        self._implicit_pod = getattr(inner, "implicit_pod_topology_hints", None)
        steps = getattr(inner, "allocate_steps", None)
        if steps is not None:
            self.allocate_steps = steps
        self.allocate = inner.allocate
        self.remove_container = inner.remove_container

    # The device manager's steps (SteppedProvider), read by the scope with getattr(p, "allocate_steps",
    # None): an instance attribute where the inner provider has them, else this None, so that the look-up
    # never falls through to __getattr__ (an AttributeError raised and caught per provider per admission).
    allocate_steps: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        hints = self._inner.get_topology_hints(pod, container)
        self._counter.seen(hints, self._last)
        return hints

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        hints = self._inner.get_pod_topology_hints(pod)
        self._counter.seen(hints, self._last)
        return hints

    def implicit_topology_hints(self, pod: Pod, container: Container) -> ProviderAnswer:
        implicit = self._implicit
        if implicit is None:
            return self.get_topology_hints(pod, container)
        answer: ProviderAnswer = implicit(pod, container)
        counter = self._counter
        if answer:
            # An explicit answer is counted as it is (its lists are upstream's), here without a call per
            # list; an implicit one from the provider's explicit lists for the same state.
            pending = counter.pending
            for hints in answer.values():
                if isinstance(hints, ImplicitHints):
                    counter.seen(_as_hints(self._inner.get_topology_hints(pod, container)), self._last)
                    return answer
                pending *= counter.length(hints)
            counter.pending = pending
        # (an empty answer, most containers': no resource this provider aligns, nothing to count)
        if self._last:
            counter.close()
        return answer

    def implicit_pod_topology_hints(self, pod: Pod) -> ProviderAnswer:
        implicit = self._implicit_pod
        if implicit is None:
            return self.get_pod_topology_hints(pod)
        answer: ProviderAnswer = implicit(pod)
        self._counter.seen(answer if _explicit(answer) else _as_hints(self._inner.get_pod_topology_hints(pod)),
                           self._last)
        return answer


def _as_hints(answer: ProviderAnswer | ProviderHints) -> ProviderHints:
    if not answer:
        return None
    assert isinstance(answer, Mapping)
    return {r: None if h is None else list(h) for r, h in answer.items() if not isinstance(h, ImplicitHints)}


def install(tm: TopologyManager, policy: str) -> None:
    """Count the merges of `tm`'s providers against the budget (the last one added triggers the check).

    Not on MASK_WALK_NUMA_NODES or more NUMA nodes: there a merge of two or more permutations needs a
    list of two or more hints, which upstream's providers make only by walking every mask (the CPU
    manager's generateCPUTopologyHints, the memory manager's calculateHints, the device manager's
    generateDeviceTopologyHints), so upstream hangs before any merge the budget could stop, and counting
    its lists here would list 2^N masks too (on 32 NUMA nodes the device manager's list of 4.3 billion
    masks filled the machine's 23 GB)."""
    if len(tm.numa.nodes) >= MASK_WALK_NUMA_NODES:
        return
    counter = _Counter(policy)
    providers = tm.scope.providers
    providers[:] = [_Counted(p, counter, i == len(providers) - 1) for i, p in enumerate(providers)]
