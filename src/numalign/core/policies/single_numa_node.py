"""Policy single-numa-node: only preferred single-node (or nil) hints take part; an all-nodes result
is reported as a nil affinity; prefer-closest-numa-nodes does not apply.

Single-node preferred hints are at most N per list, so implicit lists are listed here (their
single-node preferred members) and every list is merged as upstream's.
"""

from __future__ import annotations

from collections.abc import Sequence

from numalign.core.bitmask import bits_of
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ExplicitHints, ImplicitHints, ProviderAnswer
from numalign.core.merge import FilteredList, filter_providers_hints, max_of_min_affinity_counts, merge_lists
from numalign.core.numa import NUMAInfo
from numalign.core.policies.base import MergeResult, Policy, PolicyName, has_implicit
from numalign.core.policies.options import PolicyOptions


def _single_numa(hints: ExplicitHints | ImplicitHints) -> ExplicitHints:
    if isinstance(hints, ImplicitHints):
        return tuple(hints.single_node_preferred(bits_of(hints.top)))
    return tuple(h for h in hints if h.preferred and (h.mask is None or h.mask.bit_count() == 1))


def filter_single_numa_hints(lists: Sequence[FilteredList]) -> list[FilteredList]:
    """Upstream filterSingleNumaHints: keep preferred hints whose mask is nil or one node."""
    return [FilteredList(f.provider, f.resource, _single_numa(f.hints)) for f in lists]


class SingleNUMANodePolicy:
    def __init__(self, numa: NUMAInfo, opts: PolicyOptions | None = None) -> None:
        self.numa = numa
        self.opts = opts or PolicyOptions()

    @property
    def name(self) -> PolicyName:
        return PolicyName.SINGLE_NUMA_NODE

    def merge(self, providers_hints: Sequence[ProviderAnswer]) -> MergeResult:
        filtered = filter_providers_hints(providers_hints)
        lists = [_single_numa(f.hints) for f in filtered]
        single = tuple(FilteredList(f.provider, f.resource, h) for f, h in zip(filtered, lists, strict=True))
        best = merge_lists(lists, self.numa, use_closest=False)
        if best.mask == self.numa.default_affinity_mask:
            best = TopologyHint(None, best.preferred)
        considered = (best,) if has_implicit(providers_hints) else ()
        return MergeResult(best, best.preferred, single, max_of_min_affinity_counts(lists), considered)


# upstream: var _ Policy = &singleNumaNodePolicy{}
_conforms: type[Policy] = SingleNUMANodePolicy
