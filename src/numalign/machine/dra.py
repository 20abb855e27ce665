"""The DRA side of a machine: the ResourceSlices its DRA drivers publish for this node, and the NUMA
node of a device found by its PCI address (for slices that carry `pciBusID`/`pcieRoot` but no
`numaNode`, on a machine whose PCI devices were discovered).

A slice is built in its API form and read by numalign.k8s.dra.read, so a machine file's DRA devices
are checked exactly as the API server checks a ResourceSlice (device names, attribute names, limits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from numalign.k8s.dra.read import dra_object_from_dict
from numalign.k8s.dra.types import (
    ATTRIBUTE_NUMA_NODE,
    ATTRIBUTE_PCI_BUS_ID,
    ATTRIBUTE_PCIE_ROOT,
    RESOURCE_SLICE_MAX_DEVICES,
    DeviceAttribute,
    ResourceSlice,
)
from numalign.machine.topology import DRADevice, Machine


def pcie_root_of(pci_address: str) -> str:
    """The root complex a device hangs from, as drivers publish `pcieRoot` ("pci0000:17"): numalign's
    machines put each device on a bus of its own under its own root, so the root is its domain and bus."""
    domain, _, rest = pci_address.partition(":")
    bus = rest.partition(":")[0]
    return f"pci{domain}:{bus}"


def _attribute(value: str | int | bool) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def _device_dict(d: DRADevice) -> dict[str, Any]:
    attrs: dict[str, Any] = {k: _attribute(v) for k, v in d.attributes.items()}
    if d.numa_node is not None:
        attrs.setdefault(ATTRIBUTE_NUMA_NODE, {"int": d.numa_node})
    if d.pci_address:
        attrs.setdefault(ATTRIBUTE_PCI_BUS_ID, {"string": d.pci_address})
    root = d.pcie_root or (pcie_root_of(d.pci_address) if d.pci_address else None)
    if root:
        attrs.setdefault(ATTRIBUTE_PCIE_ROOT, {"string": root})
    out: dict[str, Any] = {"name": d.name, "attributes": attrs}
    if d.capacity:
        out["capacity"] = {k: {"value": v} for k, v in d.capacity.items()}
    return out


def slices_from_devices(devices: Iterable[DRADevice], node: str, where: str) -> list[ResourceSlice]:
    """One pool per driver named after the node (as node-local drivers name theirs), split into slices
    of at most 128 devices; read and validated as the API server would."""
    by_driver: dict[str, list[DRADevice]] = {}
    for d in devices:
        by_driver.setdefault(d.driver, []).append(d)
    out: list[ResourceSlice] = []
    for driver, devs in sorted(by_driver.items()):
        chunks = [devs[i:i + RESOURCE_SLICE_MAX_DEVICES] for i in range(0, len(devs), RESOURCE_SLICE_MAX_DEVICES)]
        for i, chunk in enumerate(chunks):
            name = f"{node}-{driver}" + (f"-{i}" if len(chunks) > 1 else "")
            obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                   "spec": {"driver": driver, "nodeName": node,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": len(chunks)},
                            "devices": [_device_dict(d) for d in chunk]}}
            parsed = dra_object_from_dict(obj, where)
            assert isinstance(parsed, ResourceSlice)
            out.append(parsed)
    return out


def machine_slices(machine: Machine, node: str) -> list[ResourceSlice]:
    """The ResourceSlices of the machine's declared DRA devices, published for node `node`."""
    if not machine.dra_devices:
        return []
    return slices_from_devices(machine.dra_devices, node, f"machine {machine.name}: dra_devices")


def numa_of_pci(machine: Machine, attributes: Mapping[str, DeviceAttribute]) -> tuple[int | None, str]:
    """A device's NUMA node from the machine's PCI devices: its `pciBusID` when the machine lists that
    address, else its `pcieRoot` when a listed device sits on that root's bus. (node, which attribute
    told it); (None, "") when neither does."""
    bus_id = attributes.get(ATTRIBUTE_PCI_BUS_ID)
    root = attributes.get(ATTRIBUTE_PCIE_ROOT)
    known = {d.pci_address.lower(): d.numa_nodes for d in machine.devices if d.pci_address}
    if bus_id is not None and bus_id.kind == "string" and bus_id.values:
        nodes = known.get(str(bus_id.values[0]).lower())
        if nodes:
            return nodes[0], "pciBusID"
    if root is not None and root.kind == "string" and root.values:
        wanted = str(root.values[0]).lower()
        for address, nodes in sorted(known.items()):
            if nodes and pcie_root_of(address) == wanted:
                return nodes[0], "pcieRoot"
    return None, ""
