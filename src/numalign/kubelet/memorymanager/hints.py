"""Memory manager Static policy: topology hints (upstream calculateHints / regenerateHints).

Result shapes are upstream's, kept distinct:
- None: regenerateHints found blocks that do not match the request (the TM reads it as "don't care");
- {}: calculateHints found no mask that can hold the request;
- otherwise one list per requested resource, identical across resources (possibly [] in
  regenerateHints when several matching blocks share one type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

from numalign.core.bitmask import bits_of, is_narrower, mask_of, mask_string
from numalign.core.hint import TopologyHint, hint_of
from numalign.kubelet.memorymanager.state import Block, MemoryTable, NUMANodeState

# The container's (or pod's) request per resource, bytes.
Requested = Mapping[str, int]
# Reusable init-container memory of the pod being admitted: mask_string(mask) -> resource -> bytes.
# It counts only for the exact mask it was allocated on.
ReusableMemory = Mapping[str, Mapping[str, int]]

MemoryHints = dict[str, list[TopologyHint]]


def reusable_for(reusable: ReusableMemory | None, mask: int, resource: str) -> int:
    """Upstream getPodReusableMemory, keyed by the bitmask's String() text."""
    if not reusable:
        return 0
    return reusable.get(mask_string(mask), {}).get(resource, 0)


def _group_matches(cells: Sequence[int], mask_bits: Sequence[int]) -> bool:
    """Upstream areGroupsEqual: the same NUMA ids in any order (lists compared sorted)."""
    return sorted(cells) == sorted(mask_bits)


def violates_grouping(machine_state: Mapping[int, NUMANodeState], mask_bits: Sequence[int]) -> bool:
    """Upstream isAffinityViolatingNUMAAllocations: a node is used either by single-NUMA allocations or
    by exactly one multi-NUMA group. Only multi-node masks over used nodes can violate it."""
    if len(mask_bits) == 1:
        return False
    for nid in mask_bits:
        node = machine_state[nid]
        if node.number_of_assignments == 0:
            continue
        if len(node.cells) == 1 or not _group_matches(node.cells, mask_bits):
            return True
    return False


def calculate_hints(
    machine_state: Mapping[int, NUMANodeState],
    requested: Requested,
    reusable: ReusableMemory | None = None,
) -> MemoryHints:
    """Upstream calculateHints. Masks come from IterateBitMasks over the sorted NUMA ids; preferred
    means the mask size equals the smallest size whose *allocatable* totals cover the request."""
    # Plain loops and lists throughout: this runs for every Guaranteed container admitted, and the compiled
    # core runs them natively (zip(strict=True), generators and set methods go through generic calls).
    nodes = sorted(machine_state)
    resources = sorted(requested)
    states = [machine_state[n] for n in nodes]
    tables: list[list[MemoryTable]] = []
    allocatable: list[int] = []
    for r in resources:
        ts = [st.table(r) for st in states]
        tables.append(ts)
        for t in ts:
            allocatable.append(t.allocatable)
    # Which masks' allocatable totals cover the request, and the smallest such size, depend only on the
    # allocatable bytes (fixed for a node) and the request: kept per those, as every admission asks.
    key = (tuple(nodes), tuple([(r, requested[r]) for r in resources]), tuple(allocatable))
    found = _COVERING.get(key)
    if found is None:
        found = _covering(nodes, [requested[r] for r in resources], [[t.allocatable for t in ts] for ts in tables])
        if len(_COVERING) >= COVERING_KEPT:
            _COVERING.clear()
        _COVERING[key] = found
    candidates, min_affinity_size = found
    # The hints themselves depend, beyond that key, only on each node's free bytes, its cells and whether
    # it holds an assignment (and on reusable memory, which only an init container's pod has): kept per
    # those, as a node's state comes back to the same few values admission after admission.
    state_key: tuple[object, ...] | None = None
    if not reusable:
        parts: list[object] = [key]
        for i in range(len(states)):
            st = states[i]
            parts.append(tuple(st.cells))
            parts.append(st.number_of_assignments != 0)
            for ts in tables:
                parts.append(ts[i].free)
        state_key = tuple(parts)
        kept = _HINTED.get(state_key)
        if kept is not None:
            return _as_hints(kept, resources)
    grouped: set[int] = set()  # nodes in a multi-NUMA group
    busy: set[int] = set()
    for i, n in enumerate(nodes):
        st = states[i]
        if len(st.cells) > 1:
            grouped.add(n)
        if st.number_of_assignments:
            busy.add(n)
    # Per resource: the request and each node's free bytes (one dict lookup per node in the loop below).
    free: list[tuple[str, int, dict[int, int]]] = []
    for j, r in enumerate(resources):
        ts = tables[j]
        column: dict[int, int] = {}
        for i, n in enumerate(nodes):
            column[n] = ts[i].free
        free.append((r, requested[r], column))
    single = len(free) == 1 and not reusable
    need, column = (free[0][1], free[0][2]) if single else (0, {})
    masks: list[int] = []
    for mask_bits, mask in candidates:
        if len(mask_bits) == 1:
            if mask_bits[0] in grouped:
                continue  # the node belongs to a multi-NUMA group
        elif busy:
            # (a mask over unused nodes cannot violate the grouping)
            touches_busy = False
            for n in mask_bits:
                if n in busy:
                    touches_busy = True
                    break
            if touches_busy and violates_grouping(machine_state, mask_bits):
                continue
        if single:  # one resource, no reusable memory: the common case, without the general loop
            total = 0
            for n in mask_bits:
                total += column[n]
            if total >= need:
                masks.append(mask)
            continue
        fits = True
        for r, need_r, column_r in free:
            total = reusable_for(reusable, mask, r) if reusable else 0
            for n in mask_bits:
                total += column_r[n]
            if total < need_r:
                fits = False
                break
        if fits:
            masks.append(mask)

    listed = _hint_list(masks, min_affinity_size) if masks else ()
    if state_key is not None:
        if len(_HINTED) >= COVERING_KEPT:
            _HINTED.clear()
        _HINTED[state_key] = listed
    return _as_hints(listed, resources)


