"""Invariants of a node's state directory, read as a restart reads it (a read-only open reconciles in
memory): no CPU or device given twice, free + assigned = allocatable (CPUs and memory per NUMA node),
every pod listed exactly once. Shared by the crash, full-disk and soak runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.directory import StateDirectory
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.memorymanager.policy_static import MemoryManagerStatic
from numalign.kubelet.node import Node
from numalign.machine.topology import Machine


def open_read_only(machine: Machine, config: KubeletConfig, state_dir: Path) -> Node:
    return Node(machine, config, store=StateDirectory(state_dir, read_only=True))


def raw_record_uids(state_dir: Path) -> list[str]:
    """The uids numalign_pods.json lists, straight from the file (duplicates kept)."""
    path = state_dir / "numalign_pods.json"
    if not path.exists():
        return []
    return [p["uid"] for p in json.loads(path.read_text())["pods"]]


def check_node(node: Node, state_dir: Path) -> dict[str, Any]:
    """Assert the invariants; return {uid: {container: exclusive cpus}} for comparisons across restarts."""
    assert isinstance(node.cpu, StaticPolicy) and isinstance(node.memory, MemoryManagerStatic)
    listed = raw_record_uids(state_dir)
    assert len(listed) == len(set(listed)), f"a pod listed twice: {listed}"
    cpu_owner: dict[int, str] = {}
    dev_owner: dict[tuple[str, str], str] = {}
    held: dict[str, Any] = {}
    for uid in node.cpu.state.entries:
        assert uid in node.pods, f"CPUs held by pod uid {uid}, which no pod record lists"
    for uid, pod in node.pods.items():
        held[uid] = {}
        for c in pod.all_containers():
            own = node.cpu.get_cpu_set(uid, c.name) or frozenset()
            held[uid][c.name] = sorted(own)
            for cpu in own:
                assert cpu_owner.setdefault(cpu, uid) == uid, f"CPU {cpu} given to two pods"
            for res, ids in (node.devices.get_container_devices(uid, c.name) or {}).items():
                for d in ids:
                    assert dev_owner.setdefault((res, d), uid) == uid, f"device {res}/{d} given to two pods"
    assert not set(cpu_owner) & node.cpu.get_default_cpu_set(), "a CPU both exclusive and in the shared pool"
    assert set(cpu_owner) | node.cpu.get_default_cpu_set() == set(node.cpu.topology.details.cpus())
    for n, st in node.memory.machine_state.items():
        for kind, table in st.memory_map.items():
            assert table.free + table.reserved == table.allocatable, f"NUMA {n} {kind}: free + reserved != allocatable"
    assert set(node.devices.pod_devices.pods()) <= set(node.pods), "devices held by a pod no record lists"
    return held
