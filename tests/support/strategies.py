"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.numa import NUMAInfo


@st.composite
def numa_infos(draw: st.DrawFn, max_nodes: int = 10, with_distances: bool = True) -> NUMAInfo:
    n = draw(st.integers(0, max_nodes))
    ids = sorted(draw(st.sets(st.integers(0, max_nodes + 2), min_size=n, max_size=n)))
    if not with_distances or not ids:
        return NUMAInfo.create(ids)
    width = max(ids) + 1
    # Small distances make equal averages (the numeric tie-break) frequent.
    rows = {i: [10 if i == j else draw(st.sampled_from([11, 12, 20, 21])) for j in range(width)] for i in ids}
    return NUMAInfo.create(ids, rows)


def hints_for(numa: NUMAInfo, max_hints: int = 4) -> st.SearchStrategy[TopologyHint]:
    universe = max(numa.nodes, default=0) + 2  # includes ids outside the machine
    masks = st.one_of(
        st.none(),
        st.just(0),
        st.integers(1, (1 << universe) - 1),
        st.sampled_from([1 << n for n in numa.nodes] or [1]),
    )
    return st.builds(TopologyHint, masks, st.booleans())


@st.composite
def provider_hint_sets(draw: st.DrawFn, numa: NUMAInfo, max_providers: int = 4) -> list[ProviderHints]:
    providers: list[ProviderHints] = []
    for p in range(draw(st.integers(0, max_providers))):
        shape = draw(st.sampled_from(["none", "empty", "map"]))
        if shape == "none":
            providers.append(None)
        elif shape == "empty":
            providers.append({})
        else:
            pmap: dict[str, Any] = {}
            for r in range(draw(st.integers(1, 3))):
                kind = draw(st.sampled_from(["nil", "empty", "list", "list", "list"]))
                if kind == "nil":
                    pmap[f"r{p}{r}"] = None
                elif kind == "empty":
                    pmap[f"r{p}{r}"] = []
                else:
                    pmap[f"r{p}{r}"] = draw(st.lists(hints_for(numa), min_size=1, max_size=4))
            providers.append(pmap)
    return providers


POLICIES = ["best-effort", "restricted", "single-numa-node"]
