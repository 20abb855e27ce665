"""The fewest NUMA nodes that could hold a pod on a machine: the measure "on the fewest possible" of
the simulation's NUMA alignment.

Read from an empty node's allocatable per NUMA node (the NodeResourceTopology zones): the smallest
number of NUMA nodes whose allocatable together covers the pod's exclusive CPUs (integral CPU requests
of a Guaranteed pod under the static CPU manager), its memory and hugepages (Guaranteed pods under the
Static memory manager) and its devices. A pod needing none of those needs 0: it cannot be misaligned.
Machines with more than 12 NUMA nodes take the largest nodes first (a greedy lower bound on the
count) instead of trying every combination.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from numalign.cluster.nrt_export import node_resource_topology
from numalign.k8s.pod import Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.requests import container_requests, pod_requests
from numalign.k8s.resources import RESOURCE_CPU
from numalign.kubelet.node import Node

EXHAUSTIVE_LIMIT = 12


def zone_allocatable(empty: Node) -> list[dict[str, int]]:
    """Per NUMA node of an empty node: allocatable per resource (cpu in whole CPUs)."""
    nrt = node_resource_topology(empty, "empty")
    return [{r.name: r.allocatable for r in z.resources} for z in nrt.zones]


def needs(pod: Pod) -> dict[str, int]:
    """What must sit on the pod's NUMA nodes: exclusive CPUs, memory, hugepages and devices."""
    if get_pod_qos(pod) is not QOSClass.GUARANTEED:
        return {}
    from numalign.cluster.resources import amount

    out: dict[str, int] = {}
    integral = all(
        (q := container_requests(c).get(RESOURCE_CPU)) is None or q.milli_value() % 1000 == 0
        for c in pod.containers
    )
    for name, q in pod_requests(pod).items():
        if name == RESOURCE_CPU:
            if integral:
                out[name] = amount(name, q) // 1000
        else:
            out[name] = amount(name, q)
    return {k: v for k, v in out.items() if v > 0}


def fewest_numa_nodes(zones: list[dict[str, int]], request: Mapping[str, int]) -> int:
    wanted = {k: v for k, v in request.items() if any(k in z for z in zones)}
    if not wanted:
        return 0
    n = len(zones)
    if n > EXHAUSTIVE_LIMIT:
        order = sorted(range(n), key=lambda i: [-zones[i].get(k, 0) for k in sorted(wanted)])
        total: dict[str, int] = {}
        for k, i in enumerate(order, start=1):
            for name in wanted:
                total[name] = total.get(name, 0) + zones[i].get(name, 0)
            if all(total[name] >= v for name, v in wanted.items()):
                return k
        return n
    for size in range(1, n + 1):
        for combo in itertools.combinations(zones, size):
            if all(sum(z.get(name, 0) for z in combo) >= v for name, v in wanted.items()):
                return size
    return n
