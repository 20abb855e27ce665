"""search_closest (branch and bound, and its twin-class search) equals brute force over every mask."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.core.bitmask import mask_of
from numalign.core.implicit.closest import search_closest
from numalign.core.numa import NUMAInfo


@st.composite
def cases(draw: st.DrawFn) -> tuple[NUMAInfo, list[int], int, frozenset[int], int]:
    n = draw(st.integers(2, 9))
    ids = sorted(draw(st.sets(st.integers(0, 11), min_size=n, max_size=n)))
    # sockets give twin classes; a few random edits break some of them
    socket = {x: draw(st.integers(0, 2)) for x in ids}
    between = {(a, b): draw(st.sampled_from([11, 12, 20, 21, 30])) for a in range(3) for b in range(3)}
    width = max(ids) + 1
    rows = {x: [10 if x == y else between[socket[x], socket.get(y, 0)] for y in range(width)] for x in ids}
    for _ in range(draw(st.integers(0, 2))):
        x, y = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        rows[x][y] = draw(st.sampled_from([10, 11, 15, 40]))
    numa = NUMAInfo.create(ids, rows)
    size = draw(st.integers(1, n))
    every = [mask_of(c) for c in combinations(ids, size)]
    allowed = frozenset(draw(st.lists(st.sampled_from(every), max_size=len(every))))
    need = draw(st.sampled_from(ids))
    return numa, ids, size, allowed, need


@settings(max_examples=200)
@given(cases())
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
