"""CPUManagerState through the cpu_manager_state codec: a restart restores the policy exactly."""

from __future__ import annotations

import pytest

from numalign.core.hint import TopologyHint
from numalign.errors import CheckpointError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint, decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology

TOPO = CPUTopology.from_cpu_infos(CPUInfo(c, c % 2, c % 2, c % 6, 0) for c in range(12))


class Store:
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint.of([1], True)


def to_bytes(st: CPUManagerState) -> bytes:
    policy, default, entries = st.to_strings()
    return encode_cpu_checkpoint(CPUManagerCheckpoint(policy, default, entries))


def from_bytes(data: bytes) -> CPUManagerState:
    cp = decode_cpu_checkpoint(data, policy_name="static")
    return CPUManagerState.from_strings(cp.policy_name, cp.default_cpu_set, cp.entries)


def test_restart_restores_assignments() -> None:
    p = StaticPolicy(TOPO, 1, affinity=Store())
    p.start()
    q = {"cpu": Quantity.parse("2"), "memory": Quantity.parse("1Gi")}
    c = Container("app", requests=q, limits=q)
    p.allocate(Pod("p", uid="u1", containers=(c,)), c)
    data = to_bytes(p.snapshot())
    assert b'"defaultCpuSet":"0,2-6,8-11"' in data
    assert b'"entries":{"u1":{"app":"1,7"}}' in data
    again = StaticPolicy(TOPO, 1, affinity=Store())
    again.restore(from_bytes(data))
    assert again.snapshot() == p.snapshot()
    assert again.get_cpu_set("u1", "app") == frozenset({1, 7})


def test_unparsable_cpuset_is_a_checkpoint_error() -> None:
    with pytest.raises(CheckpointError, match="defaultCpuSet"):
        CPUManagerState.from_strings("static", "0-x")
    with pytest.raises(CheckpointError, match=r"entries\[u\]\[c\]"):
        CPUManagerState.from_strings("static", "0-3", {"u": {"c": "5-2"}})
