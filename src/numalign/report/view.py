"""What a node report shows, as plain values: the machine, reserved CPUs and every pod with its
containers' CPUs, memory and devices (admitted) or its decision record (rejected).

Two sources give the same shape: the decision records of `numalign admit` (DecisionRecord.to_dict())
and the status file `numalign serve` writes (read by `numalign pods`). Both carry allocations in
ContainerAllocation.to_dict() form, so the drawing never needs to know where they came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from numalign.k8s.cpuset import parse_cpuset
from numalign.machine.topology import Machine


@dataclass(frozen=True)
class MemoryBlock:
    type: str  # "memory" or "hugepages-<size>"
    size: int  # bytes
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True)
class ContainerView:
    name: str
    cpus: frozenset[int]
    exclusive: bool  # False: the container runs in the shared pool
    memory: tuple[MemoryBlock, ...] = ()
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # resource -> device ids


@dataclass(frozen=True)
class PodView:
    key: str  # namespace/name
    status: str  # admitted, rejected, pending
    reason: str = ""
    message: str = ""
    containers: tuple[ContainerView, ...] = ()
    record: Mapping[str, Any] | None = None  # DecisionRecord.to_dict(), kept for rejected pods
    # admit's answers (numalign.answer.present.admit): a rejected pod's why, free capacity and verified
    # "would fit if"; an admitted pod's alignment. None where the source has none (serve's status file).
    answer: Mapping[str, Any] | None = None
    alignment: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class NodeView:
    machine: Machine
    title: str
    pods: tuple[PodView, ...] = ()
    reserved_cpus: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()  # one line each: the configuration, where the pods came from

    @property
    def admitted(self) -> list[PodView]:
        return [p for p in self.pods if p.status == "admitted"]

    @property
    def rejected(self) -> list[PodView]:
        return [p for p in self.pods if p.status == "rejected"]

    def owners(self) -> list[tuple[PodView, ContainerView]]:
        """Containers that hold something exclusively (CPUs, memory or devices): the coloured ones."""
        out = []
        for p in self.admitted:
            for c in p.containers:
                if c.exclusive or c.memory or any(c.devices.values()):
                    out.append((p, c))
        return out


def _container(name: str, alloc: Mapping[str, Any]) -> ContainerView:
    cpus = alloc.get("cpus") or ""
    memory = tuple(
        MemoryBlock(str(b["type"]), int(b["size"]), tuple(int(n) for n in b.get("numa_nodes") or ()))
        for b in alloc.get("memory") or ()
        if isinstance(b.get("size"), int)
    )
    devices = {str(r): tuple(sorted(ids)) for r, ids in sorted((alloc.get("devices") or {}).items())}
    return ContainerView(name, frozenset(parse_cpuset(cpus)) if cpus else frozenset(),
                         bool(alloc.get("exclusive_cpus")), memory, devices)


def _containers(allocations: Mapping[str, Any] | None, order: Iterable[str] = ()) -> tuple[ContainerView, ...]:
    allocations = allocations or {}
    # The given order, else the mapping's own (a pod's containers in kubelet order, init containers first):
    # a container drawn later wins a CPU an earlier, finished one held.
    names = [n for n in order if n in allocations] + [n for n in allocations if n not in set(order)]
    return tuple(_container(n, allocations[n]) for n in names)


def container_order(entry: Mapping[str, Any]) -> list[str]:
    """A status entry's containers in the pod's order (`container_order`: init containers first, in spec
    order), then any other container its allocations name. The status file sorts its keys, so the
    allocations' own order is alphabetical, not the kubelet's."""
    order = entry.get("container_order")
    names = [str(n) for n in order if isinstance(n, str)] if isinstance(order, list) else []
    allocations = entry.get("allocations")
    extra = [str(n) for n in allocations if n not in names] if isinstance(allocations, Mapping) else []
    return names + extra


def node_view_from_records(
    machine: Machine,
    records: Iterable[Mapping[str, Any]],
    *,
    reserved_cpus: Iterable[int] = (),
    title: str = "",
    notes: Iterable[str] = (),
    container_order: Mapping[str, list[str]] | None = None,
) -> NodeView:
    """From `numalign admit`'s records (DecisionRecord.to_dict()), in admission order.

    `container_order` (pod key -> container names, init containers first) keeps the pod's own order, so
    that an app container that reuses a finished init container's CPUs is drawn over it."""
    pods = []
    for r in records:
        res = r.get("result") or {}
        ok = bool(res.get("admit"))
        pods.append(PodView(
            str(r["pod"]), "admitted" if ok else "rejected", str(res.get("reason") or ""),
            str(res.get("message") or ""),
            _containers(r.get("allocations"), (container_order or {}).get(str(r["pod"]), ())),
            None if ok else r,
            r.get("answer"),
            r.get("alignment"),
        ))
    return NodeView(machine, title or f"node {machine.name}", tuple(pods), frozenset(reserved_cpus), tuple(notes))


def node_view_from_status(machine: Machine, doc: Mapping[str, Any], *, title: str = "",
                          notes: Iterable[str] = ()) -> NodeView:
    """From the status file of `numalign serve` (see numalign.agent.status for its layout)."""
    pods = []
    for p in sorted((doc.get("pods") or {}).values(), key=lambda p: (p.get("namespace", ""), p.get("name", ""))):
        key = f"{p.get('namespace', '')}/{p.get('name', '')}"
        status = str(p.get("status") or "pending")
        pods.append(PodView(key, status, str(p.get("reason") or ""), str(p.get("message") or ""),
                            _containers(p.get("allocations"), container_order(p)),
                            p.get("record") if status == "rejected" else None))
    reserved = frozenset(parse_cpuset(doc["reserved_cpus"])) if doc.get("reserved_cpus") else frozenset()
    return NodeView(machine, title or f"node {machine.name}", tuple(pods), reserved, tuple(notes))