def _as_hints(listed: tuple[TopologyHint, ...], resources: list[str]) -> MemoryHints:
    """calculateHints' answer: the same list (a new one each) per resource, or {} when no mask fits."""
    hints: MemoryHints = {}
    if listed:
        for r in resources:
            hints[r] = list(listed)
    return hints


def _hint_list(masks: list[int], min_affinity_size: int) -> tuple[TopologyHint, ...]:
    """The hints of `masks`, preferred when as narrow as `min_affinity_size`, kept per (masks, size): a
    node's free state comes back to the same few mask lists again and again."""
    key = (tuple(masks), min_affinity_size)
    got = _HINT_LISTS.get(key)
    if got is None:
        got = tuple([hint_of(m, m.bit_count() == min_affinity_size) for m in masks])
        if len(_HINT_LISTS) >= COVERING_KEPT:
            _HINT_LISTS.clear()
        _HINT_LISTS[key] = got
    return got


_HINT_LISTS: dict[tuple[tuple[int, ...], int], tuple[TopologyHint, ...]] = {}
# calculate_hints' answers without reusable memory, per (its covering key, each node's cells, busy flag and
# free bytes per resource).
_HINTED: dict[tuple[object, ...], tuple[TopologyHint, ...]] = {}


# calculateHints' masks whose allocatable bytes cover a request, per (NUMA ids, request, allocatable).
_COVERING: dict[tuple[object, ...], tuple[list[tuple[tuple[int, ...], int]], int]] = {}
COVERING_KEPT = 4096


def _covering(nodes: Sequence[int], needs: Sequence[int],
              allocatable: Sequence[Sequence[int]]) -> tuple[list[tuple[tuple[int, ...], int]], int]:
    """The masks (IterateBitMasks order) whose allocatable totals cover every need, with their ids,
    and the smallest size among them (the machine's NUMA count when none does)."""
    position = {n: i for i, n in enumerate(nodes)}
    min_affinity_size = len(nodes)
    out: list[tuple[tuple[int, ...], int]] = []
    for k in range(1, len(nodes) + 1):
        # combinations of the sorted ids in order == upstream IterateBitMasks
        for mask_bits in combinations(nodes, k):
            if any(sum(column[position[n]] for n in mask_bits) < need
                   for need, column in zip(needs, allocatable, strict=True)):
                continue
            # Counted before the grouping and free-memory checks: a mask that is merely busy still
            # counts as the minimal size, so wider fallbacks are then not preferred.
            min_affinity_size = min(min_affinity_size, k)
            out.append((mask_bits, mask_of(mask_bits)))
    return out, min_affinity_size


def regenerate_hints(blocks: Iterable[Block], requested: Requested) -> MemoryHints | None:
    """Upstream regenerateHints: the hints of a container that already holds blocks (e.g. after a
    kubelet restart). Returns None when the blocks do not match the request."""
    blocks = list(blocks)
    hints: MemoryHints = {r: [] for r in sorted(requested)}
    if len(blocks) != len(requested):
        return None
    for b in blocks:
        if b.type not in requested or b.size != requested[b.type]:
            return None
        hints[b.type].append(TopologyHint(mask_of(b.numa_affinity), True))
    return hints


def find_best_hint(hints: Iterable[TopologyHint]) -> TopologyHint | None:
    """Upstream findBestHint: the first hint, replaced by any preferred one over a non-preferred one,
    and by a narrower one with the same preference. None for an empty list (upstream: a nil-affinity
    zero hint)."""
    best: TopologyHint | None = None
    for h in hints:
        if best is None:
            best = h
            continue
        if h.preferred and not best.preferred:
            best = h
            continue
        if (
            h.preferred == best.preferred
            and h.mask is not None
            and best.mask is not None
            and is_narrower(h.mask, best.mask)
        ):
            best = h
    return best


def is_affinity_satisfy_request(
    machine_state: Mapping[int, NUMANodeState], mask: int, requested: Requested
) -> bool:
    """Upstream isAffinitySatisfyRequest: Σ free over the mask covers every request (reusable memory
    is not counted here)."""
    states = [machine_state[n] for n in bits_of(mask)]
    for r, size in requested.items():  # plain loops: every Allocate of a Guaranteed container asks
        total = 0
        for st in states:
            total += st.table(r).free
        if total < size:
            return False
    return True


def is_subset_mask(inner: int, outer: int) -> bool:
    """Upstream isHintInGroup(inner bits, outer bits): every node of `inner` is in `outer`."""
    return inner & outer == inner
