"""new_memory_manager (upstream NewManager) and the None policy."""

from __future__ import annotations

import pytest
from support.memoryfile import file_document, restore_document

from numalign.errors import CheckpointError, ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.memorymanager.manager import MemoryManagerNone, new_memory_manager
from numalign.kubelet.memorymanager.policy import MemoryPolicy
from numalign.kubelet.memorymanager.policy_static import MemoryManagerStatic
from numalign.kubelet.memorymanager.reserved import MemoryReservation
from numalign.kubelet.topologymanager.provider import HintProvider
from numalign.machine.examples import example

GI = Quantity.parse("1Gi")


def test_none_policy_is_inert() -> None:
    m = new_memory_manager("None", example("dual-socket"), {}, [])
    assert isinstance(m, MemoryManagerNone)
    provider: HintProvider = m
    res = {"cpu": Quantity.parse("1"), "memory": GI}
    c = Container("c", requests=res, limits=res)
    pod = Pod(name="p", uid="p", containers=(c,))
    assert provider.get_topology_hints(pod, c) is None and provider.get_pod_topology_hints(pod) is None
    provider.allocate(pod, c)
    assert m.get_memory("p", "c") is None and m.get_allocatable_memory() == []
    assert file_document(m) == {"policyName": "None", "machineState": {}}
    with pytest.raises(CheckpointError, match='configured policy "None" differs from state checkpoint policy "Static"'):
        restore_document(m, {"policyName": "Static", "machineState": {}})


def test_none_policy_is_a_null_memory_policy() -> None:
    """Read through MemoryPolicy, None holds no machine state and no assignments and counts nothing;
    Static says it pins."""
    none: MemoryPolicy = new_memory_manager("None", example("dual-socket"), {}, [])
    assert not none.pins and none.machine_state == {} and none.assignments == {} and list(none.host_changes) == []
    assert (none.pinning_requests_total, none.pinning_errors_total) == (0, 0)
    static: MemoryPolicy = new_memory_manager("Static", example("dual-socket"), {"memory": GI},
                                              [MemoryReservation(0, {"memory": GI})])
    assert static.pins and sorted(static.machine_state) == example("dual-socket").numa_ids()


def test_static_policy_validates_reserved_memory() -> None:
    machine = example("dual-socket")
    with pytest.raises(ConfigError, match=r'^the total amount "1Gi" of type "memory" is not equal to the value "2Gi"'):
        new_memory_manager("Static", machine, {"memory": Quantity.parse("2Gi")}, [MemoryReservation(0, {"memory": GI})])
    m = new_memory_manager("Static", machine, {"memory": Quantity.parse("2Gi")},
                           [MemoryReservation(0, {"memory": GI}), MemoryReservation(1, {"memory": GI})])
    assert isinstance(m, MemoryManagerStatic)
    assert m.machine_state[0].memory_map["memory"].system_reserved == 1024**3


def test_static_policy_needs_reserved_memory() -> None:
    with pytest.raises(ConfigError, match=r"you should specify the system reserved memory"):
        new_memory_manager("Static", example("dual-socket"), {}, [])


@pytest.mark.parametrize("name", ["static", "BestEffort", ""])
def test_unknown_policy(name: str) -> None:
    with pytest.raises(ConfigError, match=f'^unknown policy: "{name}"'):
        new_memory_manager(name, example("dual-socket"), {}, [])
