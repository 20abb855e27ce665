"""The rank search over explicit lists (used by core.merge when the intersection DP would be too big)
decides exactly like the exhaustive product and like the intersection DP."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.reference_merge import ref_filter, ref_merge_lists
from support.strategies import long_lists, numa_infos, provider_hint_sets

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
