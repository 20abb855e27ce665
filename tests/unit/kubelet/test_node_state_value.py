"""A node's state as a value: Node.state / restore, a restart with another config (Node.restarted), the
probe that leaves nothing behind, and the state directory trading NodeState values."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from support.configs import static_node_config

from numalign import metrics as m
from numalign.adapters.statedir.directory import StateDirectory
from numalign.k8s.pod import Container, Pod, pod_to_manifest
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.kubelet.state import NodeState
from numalign.machine.examples import example

MACHINE = example("dual-socket")
CONFIG = static_node_config(reserved="0,64")


def pod(name: str, cpus: int = 4, gpus: int = 0, memory: str = "1Gi") -> Pod:
    res = {"cpu": Quantity.from_int(cpus), "memory": Quantity.parse(memory)}
    if gpus:
        res["nvidia.com/gpu"] = Quantity.from_int(gpus)
    return Pod(name=name, uid=f"uid-{name}", containers=(Container("app", requests=res, limits=res),))


def loaded() -> Node:
    n = Node(MACHINE, CONFIG)
    for p in (pod("a", gpus=1), pod("b", 8), pod("c", 2, gpus=1)):
        assert n.admit(p).result.admit
    return n


def counters(n: Node) -> dict[str, float]:
    names = (m.ADMISSION_REJECTIONS, m.TM_ADMISSION_REQUESTS, m.CPU_PINNING_REQUESTS, m.MEM_PINNING_REQUESTS)
    return {name: n.metrics.value(name) for name in names}


def test_a_probe_decides_as_admit_and_leaves_nothing() -> None:
    n = loaded()
    state, seen, pinned = n.state(), counters(n), (n.cpu.snapshot(), n.memory.snapshot())
    for p in (pod("d", 6, gpus=1), pod("huge", 200)):
        probed = n.probe(p)
        assert n.state() == state and counters(n) == seen and (n.cpu.snapshot(), n.memory.snapshot()) == pinned
        assert p.uid not in n.pods and p.uid not in n.records
        twin = n.restarted()
        assert twin.admit(p) == probed  # the same decision, allocations included
    assert n.probe(pod("d", 6, gpus=1)).result.admit and not n.probe(pod("huge", 200)).result.admit
    n.admit(pod("d", 6, gpus=1))
    assert counters(n)[m.TM_ADMISSION_REQUESTS] == seen[m.TM_ADMISSION_REQUESTS] + 1  # probes counted nothing


def test_a_probe_without_allocations_gives_the_same_verdict_and_leaves_nothing() -> None:
    n = loaded()
    state, seen = n.state(), counters(n)
    for p in (pod("d", 6, gpus=1), pod("huge", 200), pod("e", 2)):
        full, bare = n.probe(p), n.probe(p, allocations=False)
        assert bare == dataclasses.replace(full, allocations={})  # decisions, merged hints and result alike
        assert n.state() == state and counters(n) == seen
    assert n.probe(pod("d", 6, gpus=1)).allocations  # the default keeps them


def test_a_restart_keeps_every_allocation_under_another_config() -> None:
    n = loaded()
    config = dataclasses.replace(CONFIG, topology_manager_policy="best-effort", topology_manager_scope="pod")
    twin = n.restarted(config)
    assert (twin.tm.policy_name, twin.tm.scope_name) == ("best-effort", "pod")
    assert twin.state() == n.state() and twin.store is None
    for uid, p in n.pods.items():
        for c in p.all_containers():
            assert twin.allocation(uid, c.name) == n.allocation(uid, c.name)
    twin.remove("uid-a")
    assert "uid-a" in n.pods and n.state().pods != twin.state().pods  # the original is not touched


def test_the_state_directory_trades_node_states(tmp_path: Path) -> None:
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    for p in (pod("a", gpus=1), pod("b", 8)):
        assert n.admit(p).result.admit
    store = StateDirectory(tmp_path, read_only=True)
    state = store.load(cpu_policy=n.cpu.policy_name, memory_policy=n.memory.policy_name)
    assert isinstance(state, NodeState) and state.recorded
    assert [pod_to_manifest(a.pod) for a in state.pods] == [pod_to_manifest(p) for p in n.pods.values()]
    assert [a.allocation for a in state.pods] == [n.allocations[uid] for uid in n.pods]
    assert (state.cpu, state.memory) == (n.cpu.snapshot(), n.memory.snapshot())
    assert state.devices is not None and state.devices.pod_device_entries == n.devices.snapshot().pod_device_entries
    # A node started from the loaded state holds what the directory's node holds.
    again = Node(MACHINE, CONFIG, state=state)
    assert list(again.pods) == list(n.pods) and again.allocations == n.allocations
    assert (again.cpu.snapshot(), again.memory.snapshot()) == (n.cpu.snapshot(), n.memory.snapshot())


def test_decide_then_commit_is_admit() -> None:
    n, m2 = loaded(), loaded()
    plan = n.decide(pod("d", 6))
    assert plan.settled and plan.record.result.admit and "uid-d" in n.pods  # no plugin call: recorded at once
    assert n.commit(plan) is plan.record
    assert m2.admit(pod("d", 6)) == plan.record


def test_the_library_example_runs() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "library.md"
    code = doc.read_text(encoding="utf-8").split("## One node's kubelet", 1)[1].split("```python\n", 1)[1]
    code = code.split("```", 1)[0]
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split("\n")[:2] == ["True 0", "True 1"]
