"""The merge over implicit hint lists equals upstream's exhaustive product (tests/support/reference_merge).

Implicit lists here are adversarial: random monotone predicates over random tops, random listed
extras (masks may reach outside the machine), arbitrary preferred flags; mixed with explicit lists
of every shape (nil, [], nil masks, empty masks, out-of-machine bits).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.reference_merge import policy_merge, ref_policy_merge
from support.strategies import POLICIES, hints_for, numa_infos

from numalign.core.bitmask import iterate_bitmasks
from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
from numalign.core.numa import NUMAInfo
from numalign.core.policies.base import has_implicit


def _family(
    top: int, weights: dict[int, int], threshold: int, required: int, pref_salt: int, extras: list[TopologyHint]
) -> ImplicitHints:
    def up_pass(m: int) -> bool:
        return required & ~m == 0 and sum(w for x, w in weights.items() if m >> x & 1) >= threshold

    def preferred(m: int) -> bool:
        return (m * 2654435761 + pref_salt) % 3 == 0

    members = [m for m in iterate_bitmasks([x for x in range(top.bit_length()) if top >> x & 1]) if up_pass(m)]
    listed = [TopologyHint(m, preferred(m)) for m in members] + extras
    counts = [h.mask.bit_count() for h in listed if h.mask is not None]
    return ImplicitHints(
        top=top,
        up_pass=up_pass,
        is_preferred=preferred,
        min_count=min(counts),
        extras=tuple(extras),
        materialize=lambda: list(listed),
        label="random",
    )


@st.composite
def implicit_lists(draw: st.DrawFn, numa: NUMAInfo) -> ImplicitHints | list[TopologyHint]:
    nodes = list(numa.nodes)
    outside = draw(st.booleans()) and draw(st.integers(0, 5)) == 0  # sometimes a top beyond the machine
    pool = [*nodes, max(nodes) + 1] if outside else nodes
    top_nodes = draw(st.sets(st.sampled_from(pool), min_size=1))
    top = 0
    for x in top_nodes:
        top |= 1 << x
    weights = {x: draw(st.integers(0, 3)) for x in top_nodes}
    threshold = draw(st.integers(0, sum(weights.values())))
    required = 0
    for x in draw(st.sets(st.sampled_from(sorted(top_nodes)), max_size=1)):
        required |= 1 << x
    extras = [h for h in draw(st.lists(hints_for(numa), max_size=2)) if h.mask is not None]
    fam = _family(top, weights, threshold, required, draw(st.integers(0, 2)), extras)
    if not fam.materialize or not fam.materialize():
        return []  # providers answer [] when nothing passes, never an empty implicit list
    return fam


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, NUMAInfo, list[ProviderAnswer], bool]:
    numa = draw(numa_infos(max_nodes=4).filter(lambda n: len(n.nodes) > 0))
    providers: list[ProviderAnswer] = []
    for p in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["none", "implicit", "implicit", "explicit"]))
        if kind == "none":
            providers.append(draw(st.sampled_from([None, {}])))
            continue
        pmap: dict[str, Any] = {}
        for r in range(draw(st.integers(1, 2))):
            if kind == "implicit":
                pmap[f"r{p}{r}"] = draw(implicit_lists(numa))
            else:
                pmap[f"r{p}{r}"] = draw(st.one_of(st.none(), st.lists(hints_for(numa), max_size=3)))
        providers.append(pmap)
    policy = draw(st.sampled_from(POLICIES))
    closest = draw(st.booleans()) and numa.distances is not None
    return policy, numa, providers, closest


def _explicit(providers: list[ProviderAnswer]) -> list[ProviderHints]:
    out: list[ProviderHints] = []
    for p in providers:
        if p is None:
            out.append(None)
            continue
        conv: dict[str, list[TopologyHint] | None] = {}
        for r, v in p.items():
            if isinstance(v, ImplicitHints):
                assert v.materialize is not None
                conv[r] = v.materialize()
            else:
                conv[r] = None if v is None else list(v)
        out.append(conv)
    return out


@settings(max_examples=200)
@given(scenarios())
def test_implicit_merge_equals_exhaustive_product(s: tuple[str, NUMAInfo, list[ProviderAnswer], bool]) -> None:
    policy, numa, providers, closest = s
    got = policy_merge(providers, numa, policy, closest)
    assert (got.hint, got.admit) == ref_policy_merge(policy, _explicit(providers), numa, closest)
    # `considered` is kept for records of implicit merges only (explicit lists speak for themselves)
    assert got.hint in got.considered or policy == "none" or not has_implicit(providers)
