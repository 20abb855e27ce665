"""The Policy contract (upstream Policy interface) and the names users write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.merge import FilteredList


class PolicyName(StrEnum):
    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class ScopeName(StrEnum):
    CONTAINER = "container"
    POD = "pod"


@dataclass(frozen=True)
class MergeResult:
    """What a policy decided, with the normalised lists it merged (for the decision record)."""

    hint: TopologyHint
    admit: bool
    lists: tuple[FilteredList, ...] = ()
    best_non_preferred_affinity_count: int = 0


class Policy(Protocol):
    @property
    def name(self) -> PolicyName: ...

    def merge(self, providers_hints: Sequence[ProviderHints]) -> MergeResult: ...


def is_alignment_guaranteed(policy: Policy) -> bool:
    """Upstream IsAlignmentGuaranteed: only single-numa-node guarantees alignment (gates metrics)."""
    return policy.name is PolicyName.SINGLE_NUMA_NODE
