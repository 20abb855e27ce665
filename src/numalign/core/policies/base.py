"""The Policy contract (upstream Policy interface) and the names users write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
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
    """What a policy decided, with the normalised lists it merged (for the decision record).

    `considered`: when some list was implicit, at most ImplicitMerger.MAX_CONSIDERED + 1 hints that
    mattered (each candidate that became the best so far, in search order, then the winner); empty
    when every list was explicit (the lists themselves say it all)."""

    hint: TopologyHint
    admit: bool
    lists: tuple[FilteredList, ...] = ()
    best_non_preferred_affinity_count: int = 0
    considered: tuple[TopologyHint, ...] = ()


class Policy(Protocol):
    """Upstream's Policy interface: Merge is the one way hints become an affinity.

    `merge` accepts upstream's explicit lists or providers' implicit ones (core/implicit) and picks
    the path itself; both decide the same. Each policy module states its conformance the way upstream
    writes `var _ Policy = &bestEffortPolicy{}`: a module-level `_conforms: type[Policy] = ...` that
    mypy checks and that costs nothing at run time (annotations are not evaluated).
    """

    @property
    def name(self) -> PolicyName: ...

    def merge(self, providers_hints: Sequence[ProviderAnswer]) -> MergeResult: ...


def has_implicit(providers_hints: Sequence[ProviderAnswer]) -> bool:
    """Did any provider describe a list implicitly (then the implicit merge decides)."""
    for answer in providers_hints:
        if answer:
            for hints in answer.values():
                if isinstance(hints, ImplicitHints):
                    return True
    return False


def is_alignment_guaranteed(policy: Policy) -> bool:
    """Upstream IsAlignmentGuaranteed: only single-numa-node guarantees alignment (gates metrics)."""
    return policy.name is PolicyName.SINGLE_NUMA_NODE
