"""The admit area's merge budget on numalign's side (conformance/admit_merge_budget.go has the why).

The real Topology Manager merges by walking every permutation of its providers' hint lists; on 8 NUMA
nodes one merge can be 255^4 of them. The harness counts, before each merge, the permutations it will
walk (the product of filterProvidersHints' list lengths, after filterSingleNumaHints under
single-numa-node); a case may spend MERGE_BUDGET in all, and the merge that would go beyond it is not
run: the case ends with {"merge_over_budget": N} at that admission. numalign merges without walking the
product, so here its providers' answers are counted (Scope.answers_seen) as the same lists, upstream's
explicit ones, and the Topology Manager stops at the same merge. The count is itself compared: a provider
listing another number of hints than upstream's shows as a difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager.manager import TopologyManager
from numalign.kubelet.topologymanager.provider import HintProvider

AnswersSeen = Callable[[Pod, Container | None, Sequence[ProviderAnswer]], None]

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


def _as_hints(answer: ProviderAnswer | ProviderHints) -> ProviderHints:
    if not answer:
        return None
    assert isinstance(answer, Mapping)
    return {r: None if h is None else list(h) for r, h in answer.items() if not isinstance(h, ImplicitHints)}


def install(tm: TopologyManager, policy: str, steps: Sequence[Any] | None = None) -> None:
    """Count the merges of `tm`'s providers against the budget, before each merge (Scope.answers_seen);
    not when the case's `steps` (given) cannot spend it (_within_budget), nor under policy none (no merge).

    Not on MASK_WALK_NUMA_NODES or more NUMA nodes: there a merge of two or more permutations needs a
    list of two or more hints, which upstream's providers make only by walking every mask (the CPU
    manager's generateCPUTopologyHints, the memory manager's calculateHints, the device manager's
    generateDeviceTopologyHints), so upstream hangs before any merge the budget could stop, and counting
    its lists here would list 2^N masks too (on 32 NUMA nodes the device manager's list of 4.3 billion
    masks filled the machine's 23 GB)."""
    numa_nodes = len(tm.numa.nodes)
    if numa_nodes >= MASK_WALK_NUMA_NODES or policy == "none":
        return
    if steps is not None and _within_budget(steps, numa_nodes, policy):
        return
    tm.scope.answers_seen = _counting(_Counter(policy), tm.scope.providers)


def _within_budget(steps: Sequence[Any], numa_nodes: int, policy: str) -> bool:
    """Every merge the case's admissions can make, counted at its most, spends no more than MERGE_BUDGET:
    then no admission can end the case, and counting each merge is work the harness alone would do
    (numalign's own admission counts nothing; on the dual-socket mix of benchmarks/admissions_go.py it was
    a tenth of numalign's timed side).

    At its most, a merge is of one list per resource the pod names (a container's merge names fewer;
    a provider without a hint for a resource gives one hint), each list as long as upstream's can be:
    under single-numa-node its filter keeps the preferred hints of one NUMA node or none (N + 1 at most,
    upstream listing each mask once), else every mask and a nil hint (2^N). A pod merges once a container
    at most (the pod scope once). False on anything not read as a pod with containers: such a case is
    counted as any other (and its pod refused as the manifest's reader refuses it)."""
    per_list = numa_nodes + 1 if policy == "single-numa-node" else 2**numa_nodes + 1
    names: set[str] = set()
    merges = 0
    # Read as the manifest is expected to be, any other shape ending in a TypeError, AttributeError or
    # KeyError (then False): no isinstance test a field (this runs over every step of a case, interpreted,
    # inside numalign's timed side). A shape read otherwise than as a pod (a string of names, a list) only
    # adds names or merges, so the bound stays one.
    try:
        for step in steps:
            if step["op"] != "admit":
                continue
            spec = step["pod"]["spec"]
            for c in spec["containers"]:
                merges += 1
                resources = c.get("resources")
                if resources:
                    names.update(resources.get("requests") or ())
                    names.update(resources.get("limits") or ())
            inits = spec.get("initContainers")
            if inits:
                for c in inits:
                    merges += 1
                    resources = c.get("resources")
                    if resources:
                        names.update(resources.get("requests") or ())
                        names.update(resources.get("limits") or ())
            resources = spec.get("resources")
            if resources:
                names.update(resources.get("requests") or ())
                names.update(resources.get("limits") or ())
            names.update(spec.get("overhead") or ())
    except (TypeError, AttributeError, KeyError):
        return False
    return bool(merges * per_list ** len(names) <= MERGE_BUDGET)


def _counting(counter: _Counter, providers: Sequence[HintProvider]) -> AnswersSeen:
    """What the scope calls with every provider's answer just before each merge: upstream's lists counted
    (_Counter.length), then the merge's permutations spent, or the case ends (OverBudgetError).

    An answer that is already explicit (machines below the implicit size) is counted as it is; an
    implicit one is counted from the provider's explicit lists (get_topology_hints, upstream's own
    generator), asked for the same state.

    Inside numalign's timed side (benchmarks/admissions_go.py), once a container admitted, as a function
    (a call of an object's __call__ costs a look-up more): the providers themselves are not wrapped (a
    wrapper was an interpreted call per provider, and per Allocate and release), and _Counter.length is
    written out (no call per list). (Counting a list by map() over an attrgetter and a set's __contains__
    measured slower than this loop: the getter reads the native hint's fields by name.)"""
    single = counter.single_numa

    def seen(pod: Pod, container: Container | None, answers: Sequence[ProviderAnswer]) -> None:
        pending = counter.pending
        i = -1
        for answer in answers:
            i += 1
            if not answer:
                continue  # most containers' answer from most providers: no resource aligned, nothing to count
            factor = 1
            for hints in answer.values():
                if hints is None:
                    continue  # {nil, preferred}: one hint, kept by every policy
                if isinstance(hints, ImplicitHints):
                    factor = _explicit_factor(providers[i], pod, container, single)
                    break
                if not single:
                    factor *= len(hints) or 1  # [] is {nil, not preferred}: one hint
                    continue
                kept = 0  # _Counter.length written out
                for h in hints:
                    if h.preferred:
                        mask = h.mask
                        if mask is None or mask.bit_count() == 1:
                            kept += 1
                factor *= kept
            pending *= factor
        counter.pending = pending
        counter.close()

    return seen


def _explicit_factor(provider: HintProvider, pod: Pod, container: Container | None, single: bool) -> int:
    """The permutations a provider's explicit lists make (its answer was implicit)."""
    explicit = provider.get_pod_topology_hints(pod) if container is None else \
        provider.get_topology_hints(pod, container)
    counter = _Counter("single-numa-node" if single else "")
    counter.seen(_as_hints(explicit), last=False)
    return counter.pending
