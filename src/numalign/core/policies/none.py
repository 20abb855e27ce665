"""Policy none: no merge at all; every pod is admitted with a nil affinity."""

from __future__ import annotations

from collections.abc import Sequence

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.policies.base import MergeResult, PolicyName


class NonePolicy:
    @property
    def name(self) -> PolicyName:
        return PolicyName.NONE

    def merge(self, providers_hints: Sequence[ProviderHints]) -> MergeResult:
        return MergeResult(TopologyHint(None, False), True)
