"""NUMA occupancy per node pool at the end of a run: the share of each NUMA node's allocatable CPUs
held exclusively (the CPU manager's static policy), summed over the pool's nodes. `simulate --report`
draws it as a heat map (pool x NUMA node). Pools whose kubelets pin no CPUs (cpuManagerPolicy none)
are left out: they place nothing on a NUMA node."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numalign.cluster.state import ClusterState


def numa_occupancy(state: ClusterState) -> dict[str, dict[int, float]]:
    held: dict[str, dict[int, int]] = {}
    allocatable: dict[str, dict[int, int]] = {}
    empty: dict[str, dict[int, int] | None] = {}  # a pool's allocatable CPUs per NUMA node, built once
    for sn in state.nodes:
        pool = sn.pool.name
        if pool not in empty:
            node = sn.kubelet or sn.pool.new_node()  # an idle node's kubelet is never built
            empty[pool] = ({n.id: len(n.cpus - node.cpu.reserved_cpus) for n in node.machine.numa_nodes}
                           if node.cpu.pins else None)
        per_numa = empty[pool]
        if per_numa is None:
            continue
        totals = allocatable.setdefault(pool, {})
        pool_held = held.setdefault(pool, {})
        for numa, count in per_numa.items():
            totals[numa] = totals.get(numa, 0) + count
        if sn.kubelet is not None:
            for numa, count in sn.kubelet.cpu.allocated_per_numa().items():
                pool_held[numa] = pool_held.get(numa, 0) + count
    return {
        pool: {numa: round(held[pool].get(numa, 0) / total, 6) if total else 0.0
               for numa, total in sorted(nodes.items())}
        for pool, nodes in allocatable.items()
    }
