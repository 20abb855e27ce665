"""`numalign admit --config` with settings the kubelet accepts through its defaulting and node capacity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXE = [sys.executable, "-m", "numalign.cli.main"]
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
POD = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
    "    resources:\n      limits: {cpu: '2', memory: 1Gi}\n"
)


def admit(tmp_path: Path, config: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config.yaml").write_text(HEADER + config)
    (tmp_path / "pod.yaml").write_text(POD)
    return subprocess.run(
        [*EXE, "admit", str(tmp_path / "pod.yaml"), "--config", str(tmp_path / "config.yaml"), *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_percentage_memory_eviction_threshold_uses_the_machine_memory(tmp_path: Path) -> None:
    p = admit(
        tmp_path,
        "cpuManagerPolicy: static\nkubeReserved: {cpu: \"1\"}\nevictionHard: {memory.available: \"5%\"}\n",
        "--output", "json",
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pods"][0]["result"]["admit"] is True


def test_empty_policy_fields_are_the_kubelet_defaults(tmp_path: Path) -> None:
    p = admit(
        tmp_path,
        'topologyManagerScope: ""\ntopologyManagerPolicy: ""\ncpuManagerPolicy: ""\nmemoryManagerPolicy: ""\n',
    )
    assert p.returncode == 0, p.stderr
    assert "pod default/p: admitted" in p.stdout


def test_pod_level_resources_gate_is_known_and_other_gates_are_not_called_fatal(tmp_path: Path) -> None:
    gates = "PodLevelResources=true,TopologyManagerPolicyOptions=true,MemoryQoS=true"
    p = admit(tmp_path, "", "--feature-gates", gates)
    assert p.returncode == 0, p.stderr
    (line,) = p.stderr.splitlines()  # TopologyManagerPolicyOptions is modelled (numalign.kubelet.versions)
    assert line.startswith('warning: --feature-gates: feature gate "MemoryQoS" is not modelled '
                           "by numalign and has no effect here")
    assert "refuses" not in line and "unrecognized" not in line


def test_extended_resource_no_plugin_provides_is_noted(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: foo}\nspec:\n  containers:\n  - name: c\n"
        "    resources:\n      limits: {cpu: '2', memory: 1Gi, example.com/foo: '1', nvidia.com/gpu: '1'}\n"
        "---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec:\n  containers:\n  - name: c\n"
        "    resources:\n      limits: {cpu: '1', memory: 1Gi, nvidia.com/gpu: '1'}\n"
    )
    p = subprocess.run([*EXE, "admit", str(pods)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    foo, plain = p.stdout.split("pod default/foo: ")[1].split("pod default/plain: ")
    assert foo.startswith("admitted")
    assert ("  note: no device plugin provides example.com/foo on this machine; the kubelet admits the pod "
            "without those devices") in foo
    assert "nvidia.com/gpu" not in foo.split("note:")[1]  # the machine's GPUs are provided
    assert "note:" not in plain
    assert "2/2 pods admitted" in p.stdout


def test_unprovided_extended_resource_on_a_rejected_pod_is_not_the_reason(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    # More GPUs than any one NUMA node has: single-numa-node (the built-in config) rejects the pod.
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n  - name: c\n"
        "    resources:\n      limits: {cpu: '2', memory: 1Gi, example.com/foo: '1', nvidia.com/gpu: '4'}\n"
    )
    p = subprocess.run([*EXE, "admit", str(pod)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert "pod default/big: REJECTED" in p.stdout
    assert ("  note: no device plugin provides example.com/foo on this machine; the kubelet leaves that request "
            "out of admission, so it is not why the pod was rejected") in p.stdout
