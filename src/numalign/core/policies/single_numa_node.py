"""Policy single-numa-node: only preferred single-node (or nil) hints take part; an all-nodes result
is reported as a nil affinity; prefer-closest-numa-nodes does not apply."""

from __future__ import annotations

from collections.abc import Sequence

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.merge import (
    FilteredList,
    filter_providers_hints,
    max_of_min_affinity_counts,
    merge_lists,
)
from numalign.core.numa import NUMAInfo
from numalign.core.policies.base import MergeResult, PolicyName
from numalign.core.policies.options import PolicyOptions


def filter_single_numa_hints(lists: Sequence[FilteredList]) -> list[FilteredList]:
    """Upstream filterSingleNumaHints: keep preferred hints whose mask is nil or one node."""
    return [
        FilteredList(
            f.provider,
            f.resource,
            tuple(h for h in f.hints if h.preferred and (h.mask is None or h.mask.bit_count() == 1)),
        )
        for f in lists
    ]


class SingleNUMANodePolicy:
    def __init__(self, numa: NUMAInfo, opts: PolicyOptions | None = None) -> None:
        self.numa = numa
        self.opts = opts or PolicyOptions()

    @property
    def name(self) -> PolicyName:
        return PolicyName.SINGLE_NUMA_NODE

    def merge(self, providers_hints: Sequence[ProviderHints]) -> MergeResult:
        single = filter_single_numa_hints(filter_providers_hints(providers_hints))
        lists = [f.hints for f in single]
        best = merge_lists(lists, self.numa, use_closest=False)
        if best.mask == self.numa.default_affinity_mask:
            best = TopologyHint(None, best.preferred)
        return MergeResult(best, best.preferred, tuple(single), max_of_min_affinity_counts(lists))
