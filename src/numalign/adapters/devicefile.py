"""The devices a node's plugins really report, with their NUMA nodes, in place of the machine
description's own (`--devices`, whose option lives in cli/nodeargs.py; snapshots).

Two forms, because these are what a user has at hand:
* `RESOURCE=FILE`: the device list `numalign plugin --resource RESOURCE --devices FILE` takes (YAML or
  JSON, `- {id: GPU-0c3d..., numa: 0}`), for one resource;
* `FILE`: a PodResources GetAllocatableResources answer as JSON (`grpcurl ... GetAllocatableResources`,
  protobuf's camelCase `resourceName`/`deviceIds`/`topology.nodes[].ID`, or the field names
  `resource_name`/`device_ids` that `numalign snapshot` writes), listing every resource's devices.

A device list replaces the machine's devices of its resource; a PodResources answer lists every
resource a device plugin serves, so it replaces all of the machine's devices (a PCI scan names
resources by vendor and class, which a plugin may name otherwise or not serve at all).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from numalign.errors import InvalidInputError
from numalign.machine.topology import HEALTHY, Device, Machine

EXPECTED = ("RESOURCE=FILE (a device list as `numalign plugin --devices` takes: - {id: ..., numa: N}) or "
            "FILE.json (a PodResources GetAllocatableResources answer)")


def devices_from_allocatable(obj: Any, source: str) -> dict[str, list[Device]]:
    """resource -> devices from an AllocatableResourcesResponse (JSON object form)."""
    if isinstance(obj, Mapping) and isinstance(obj.get("allocatable"), Mapping):
        obj = obj["allocatable"]  # the whole capture `numalign snapshot` keeps
    if not isinstance(obj, Mapping) or not isinstance(obj.get("devices"), list):
        raise InvalidInputError(
            f"{source}: expected a PodResources GetAllocatableResources answer with a \"devices\" list "
            f"(resourceName, deviceIds, topology.nodes[].ID), got {type(obj).__name__}"
            + (f" with keys {sorted(obj)[:6]}" if isinstance(obj, Mapping) else "")
        )
    out: dict[str, list[Device]] = {}
    # Each resource's ids seen so far, kept beside `out`: a PodResources answer lists one entry per
    # device (16,000 of them on a large node), so rebuilding the set per entry would be quadratic.
    seen: dict[str, set[str]] = {}
    for i, d in enumerate(obj["devices"]):
        where = f"{source}: devices[{i}]"
        if not isinstance(d, Mapping):
            raise InvalidInputError(f"{where}: expected an object, got {type(d).__name__}")
        resource = d.get("resource_name", d.get("resourceName"))
        ids = d.get("device_ids", d.get("deviceIds"))
        if not isinstance(resource, str) or not resource or not _strings(ids):
            raise InvalidInputError(f"{where}: expected resourceName (a string) and deviceIds (a list of strings)")
        numa = _topology(d.get("topology"), where)
        known = seen.setdefault(resource, set())
        devices = out.setdefault(resource, [])
        for dev_id in ids:
            if dev_id not in known:
                devices.append(Device(dev_id, resource, numa, None, None, None, HEALTHY))
                known.add(dev_id)
    return out


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) and x for x in value)


def _topology(value: Any, where: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    nodes = value.get("nodes") if isinstance(value, Mapping) else None
    if not isinstance(nodes, list):
        raise InvalidInputError(f"{where}: topology: expected {{nodes: [{{ID: N}}]}}, got {value!r}")
    out = set()
    for n in nodes:
        # proto3 JSON leaves out default values: a node written as {} is node 0.
        raw: Any = n.get("ID", n.get("id", 0)) if isinstance(n, Mapping) else None
        try:
            node = int(raw)  # protobuf JSON writes int64 as a string
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: topology.nodes: expected {{ID: N}} entries, got {n!r}") from None
        out.add(node)
    return tuple(sorted(out)) or None


def machine_with_devices(machine: Machine, by_resource: Mapping[str, Sequence[Device]], source: str) -> Machine:
    """The machine with each named resource's devices replaced by `by_resource`'s."""
    kept = [d for d in machine.devices if d.resource not in by_resource]
    given = [d for devs in by_resource.values() for d in devs]
    try:
        return dataclasses.replace(machine, devices=(*kept, *given))
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}; describe devices on the machine's NUMA nodes "
                                f"({', '.join(map(str, machine.numa_ids()))})") from None
