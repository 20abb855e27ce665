"""A state directory's kubelet files are in the layout of the kubelet release the CLI decides as: from 1.37
cpu_manager_state and memory_manager_state are the checkpoint envelope (`data`, `dataChecksum`), which the
checkpoint conformance area shows the real 1.37 decoder reads back; up to 1.36 the flat layout with
`checksum`. Each CLI call is a subprocess on the directory, as a user runs one after the other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numalign.kubelet.cpumanager.checkpoint import decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.memorymanager.checkpoint import decode_memory_checkpoint, encode_memory_checkpoint

EXE = [sys.executable, "-m", "numalign.cli.main"]
MACHINE = "2s x 2n x 4c x 2t, 16Gi/node"
POD = """apiVersion: v1
kind: Pod
metadata: {name: app, uid: uid-app}
spec:
  containers:
  - name: main
    image: app
    resources:
      limits: {cpu: "2", memory: 1Gi}
"""
NODE = ["--machine", MACHINE, "--cpu-manager-policy", "static", "--reserved-cpus", "0",
        "--memory-manager-policy", "Static", "--reserved-memory", "0:memory=2148Mi"]


def admit(state: Path, pods: Path, version: str) -> None:
    p = subprocess.run([*EXE, "admit", "--state-dir", str(state), *NODE, "--kubelet-version", version, str(pods)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr


def keys(path: Path) -> set[str]:
    return set(json.loads(path.read_bytes()))


@pytest.mark.parametrize(("version", "release", "layout"), [
    ("1.37.2", (1, 37), {"data", "dataChecksum"}),
    ("1.36.3", (1, 36), {"checksum"}),
    ("1.33.13", (1, 33), {"checksum"}),
])
def test_admit_writes_the_kubelet_files_of_the_release_it_decides_as(
    tmp_path: Path, version: str, release: tuple[int, int], layout: set[str]
) -> None:
    pods = tmp_path / "pod.yaml"
    pods.write_text(POD)
    state = tmp_path / "state"
    admit(state, pods, version)
    cpu_file, memory_file = state / "cpu_manager_state", state / "memory_manager_state"
    for f in (cpu_file, memory_file):
        assert layout <= keys(f), f"{f.name} at {version}: {sorted(keys(f))}"
        assert ("data" in keys(f)) == (release >= (1, 37)), f"{f.name} at {version}: {sorted(keys(f))}"
    # The bytes are those the release's kubelet writes for what it holds (its codec, which the
    # checkpoint conformance area holds to the real state code), and read back as that kubelet reads them.
    cpu = decode_cpu_checkpoint(cpu_file.read_bytes(), policy_name="static", version=release)
    assert encode_cpu_checkpoint(cpu, version=release) == cpu_file.read_bytes()
    assert any("main" in ctrs for ctrs in cpu.entries.values())
    memory = decode_memory_checkpoint(memory_file.read_bytes(), policy_name="Static", version=release)
    assert encode_memory_checkpoint(memory.state(), version=release) == memory_file.read_bytes()
    # The same release reads its directory again (a second pod on the same node).
    other = tmp_path / "other.yaml"
    other.write_text(POD.replace("name: app, uid: uid-app", "name: other, uid: uid-other"))
    admit(state, other, version)
    cpu = decode_cpu_checkpoint(cpu_file.read_bytes(), policy_name="static", version=release)
    assert len(cpu.entries) == 2
