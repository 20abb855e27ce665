"""Every resource a rejected pod falls short of, with what it needs and what is free per NUMA node and
on the node, in one answer.

The kubelet stops at the first failure (the CPU manager's Allocate fails before the memory manager is
asked), so its message names one resource; a pod short of CPUs and of hugepages must hear of both to
be fixed in one go. Each resource the pod requests is compared on its own against the node as it is:

* on the node: the predicate's view, allocatable less what the admitted pods request (cpu in
  millicores; a node without hugepages of a size has 0 of it);
* per NUMA node, for the resources the NUMA-aware managers place: exclusive CPUs (static CPU manager,
  Guaranteed, whole CPUs), memory and hugepages (Static memory manager), devices. Under the
  single-numa-node policy a resource no single NUMA node has enough of falls short even when the node
  as a whole has it.

The request compared is the rejected container's (the pod's under the pod scope).
"""

from __future__ import annotations

from dataclasses import dataclass

from numalign.answer.rejected import Rejected
from numalign.answer.why import numa_bound, show
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, is_hugepage_resource_name
from numalign.kubelet.admission.allocatable import RESOURCE_PODS
from numalign.kubelet.node import Node

# Rejections whose cause is not a resource: nothing to count.
NOT_RESOURCES = ("Evicted", "PodLevelResourcesNotSupported")


@dataclass(frozen=True)
class Shortfall:
    resource: str
    need: int                              # per NUMA node: CPUs, bytes or devices; on the node: predicate units
    per_numa: tuple[tuple[int, int], ...]  # (NUMA node, free) where the managers place the resource
    numa_need: int                         # the request per NUMA node is compared with (whole CPUs for cpu)
    node_free: int
    node_allocatable: int

    def text(self) -> str:
        r = self.resource
        exclusive = r == RESOURCE_CPU and bool(self.per_numa)
        need = f"{self.numa_need} exclusive CPUs" if exclusive else show(r, self.need)
        parts = []
        if self.per_numa:
            parts.append(_per_numa_text(r, self.per_numa))
        if self.node_allocatable == 0:
            parts.append(f"this node has 0 {r}")
        else:
            parts.append(f"the node {show(r, self.node_free)} of {show(r, self.node_allocatable)} allocatable")
        return f"{r} needs {need} (free: {'; '.join(parts)})"


# Beyond this many "NUMA n free" entries the line names the NUMA nodes with the most free and sums up the rest.
MAX_NUMA_ENTRIES = 6
# NUMA nodes sharing a free amount are named as one range ("NUMA 0-63 0 each") from this many on; two stay
# apart ("NUMA 0 0, NUMA 1 0"), which reads as plainly as a range at that size.
MIN_GROUP = 3


def _per_numa_text(resource: str, per_numa: tuple[tuple[int, int], ...]) -> str:
    """Free per NUMA node, readable at 64 NUMA nodes: equal amounts share a range in the cpuset spelling
    ("NUMA 0-31,33-63 0 each"), and past MAX_NUMA_ENTRIES entries only those with the most free are named,
    the rest counted ("NUMA 5 7, ..., and 40 more NUMA nodes with 2 or less")."""
    def amount(v: int) -> str:
        return str(v) if resource == RESOURCE_CPU else show(resource, v)

    by_free: dict[int, list[int]] = {}
    for n, v in per_numa:
        by_free.setdefault(v, []).append(n)
    entries: list[tuple[int, int, str]] = []  # (first NUMA id, free, text): shown in NUMA order
    for v, ids in by_free.items():
        if len(ids) >= MIN_GROUP:
            entries.append((ids[0], v, f"NUMA {format_cpuset(ids)} {amount(v)} each"))
        else:
            entries.extend((n, v, f"NUMA {n} {amount(v)}") for n in ids)
    if len(entries) <= MAX_NUMA_ENTRIES:
        return ", ".join(t for _, _, t in sorted(entries))
    ranked = sorted(entries, key=lambda e: (-e[1], e[0]))
    shown, rest = ranked[:MAX_NUMA_ENTRIES - 1], ranked[MAX_NUMA_ENTRIES - 1:]
    rest_ids = sum(len(by_free[v]) if len(by_free[v]) >= MIN_GROUP else 1 for _, v, _ in rest)
    most = max(v for _, v, _ in rest)
    return (", ".join(t for _, _, t in sorted(shown))
            + f", and {rest_ids} more NUMA nodes with {amount(most)} or less")


def shortfalls(node: Node, pod: Rejected) -> list[Shortfall]:
    """The resources `pod` (rejected by `node`) falls short of, in the order it requests them."""
    if pod.reason in NOT_RESOURCES:
        return []
    pod_scope = node.tm.scope_name == "pod"
    numa_need: dict[str, int] = {}
    if pod.target is not None:
        bound = set(numa_bound(node, pod))
        requests = pod.fit if pod_scope else pod.target.amounts
        numa_need = {n: (v // 1000 if n == RESOURCE_CPU else v) for n, v in requests.items() if n in bound}
    allocatable, used = pod.allocatable, pod.requested
    single = node.tm.policy_name == "single-numa-node"
    out = []
    for name, need in pod.fit.items():
        if name == RESOURCE_PODS or need <= 0:
            continue
        cap = allocatable.get(name, 0)
        node_free = cap - used.get(name, 0)
        per_numa = _per_numa(node, name) if name in numa_need else ()
        wanted = numa_need.get(name, 0)
        short_numa = bool(per_numa) and (sum(v for _, v in per_numa) < wanted
                                         or (single and max(v for _, v in per_numa) < wanted))
        if node_free < need or short_numa:
            out.append(Shortfall(name, need, per_numa, wanted, node_free, cap))
    return out


def _per_numa(node: Node, resource: str) -> tuple[tuple[int, int], ...]:
    ids = node.machine.numa_ids()
    if resource == RESOURCE_CPU:
        if not node.cpu.pins:
            return ()
        free = node.cpu.get_available_cpus()
        return tuple((n, len(free & node.machine.cpus_on(n))) for n in ids)
    if resource == RESOURCE_MEMORY or is_hugepage_resource_name(resource):
        if not node.memory.pins:
            return ()
        out = []
        for n in ids:
            state = node.memory.machine_state.get(n)
            table = state.memory_map.get(resource) if state is not None else None
            out.append((n, table.free if table is not None else 0))
        return tuple(out)
    devices = node.devices.get_allocatable_devices().get(resource)
    if not devices:
        return ()
    taken = node.devices.allocated.get(resource, set())
    return tuple((n, sum(1 for d, dev in devices.items()
                         if d not in taken and dev.topology is not None and n in dev.topology)) for n in ids)

