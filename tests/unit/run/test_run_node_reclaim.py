"""Node keeps each `numalign run` pod's process in numalign_pods.json and releases the pods whose
process ended (the liveness check is injected; run/ gives /proc's)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.directory import StateDirectory
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node
from numalign.machine.examples import example

CONFIG = KubeletConfig(cpu_manager_policy="static", reserved_system_cpus="0")


def pod(name: str) -> Any:
    return pod_from_dict({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})


def test_process_records_survive_a_reload_and_ended_ones_are_released(tmp_path: Path) -> None:
    machine = example("dual-socket")
    node = Node(machine, CONFIG, store=StateDirectory(tmp_path))
    for name, pid in (("a", 10), ("b", 11)):
        node.processes[f"uid-{name}"] = {"pid": pid, "start_time": 1, "command": ["x"]}
        assert node.admit(pod(name)).result.admit
    node.admit(pod("agent"))  # a pod without a process (an agent's or admit's) is never reclaimed
    held = node.allocation("uid-a", "main").cpus

    def alive(record: Mapping[str, Any]) -> bool:
        return bool(record["pid"] == 11)

    again = Node(machine, CONFIG, store=StateDirectory(tmp_path), process_alive=alive)
    assert [(p.uid, r["pid"]) for p, r in again.reclaimed] == [("uid-a", 10)]
    assert sorted(again.pods) == ["uid-agent", "uid-b"] and list(again.processes) == ["uid-b"]
    assert set(held) <= set(again.cpu.get_default_cpu_set())
    third = Node(machine, CONFIG, store=StateDirectory(tmp_path))  # what was released is gone from the files too
    assert sorted(third.pods) == ["uid-agent", "uid-b"] and third.processes["uid-b"]["pid"] == 11
