"""DRA devices a machine declares: file format and shorthand, the ResourceSlices published from them
(checked as the API server checks slices), and NUMA nodes found by PCI address."""

from __future__ import annotations

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.dra.types import ATTRIBUTE_NUMA_NODE, ATTRIBUTE_PCI_BUS_ID, ATTRIBUTE_PCIE_ROOT, DeviceAttribute
from numalign.machine.dra import machine_slices, numa_of_pci, pcie_root_of
from numalign.machine.examples import example
from numalign.machine.fileformat import machine_from_dict, machine_to_dict
from numalign.machine.shorthand import machine_from_shorthand, parse_shorthand

SPEC = ("2s x 2n x 4c x 2t, 64Gi/node, nvidia.com/gpu=1/node, "
        "dra:gpu.example.com=2/node{model=h100;capacity.memory=80Gi}")


def test_shorthand_dra_devices_per_numa_node_with_attributes_and_capacity() -> None:
    m = parse_shorthand(SPEC)
    assert [(d.name, d.numa_node) for d in m.dra_devices] == [
        ("gpu-0", 0), ("gpu-1", 0), ("gpu-2", 1), ("gpu-3", 1),
        ("gpu-4", 2), ("gpu-5", 2), ("gpu-6", 3), ("gpu-7", 3)]
    assert dict(m.dra_devices[0].attributes) == {"model": "h100"}
    assert dict(m.dra_devices[0].capacity) == {"memory": "80Gi"}
    # PCI buses follow the device plugins' devices (0x10-0x13), one each
    assert m.dra_devices[0].pci_address == "0000:14:00.0"
    assert machine_from_dict(machine_to_dict(m), "file") == m


def test_mapping_form_and_typed_attributes() -> None:
    m = machine_from_shorthand({"sockets": 1, "cores_per_numa_node": 2, "memory_per_numa_node": "8Gi",
                                "dra_devices_per_numa_node": {"nic.example.com": {"count": 1, "attributes": {
                                    "sriov": True, "vfs": 8}}}}, "m.yaml")
    (d,) = m.dra_devices
    assert (d.name, d.driver, dict(d.attributes)) == ("nic-0", "nic.example.com", {"sriov": True, "vfs": 8})
    one_line = parse_shorthand("1s x 2c, 8Gi/node, dra:nic.example.com=1/node{sriov=true;vfs=8}")
    assert one_line.dra_devices[0].attributes == d.attributes


def test_slices_carry_the_standard_attributes() -> None:
    m = parse_shorthand(SPEC)
    (s,) = machine_slices(m, "node-a")
    assert (s.driver, s.node_name, s.pool.name, len(s.devices)) == ("gpu.example.com", "node-a", "node-a", 8)
    gpu2 = s.devices[2]
    assert gpu2.attributes[ATTRIBUTE_NUMA_NODE].values == (1,)
    assert gpu2.attributes[ATTRIBUTE_PCI_BUS_ID].values == ("0000:16:00.0",)
    assert gpu2.attributes[ATTRIBUTE_PCIE_ROOT].values == ("pci0000:16",)
    assert str(gpu2.capacity["memory"].value) == "80Gi"
    with pytest.raises(InvalidInputError, match=r"m.json: draDevices\[0\].name: expected a device name"):
        machine_from_dict({**machine_to_dict(m), "draDevices": [
            {"name": "GPU_0", "driver": "gpu.example.com", "numaNode": 0}]}, "m.json")


def test_bad_dra_devices_are_refused_in_one_line() -> None:
    base = machine_to_dict(example("dual-socket"))
    with pytest.raises(InvalidInputError, match="names NUMA node 9"):
        machine_from_dict({**base, "draDevices": [{"name": "g", "driver": "gpu.example.com", "numaNode": 9}]}, "m")
    with pytest.raises(InvalidInputError, match=r"draDevices\[0\].driver: expected a DRA driver name"):
        machine_from_dict({**base, "draDevices": [{"name": "g", "driver": "gpu"}]}, "m")
    with pytest.raises(InvalidInputError, match="appears twice"):
        machine_from_dict({**base, "draDevices": [{"name": "g", "driver": "a.b"}] * 2}, "m")
    with pytest.raises(InvalidInputError, match="expected ATTRIBUTE=VALUE"):
        parse_shorthand("1s x 2c, 8Gi/node, dra:nic.example.com=1/node{sriov}")


def test_numa_node_of_a_pci_address_on_a_discovered_machine() -> None:
    m = example("dual-socket")
    dev = next(d for d in m.devices if d.pci_address and d.numa_nodes)
    assert dev.pci_address is not None and dev.numa_nodes is not None
    by_bus = {ATTRIBUTE_PCI_BUS_ID: DeviceAttribute("string", (dev.pci_address,))}
    assert numa_of_pci(m, by_bus) == (dev.numa_nodes[0], "pciBusID")
    by_root = {ATTRIBUTE_PCIE_ROOT: DeviceAttribute("string", (pcie_root_of(dev.pci_address),))}
    assert numa_of_pci(m, by_root) == (dev.numa_nodes[0], "pcieRoot")
    assert numa_of_pci(m, {ATTRIBUTE_PCI_BUS_ID: DeviceAttribute("string", ("0000:ff:1f.7",))}) == (None, "")
