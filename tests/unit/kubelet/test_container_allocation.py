"""The decision record's typed container allocation: the fields a caller reads, and to_dict() giving
the JSON layout records, status files and reports have always carried."""

from __future__ import annotations

from support.configs import static_node_config
from support.machines import gpu_node

from numalign.answer.present.admit import record_text
from numalign.core.decision import ContainerAllocation, MemoryBlock
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node

GiB = 1 << 30


def _pod(name: str, limits: dict[str, str]) -> object:
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}, name)


def test_an_admitted_container_reads_as_typed_fields_and_as_the_same_json() -> None:
    node = Node(gpu_node(), static_node_config())
    rec = node.admit(_pod("p", {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}))  # type: ignore[arg-type]
    assert rec.result.admit, record_text(rec)
    alloc = rec.allocations["c"]
    assert isinstance(alloc, ContainerAllocation) and alloc.exclusive and len(alloc.cpus) == 2
    assert alloc.cpus == tuple(sorted(alloc.cpus))
    assert alloc.memory == (MemoryBlock("memory", GiB, alloc.memory[0].numa_nodes),)
    [(gpu, topo)] = alloc.devices["nvidia.com/gpu"].items()
    assert topo is not None and set(topo) == set(alloc.memory[0].numa_nodes)
    assert rec.to_dict()["allocations"] == {"c": {
        "cpus": alloc.cpus_text,
        "exclusive_cpus": True,
        "memory": [{"type": "memory", "size": GiB, "numa_nodes": list(alloc.memory[0].numa_nodes)}],
        "devices": {"nvidia.com/gpu": {gpu: list(topo)}},
    }}
    assert node.allocation("p", "c") == alloc  # what the node reports now is what the record holds


def test_a_shared_pool_container_and_a_device_without_topology() -> None:
    shared = ContainerAllocation((0, 1, 2, 5), False, (), {"example.com/nic": {"nic0": None}}, "0-2,5")
    assert shared.to_dict() == {"cpus": "0-2,5", "exclusive_cpus": False, "memory": [],
                                "devices": {"example.com/nic": {"nic0": None}}}


def test_admit_without_allocations_decides_the_same_and_the_node_still_answers_them() -> None:
    """admit(allocations=False), as the simulator admits: the same verdict and holdings, a record without
    the allocations, which the node still answers."""
    full, lean = Node(gpu_node(), static_node_config()), Node(gpu_node(), static_node_config())
    for i, limits in enumerate(({"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}, {"cpu": "500m"},
                                {"cpu": "200", "memory": "1Gi"})):
        pod = _pod(f"p{i}", limits)
        a, b = full.admit(pod), lean.admit(pod, allocations=False)  # type: ignore[arg-type]
        assert (a.result, a.decisions) == (b.result, b.decisions) and b.allocations == {}
        if a.result.admit:
            assert lean.allocation(f"p{i}", "c") == full.allocation(f"p{i}", "c") == a.allocations["c"]
    assert list(lean.pods) == list(full.pods) == ["p0", "p1"]
