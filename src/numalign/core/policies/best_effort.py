"""Policies best-effort and restricted: the same merge; restricted admits only preferred results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from numalign.core.implicit.hints import ProviderAnswer
from numalign.core.merge import (
    ExplicitList,
    filter_providers_hints,
    max_of_min_affinity_counts,
    merge_filtered,
    merge_lists,
)
from numalign.core.numa import NUMAInfo
from numalign.core.policies.base import MergeResult, Policy, PolicyName, has_implicit
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

    def merge(self, providers_hints: Sequence[ProviderAnswer]) -> MergeResult:
        filtered = tuple(filter_providers_hints(providers_hints))
        lists = [f.hints for f in filtered]
        b = max_of_min_affinity_counts(lists)
        closest = self.opts.prefer_closest_numa
        if not has_implicit(providers_hints):
            best = merge_lists(cast(list[ExplicitList], lists), self.numa, closest)
            return MergeResult(best, self.can_admit(best.preferred), filtered, b)
        best, considered = merge_filtered(lists, self.numa, closest, b)
        return MergeResult(best, self.can_admit(best.preferred), filtered, b, considered)


class RestrictedPolicy(BestEffortPolicy):
    @property
    def name(self) -> PolicyName:
        return PolicyName.RESTRICTED

    def can_admit(self, preferred: bool) -> bool:
        return preferred


# upstream: var _ Policy = &bestEffortPolicy{} (and restrictedPolicy)
_conforms: type[Policy] = BestEffortPolicy
_conforms_restricted: type[Policy] = RestrictedPolicy
