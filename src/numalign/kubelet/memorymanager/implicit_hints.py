"""The memory manager's hints without listing 2^N masks (calculateHints as ImplicitHints), and its
findBestHint over such a description.

calculateHints is NOT monotone. Its passing masks are (a) masks of unused nodes whose allocatable and
free memory cover the request (monotone over the unused nodes), plus a few listed masks: (b) single
used nodes, (c) multi-NUMA groups in use, (d) masks holding reusable memory (keyed by the exact mask).
A multi-node mask with a used node passes only if it equals that node's group, which is why (a)-(d)
are all of them. A state with an unused node inside a group (which the kubelet never writes) falls
back to the exhaustive generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from numalign.core.bitmask import bits_of, mask_of, mask_string
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, NodeSums, UpBound, min_member_count, search_masks
from numalign.kubelet.memorymanager.hints import (
    Requested,
    ReusableMemory,
    calculate_hints,
    find_best_hint,
    reusable_for,
    violates_grouping,
)
from numalign.kubelet.memorymanager.state import NUMANodeState
from numalign.kubelet.topologymanager.provider import ListOrImplicit


def memory_topology_hints(
    machine_state: Mapping[int, NUMANodeState],
    requested: Requested,
    reusable: ReusableMemory | None = None,
) -> dict[str, ListOrImplicit]:
    """calculate_hints, described: {} when no mask passes, else one (shared) list per resource."""
    nodes = sorted(machine_state)
    resources = sorted(requested)
    if not resources or not nodes:
        return {}
    unused = [n for n in nodes if machine_state[n].number_of_assignments == 0]
    if any(len(machine_state[n].cells) > 1 for n in unused):
        exhaustive = calculate_hints(machine_state, requested, reusable)
        return {r: list(h) for r, h in exhaustive.items()}
    alloc = {r: NodeSums({n: machine_state[n].table(r).allocatable for n in nodes}) for r in resources}
    free = {r: NodeSums({n: machine_state[n].table(r).free for n in nodes}) for r in resources}

    def covers(table: Mapping[str, NodeSums], m: int) -> bool:
        return all(table[r].sum(m) >= requested[r] for r in resources)

    def bound_for(tables: Sequence[Mapping[str, NodeSums]]) -> UpBound:
        def bound(inc: int, allowed: int, size: int) -> bool:
            extra = size - inc.bit_count()
            rest = allowed & ~inc
            return all(t[r].sum(inc) + t[r].topk(rest, extra) >= requested[r] for t in tables for r in resources)

        return bound

    # minAffinitySize: the fewest nodes whose allocatable covers every request (upstream starts at N)
    def alloc_pass(m: int) -> bool:
        return covers(alloc, m)

    k = min_member_count(nodes, alloc_pass, bound_for([alloc])) or len(nodes)

    def passes(m: int) -> bool:
        """calculateHints' test of one mask, exactly."""
        bits = bits_of(m)
        if not covers(alloc, m):
            return False
        if len(bits) == 1:
            if len(machine_state[bits[0]].cells) > 1:
                return False
        elif violates_grouping(machine_state, bits):
            return False
        return all(free[r].sum(m) + reusable_for(reusable, m, r) >= requested[r] for r in resources)

    top = mask_of(unused)

    def up_pass(m: int) -> bool:
        return covers(alloc, m) and covers(free, m)

    up_bound = bound_for([alloc, free])

    has_up = bool(unused) and up_pass(top)
    # (b)-(d): every other mask that can pass
    listed: set[int] = set()
    for n in nodes:
        st = machine_state[n]
        if st.number_of_assignments > 0:
            listed.add(1 << n)
            if len(st.cells) > 1 and all(c in machine_state for c in st.cells):
                listed.add(mask_of(st.cells))
    all_nodes = mask_of(nodes)
    for key in reusable or {}:
        try:
            m = int(key, 2)
        except ValueError:
            continue
        if m and m & ~all_nodes == 0 and mask_string(m) == key:
            listed.add(m)
    extras = tuple(
        TopologyHint(m, m.bit_count() == k)
        for m in sorted(listed)
        if passes(m) and not (has_up and m & ~top == 0 and up_pass(m))
    )
    if not has_up and not extras:
        return {}
    up_min = min_member_count(unused, up_pass, up_bound) if has_up else None
    min_count = min([c for c in [up_min, *(h.mask.bit_count() for h in extras if h.mask)] if c is not None])
    state, req, reuse = machine_state, dict(requested), reusable

    def materialize() -> list[TopologyHint]:
        return list(calculate_hints(state, req, reuse).get(resources[0], []))

    family = ImplicitHints(
        top=top,
        up_pass=up_pass if has_up else None,
        is_preferred=lambda m: m.bit_count() == k,
        min_count=min_count,
        pref_sizes=frozenset({k}),
        up_bound=up_bound,
        extras=extras,
        materialize=materialize,
        label="memory",
        # what the list is made of: the unused nodes' allocatable and free memory (the upward part), the extras
        describe=lambda: ("memory", top, has_up, extras, min_count, k, tuple(
            (r, requested[r], tuple((machine_state[n].table(r).allocatable, machine_state[n].table(r).free)
                                    for n in unused)) for r in resources)),
    )
    return dict.fromkeys(resources, family)



def best_member_hint(src: ListOrImplicit, containing: int = 0) -> TopologyHint | None:
    """The memory manager's findBestHint over the hints whose mask contains `containing` (all hints
    when 0), without listing them: a preferred hint first, then the narrowest (fewest nodes, then
    numerically smallest). Allocate uses it for the default affinity (`containing` 0) and to widen
    a merged affinity that cannot hold the request (`containing` = that affinity)."""
    if isinstance(src, list):
        return find_best_hint(h for h in src if h.mask is not None and h.mask & containing == containing)
    listed = [h for h in src.extras if h.mask is not None and h.mask & containing == containing]
    nodes = bits_of(src.top)
    lowest = max(containing.bit_count(), 1)

    def narrowest_up(preferred_only: bool) -> int | None:
        if src.up_pass is None or containing & ~src.top:
            return None
        sizes = sorted(src.pref_sizes) if preferred_only and src.pref_sizes is not None else range(1, len(nodes) + 1)
        for c in sizes:
            if c < lowest or c > len(nodes):
                continue

            def leaf(m: int) -> bool:
                return m & containing == containing and src.in_up(m) and (not preferred_only or src.is_preferred(m))

            def prune(inc: int, allowed: int, c: int = c) -> bool:
                return allowed & containing == containing and src.bound(inc | containing, allowed, c)

            found = next(search_masks(nodes, c, leaf, prune), None)
            if found is not None:
                return found
        return None

    for preferred_only in (True, False):
        cands = [h.mask for h in listed if h.mask is not None and (h.preferred or not preferred_only)]
        up = narrowest_up(preferred_only)
        if up is not None:
            cands.append(up)
        if cands:
            best = min(cands, key=lambda m: (m.bit_count(), m))
            preferred = any(h.mask == best and h.preferred for h in listed) or (
                src.in_up(best) and src.is_preferred(best)
            )
            return TopologyHint(best, preferred)
    return None
