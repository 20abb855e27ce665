"""The exhaustive reference: upstream's HintMerger, walking the full product, written from the spec.

Kept deliberately naive and separate from numalign.core.merge so the fast merge is checked against an
independent implementation of upstream's algorithm (pairwise compare, odometer order).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.hints import ProviderAnswer
from numalign.core.numa import NUMAInfo
from numalign.core.policies import MergeResult, PolicyOptions, make_policy


def ref_filter(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    out: list[list[TopologyHint]] = []
    for pmap in providers:
        if not pmap:
            out.append([TopologyHint(None, True)])
            continue
        for res in pmap:  # any order: the result must not depend on it
            hs = pmap[res]
            if hs is None:
                out.append([TopologyHint(None, True)])
            elif len(hs) == 0:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(hs))
    return out


def ref_max_of_min(lists: Sequence[Sequence[TopologyHint]]) -> int:
    best = 0
    for hs in lists:
        narrowest: int | None = None
        for h in hs:
            if h.mask is None:
                continue
            if narrowest is None or (h.mask.bit_count(), h.mask) < (narrowest.bit_count(), narrowest):
                narrowest = h.mask
        if narrowest is not None and narrowest.bit_count() > best:
            best = narrowest.bit_count()
    return best


def _narrower(a: int, b: int) -> bool:
    if a.bit_count() == b.bit_count():
        return a < b
    return a.bit_count() < b.bit_count()


def _avg(numa: NUMAInfo, mask: int) -> float:
    ids = [i for i in range(mask.bit_length()) if mask >> i & 1]
    assert numa.distances is not None
    total = 0.0
    for i in ids:
        for j in ids:
            total += float(numa.distances[i][j])
    return total / float(len(ids) * len(ids))


def _compare_masks(numa: NUMAInfo, closest: bool, cur: TopologyHint, cand: TopologyHint) -> TopologyHint:
    assert cur.mask is not None and cand.mask is not None
    if cur.mask == cand.mask:
        return cur
    # upstream: Closest/Narrowest(current, candidate); returns current iff it picked current's mask
    m1, m2 = cur.mask, cand.mask
    if closest and m1.bit_count() == m2.bit_count():
        a1, a2 = _avg(numa, m1), _avg(numa, m2)
        best = (m1 if m1 < m2 else m2) if a1 == a2 else (m1 if a1 < a2 else m2)
    else:
        best = m1 if _narrower(m1, m2) else m2
    return cur if best == cur.mask else cand


def ref_compare(
    numa: NUMAInfo, closest: bool, b: int, cur: TopologyHint | None, cand: TopologyHint
) -> TopologyHint | None:
    assert cand.mask is not None
    if cand.mask.bit_count() == 0:
        return cur
    if cur is None:
        return cand
    assert cur.mask is not None
    if not cur.preferred and cand.preferred:
        return cand
    if cur.preferred and not cand.preferred:
        return cur
    if cur.preferred and cand.preferred:
        return _compare_masks(numa, closest, cur, cand)
    c, n = cur.mask.bit_count(), cand.mask.bit_count()
    if c > b:
        return _compare_masks(numa, closest, cur, cand)
    if c == b:
        return cur if n != b else _compare_masks(numa, closest, cur, cand)
    if n > b:
        return cur
    if n == b:
        return cand
    if n > c:
        return cand
    if n < c:
        return cur
    return _compare_masks(numa, closest, cur, cand)


def ref_merge_lists(lists: Sequence[Sequence[TopologyHint]], numa: NUMAInfo, closest: bool) -> TopologyHint:
    default = 0
    for n in numa.nodes:
        default |= 1 << n
    b = ref_max_of_min(lists)
    best: TopologyHint | None = None
    for perm in product(*lists):
        preferred = True
        affs = [h.mask for h in perm if h.mask is not None]
        merged = default
        for h in perm:
            if h.mask is not None and h.mask != affs[0]:
                preferred = False
            if not h.preferred:
                preferred = False
            if h.mask is not None:
                merged &= h.mask
        best = ref_compare(numa, closest, b, best, TopologyHint(merged, preferred))
    return best if best is not None else TopologyHint(default, False)


def ref_policy_merge(
    policy: str, providers: Sequence[ProviderHints], numa: NUMAInfo, closest: bool
) -> tuple[TopologyHint, bool]:
    lists = ref_filter(providers)
    if policy == "none":
        return TopologyHint(None, False), True
    if policy == "single-numa-node":
        lists = [[h for h in hs if h.preferred and (h.mask is None or h.mask.bit_count() == 1)] for hs in lists]
        best = ref_merge_lists(lists, numa, False)
        default = 0
        for n in numa.nodes:
            default |= 1 << n
        if best.mask == default:
            best = TopologyHint(None, best.preferred)
        return best, best.preferred
    best = ref_merge_lists(lists, numa, closest)
    return best, (best.preferred if policy == "restricted" else True)


def policy_merge(
    providers: Sequence[ProviderAnswer], numa: NUMAInfo, policy: str, prefer_closest_numa: bool = False
) -> MergeResult:
    """numalign's own merge through the one entry point, Policy.merge (explicit or implicit lists)."""
    return make_policy(policy, numa, PolicyOptions(prefer_closest_numa=prefer_closest_numa)).merge(providers)
