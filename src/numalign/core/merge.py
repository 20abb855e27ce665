"""The hint merge: upstream's HintMerger, computed without walking the product of hint lists.

Theory of operation
-------------------
Upstream (policy.go) walks every permutation of one hint per (provider, resource) list, ANDs the
masks of each permutation with the machine's default mask, marks the result preferred only when every
chosen hint is preferred and all chosen non-nil masks are *identical*, and keeps the best result by a
pairwise comparison. That comparison is a strict total order on (mask, preferred) pairs, so the
winner is simply the maximum of all non-empty merged candidates under this ranking:

1. preferred before non-preferred;
2. among preferred: the fitter mask — fewer nodes, then numerically smaller; with
   prefer-closest-numa-nodes (not under single-numa-node): fewer nodes, then smaller average
   distance, then numerically smaller;
3. among non-preferred, with B = max over lists of the narrowest non-nil hint's node count
   ("BestNonPreferredAffinityCount"): count == B first; then count < B, larger first; then
   count > B, smaller first; ties broken by the fitter mask as in 2.

So we never need the product:
- The preferred candidates are exactly the raw masks m offered preferred by every list (or accepted
  by a preferred nil hint in that list), giving m AND default; plus `default` itself when every list
  holds a preferred nil hint. That is O(distinct masks x lists).
- Only when no preferred candidate is non-empty do we need the non-preferred ones, which are the
  set of reachable intersections; we compute that set by dynamic programming over the lists
  (its size is bounded by the distinct masks, not by the product of list lengths).
- No non-empty candidate at all gives {default, non-preferred}, as upstream.

The exhaustive product is kept in the tests as the reference and compared on every vector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from numalign.core.hint import CANNOT_SATISFY, DONT_CARE, TopologyHint
from numalign.core.implicit.hints import HintList, ImplicitHints, ProviderAnswer
from numalign.core.implicit.merge import ImplicitMerger, max_of_min_affinity_counts
from numalign.core.numa import NUMAInfo
from numalign.errors import InvalidInputError

# One explicit (listed) hint list; each hint as (mask | None, preferred).
ExplicitList = Sequence[TopologyHint]

__all__ = [
    "CANNOT_SATISFY",
    "DONT_CARE",
    "FilteredList",
    "best_non_preferred",
    "filter_providers_hints",
    "mask_fitter",
    "max_of_min_affinity_counts",
    "merge_filtered",
    "merge_lists",
    "reachable_intersections",
]


@dataclass(frozen=True)
class FilteredList:
    """One normalised hint list (explicit or implicit) and where it came from (for the decision record)."""

    provider: int
    resource: str | None  # None when the provider gave no map at all
    hints: HintList


def filter_providers_hints(providers_hints: Sequence[ProviderAnswer]) -> list[FilteredList]:
    """Upstream filterProvidersHints: one list per (provider, resource), nil/[] made explicit.

    Resources are visited in sorted order; upstream visits Go map order, which is random, and the
    result does not depend on it (the selection above is a total order), only logging does. An
    implicit list with no member is an empty list ("cannot be satisfied").
    """
    out: list[FilteredList] = []
    for i, pmap in enumerate(providers_hints):
        if not pmap:
            out.append(FilteredList(i, None, (DONT_CARE,)))
            continue
        for resource in sorted(pmap):
            hints = pmap[resource]
            if hints is None:
                out.append(FilteredList(i, resource, (DONT_CARE,)))
            elif isinstance(hints, ImplicitHints):
                empty = not hints.has_up() and not any(h.mask is not None for h in hints.extras)
                out.append(FilteredList(i, resource, (CANNOT_SATISFY,) if empty else hints))
            elif len(hints) == 0:
                out.append(FilteredList(i, resource, (CANNOT_SATISFY,)))
            else:
                out.append(FilteredList(i, resource, tuple(hints)))
    return out


MaskCompare = Callable[[int, int], int]


def mask_fitter(numa: NUMAInfo, use_closest: bool) -> MaskCompare:
    """Upstream CompareNUMAAffinityMasks reduced to masks: returns the fitter of two masks."""
    return numa.fitter(use_closest)


def _best_mask(masks: Iterable[int], fitter: MaskCompare) -> int | None:
    best: int | None = None
    for m in masks:
        best = m if best is None else fitter(best, m)
    return best


def _preferred_candidates(lists: Sequence[ExplicitList], default: int) -> set[int]:
    """Masks (already ANDed with default) that some all-preferred, all-equal permutation yields."""
    if not lists:
        return {default}
    nil_ok: list[bool] = []
    per_list: list[set[int]] = []
    for hs in lists:  # one pass per list (this runs for every admission)
        nil = False
        masks: set[int] = set()
        for h in hs:
            if h.preferred:
                if h.mask is None:
                    nil = True
                else:
                    masks.add(h.mask)
        nil_ok.append(nil)
        per_list.append(masks)
    out: set[int] = set()
    if all(nil_ok):
        out.add(default)
    raw: set[int] = set().union(*per_list)
    for m in raw:
        if all(nil_ok[i] or m in per_list[i] for i in range(len(lists))):
            out.add(m & default)
    return out


def reachable_intersections(lists: Sequence[ExplicitList], default: int) -> set[int]:
    """Every mask some permutation merges to (default AND the chosen non-nil masks)."""
    reach = {default}
    for hs in lists:
        options = {default if h.mask is None else h.mask & default for h in hs}
        if default in options:
            # a nil (or all-covering) hint keeps every reachable mask as it is
            reach = reach | {s & m for s in reach for m in options if m != default}
        else:
            reach = {s & m for s in reach for m in options}
        if not reach:
            break
    return reach


# Work (reachable states x options) the intersection DP may spend before the rank search takes over.
_DP_BUDGET = 20_000


def _reachable_within_budget(lists: Sequence[ExplicitList], default: int, budget: int) -> set[int] | None:
    """reachable_intersections, or None as soon as the DP would exceed `budget` steps."""
    reach = {default}
    for hs in lists:
        options = {default if h.mask is None else h.mask & default for h in hs}
        budget -= len(reach) * len(options)
        if budget < 0:
            return None
        if default in options:
            reach = reach | {s & m for s in reach for m in options if m != default}
        else:
            reach = {s & m for s in reach for m in options}
        if not reach:
            break
    return reach


def non_preferred_rank(count: int, b: int) -> tuple[int, int]:
    """Sort key (smaller is better) of rule 3's count preference around B."""
    if count == b:
        return (0, 0)
    if count < b:
        return (1, -count)
    return (2, count)


