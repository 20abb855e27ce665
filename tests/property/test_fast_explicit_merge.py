"""The rank search over explicit lists (used by core.merge when the intersection DP would be too big)
decides exactly like the exhaustive product and like the intersection DP."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.reference_merge import ref_filter, ref_merge_lists
from support.strategies import numa_infos, provider_hint_sets

from numalign.core.bitmask import iterate_bitmasks
from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.merge import ImplicitMerger
from numalign.core.merge import (
    best_non_preferred,
    mask_fitter,
    max_of_min_affinity_counts,
    merge_lists,
    reachable_intersections,
)
from numalign.core.numa import NUMAInfo


@settings(max_examples=200)
@given(st.data())
def test_rank_search_equals_exhaustive_product(data: st.DataObject) -> None:
    numa = data.draw(numa_infos(max_nodes=6))
    providers: list[ProviderHints] = data.draw(provider_hint_sets(numa))
    closest = data.draw(st.booleans()) and numa.distances is not None
    lists = [tuple(hs) for hs in ref_filter(providers)]
    merger = ImplicitMerger(lists, numa, closest)
    assert merger.merge() == ref_merge_lists(lists, numa, closest)


@st.composite
def long_lists(draw: st.DrawFn) -> tuple[NUMAInfo, list[list[TopologyHint]], bool]:
    numa = draw(numa_infos(max_nodes=10).filter(lambda n: len(n.nodes) >= 5))
    every = list(iterate_bitmasks(list(numa.nodes)))
    lists: list[list[TopologyHint]] = []
    for _ in range(draw(st.integers(2, 4))):
        shape = draw(st.sampled_from(["upward", "random", "every"]))
        if shape == "every":
            masks = every
        elif shape == "upward":  # all masks holding enough weight: an upward-closed list
            w = {n: draw(st.integers(0, 3)) for n in numa.nodes}
            t = draw(st.integers(1, max(1, sum(w.values()))))
            masks = [m for m in every if sum(v for n, v in w.items() if m >> n & 1) >= t] or [every[-1]]
        else:
            masks = draw(st.lists(st.sampled_from(every), min_size=1, max_size=150))
        lists.append([TopologyHint(m, draw(st.integers(0, 9)) == 0) for m in masks])
    return numa, lists, draw(st.booleans()) and numa.distances is not None


@settings(max_examples=40)
@given(long_lists())
def test_rank_search_equals_intersection_dp_on_long_lists(
    case: tuple[NUMAInfo, list[list[TopologyHint]], bool],
) -> None:
    numa, lists, closest = case
    b = max_of_min_affinity_counts(lists)
    want = best_non_preferred(reachable_intersections(lists, numa.default_affinity_mask), b, mask_fitter(numa, closest))
    got = ImplicitMerger([tuple(hs) for hs in lists], numa, closest).best_non_preferred(b)
    assert got == want
    # and merge_lists (which picks DP or search by size) agrees with the DP-only answer
    full = merge_lists(lists, numa, closest)
    if not full.preferred:
        assert full.mask == (numa.default_affinity_mask if want is None else want)
