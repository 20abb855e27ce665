"""A pod record entry's `allocation` (numalign_pods.json) <-> the kubelet's typed RecordedAllocation.
JSON <-> model, no I/O: the one place the recorded allocation is read and written.

The JSON is per container name an object with `cpus` (a cpuset string), `memory` (a non-empty list of
{type, size, numa_nodes}) and `devices` (a non-empty object: resource name -> device IDs), each only
when the container holds some. Anything else in that object is not what numalign writes: it is read as
an UnreadableAllocation, which matches no holding, so the pod is admitted again when the directory is
opened (a damaged entry is a lost allocation, as a lost kubelet file is), never refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.k8s.cpuset import parse_cpuset
from numalign.kubelet.state import (
    AllocationRecord,
    RecordedAllocation,
    RecordedBlock,
    RecordedContainer,
    SpelledCPUSet,
    UnreadableAllocation,
)

_KEYS = frozenset({"cpus", "memory", "devices"})
_BLOCK_KEYS = frozenset({"type", "size", "numa_nodes"})


class _UnreadableError(Exception):
    """What is wrong with the entry, and where."""


def allocation_from_json(raw: Mapping[str, Any], where: str) -> AllocationRecord:
    """The typed allocation in `raw` (an object per container), or an UnreadableAllocation saying why."""
    try:
        return RecordedAllocation(tuple((name, _container(entry, f"{where}.{name}"))
                                        for name, entry in sorted(raw.items())))
    except _UnreadableError as e:
        return UnreadableAllocation(str(e), raw)


def allocation_to_json(allocation: AllocationRecord) -> Any:
    """The JSON numalign writes for `allocation` (an unreadable one as it was read)."""
    if isinstance(allocation, UnreadableAllocation):
        return allocation.raw
    out: dict[str, Any] = {}
    for name, c in allocation.containers:
        entry: dict[str, Any] = {}
        if c.cpus is not None:
            entry["cpus"] = c.cpus.text
        if c.memory:
            entry["memory"] = [{"type": b.type, "size": b.size, "numa_nodes": list(b.numa_nodes)} for b in c.memory]
        if c.devices:
            entry["devices"] = {res: list(ids) for res, ids in c.devices}
        out[name] = entry
    return out


def _container(entry: Any, where: str) -> RecordedContainer:
    if not isinstance(entry, dict) or not entry or not set(entry) <= _KEYS:
        raise _UnreadableError(f"{where}: expected an object with some of cpus, memory, devices")
    cpus = None
    if "cpus" in entry:
        text = entry["cpus"]
        if not isinstance(text, str):
            raise _UnreadableError(f"{where}.cpus: expected a cpuset string")
        try:
            cpus = SpelledCPUSet(parse_cpuset(text, f"{where}.cpus"), text)
        except ValueError as e:
            raise _UnreadableError(str(e)) from None
    memory: tuple[RecordedBlock, ...] = ()
    if "memory" in entry:
        blocks = entry["memory"]
        if not isinstance(blocks, list) or not blocks:
            raise _UnreadableError(f"{where}.memory: expected a non-empty list of memory blocks")
        memory = tuple(_block(b, f"{where}.memory[{i}]") for i, b in enumerate(blocks))
    devices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if "devices" in entry:
        devs = entry["devices"]
        if not isinstance(devs, dict) or not devs:
            raise _UnreadableError(f"{where}.devices: expected a non-empty object of device IDs per resource")
        for res, ids in devs.items():
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise _UnreadableError(f"{where}.devices.{res}: expected a list of device IDs (strings)")
        devices = tuple((res, tuple(ids)) for res, ids in sorted(devs.items()))
    return RecordedContainer(cpus, memory, devices)


def _block(block: Any, where: str) -> RecordedBlock:
    if not isinstance(block, dict) or set(block) != _BLOCK_KEYS:
        raise _UnreadableError(f"{where}: expected an object {{type, size, numa_nodes}}")
    kind, size, nodes = block["type"], block["size"], block["numa_nodes"]
    if not isinstance(kind, str) or not _is_int(size) or not isinstance(nodes, list) or \
            not all(_is_int(n) for n in nodes):
        raise _UnreadableError(f"{where}: expected type a string, size an integer and numa_nodes a list of integers")
    return RecordedBlock(kind, size, tuple(nodes))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