def best_non_preferred(masks: Iterable[int], b: int, fitter: MaskCompare) -> int | None:
    by_rank: dict[tuple[int, int], list[int]] = {}
    for m in masks:
        if m:
            by_rank.setdefault(non_preferred_rank(m.bit_count(), b), []).append(m)
    if not by_rank:
        return None
    return _best_mask(by_rank[min(by_rank)], fitter)


def merge_lists(lists: Sequence[ExplicitList], numa: NUMAInfo, use_closest: bool) -> TopologyHint:
    """Upstream HintMerger.Merge over already-normalised lists."""
    default = numa.default_affinity_mask
    if any(len(hs) == 0 for hs in lists):
        return TopologyHint(default, False)  # no permutation at all
    fitter = mask_fitter(numa, use_closest)
    preferred = _best_mask((m for m in _preferred_candidates(lists, default) if m), fitter)
    if preferred is not None:
        return TopologyHint(preferred, True)
    b = max_of_min_affinity_counts(lists)
    reach = _reachable_within_budget(lists, default, _DP_BUDGET)
    if reach is None:
        # Too many intersections to list (long lists over many nodes): search them by rank instead,
        # testing membership per candidate (core/implicit/merge.py).
        best = ImplicitMerger([tuple(hs) for hs in lists], numa, use_closest).best_non_preferred(b)
    else:
        best = best_non_preferred(reach, b, fitter)
    if best is None:
        return TopologyHint(default, False)
    return TopologyHint(best, False)


def _explicit(hints: HintList) -> ExplicitList:
    if not isinstance(hints, ImplicitHints):
        return hints
    if hints.materialize is None:
        raise InvalidInputError(
            f"implicit hint list {hints.label!r}: its masks reach NUMA nodes outside the Topology Manager's "
            f"nodes and it has no materialize() to list them; give the provider the same NUMA node set"
        )
    return tuple(hints.materialize())


def merge_filtered(
    lists: Sequence[HintList], numa: NUMAInfo, use_closest: bool, b: int
) -> tuple[TopologyHint, tuple[TopologyHint, ...]]:
    """Upstream HintMerger.Merge (best-effort/restricted) over lists of which some are implicit;
    `b` is max_of_min_affinity_counts(lists). Returns the best hint and the bounded list of the
    candidates that mattered (for the decision record)."""
    d = numa.default_affinity_mask
    if not any(isinstance(h, ImplicitHints) for h in lists):
        best = merge_lists([_explicit(h) for h in lists], numa, use_closest)
        return best, (best,)
    if any(isinstance(h, ImplicitHints) and h.top & ~d for h in lists):
        # The provider sees nodes the Topology Manager does not: compare raw masks the slow, sure way.
        best = merge_lists([_explicit(h) for h in lists], numa, use_closest)
        return best, (best,)
    merger = ImplicitMerger(lists, numa, use_closest)
    best = merger.merge(b)
    return best, tuple(merger.considered) + (() if best in merger.considered else (best,))
