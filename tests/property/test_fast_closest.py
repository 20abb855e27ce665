"""search_closest (branch and bound, and its twin-class search) equals brute force over every mask."""

from __future__ import annotations

from hypothesis import given, settings
from support.strategies import closest_cases

from numalign.core.implicit.closest import search_closest
from numalign.core.numa import NUMAInfo


@settings(max_examples=200)
@given(closest_cases())
def test_search_closest_equals_brute_force(case: tuple[NUMAInfo, list[int], int, frozenset[int], int]) -> None:
    numa, ids, size, allowed, need = case
    assert numa.distances is not None

    def leaf(m: int) -> bool:
        return m in allowed

    def prune(inc: int, top: int) -> bool:  # a necessary condition: the mask must hold node `need`
        return bool(top >> need & 1)

    want: int | None = None
    for m in sorted(allowed):
        if m >> need & 1:
            want = m if want is None else numa.closest(want, m)
    def leaf_need(m: int) -> bool:
        return leaf(m) and bool(m >> need & 1)

    assert search_closest(ids, size, leaf_need, prune, numa.distances, numa.closest) == want
