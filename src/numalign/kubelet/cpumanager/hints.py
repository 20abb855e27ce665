"""CPU topology hints of the static policy (upstream generateCPUTopologyHints, spec §1.4).

This is the exact reference generator: it visits every non-empty subset of the machine's NUMA
nodes in bitmask.IterateBitMasks order, as upstream does. Its cost is 2^N masks.
"""

from __future__ import annotations

from collections.abc import Iterable

from numalign.core.bitmask import bits_of, iterate_bitmasks
from numalign.core.hint import TopologyHint
from numalign.errors import InvalidInputError
from numalign.kubelet.cpumanager.topology import CPUTopology, cpu_mask

# 2^20 masks take about a second; beyond that the exhaustive list would run for minutes or years.
EXACT_GENERATOR_MAX_NUMA_NODES = 20
# generateCPUTopologyHints' answers kept per topology (topo.derived[_HINTED]); cleared when full.
_HINTED = "cpu_topology_hints"
HINTED_KEPT = 8192


def is_hint_socket_aligned(topo: CPUTopology, mask: int, min_affinity_size: int) -> bool:
    """Upstream isHintSocketAligned: the hint spans exactly the minimal number of sockets."""
    if topo.num_sockets == 0:
        return False
    numa_per_socket = topo.num_numa_nodes // topo.num_sockets
    if numa_per_socket == 0:
        return False
    min_sockets = (min_affinity_size + numa_per_socket - 1) // numa_per_socket
    return len(topo.details.sockets_in_numa_nodes(*bits_of(mask))) == min_sockets


def _mask_table(topo: CPUTopology) -> list[tuple[int, tuple[int, ...], int]]:
    """(mask, its NUMA ids, machine CPUs in it) for every mask, in IterateBitMasks order (cached)."""
    table = topo.derived.get("cpu_hint_masks")
    if table is None:
        numa_ids = sorted(topo.details.numa_nodes())
        if len(numa_ids) > EXACT_GENERATOR_MAX_NUMA_NODES:
            raise InvalidInputError(
                f"the exhaustive CPU hint generator lists all 2^{len(numa_ids)} NUMA masks of this "
                f"machine, which cannot finish (limit {EXACT_GENERATOR_MAX_NUMA_NODES} NUMA nodes); "
                "query numalign.kubelet.cpumanager.hint_queries.CPUHintQueries instead"
            )
        total = {n: len(topo.details.cpus_in_numa_nodes(n)) for n in numa_ids}
        table = []
        for mask in iterate_bitmasks(numa_ids):
            nodes = tuple(bits_of(mask))
            table.append((mask, nodes, sum(total[n] for n in nodes)))
        topo.derived["cpu_hint_masks"] = table
    return table


def generate_cpu_topology_hints(
    topo: CPUTopology,
    available: Iterable[int],
    reusable: Iterable[int],
    request: int,
    align_by_socket: bool = False,
) -> list[TopologyHint]:
    """All NUMA masks with enough available + reusable CPUs, preferred when minimal (§1.4)."""
    return cpu_hints_of_masks(topo, cpu_mask(available), cpu_mask(reusable), request, align_by_socket)


def cpu_hints_of_masks(
    topo: CPUTopology, available: int, reusable: int, request: int, align_by_socket: bool = False
) -> list[TopologyHint]:
    """generate_cpu_topology_hints of the CPU sets given as masks (CPUTopology.mask_of).

    A pure function of the topology and its arguments: answers are kept per topology (shared by the
    nodes of one machine), as a fleet's nodes go through the same free sets again and again."""
    memo: dict[tuple[int, int, int, bool], tuple[TopologyHint, ...]] | None = topo.derived.get(_HINTED)
    if memo is None:
        memo = topo.derived[_HINTED] = {}
    key = (available, reusable, request, align_by_socket)
    got = memo.get(key)
    if got is None:
        got = tuple(_generate(topo, available, reusable, request, align_by_socket))
        if len(memo) >= HINTED_KEPT:
            memo.clear()
        memo[key] = got
    return list(got)


def _generate(topo: CPUTopology, avail: int, reusable: int, request: int, align_by_socket: bool) -> list[TopologyHint]:
    # Each NUMA node's available CPUs counted on the masks. Upstream reads CPUDetails[cpu] for any CPU: one
    # outside the topology reads the zero CPUInfo, NUMA node 0, for the counts and the reusable CPUs' nodes.
    avail_per_node: dict[int, int] = {}
    reusable_mask = 0
    for node, cpus in topo.numa_masks:
        avail_per_node[node] = (avail & cpus).bit_count()
        if reusable & cpus:
            reusable_mask |= 1 << node
    outside = ~topo.all_mask
    stray = (avail & outside).bit_count()
    if stray:
        avail_per_node[0] = avail_per_node.get(0, 0) + stray
    if reusable & outside:
        reusable_mask |= 1

    table = _mask_table(topo)
    min_affinity_size = len(topo.details.numa_nodes())
    masks: list[int] = []
    need_avail = request - reusable.bit_count()
    for mask, nodes, total in table:
        count = len(nodes)
        # The minimum counts the machine's total CPUs, before any free/reusable filter.
        if count < min_affinity_size and total >= request:
            min_affinity_size = count
        if reusable_mask & ~mask:
            continue
        free = 0
        for n in nodes:
            free += avail_per_node[n]
        if free < need_avail:
            continue
        masks.append(mask)

    # Hints are immutable, so one instance per (mask, preferred) is shared across calls.
    cache: dict[tuple[int, bool], TopologyHint] = topo.derived.setdefault("cpu_hint_objects", {})
    hints: list[TopologyHint] = []
    for mask in masks:
        if align_by_socket and is_hint_socket_aligned(topo, mask, min_affinity_size):
            preferred = True
        else:
            preferred = mask.bit_count() == min_affinity_size
        hint = cache.get((mask, preferred))
        if hint is None:
            hint = cache[(mask, preferred)] = TopologyHint(mask, preferred)
        hints.append(hint)
    return hints
