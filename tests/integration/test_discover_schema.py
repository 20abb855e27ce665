"""`numalign discover -o json|yaml` validates against its published schema (docs/schemas/discover.schema.json)
in one key style (camelCase, numalign.machine/v2), and what it prints reads back through --machine as the
same machine (newcomer finding 5: the machine file was the one document in snake_case, with no schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.schemas import snake_keys, validate

from numalign.cli.main import main
from numalign.machine.examples import example, example_names
from numalign.machine.fileformat import machine_from_dict

# maps keyed by data: hugepage sizes, NUMA node ids, DRA attribute and capacity names
DATA_MAPS = frozenset({"hugepages", "distances", "attributes", "capacity"})


def discover(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["discover", *args]) == 0
    out = capsys.readouterr().out
    doc = yaml.safe_load(out) if "yaml" in args else json.loads(out)
    validate("discover", doc)
    assert snake_keys(doc, data_maps=DATA_MAPS) == []
    return doc


@pytest.mark.parametrize("name", example_names())
def test_every_built_in_machine(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = discover(capsys, "--machine", name, "-o", "json")
    assert doc["format"] == "numalign.machine/v2" and list(doc)[:3] == ["format", "name", "numaNodes"]
    assert machine_from_dict(doc, name) == example(name)
    assert discover(capsys, "--machine", name, "-o", "yaml") == doc


def test_a_sysfs_machine_keeps_cadvisors_counts_in_camel_case(capsys: pytest.CaptureFixture[str]) -> None:
    doc = discover(capsys, "--sysfs-root", "/", "-o", "json")  # this host, as the kubelet reads it
    assert {"numCPUs", "numCores", "numSockets"} <= set(doc["cadvisor"])


def test_the_list_of_built_in_machines(capsys: pytest.CaptureFixture[str]) -> None:
    rows = discover(capsys, "--list", "-o", "json")
    assert [r["name"] for r in rows] == list(example_names())
    assert rows[0] == {"name": rows[0]["name"], "numaNodes": len(example(rows[0]["name"]).numa_nodes),
                       "cpus": len(example(rows[0]["name"]).cpus)}


def test_a_v1_file_written_before_still_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("format: numalign.machine/v1\nname: old\n"
                   "numa_nodes:\n- {id: 0, cpus: [0, 1], memory_bytes: 1073741824}\n"
                   "cpus:\n- {id: 0, socket: 0, core: 0, numa_node: 0}\n- {id: 1, socket: 0, core: 1, numa_node: 0}\n")
    doc = discover(capsys, "--machine", str(old), "-o", "json")
    assert doc["numaNodes"][0]["memoryBytes"] == 1 << 30 and doc["cpus"][1]["numaNode"] == 0


def test_the_few_line_form_in_camel_case_as_the_machine_file(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The few-line machine form is written in the machine file's key style (camelCase); its older
    snake_case names read as the same machine; one file mixing them is refused naming the spelling."""
    camel = tmp_path / "camel.yaml"
    camel.write_text("name: gpu-node\nsockets: 2\nnumaNodesPerSocket: 2\ncoresPerNumaNode: 4\nthreadsPerCore: 2\n"
                     "memoryPerNumaNode: 64Gi\nhugepagesPerNumaNode: {1Gi: 4}\n"
                     "devicesPerNumaNode: {nvidia.com/gpu: 2}\n"
                     "draDevicesPerNumaNode: {gpu.example.com: {count: 1, attributes: {model: h100}}}\n")
    snake = tmp_path / "snake.yaml"
    snake.write_text("name: gpu-node\nsockets: 2\nnuma_nodes_per_socket: 2\ncores_per_numa_node: 4\n"
                     "threads_per_core: 2\nmemory_per_numa_node: 64Gi\nhugepages_per_numa_node: {1Gi: 4}\n"
                     "devices_per_numa_node: {nvidia.com/gpu: 2}\n"
                     "dra_devices_per_numa_node: {gpu.example.com: {count: 1, attributes: {model: h100}}}\n")
    doc = discover(capsys, "--machine", str(camel), "-o", "json")
    assert doc == discover(capsys, "--machine", str(snake), "-o", "json")
    assert len(doc["numaNodes"]) == 4 and len(doc["draDevices"]) == 4 and len(doc["devices"]) == 8
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text("sockets: 1\ncoresPerNumaNode: 4\nmemory_per_numa_node: 8Gi\n")
    assert main(["discover", "--machine", str(mixed)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"numalign discover: error: {mixed}: unknown keys ['memory_per_numa_node']; allowed: ")
    assert line.endswith("write 'memoryPerNumaNode' (one spelling per file: camelCase, or the older snake_case)")
    missing = tmp_path / "missing.yaml"
    missing.write_text("sockets: 1\ncoresPerNumaNode: 4\n")
    assert main(["discover", "--machine", str(missing)]) == 2
    assert f"{missing}: memoryPerNumaNode is missing" in capsys.readouterr().err
