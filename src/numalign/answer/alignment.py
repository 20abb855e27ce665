"""Alignment at a glance: the NUMA nodes (and sockets) of each container's CPUs, memory and devices,
flags where a container spans more NUMA nodes than it needs or more than one socket, and a summary
per pod.

"Needs": the fewest NUMA nodes whose capacity on an empty node (allocatable exclusive CPUs, memory
manager allocatable memory and hugepages, healthy devices) holds the container's exclusive CPUs,
pinned memory and devices together; found exactly up to 10 NUMA nodes, above that as the largest of
the per-resource minimums (a lower bound). Containers on the shared CPU pool with no pinned memory
and no devices are not flagged: nothing of theirs is NUMA-bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from numalign.core.decision import ContainerAllocation
from numalign.k8s.resources import RESOURCE_CPU
from numalign.machine.topology import Machine
from numalign.report.verdict import ALIGNED, NOT_ALIGNED, NOTHING_PINNED, Verdict, headline

EXACT_LIMIT = 10


@dataclass(frozen=True)
class ContainerAlignment:
    container: str
    cpus: tuple[int, ...]       # NUMA nodes of its exclusive CPUs (empty on the shared pool)
    memory: tuple[int, ...]
    devices: Mapping[str, tuple[int, ...]]
    numa_nodes: tuple[int, ...]
    sockets: tuple[int, ...]
    fewest: int                 # NUMA nodes it needs at least (0: nothing NUMA-bound)
    flags: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"container": self.container, "cpus_numa_nodes": list(self.cpus),
                "memory_numa_nodes": list(self.memory),
                "devices_numa_nodes": {r: list(v) for r, v in self.devices.items()},
                "numa_nodes": list(self.numa_nodes), "sockets": list(self.sockets),
                "fewest_numa_nodes": self.fewest, "flags": list(self.flags)}


@dataclass(frozen=True)
class PodAlignment:
    containers: tuple[ContainerAlignment, ...]

    @property
    def verdict(self) -> Verdict:
        """report/verdict.py's word: nothing pinned when no container holds anything NUMA-bound, NOT
        aligned when a container is flagged, else aligned."""
        if not any(c.numa_nodes for c in self.containers):
            return NOTHING_PINNED
        return NOT_ALIGNED if any(c.flags for c in self.containers) else ALIGNED

    @property
    def aligned(self) -> bool:
        return self.verdict == ALIGNED

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        return tuple(sorted({n for c in self.containers for n in c.numa_nodes}))

    def summary(self) -> str:
        verdict = self.verdict
        if verdict == NOTHING_PINNED:
            return headline(verdict, "shared CPU pool, no pinned memory or NUMA-bound devices")
        if verdict == ALIGNED:
            return headline(verdict, f"each container on the fewest NUMA nodes it needs; the pod uses NUMA "
                                     f"{_nodes(self.numa_nodes)}")
        return headline(verdict, "; ".join(f"{c.container}: {', '.join(c.flags)}" for c in self.containers if c.flags))

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "aligned": self.aligned, "numa_nodes": list(self.numa_nodes),
                "summary": self.summary(),
                "containers": [c.to_dict() for c in self.containers]}


def _nodes(ids: Iterable[int]) -> str:
    return ",".join(map(str, sorted(ids))) or "-"


class AlignmentJudge:
    """Built once per node from an empty node's capacity per NUMA node."""

    def __init__(self, machine: Machine, capacity: Mapping[int, Mapping[str, int]]) -> None:
        self.machine = machine
        self.capacity = {n: dict(capacity.get(n, {})) for n in machine.numa_ids()}
        self._socket = {n.id: _socket_of(machine, n.id) for n in machine.numa_nodes}

    def container(self, name: str, allocation: ContainerAllocation) -> ContainerAlignment:
        cpu_nodes: set[int] = set()
        need: dict[str, int] = {}
        if allocation.exclusive:
            cpu_nodes = self.machine.numa_nodes_of(allocation.cpus)
            need[RESOURCE_CPU] = len(allocation.cpus)
        mem_nodes: set[int] = set()
        for b in allocation.memory:
            mem_nodes.update(b.numa_nodes)
            need[b.type] = need.get(b.type, 0) + b.size
        devs: dict[str, tuple[int, ...]] = {}
        for res, ids in allocation.devices.items():
            nodes = {n for topo in ids.values() if topo for n in topo}
            devs[res] = tuple(sorted(nodes))
            need[res] = need.get(res, 0) + len(ids)
        used = cpu_nodes | mem_nodes | {n for v in devs.values() for n in v}
        sockets = tuple(sorted({self._socket[n] for n in used if n in self._socket}))
        fewest = self.fewest(need) if need else 0
        flags = []
        if fewest and len(used) > fewest:
            flags.append(f"spans NUMA {_nodes(used)} where {fewest} NUMA node{'s' if fewest > 1 else ''} would do")
        if len(sockets) > 1 and self._fits_one_socket(need):
            flags.append(f"spans sockets {_nodes(sockets)} where one would do")
        return ContainerAlignment(name, tuple(sorted(cpu_nodes)), tuple(sorted(mem_nodes)), devs,
                                  tuple(sorted(used)), sockets, fewest, tuple(flags))

    def pod(self, allocations: Mapping[str, ContainerAllocation]) -> PodAlignment:
        return PodAlignment(tuple(self.container(n, a) for n, a in allocations.items()))

    def _covers(self, nodes: Sequence[int], need: Mapping[str, int]) -> bool:
        return all(sum(self.capacity[n].get(r, 0) for n in nodes) >= v for r, v in need.items())

    def fewest(self, need: Mapping[str, int]) -> int:
        ids = list(self.capacity)
        if len(ids) <= EXACT_LIMIT:
            for k in range(1, len(ids) + 1):
                if any(self._covers(c, need) for c in combinations(ids, k)):
                    return k
            return len(ids)
        worst = 1
        for r, v in need.items():
            total, k = 0, 0
            for amount in sorted((self.capacity[n].get(r, 0) for n in ids), reverse=True):
                if total >= v:
                    break
                total += amount
                k += 1
            worst = max(worst, k)
        return worst

    def _fits_one_socket(self, need: Mapping[str, int]) -> bool:
        by_socket: dict[int, list[int]] = {}
        for n, s in self._socket.items():
            by_socket.setdefault(s, []).append(n)
        return any(self._covers(nodes, need) for nodes in by_socket.values())


def _socket_of(machine: Machine, numa: int) -> int:
    cpus = machine.node(numa).cpus
    return machine.cpu(min(cpus)).socket if cpus else -1



def empty_node_capacity(free: Iterable[Any]) -> dict[int, dict[str, int]]:
    """Per NUMA node allocatable from numalign.answer.free.numa_capacity (an empty node's capacity)."""
    out: dict[int, dict[str, int]] = {}
    for f in free:
        if f.numa_node is not None:
            out.setdefault(f.numa_node, {})[f.resource] = f.allocatable
    return out
