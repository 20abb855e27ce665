"""`numalign admit` text stays readable at 64 NUMA nodes and many pods (issue 22, item 9): a few lines per
rejected pod, identical rejections named once, free capacity only where it matters, no line over 200
characters, a summary by reason first; --details keeps everything."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from numalign.cli.main import main
from numalign.paths import DATA_DIR

NUMA64 = ["--machine", "numa-64", "--policy-option", "max-allowable-numa-nodes=64"]


def eighty_pods(tmp_path: Path) -> Path:
    docs = list(yaml.safe_load_all((DATA_DIR / "example-pods.yaml").read_text(encoding="utf-8")))
    out = []
    for i in range(16):
        for d in docs:
            pod = copy.deepcopy(d)
            pod["metadata"]["name"] += f"-{i}"
            pod["metadata"].pop("uid", None)
            out.append(pod)
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all(out), encoding="utf-8")
    return path


def admit(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["admit", *args]) == 0
    return capsys.readouterr().out.splitlines()


def pod_blocks(lines: list[str]) -> dict[str, list[str]]:
    """Each pod's lines, from its `pod ...:` line to the next."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("pod "):
            current = blocks.setdefault(line.split(":")[0][4:], [])
        elif not line.strip():
            current = None
        if current is not None:
            current.append(line)
    return blocks


def test_numa_64_with_80_pods_is_a_few_lines_per_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = admit(capsys, str(eighty_pods(tmp_path)), *NUMA64)
    assert max(map(len, lines)) <= 200
    blocks = pod_blocks(lines)
    assert len(blocks) == 80
    rejected = {name: b for name, b in blocks.items() if "REJECTED" in b[0]}
    assert rejected and all(len(b) <= 8 for b in rejected.values())
    # Identical rejections (same reason, message and pod shape) get one line after the first.
    repeats = [b for b in rejected.values() if "the same pod shape" in b[0]]
    assert repeats and all(len(b) == 1 for b in repeats)
    # Free capacity of NUMA nodes in the same state shares a line: never 64 lines of it.
    assert not any(line.strip().startswith("NUMA 63 ") for line in lines)
    admitted = sum(1 for b in blocks.values() if b[0].endswith(": admitted"))
    at = lines.index(f"{admitted}/80 pods admitted")  # the summary first, before any pod
    assert at < min(i for i, line in enumerate(lines) if line.startswith("pod "))
    assert lines[at + 1].startswith(f"  TopologyAffinityError: {80 - admitted} pods (")


def test_details_prints_every_record_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = admit(capsys, str(eighty_pods(tmp_path)), *NUMA64, "--details")
    assert sum(1 for line in lines if line.startswith("pod ")) == 80
    assert not any("the same pod shape" in line for line in lines)
    assert any(line.strip().startswith("NUMA 63 memory:") for line in lines)  # every NUMA node


def test_gb200_shows_no_empty_cpu_lines_and_groups_memory_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    lines = admit(capsys, "--machine", "gb200", "--policy-option", "max-allowable-numa-nodes=34")
    assert not any("0 CPUs free of 0 CPUs" in line for line in lines)
    # The four GPUs' HBM nodes, all untouched, on one line.
    assert "    NUMA 2,10,18,26 memory: 186Gi free of 186Gi each" in lines
    at = lines.index("  TopologyAffinityError: 1 pod (ml/training-4gpu)")  # in the summary, before any pod
    assert at < min(i for i, line in enumerate(lines) if line.startswith("pod "))
