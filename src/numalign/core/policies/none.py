"""Policy none: no merge at all; every pod is admitted with a nil affinity."""

from __future__ import annotations

from collections.abc import Sequence

from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ProviderAnswer
from numalign.core.policies.base import MergeResult, Policy, PolicyName


class NonePolicy:
    @property
    def name(self) -> PolicyName:
        return PolicyName.NONE

    def merge(self, providers_hints: Sequence[ProviderAnswer]) -> MergeResult:
        return MergeResult(TopologyHint(None, False), True)


# upstream: var _ Policy = &nonePolicy{}
_conforms: type[Policy] = NonePolicy
