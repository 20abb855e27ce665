"""CPU topology hints of the static policy (upstream generateCPUTopologyHints, spec §1.4).

This is the exact reference generator: it visits every non-empty subset of the machine's NUMA
nodes in bitmask.IterateBitMasks order, as upstream does. Its cost is 2^N masks.
"""

from __future__ import annotations

from collections.abc import Iterable

from numalign.core.bitmask import bits_of, iterate_bitmasks
from numalign.core.hint import TopologyHint
from numalign.errors import InvalidInputError
from numalign.kubelet.cpumanager.topology import CPUTopology

# 2^20 masks take about a second; beyond that the exhaustive list would run for minutes or years.
EXACT_GENERATOR_MAX_NUMA_NODES = 20
# generateCPUTopologyHints' answers kept per topology (topo.derived[_HINTED]); cleared when full.
_HINTED = "cpu_topology_hints"
HINTED_KEPT = 8192


def _numa_of(topo: CPUTopology, cpu: int) -> int:
    # Upstream indexes CPUDetails[cpu]; a CPU outside the topology reads the zero CPUInfo, NUMA 0.
    info = topo.info(cpu)
    return 0 if info is None else info.numa_node


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
    """All NUMA masks with enough available + reusable CPUs, preferred when minimal (§1.4).

    A pure function of the topology and its arguments: answers are kept per topology (shared by the
    nodes of one machine), as a fleet's nodes go through the same free sets again and again."""
    # The policy passes frozensets: taken as they are (frozenset() of one is a copy in the compiled core,
    # with its hash to compute again for the memo's key).
    avail = available if isinstance(available, frozenset) else frozenset(available)
    reusable_set = reusable if isinstance(reusable, frozenset) else frozenset(reusable)
    memo: dict[tuple[frozenset[int], frozenset[int], int, bool], tuple[TopologyHint, ...]] | None
    memo = topo.derived.get(_HINTED)
    if memo is None:
        memo = topo.derived[_HINTED] = {}
    key = (avail, reusable_set, request, align_by_socket)
    got = memo.get(key)
    if got is None:
        got = tuple(_generate(topo, avail, reusable_set, request, align_by_socket))
        if len(memo) >= HINTED_KEPT:
            memo.clear()
        memo[key] = got
    return list(got)


def _generate(topo: CPUTopology, avail: frozenset[int], reusable_set: frozenset[int], request: int,
              align_by_socket: bool) -> list[TopologyHint]:
    view = topo.keep_only(avail)
    avail_per_node = dict.fromkeys(topo.details.numa_nodes(), 0)
    avail_per_node.update(view.counts("numa_node"))
    # Upstream reads CPUDetails[cpu] for any CPU; one outside the topology reads NUMA node 0.
    stray = len(avail) - len(view)
    if stray:
        avail_per_node[0] = avail_per_node.get(0, 0) + stray
    reusable_mask = 0
    for cpu in reusable_set:
        reusable_mask |= 1 << _numa_of(topo, cpu)

    table = _mask_table(topo)
    min_affinity_size = len(topo.details.numa_nodes())
    masks: list[int] = []
    need_avail = request - len(reusable_set)
    count_of = avail_per_node.__getitem__
    for mask, nodes, total in table:
        count = len(nodes)
        # The minimum counts the machine's total CPUs, before any free/reusable filter.
        if count < min_affinity_size and total >= request:
            min_affinity_size = count
        if reusable_mask & ~mask:
            continue
        if sum(map(count_of, nodes)) < need_avail:
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
