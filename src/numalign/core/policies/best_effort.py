"""Policies best-effort and restricted: the same merge; restricted admits only preferred results."""

from __future__ import annotations

from collections.abc import Sequence

from numalign.core.hint import ProviderHints
from numalign.core.merge import filter_providers_hints, max_of_min_affinity_counts, merge_lists
from numalign.core.numa import NUMAInfo
from numalign.core.policies.base import MergeResult, PolicyName
from numalign.core.policies.options import PolicyOptions


class BestEffortPolicy:
    def __init__(self, numa: NUMAInfo, opts: PolicyOptions | None = None) -> None:
        self.numa = numa
        self.opts = opts or PolicyOptions()
        if self.opts.prefer_closest_numa:
            numa.require_distances()

    @property
    def name(self) -> PolicyName:
        return PolicyName.BEST_EFFORT

    def can_admit(self, preferred: bool) -> bool:
        return True

    def merge(self, providers_hints: Sequence[ProviderHints]) -> MergeResult:
        filtered = filter_providers_hints(providers_hints)
        lists = [f.hints for f in filtered]
        best = merge_lists(lists, self.numa, self.opts.prefer_closest_numa)
        return MergeResult(best, self.can_admit(best.preferred), tuple(filtered), max_of_min_affinity_counts(lists))


class RestrictedPolicy(BestEffortPolicy):
    @property
    def name(self) -> PolicyName:
        return PolicyName.RESTRICTED

    def can_admit(self, preferred: bool) -> bool:
        return preferred
