"""The run layer keeps each `numalign run` pod's process beside the node's state (numalign_pods.json,
through the state directory) and has the Node release, on every load, the pods whose process ended (the
liveness check is injected; run/leftovers gives /proc's). The Node itself knows no process."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.directory import StateDirectory
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.run.records import RunProcesses

CONFIG = KubeletConfig(cpu_manager_policy="static", reserved_system_cpus="0")
# Written by numalign while the Node still kept the process records (dual-socket, CONFIG): the pods a and b
# of runs whose processes are pids 10 and 11, and a pod without a process (an agent's).
WRITTEN_BEFORE = Path(__file__).resolve().parents[2] / "data" / "state" / "run-processes"


def pod(name: str) -> Any:
    return pod_from_dict({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})


def opened(tmp_path: Path, alive: Any = None) -> tuple[Node, RunProcesses]:
    store = StateDirectory(tmp_path)
    runs = RunProcesses(store, alive)
    return Node(example("dual-socket"), CONFIG, store=store, ended_pods=runs.ended), runs


def test_process_records_survive_a_reload_and_ended_ones_are_released(tmp_path: Path) -> None:
    node, runs = opened(tmp_path)
    for name, pid in (("a", 10), ("b", 11)):
        runs.records[f"uid-{name}"] = {"pid": pid, "start_time": 1, "command": ["x"]}
        assert node.admit(pod(name)).result.admit
    node.admit(pod("agent"))  # a pod without a process (an agent's or admit's) is never reclaimed
    held = node.allocation("uid-a", "main").cpus
    assert not hasattr(node, "processes")

    def alive(record: Mapping[str, Any]) -> bool:
        return bool(record["pid"] == 11)

    again, runs = opened(tmp_path, alive)
    assert [(p.uid, r["pid"]) for p, r in runs.reclaimed] == [("uid-a", 10)]
    assert sorted(again.pods) == ["uid-agent", "uid-b"] and list(runs.records) == ["uid-b"]
    assert set(held) <= set(again.cpu.get_default_cpu_set())
    third, runs = opened(tmp_path)  # what was released is gone from the files too
    assert sorted(third.pods) == ["uid-agent", "uid-b"] and runs.records["uid-b"]["pid"] == 11


def test_a_process_that_ends_later_is_released_on_the_next_tick(tmp_path: Path) -> None:
    ended: set[int] = set()
    node, runs = opened(tmp_path, lambda r: r["pid"] not in ended)
    runs.records["uid-a"] = {"pid": 10, "start_time": 1, "command": ["x"]}
    assert node.admit(pod("a")).result.admit
    assert not runs.release_ended(node)  # still running
    ended.add(10)  # kill -9
    assert runs.release_ended(node) and not node.pods and not runs.records
    after, runs = opened(tmp_path)
    assert not after.pods and not runs.records


def files(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in sorted(state.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def test_a_directory_written_before_the_records_left_the_node_loads_unchanged(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(WRITTEN_BEFORE, state)
    before = files(state)
    node, runs = opened(state)
    assert sorted(node.pods) == ["uid-a", "uid-agent", "uid-b"]
    assert {uid: (r["pid"], r["command"], r["container"]) for uid, r in runs.records.items()} == {
        "uid-a": (10, ["sleep", "600"], "main"), "uid-b": (11, ["sleep", "600"], "main")}
    assert files(state) == before  # read as it is: nothing rewritten
    held = node.allocation("uid-a", "main").cpus

    again, runs = opened(state, lambda r: bool(r["pid"] == 11))  # a's process was killed (kill -9)
    assert [p.uid for p, _ in runs.reclaimed] == ["uid-a"]
    assert sorted(again.pods) == ["uid-agent", "uid-b"] and set(held) <= set(again.cpu.get_default_cpu_set())
    third, runs = opened(state)
    assert sorted(third.pods) == ["uid-agent", "uid-b"] and runs.records["uid-b"]["command"] == ["sleep", "600"]
