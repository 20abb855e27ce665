"""The public entry point of the implicit merge: upstream policy Merge over provider answers whose
hint lists may be ImplicitHints (see implicit_merge.py for the algorithm).

merge_implicit(providers, numa, policy, prefer_closest_numa) returns a FastMergeResult with the
same hint and admit as make_policy(policy, numa, opts).merge(...) over the exhaustive lists, plus the
normalised lists, B, and a bounded list of the hints that mattered for the decision record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from numalign.core.bitmask import bits_of
from numalign.core.hint import TopologyHint
from numalign.core.implicit import ImplicitHints
from numalign.core.implicit_merge import (
    Explicit,
    ImplicitMerger,
    ProviderSources,
    Source,
    SourceList,
    best_non_preferred_count,
    normalise,
)
from numalign.core.merge import merge_lists
from numalign.core.numa import NUMAInfo
from numalign.errors import ConfigError, InvalidInputError


def merge_sources(
    sources: Sequence[Source], numa: NUMAInfo, use_closest: bool
) -> tuple[TopologyHint, list[TopologyHint]]:
    """Upstream HintMerger.Merge (best-effort/restricted) over normalised lists; returns the best
    hint and the bounded list of candidates that mattered."""
    d = numa.default_affinity_mask
    if not any(isinstance(s, ImplicitHints) for s in sources):
        lists = [s for s in sources if not isinstance(s, ImplicitHints)]
        best = merge_lists(lists, numa, use_closest)
        return best, [best]
    if any(isinstance(s, ImplicitHints) and s.top & ~d for s in sources):
        # The provider sees nodes the Topology Manager does not: compare raw masks the slow, sure way.
        lists = [_materialize(s) for s in sources]
        best = merge_lists(lists, numa, use_closest)
        return best, [best]
    merger = ImplicitMerger(sources, numa, use_closest)
    best = merger.merge()
    return best, merger.considered + ([best] if best not in merger.considered else [])


def _materialize(src: Source) -> Explicit:
    if not isinstance(src, ImplicitHints):
        return src
    if src.materialize is None:
        raise InvalidInputError(
            f"implicit hint list {src.label!r}: its masks reach NUMA nodes outside the Topology Manager's "
            f"nodes and it has no materialize() to list them; give the provider the same NUMA node set"
        )
    return tuple(src.materialize())


@dataclass(frozen=True)
class FastMergeResult:
    """The policy's decision (same hint and admit as make_policy(...).merge on the explicit lists),
    the normalised lists, B, and `considered`: at most ImplicitMerger.MAX_CONSIDERED + 1 hints that
    mattered (each candidate that became the best so far, in search order, then the winner)."""

    hint: TopologyHint
    admit: bool
    lists: tuple[SourceList, ...]
    best_non_preferred_affinity_count: int
    considered: tuple[TopologyHint, ...]


def describe_lists(lists: Sequence[SourceList]) -> list[dict[str, Any]]:
    """A JSON-able summary of the merged lists for the decision record: explicit lists in full,
    implicit ones by what defines them (never their 2^N members)."""
    out: list[dict[str, Any]] = []
    for sl in lists:
        entry: dict[str, Any] = {"provider": sl.provider, "resource": sl.resource}
        src = sl.source
        if isinstance(src, ImplicitHints):
            entry.update(
                kind="implicit",
                label=src.label,
                nodes=bits_of(src.top),
                narrowest_count=src.min_count,
                preferred_counts=None if src.pref_sizes is None else sorted(src.pref_sizes),
                listed=[h.to_dict() for h in src.extras],
            )
        else:
            entry.update(kind="explicit", hints=[h.to_dict() for h in src])
        out.append(entry)
    return out


def merge_implicit(
    providers: Sequence[ProviderSources],
    numa: NUMAInfo,
    policy: str,
    prefer_closest_numa: bool = False,
) -> FastMergeResult:
    """Upstream policy Merge over provider answers whose hint lists may be ImplicitHints.

    `policy` is the kubelet name (none, best-effort, restricted, single-numa-node). The result's
    hint and admit equal `make_policy(policy, numa, PolicyOptions(prefer_closest_numa)).merge(...)`
    on the materialised (exhaustive) lists. max-allowable-numa-nodes is not checked here (the
    manager enforces it, as upstream's NewManager does).
    """
    if policy == "none":
        return FastMergeResult(TopologyHint(None, False), True, (), 0, ())
    lists = normalise(providers)
    if policy == "single-numa-node":
        single: list[Explicit] = []
        for sl in lists:
            src = sl.source
            if isinstance(src, ImplicitHints):
                single.append(tuple(src.single_node_preferred(bits_of(src.top))))
            else:
                single.append(tuple(h for h in src if h.preferred and (h.mask is None or h.mask.bit_count() == 1)))
        best = merge_lists(single, numa, False)
        if best.mask == numa.default_affinity_mask:
            best = TopologyHint(None, best.preferred)
        b = best_non_preferred_count(single)
        kept = tuple(SourceList(s.provider, s.resource, h) for s, h in zip(lists, single, strict=True))
        return FastMergeResult(best, best.preferred, kept, b, (best,))
    if policy not in ("best-effort", "restricted"):
        raise ConfigError(f'unknown policy: "{policy}"')
    if prefer_closest_numa:
        numa.require_distances()
    sources = [sl.source for sl in lists]
    best, considered = merge_sources(sources, numa, prefer_closest_numa)
    admit = True if policy == "best-effort" else best.preferred
    return FastMergeResult(best, admit, tuple(lists), best_non_preferred_count(sources), tuple(considered))
