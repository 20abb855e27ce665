"""Provider hints without listing 2^N masks: the same hint sets as the exhaustive generators
(providers/cpu/hints.py, devices/hints.py, memory/hints.py), as ImplicitHints.

Each function returns what the exhaustive generator returns when that is small ([] / {} / a
fallback list) and otherwise an ImplicitHints holding exactly the generator's masks and flags:

- CPU (generateCPUTopologyHints): a mask passes iff every reusable CPU's node is in it and
  |reusable| + free CPUs on its nodes >= request: monotone. minAffinitySize = the fewest nodes whose
  TOTAL CPUs reach the request (a greedy prefix over nodes sorted by size is exact for sums).
  Preferred: count == minAffinitySize, or (align-by-socket) socket-aligned.
- Devices (generateDeviceTopologyHints): passes iff every reusable device with topology touches it
  and |reusable| + available devices touching it >= request: monotone. minAffinitySize counts ALL
  devices of the resource touching a mask (found by a pruned search, devices may span nodes).
- Memory (calculateHints): NOT monotone. Its passing masks are (a) masks of unused nodes whose
  allocatable and free memory cover the request (monotone over the unused nodes), plus a few listed
  masks: (b) single used nodes, (c) multi-NUMA groups in use, (d) masks holding reusable memory
  (keyed by the exact mask). A multi-node mask with a used node passes only if it equals that
  node's group, which is why (a)-(d) are all of them. A state with an unused node inside a group
  (which the kubelet never writes) falls back to the exhaustive generator.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from numalign.core.bitmask import bits_of, mask_of, mask_string
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, NodeSums, UpBound, min_member_count, search_masks
from numalign.providers.cpu.hints import generate_cpu_topology_hints, is_hint_socket_aligned
from numalign.providers.cpu.topology import CPUTopology
from numalign.providers.devices.endpoint import Device
from numalign.providers.devices.hints import (
    device_numa_mask,
    generate_device_topology_hints,
    resource_hint_steps,
)
from numalign.providers.implicit import ListOrImplicit
from numalign.providers.memory.hints import (
    Requested,
    ReusableMemory,
    calculate_hints,
    find_best_hint,
    reusable_for,
    violates_grouping,
)
from numalign.providers.memory.state import NUMANodeState


class _Coverage:
    """How many devices touch a mask: single-node devices add up per node; the (few) devices that
    span several nodes are tested one by one; devices without nodes never count."""

    def __init__(self, masks: Sequence[int]) -> None:
        per_node: dict[int, int] = {}
        self.multi: list[int] = []
        for m in masks:
            if m.bit_count() == 1:
                n = m.bit_length() - 1
                per_node[n] = per_node.get(n, 0) + 1
            elif m:
                self.multi.append(m)
        self.single = NodeSums(per_node)

    def count(self, mask: int) -> int:
        return self.single.sum(mask) + sum(1 for d in self.multi if d & mask)

    def bound(self, inc: int, allowed: int, size: int, target: int) -> bool:
        """Optimistic: may some S, inc <= S <= allowed, |S| == size, touch `target` devices."""
        rest = allowed & ~inc
        spanning = sum(1 for d in self.multi if d & inc or d & rest)
        return self.single.sum(inc) + self.single.topk(rest, size - inc.bit_count()) + spanning >= target


# --- CPU -----------------------------------------------------------------------------------------
def cpu_topology_hints(
    topo: CPUTopology,
    available: Iterable[int],
    reusable: Iterable[int],
    request: int,
    align_by_socket: bool = False,
) -> ListOrImplicit:
    """generate_cpu_topology_hints, described: [] when no mask passes, else an ImplicitHints."""
    numa_ids = sorted(topo.details.numa_nodes())
    top = mask_of(numa_ids)

    # Per-node counts by set intersection (C speed; 1024 CPUs cost 64 intersections, not 1024 lookups).
    # As upstream, a CPU outside the topology reads the zero CPUInfo: it counts for NUMA node 0.
    per_node = {n: topo.details.cpus_in_numa_nodes(n) for n in numa_ids}
    known = topo.details.cpus()
    available_set = frozenset(available)
    avail = {n: len(available_set & cpus) for n, cpus in per_node.items()}
    if available_set - known:
        avail[0] = avail.get(0, 0) + len(available_set - known)
    reusable_set = frozenset(reusable)
    reusable_mask = 1 if reusable_set - known else 0
    for n, cpus in per_node.items():
        if not reusable_set.isdisjoint(cpus):
            reusable_mask |= 1 << n
    need = request - len(reusable_set)
    sums = NodeSums(avail)

    def up_pass(m: int) -> bool:
        return reusable_mask & ~m == 0 and sums.sum(m) >= need

    if not numa_ids or not up_pass(top):
        return []

    def up_bound(inc: int, allowed: int, size: int) -> bool:
        mand = inc | reusable_mask
        if mand & ~allowed:
            return False
        r = size - mand.bit_count()
        return r >= 0 and sums.sum(mand) + sums.topk(allowed & ~mand, r) >= need

    # minAffinitySize: fewest nodes whose TOTAL CPUs reach the request (upstream starts at N)
    totals = sorted((len(cpus) for cpus in per_node.values()), reverse=True)
    k, acc = len(numa_ids), 0
    for c, t in enumerate(totals, start=1):
        acc += t
        if acc >= request:
            k = min(k, c)
            break
    # the narrowest passing mask: the reusable CPUs' nodes, then the freest nodes (sums are additive)
    count, have = reusable_mask.bit_count(), sums.sum(reusable_mask)
    for n in sorted(numa_ids, key=lambda x: -avail.get(x, 0)):
        if count >= 1 and have >= need:
            break
        if not reusable_mask >> n & 1:
            count, have = count + 1, have + avail.get(n, 0)
    min_count = count

    def preferred(m: int) -> bool:
        if align_by_socket and is_hint_socket_aligned(topo, m, k):
            return True
        return m.bit_count() == k

    avail_list, reusable_list = list(available_set), list(reusable_set)
    return ImplicitHints(
        top=top,
        up_pass=up_pass,
        is_preferred=preferred,
        min_count=min_count,
        pref_sizes=None if align_by_socket else frozenset({k}),
        up_bound=up_bound,
        materialize=lambda: generate_cpu_topology_hints(topo, avail_list, reusable_list, request, align_by_socket),
        label="cpu",
    )


# --- devices -------------------------------------------------------------------------------------
def device_topology_hints(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> ListOrImplicit:
    """generate_device_topology_hints, described: [] when no mask passes, else an ImplicitHints."""
    available, reusable = list(dict.fromkeys(available)), list(dict.fromkeys(reusable))
    nodes = list(dict.fromkeys(numa_nodes))
    top = mask_of(nodes)
    all_masks = [device_numa_mask(d) for d in all_devices.values()]
    reusable_masks = [
        device_numa_mask(dev) for d in reusable if (dev := all_devices.get(d)) is not None and dev.topology is not None
    ]
    available_masks = [device_numa_mask(all_devices.get(d)) for d in available]
    need = request - len(reusable_masks)
    avail_cov = _Coverage(available_masks)

    def up_pass(m: int) -> bool:
        return all(r & m for r in reusable_masks) and avail_cov.count(m) >= need

    if not nodes or not up_pass(top):
        return []

    def up_bound(inc: int, allowed: int, size: int) -> bool:
        return avail_cov.bound(inc, allowed, size, need)

    all_cov = _Coverage(all_masks)

    def all_bound(inc: int, allowed: int, size: int) -> bool:
        return all_cov.bound(inc, allowed, size, request)

    # minAffinitySize: the fewest nodes touched by `request` devices of ANY state (upstream starts at N)
    k = min(min_member_count(nodes, lambda m: all_cov.count(m) >= request, all_bound) or len(numa_nodes),
            len(numa_nodes))
    min_count = min_member_count(nodes, up_pass, up_bound)
    assert min_count is not None
    nodes_list = list(numa_nodes)
    return ImplicitHints(
        top=top,
        up_pass=up_pass,
        is_preferred=lambda m: m.bit_count() == k,
        min_count=min_count,
        pref_sizes=frozenset({k}),
        up_bound=up_bound,
        materialize=lambda: generate_device_topology_hints(nodes_list, all_devices, available, reusable, request),
        label="devices",
    )


def resource_topology_hints_implicit(
    numa_nodes: Sequence[int],
    all_devices: Mapping[str, Device],
    *,
    allocated: Collection[str] | None,
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> ListOrImplicit | None:
    """devices.hints.resource_topology_hints (steps a-e) with the implicit generator."""
    return resource_hint_steps(
        numa_nodes, all_devices, device_topology_hints,
        allocated=allocated, available=available, reusable=reusable, request=request,
    )


# --- memory --------------------------------------------------------------------------------------
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


__all__ = [
    "best_member_hint",
    "cpu_topology_hints",
    "device_topology_hints",
    "memory_topology_hints",
    "resource_topology_hints_implicit",
    "search_masks",
]
