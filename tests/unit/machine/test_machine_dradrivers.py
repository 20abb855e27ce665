"""The slices dra-driver-cpu and dra-driver-memory publish for a machine, in each documented mode."""

from __future__ import annotations

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.dra.types import ATTRIBUTE_NUMA_NODE
from numalign.machine.dradrivers import (
    cpu_device_class,
    cpu_driver_devices,
    driver_slices,
    memory_driver_devices,
    parse_cpu_driver,
)
from numalign.machine.shorthand import parse_shorthand

MACHINE = parse_shorthand("2s x 2n x 2c x 2t, 8Gi/node, hugepages-1Gi=2/node")


def test_individual_mode_one_device_per_cpu_siblings_adjacent_reserved_left_out() -> None:
    devs = cpu_driver_devices(MACHINE, "individual", reserved={0})
    cpus = [d["attributes"]["dra.cpu/cpuID"]["int"] for d in devs]
    # CPU 0's sibling (8) stays; then core by core, each core's threads together.
    assert cpus[:5] == [1, 9, 2, 10, 3]
    assert sorted(cpus) == [c for c in range(16) if c != 0]
    assert [d["name"] for d in devs[:3]] == ["cpudev000", "cpudev001", "cpudev002"]
    first = devs[0]["attributes"]
    assert first[ATTRIBUTE_NUMA_NODE] == {"int": 0} and first["dra.net/numaNode"] == {"int": 0}
    assert first["dra.cpu/smtEnabled"] == {"bool": True}


@pytest.mark.parametrize(("mode", "names", "cpus"), [
    ("numanode", ["cpudevnuma000", "cpudevnuma001", "cpudevnuma002", "cpudevnuma003"], [4, 4, 4, 4]),
    ("socket", ["cpudevsocket000", "cpudevsocket001"], [8, 8]),
    ("machine", ["cpudevmachine"], [16]),
])
def test_grouped_modes_are_consumable(mode: str, names: list[str], cpus: list[int]) -> None:
    devs = cpu_driver_devices(MACHINE, mode)
    assert [d["name"] for d in devs] == names
    assert [int(d["capacity"]["dra.cpu/cpu"]["value"]) for d in devs] == cpus
    assert all(d["allowMultipleAllocations"] for d in devs)
    assert (ATTRIBUTE_NUMA_NODE in devs[0]["attributes"]) == (mode == "numanode")


def test_memory_devices_per_numa_node_and_page_size() -> None:
    devs = memory_driver_devices(MACHINE)
    assert [d["name"] for d in devs[:2]] == ["memory-0", "hugepages-1g-0"]
    assert int(devs[0]["capacity"]["memory"]["value"]) == (8 << 30) - (2 << 30)
    assert devs[1]["capacity"]["pages"]["value"] == "2"
    assert devs[1]["attributes"]["dra.memory/pageSize"] == {"string": "1g"}


def test_slices_are_valid_resource_slices() -> None:
    slices = driver_slices(MACHINE, "node-a", "individual", True)
    assert [(s.driver, s.node_name, len(s.devices)) for s in slices] == [("dra.cpu", "node-a", 16),
                                                                         ("dra.memory", "node-a", 8)]
    with pytest.raises(InvalidInputError, match="expected one of individual"):
        cpu_driver_devices(MACHINE, "core")


@pytest.mark.parametrize(("settings", "mode", "reserved"), [
    ("", "individual", None),
    ("individual", "individual", None),
    ("cpuDeviceMode=individual", "individual", None),
    ("grouped", "numanode", None),  # the driver's groupBy default
    ("cpuDeviceMode=grouped,groupBy=socket", "socket", None),
    ("groupBy=machine", "machine", None),  # groupBy alone: the driver's default mode, grouped
    ("socket", "socket", None),  # numalign's shorthand
    ("grouped,reservedCPUs=0,32,40-41", "numanode", frozenset({0, 32, 40, 41})),
])
def test_the_drivers_settings(settings: str, mode: str, reserved: frozenset[int] | None) -> None:
    assert parse_cpu_driver(settings, "w") == (mode, reserved)


@pytest.mark.parametrize(("settings", "error"), [
    ("cores", "w: expected cpu[=MODE]"), ("grouped,individual", "w: expected cpu[=MODE]"),
    ("groupBy=core", "w: groupBy 'core'; expected one of numanode, socket, machine"),
    ("cpuDeviceMode=individual,groupBy=socket", "w: groupBy applies to cpuDeviceMode grouped only"),
    ("reservedCPUs=0-", "w: reservedCPUs '0-'"),
])
def test_settings_the_driver_does_not_know(settings: str, error: str) -> None:
    with pytest.raises(InvalidInputError) as exc:
        parse_cpu_driver(settings, "w")
    assert str(exc.value).startswith(error)


def test_the_device_class_the_chart_installs() -> None:
    cls = cpu_device_class()
    assert cls.name == "dra.cpu"
    assert [s.expression for s in cls.selectors] == ['device.driver == "dra.cpu"']
