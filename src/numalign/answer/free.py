"""What is free where, and who holds the rest: per NUMA node and resource (exclusive CPUs under the
static CPU manager, memory and hugepages under the Static memory manager, devices), and per node as
the predicate admit handler counts requests.

Units: CPUs (count) per NUMA node, millicores per node; bytes for memory and hugepages; devices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TypeVar

from numalign.k8s.resources import RESOURCE_CPU
from numalign.kubelet.admission.allocatable import RESOURCE_PODS
from numalign.kubelet.node import Node


@dataclass(frozen=True)
class Holding:
    pod: str
    pod_uid: str
    container: str
    amount: int

    def to_dict(self) -> dict[str, object]:
        return {"pod": self.pod, "podUID": self.pod_uid, "container": self.container or None, "amount": self.amount}


@dataclass(frozen=True)
class FreeCapacity:
    """One resource on one NUMA node (numa_node None: the whole node, as the predicate counts it)."""

    numa_node: int | None
    resource: str
    allocatable: int
    free: int
    held_by: tuple[Holding, ...]

    def to_dict(self) -> dict[str, object]:
        # The documents' key style (answer/present/keys.py): every reader gets camelCase from here.
        return {"numaNode": self.numa_node, "resource": self.resource, "allocatable": self.allocatable,
                "free": self.free, "heldBy": [h.to_dict() for h in self.held_by]}


def _by_amount(holdings: list[Holding]) -> tuple[Holding, ...]:
    return tuple(sorted(holdings, key=lambda h: (-h.amount, h.pod, h.container)))


_T = TypeVar("_T", int, str)


def _each_once(containers: list[tuple[str, str]], ids: Callable[[str, str], AbstractSet[_T]]
               ) -> Iterator[tuple[str, str, AbstractSet[_T]]]:
    """Each container with the ids it holds, an id a later container of the same pod holds too counted
    for that one only: the CPU and device managers hand an init container's exclusive CPUs and devices on
    to the app containers after it (cpusToReuse, devicesToReuse) while the init container's assignment
    stays in their state, so counting both would show more held than the node has given."""
    taken: dict[str, set[_T]] = {}
    out = []
    for uid, name in reversed(containers):  # kubelet order reversed: app containers first
        seen = taken.setdefault(uid, set())
        got = ids(uid, name)
        own = got - seen
        seen |= got
        if own:
            out.append((uid, name, own))
    yield from reversed(out)


def numa_capacity(node: Node) -> list[FreeCapacity]:
    """Per NUMA node: exclusive CPUs, memory and hugepages (Static policy), devices."""
    out: list[FreeCapacity] = []
    keys = {uid: p.key for uid, p in node.pods.items()}
    containers = [(uid, c.name) for uid, p in node.pods.items() for c in p.all_containers()]
    for numa in node.machine.numa_ids():
        out.extend(_cpu(node, numa, keys, containers))
        out.extend(_memory(node, numa, keys, containers))
        out.extend(_devices(node, numa, keys, containers))
    return out


def _cpu(node: Node, numa: int, keys: dict[str, str], containers: list[tuple[str, str]]) -> Iterator[FreeCapacity]:
    if not node.cpu.pins:
        return
    mine = node.machine.cpus_on(numa)
    allocatable = node.cpu.get_allocatable_cpus() & mine
    held = []
    for uid, name, ids in _each_once(containers, lambda uid, name: node.cpu.get_exclusive_cpus(uid, name) & mine):
        held.append(Holding(keys[uid], uid, name, len(ids)))
    yield FreeCapacity(numa, RESOURCE_CPU, len(allocatable), len(node.cpu.get_available_cpus() & mine),
                       _by_amount(held))


def _memory(node: Node, numa: int, keys: dict[str, str], containers: list[tuple[str, str]]) -> Iterator[FreeCapacity]:
    if not node.memory.pins:
        return
    state = node.memory.machine_state.get(numa)
    if state is None:
        return
    for resource, table in sorted(state.memory_map.items()):
        if table.allocatable == 0:
            continue
        held = []
        for uid, name in containers:
            for b in node.memory.get_memory(uid, name) or []:
                if b.type == resource and numa in b.numa_affinity:
                    # A block over several NUMA nodes is shown whole on each (the kubelet does not split it).
                    held.append(Holding(keys[uid], uid, name, b.size))
        yield FreeCapacity(numa, resource, table.allocatable, table.free, _by_amount(held))


def _devices(node: Node, numa: int, keys: dict[str, str], containers: list[tuple[str, str]]) -> Iterator[FreeCapacity]:
    for resource, devs in sorted(node.devices.get_allocatable_devices().items()):
        here = {d for d, dev in devs.items() if dev.topology is not None and numa in dev.topology}
        if not here:
            continue
        free = here - node.devices.allocated.get(resource, set())
        held = []

        def ids(uid: str, name: str, resource: str = resource, here: set[str] = here) -> set[str]:
            return set((node.devices.get_container_devices(uid, name) or {}).get(resource, {})) & here

        for uid, name, got in _each_once(containers, ids):
            held.append(Holding(keys[uid], uid, name, len(got)))
        yield FreeCapacity(numa, resource, len(here), len(free), _by_amount(held))


def node_capacity(node: Node, also: set[str] | frozenset[str] = frozenset()) -> list[FreeCapacity]:
    """The predicate's view: allocatable, free and per-pod requests of every resource pods request
    (and of `also`: a rejected pod's resources, 0 of 0 where the node has none)."""
    allocatable = node.handlers.allocatable(node.devices.healthy)
    requests = dict(zip(node.pods, node.handlers.requests_of(node.pods.values()), strict=True))
    names = sorted({n for r in requests.values() for n in r} | {RESOURCE_CPU, RESOURCE_PODS} | set(also))
    out = []
    for name in names:
        if name == RESOURCE_PODS:
            held = [Holding(node.pods[u].key, u, "", 1) for u in node.pods]
        else:
            held = [Holding(node.pods[u].key, u, "", r[name]) for u, r in requests.items() if r.get(name)]
        cap = allocatable.get(name, 0)
        out.append(FreeCapacity(None, name, cap, cap - sum(h.amount for h in held), _by_amount(held)))
    return out
