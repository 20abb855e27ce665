"""takeByTopologyNUMADistributed walks every combination of k NUMA nodes; on many NUMA nodes that is
millions of them (C(57, 6) = 36 million on the cpu wide profile's 64 one-CPU nodes). The walk asks about
nodes one at a time, so the CPU views' memos (topo.details' lives as long as the machine) hold an entry per
node, not one per combination visited: that run grew past 6 GB before."""

from __future__ import annotations

from math import comb

from numalign.kubelet.cpumanager.distributed import take_by_topology_numa_distributed
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology


def _one_cpu_nodes(nodes: int, sockets: int) -> CPUTopology:
    per_socket = nodes // sockets
    return CPUTopology.from_cpu_infos(
        [CPUInfo(cpu=i, numa_node=i, socket=i // per_socket, core=i, uncore=i) for i in range(nodes)])


def test_the_walk_keeps_nothing_per_combination() -> None:
    topo = _one_cpu_nodes(20, 4)
    before = len(topo.details._memo)  # the machine-wide view's memo: what a long-lived node keeps
    got = take_by_topology_numa_distributed(topo, range(1, 20), 5, 1, align_by_socket=True)
    # upstream's answer (harness-1.37's cpu area, distribute-cpus-across-numa + align-by-socket, CPU 0
    # reserved): socket 1's five nodes; no balance of 0 ends the walk early
    assert sorted(got) == [5, 6, 7, 8, 9]
    assert comb(19, 5) == 11_628  # combinations of 5 of the 19 free nodes walked
    assert len(topo.details._memo) - before <= 2 * 20  # per node (ids, sockets), never per combination


def test_one_socket_is_judged_as_upstream_over_the_machine() -> None:
    # 16 nodes in 4 sockets: the answer equals the real 1.37.2 static policy's (conformance cpu area)
    topo = _one_cpu_nodes(16, 4)
    assert sorted(take_by_topology_numa_distributed(topo, range(1, 16), 4, 1, align_by_socket=True)) == [4, 5, 6, 15]
