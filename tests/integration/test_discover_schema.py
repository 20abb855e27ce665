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
