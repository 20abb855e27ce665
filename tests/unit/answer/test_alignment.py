"""Alignment at a glance: NUMA nodes of each container's CPUs, memory and devices; flags when a
container spans more NUMA nodes than it needs; the `numalign admit` output carries both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.configs import static_node_config
from support.machines import gpu_node, gpu_node_dict

from numalign.answer.admit import NodeAnswers
from numalign.answer.present.text import allocation_line
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node


def _pod(name: str, limits: dict[str, str]) -> object:
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}, name)


def test_unaligned_container_is_flagged_and_aligned_one_is_not() -> None:
    # Topology Manager none: the CPU manager takes CPUs on NUMA 0 while NUMA 0's GPUs are already held.
    node = Node(gpu_node(), static_node_config(policy="none"))
    answers = NodeAnswers(node)
    first = _pod("gpus-only", {"nvidia.com/gpu": "2"})
    node.admit(first)  # type: ignore[arg-type]
    p = _pod("split", {"cpu": "4", "memory": "1Gi", "nvidia.com/gpu": "2"})
    rec = node.admit(p)  # type: ignore[arg-type]
    alignment = answers.after(p, rec)  # type: ignore[arg-type]
    c = alignment.containers[0]  # type: ignore[union-attr]
    assert (c.cpus, c.memory, c.devices["nvidia.com/gpu"]) == ((0,), (0,), (1,))
    assert c.fewest == 1 and c.flags == ("spans NUMA 0,1 where 1 NUMA node would do",)
    assert not alignment.aligned  # type: ignore[union-attr]
    line = allocation_line("c", rec.allocations["c"], c)
    assert "(exclusive, NUMA 0)" in line and "0000:12:00.0 0000:13:00.0 (NUMA 1)" in line
    assert line.endswith("<- spans NUMA 0,1 where 1 NUMA node would do")

    aligned = Node(gpu_node(), static_node_config())
    rec = aligned.admit(p)  # type: ignore[arg-type]
    assert NodeAnswers(aligned).after(p, rec).aligned  # type: ignore[arg-type, union-attr]


def test_cli_json_and_text_carry_answers(tmp_path: Path) -> None:
    machine = tmp_path / "gpu224.json"
    machine.write_text(json.dumps(gpu_node_dict()))
    deploy = tmp_path / "web.yaml"
    deploy.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 600\n"
                      "  template:\n    spec:\n      containers:\n      - name: c\n        image: x\n"
                      "        resources: {requests: {cpu: 500m, memory: 256Mi}}\n")
    cmd = [sys.executable, "-m", "numalign.cli.main", "admit", str(deploy), "--machine", str(machine),
           "--max-pods", "1000"]
    out = subprocess.run([*cmd, "--output", "json"], capture_output=True, text=True, check=True)
    pods = json.loads(out.stdout)["pods"]
    rejected = [p for p in pods if not p["result"]["admit"]]
    # The built-in example configuration reserves CPUs 0-1: 222 allocatable CPUs, 444 pods of 500m.
    assert len(rejected) == 156
    assert rejected[0]["result"] == {"admit": False, "reason": "OutOfcpu", "message": (
        "Node didn't have enough resource: cpu, requested: 500, used: 222000, capacity: 222000")}
    assert rejected[0]["answer"]["wouldFitIf"][0]["verified"] is True
    assert "alignment" in pods[0]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    # 600 pods: a few lines per pod, the 155 rejections of the same shape in a row on one line, a summary first.
    assert "REJECTED: OutOfcpu: Node didn't have enough resource" in text and "  would fit if " in text
    assert text.count("REJECTED: OutOfcpu (as default/web-444, the same pod shape)") == 1
    assert "\npods default/web-445 to default/web-599 (155 in a row): REJECTED: OutOfcpu (as default/web-444, " \
        "the same pod shape)\n" in text
    lines = text.splitlines()
    at = lines.index("444/600 pods admitted")
    assert lines[at + 1] == "  OutOfcpu: 156 pods (default/web-444 and 155 more of its shape)"
    assert at < min(i for i, line in enumerate(lines) if line.startswith("pod "))
    assert max(map(len, text.splitlines())) <= 200
    details = subprocess.run([*cmd, "--details"], capture_output=True, text=True, check=True).stdout
    assert "  would fit if (each checked" in details and details.count("REJECTED: OutOfcpu: Node") == 156
