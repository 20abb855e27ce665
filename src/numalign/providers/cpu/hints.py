"""CPU topology hints of the static policy (upstream generateCPUTopologyHints, spec §1.4).

This is the exact reference generator: it visits every non-empty subset of the machine's NUMA
nodes in bitmask.IterateBitMasks order, as upstream does. Its cost is 2^N masks.
"""

from __future__ import annotations

from collections.abc import Iterable

from numalign.core.bitmask import bits_of, iterate_bitmasks
from numalign.core.hint import TopologyHint
from numalign.providers.cpu.topology import CPUTopology


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


def generate_cpu_topology_hints(
    topo: CPUTopology,
    available: Iterable[int],
    reusable: Iterable[int],
    request: int,
    align_by_socket: bool = False,
) -> list[TopologyHint]:
    """All NUMA masks with enough available + reusable CPUs, preferred when minimal (§1.4)."""
    numa_ids = sorted(topo.details.numa_nodes())
    total_per_node = {n: len(topo.details.cpus_in_numa_nodes(n)) for n in numa_ids}
    avail_per_node: dict[int, int] = {}
    for cpu in set(available):
        n = _numa_of(topo, cpu)
        avail_per_node[n] = avail_per_node.get(n, 0) + 1
    reusable_set = set(reusable)
    reusable_mask = 0
    for cpu in reusable_set:
        reusable_mask |= 1 << _numa_of(topo, cpu)

    min_affinity_size = len(numa_ids)
    masks: list[int] = []
    for mask in iterate_bitmasks(numa_ids):
        nodes = bits_of(mask)
        count = len(nodes)
        # The minimum counts the machine's total CPUs, before any free/reusable filter.
        if count < min_affinity_size and sum(total_per_node[n] for n in nodes) >= request:
            min_affinity_size = count
        if reusable_mask & ~mask:
            continue
        matching = len(reusable_set) + sum(avail_per_node.get(n, 0) for n in nodes)
        if matching < request:
            continue
        masks.append(mask)

    hints: list[TopologyHint] = []
    for mask in masks:
        if align_by_socket and is_hint_socket_aligned(topo, mask, min_affinity_size):
            preferred = True
        else:
            preferred = mask.bit_count() == min_affinity_size
        hints.append(TopologyHint(mask, preferred))
    return hints
