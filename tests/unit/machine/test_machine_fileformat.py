"""The machine file: lossless round trip (JSON and YAML) and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from support.strategies import machine_models

from numalign.errors import InvalidInputError
from numalign.machine.examples import example, example_names
from numalign.machine.fileformat import (
    machine_from_dict,
    machine_to_dict,
    machine_to_text,
    page_size_bytes,
    parse_machine_text,
)
from numalign.machine.topology import CPU, Machine


@pytest.mark.parametrize("name", example_names())
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_examples_round_trip_through_text(name: str, fmt: str) -> None:
    m = example(name)
    text = machine_to_text(m, fmt)
    back = machine_from_dict(parse_machine_text(text, "file"), "file")
    assert back == m
    assert back.cpu_infos() == m.cpu_infos()


def test_required_json_shape() -> None:
    d = machine_to_dict(example("dual-socket"))
    assert d["format"] == "numalign.machine/v2"
    node = d["numaNodes"][0]
    assert {"id", "cpus", "distances", "memoryBytes"} <= set(node)
    assert node["cpus"] == sorted(node["cpus"]) and len(node["distances"]) == len(d["numaNodes"])
    assert {"id", "socket", "core", "numaNode"} <= set(d["cpus"][0])
    json.dumps(d)  # plain JSON values only


def _v1(value: object) -> object:
    """A v2 file as numalign.machine/v1 wrote it (snake_case field names; data maps keep their keys)."""
    snake = {"numaNodes": "numa_nodes", "memoryBytes": "memory_bytes", "numaNode": "numa_node",
             "offlineCPUs": "offline_cpus", "pciAddress": "pci_address", "memoryNumaNodes": "memory_numa_nodes",
             "draDevices": "dra_devices", "pcieRoot": "pcie_root", "numCPUs": "num_cpus", "numCores": "num_cores",
             "numSockets": "num_sockets", "memoryCapacity": "memory_capacity",
             "numPhysicalCores": "num_physical_cores", "pageSize": "page_size", "numPages": "num_pages"}
    if isinstance(value, dict):
        return {snake.get(k, k): v if k in ("hugepages", "attributes", "capacity", "distances") and
                isinstance(v, dict) else _v1(v) for k, v in value.items()}
    return [_v1(v) for v in value] if isinstance(value, list) else value


@pytest.mark.parametrize("name", ["gb200", "dual-socket"])
def test_v1_files_are_still_read(name: str) -> None:
    """Files discover wrote before v2 (snake_case) read as the same machine, with or without `format`."""
    v1 = _v1(machine_to_dict(example(name)))
    assert isinstance(v1, dict) and "numa_nodes" in v1 and v1["format"] == "numalign.machine/v2"
    assert machine_from_dict({**v1, "format": "numalign.machine/v1"}, "old.yaml") == example(name)
    assert machine_from_dict({k: v for k, v in v1.items() if k != "format"}, "old.yaml") == example(name)


def test_a_field_in_the_other_formats_spelling_is_named() -> None:
    d = machine_to_dict(example("dual-socket"))
    d["numaNodes"][1]["memory_bytes"] = d["numaNodes"][1].pop("memoryBytes")
    with pytest.raises(InvalidInputError, match=r"^f: numaNodes\[1\]: unknown key 'memory_bytes': that is "
                       r"numalign.machine/v1's spelling; this file is numalign.machine/v2, which spells it "
                       r"'memoryBytes'"):
        machine_from_dict(d, "f")
    d = machine_to_dict(example("dual-socket"))
    d["cpus"][0]["numaNode"] = "x"
    with pytest.raises(InvalidInputError, match=r"^f: cpus\[0\]\.numaNode: "):
        machine_from_dict(d, "f")


@settings(max_examples=60)
@given(machine_models())
def test_round_trip_is_lossless(m: Machine) -> None:
    assert machine_from_dict(machine_to_dict(m), "x") == m
    assert machine_from_dict(json.loads(machine_to_text(m, "json")), "x") == m


def _minimal() -> dict[str, Any]:
    return {
        "numa_nodes": [
            {"id": 0, "cpus": [0, 1], "distances": [10, 20], "memory_bytes": 1 << 30},
            {"id": 1, "cpus": [2, 3], "distances": [20, 10], "memory_bytes": 1 << 30},
        ],
        "cpus": [{"id": i, "socket": i // 2, "core": i % 2, "numa_node": i // 2} for i in range(4)],
    }


def test_minimal_file_defaults() -> None:
    m = machine_from_dict(_minimal(), "small.json")
    assert m.name == "small.json"
    assert m.cpu(3) == CPU(3, 1, 1, 1, 0, None, True)
    assert m.distance_matrix() == {0: [10, 20], 1: [20, 10]}
    assert m.devices == () and m.offline_cpus == frozenset()


def test_conveniences_cpuset_text_hugepage_units_and_derived_node_cpus() -> None:
    d = _minimal()
    d["numa_nodes"][0]["cpus"] = "0-1"
    del d["numa_nodes"][1]["cpus"]
    d["numa_nodes"][0]["hugepages"] = {"2Mi": 512, "1GiB": 2, "2048kB": 0} | {}
    del d["numa_nodes"][0]["hugepages"]["2048kB"]
    d["numa_nodes"][1]["hugepages"] = {2097152: 3}
    m = machine_from_dict(d, "f")
    assert m.node(0).cpus == {0, 1} and m.node(1).cpus == {2, 3}
    assert dict(m.node(0).hugepages) == {2 << 20: 512, 1 << 30: 2}
    assert dict(m.node(1).hugepages) == {2 << 20: 3}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["cpus"][0].update(numa_node=7),
            "f: machine 'f': CPU 0 names NUMA node 7, which is not one of [0, 1]",
        ),
        (lambda d: d["numa_nodes"][0].update(distances=[10]), "NUMA node 0 has 1 distances [10]; expected one per"),
        (lambda d: d["numa_nodes"][1].update(id=0), "NUMA node ids [0] appear more than once"),
        (lambda d: d["cpus"].append({"id": 1, "socket": 0, "core": 1, "numa_node": 0}), "CPU ids [1] appear"),
        (lambda d: d["cpus"][0].pop("numa_node"), "f: cpus[0]: missing 'numa_node'"),
        (lambda d: d["cpus"][0].pop("socket"), "f: cpus[0]: missing 'socket'"),
        (lambda d: d["cpus"][0].update(sockets=1), "f: cpus[0]: unknown keys ['sockets']"),
        (lambda d: d.update(nodes=[]), "f: unknown keys ['nodes']"),
        (lambda d: d.pop("numa_nodes"), "f: numa_nodes: expected a list"),
        (lambda d: d["numa_nodes"][0].update(memory_bytes="1G"), "numa_nodes[0].memory_bytes: expected an integer"),
        (lambda d: d["numa_nodes"][0].update(hugepages={"huge": 1}), "page size 'huge' not understood"),
        (lambda d: d["numa_nodes"][0].update(cpus="0-x"), "numa_nodes[0].cpus: invalid CPU set element"),
        (lambda d: d["numa_nodes"][0].update(cpus=[0, 0, 1]), "contain duplicates"),
        (lambda d: d["cpus"][0].update(online="yes"), "cpus[0].online: expected true or false"),
        (lambda d: d.update(format="other/v9"), "format 'other/v9' is not supported"),
        (lambda d: d.update(devices=[{"id": "g", "resource": "gpu"}]), "devices[0].resource: expected an extended"),
        (lambda d: d.update(devices=[{"id": "g", "resource": "a.com/g", "numa_nodes": [4]}]), "names NUMA nodes [4]"),
        (lambda d: d["numa_nodes"][0].update(id=-2), "numa_nodes[0].id: -2 is out of range"),
        (lambda d: d["numa_nodes"][0].update(id=-1), "NUMA node -1 has distances, but the machine has node -1"),
    ],
)
def test_errors_name_the_field(edit: Any, message: str) -> None:
    d = _minimal()
    edit(d)
    with pytest.raises(InvalidInputError) as e:
        machine_from_dict(d, "f")
    assert message in str(e.value)


def test_machines_without_numa_nodes_round_trip() -> None:
    # cadvisor's readings of a machine without a node directory: no node at all, or node -1.
    empty = {"name": "ps3", "numa_nodes": [], "cpus": [],
             "cadvisor": {"num_cpus": 2, "num_cores": 0, "num_sockets": 1, "distances": {}, "memory_capacity": 0}}
    m = machine_from_dict(empty, "f")
    assert m.numa_ids() == [] and m.capacity_cpus() == 2 and m.kubelet_distances() == {}
    assert machine_from_dict(machine_to_dict(m), "again") == m
    minus = {"name": "s390", "numa_nodes": [{"id": -1, "memory_bytes": 0}],
             "cpus": [{"id": 0, "socket": -1, "core": 0, "numa_node": -1}],
             "devices": [{"id": "n0", "resource": "a.com/nic", "numa_nodes": [-1]}]}
    m = machine_from_dict(minus, "f")
    assert m.numa_ids() == [-1] and m.node(-1).cpus == {0} and m.devices[0].numa_nodes == (-1,)
    assert m.kubelet_distances() is None and m.capacity_cpus() == 1 and m.capacity_memory() == 0
    assert machine_from_dict(machine_to_dict(m), "again") == m


def test_text_parse_errors() -> None:
    with pytest.raises(InvalidInputError, match=r"^m\.json: line 1, column 2: Expecting property name .*"
                       r"\(not valid JSON\); expected a machine file \(numalign\.machine/v2"):
        parse_machine_text("{oops", "m.json")
    with pytest.raises(InvalidInputError, match=r"^m\.yaml: line 2, column 1: expected ',' or '\]'.*"
                       r"\(not valid YAML or JSON\); expected a machine file .*; fix the syntax"):
        parse_machine_text("a: [1, 2\n", "m.yaml")
    with pytest.raises(InvalidInputError, match="expected an object"):
        machine_from_dict([1, 2], "m.yaml")
    with pytest.raises(InvalidInputError, match="unknown machine output format"):
        machine_to_text(example("gb200"), "xml")


@pytest.mark.parametrize(
    ("key", "size"), [(2097152, 2 << 20), ("2097152", 2 << 20), ("2Mi", 2 << 20), ("1Gi", 1 << 30), ("64kB", 64 << 10)]
)
def test_page_sizes(key: object, size: int) -> None:
    assert page_size_bytes(key, "w") == size


def test_the_documented_example_loads() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "machine-format.md"
    text = doc.read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    m = machine_from_dict(parse_machine_text(block, "docs"), "docs")
    assert m.name == "small-server"
    assert m.node(1).cpus == {2, 3, 6} and m.all_offline_cpus() == {7}
    assert dict(m.node(1).hugepages) == dict(m.node(0).hugepages) == {2 << 20: 1024, 1 << 30: 4}
    assert [(i.id, i.core, i.uncore) for i in m.cpu_infos()][:2] == [(0, 0, 0), (1, 1, 0)]
    assert m.devices_by_resource()["nvidia.com/gpu"][0].numa_nodes == (1,)
