"""The DRA fields of a cluster.yaml pool (docs/cluster-format.md):

    draDevices:                       # per NUMA node, as the machine shorthand's dra:DRIVER=N/node
      gpu.example.com: {count: 2, attributes: {model: h100}, capacity: {memory: 80Gi}}
    resourceSlices: slices.yaml       # ResourceSlices every node of the pool publishes (nodeName set per node)

A pool's machine may declare DRA devices itself (machine file `dra_devices`, shorthand `dra:`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalign.errors import InvalidInputError
from numalign.k8s.dra.types import ResourceSlice
from numalign.machine.topology import Machine

FIELDS = ("draDevices", "resourceSlices")


def pool_dra(
    obj: Mapping[str, Any], path: Path, where: str, machine: Machine
) -> tuple[Machine, tuple[ResourceSlice, ...]]:
    """The pool's machine with its `draDevices` added, and the slices of its `resourceSlices` file."""
    from numalign.machine.shorthand import dra_devices_per_numa_node

    raw = obj.get("draDevices")
    if raw is not None:
        addresses = [d.pci_address for d in machine.devices] + [d.pci_address for d in machine.dra_devices]
        taken = [int(a.split(":")[1], 16) for a in addresses if a and a.count(":") == 2]
        bus = max([0x0f, *taken]) + 1
        added = dra_devices_per_numa_node(raw, machine.numa_ids(), bus, f"{path}: {where}.draDevices")
        try:
            machine = dataclasses.replace(machine, dra_devices=(*machine.dra_devices, *added))
        except InvalidInputError as e:
            raise InvalidInputError(f"{path}: {where}.draDevices: {e}") from None
    slices: tuple[ResourceSlice, ...] = ()
    file = obj.get("resourceSlices")
    if file is not None:
        if not isinstance(file, str):
            raise InvalidInputError(f"{path}: {where}.resourceSlices: expected a file of ResourceSlices (YAML or a "
                                    f"kubectl List), got {file!r}")
        from numalign.adapters.textfiles import load_documents
        from numalign.k8s.dra.documents import EXPECTED_WITH_DRA, pods_and_dra_from_documents

        target = path.parent / file
        docs = load_documents(target, "the ResourceSlices", EXPECTED_WITH_DRA)
        _pods, objects = pods_and_dra_from_documents(docs, str(target))
        if not objects.slices:
            raise InvalidInputError(f"{path}: {where}.resourceSlices: {target} holds no ResourceSlice; expected the "
                                    "slices one node of the pool publishes")
        slices = tuple(objects.slices)
    return machine, slices
