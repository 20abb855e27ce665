"""Properties of the Static policy over random admit/remove sequences: memory is conserved, no byte is
handed out twice, the grouping rule holds, and a restart from the snapshot reproduces the state."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import memory_scripts

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.memorymanager.policy_static import MemoryManagerStatic
from numalign.kubelet.memorymanager.state import HugePagesInfo, NUMANodeMemory

MB = 1024 * 1024
GB = 1024 * MB
HP2M = "hugepages-2Mi"


class NoAffinity:
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint(None, False)


def machine(nodes: int) -> MemoryManagerStatic:
    topo = [NUMANodeMemory(n, 4 * GB, (HugePagesInfo(2048, 256),)) for n in range(nodes)]
    return MemoryManagerStatic(topo, {n: {"memory": 256 * MB} for n in range(nodes)}, NoAffinity())


def guaranteed(uid: str, mem_mb: int, hp_mb: int) -> Pod:
    res = {"cpu": Quantity.parse("1"), "memory": Quantity.parse(f"{mem_mb}Mi")}
    if hp_mb:
        res[HP2M] = Quantity.parse(f"{hp_mb}Mi")
    return Pod(name=uid, uid=uid, containers=(Container("c", requests=res, limits=dict(res)),))


def check_invariants(m: MemoryManagerStatic) -> None:
    for nid, node in m.machine_state.items():
        for table in node.memory_map.values():
            assert table.free + table.reserved == table.allocatable
        if len(node.cells) > 1:  # every member of a group names the same group
            assert all(sorted(m.machine_state[c].cells) == sorted(node.cells) for c in node.cells)
        else:
            assert node.cells == [nid]
    blocks = [b for ctns in m.assignments.values() for bs in ctns.values() for b in bs]
    for nid, node in m.machine_state.items():
        assert node.number_of_assignments == sum(1 for b in blocks if nid in b.numa_affinity)
    # without init containers every byte reserved belongs to exactly one block
    for resource in ("memory", HP2M):
        reserved = sum(n.memory_map[resource].reserved for n in m.machine_state.values())
        assert reserved == sum(b.size for b in blocks if b.type == resource)


@settings(max_examples=60)
@given(nodes=st.integers(1, 4), script=memory_scripts)
def test_random_admit_remove_sequences_keep_the_books(nodes: int, script: list[tuple[bool, int, int]]) -> None:
    m = machine(nodes)
    live: list[str] = []
    for i, (remove, mem_mb, hp_mb) in enumerate(script):
        if remove and live:
            m.remove_container(live.pop(mem_mb % len(live)), "c")
        else:
            p = guaranteed(f"p{i}", mem_mb, hp_mb)
            before = m.snapshot()
            try:
                m.allocate(p, p.containers[0])
                live.append(p.uid)
            except AllocationError:
                assert m.snapshot() == before
        check_invariants(m)
        restarted = machine(nodes)
        restarted.restore(m.snapshot())
        assert restarted.snapshot() == m.snapshot()
    for uid in live:
        m.remove_container(uid, "c")
    assert m.snapshot() == machine(nodes).snapshot()
