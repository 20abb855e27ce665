"""MemoryManagerStatic: the Static policy as a hint provider (upstream
TestStaticPolicyAllocateWithInitContainers, TestStaticPolicyNew, manager AddContainer / GetMemoryNUMANodes,
pod-scope hints, snapshot/restore)."""

from __future__ import annotations

import pytest
from support.memoryfile import file_document, restore_document

from numalign.core.bitmask import mask_of
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, CheckpointError, ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.memorymanager.policy_static import MemoryManagerStatic
from numalign.kubelet.memorymanager.requests import get_pod_requested_resources
from numalign.kubelet.memorymanager.state import (
    Block,
    HugePagesInfo,
    MemoryTable,
    NUMANodeMemory,
    NUMANodeState,
)
from numalign.kubelet.topologymanager.provider import HintProvider
from numalign.machine.examples import example, example_names

MB = 1024 * 1024
GB = 1024 * MB
HP1G = "hugepages-1Gi"
PAGE_1G_KIB = 1048576


class FixedAffinity:
    """A Topology Manager store that hands every container the same merged hint."""

    def __init__(self, hint: TopologyHint) -> None:
        self.hint = hint

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return self.hint


def ctn(name: str, memory: str, hugepages: str | None = None, *, init: bool = False,
        sidecar: bool = False, burstable: bool = False) -> Container:
    res = {"cpu": Quantity.parse("1"), "memory": Quantity.parse(memory)}
    if hugepages is not None:
        res[HP1G] = Quantity.parse(hugepages)
    limits = dict(res)
    if burstable:
        limits["memory"] = limits["memory"] + limits["memory"]
    return Container(name, requests=res, limits=limits, restart_policy="Always" if sidecar else None,
                     is_init=init)


def pod(uid: str, containers: list[Container], init: list[Container] | None = None) -> Pod:
    return Pod(name=uid, uid=uid, containers=tuple(containers), init_containers=tuple(init or ()))


def manager(memory: int, pages_1g: int, nodes: int = 1, hint: TopologyHint | None = None) -> MemoryManagerStatic:
    machine = [NUMANodeMemory(n, memory, (HugePagesInfo(PAGE_1G_KIB, pages_1g),)) for n in range(nodes)]
    return MemoryManagerStatic(machine, {n: {"memory": 512 * MB} for n in range(nodes)},
                               FixedAffinity(hint or TopologyHint(None, False)))


def test_is_a_hint_provider_named_memory() -> None:
    m = manager(4 * GB, 2)
    provider: HintProvider = m  # checked statically by mypy
    assert isinstance(provider, HintProvider)
    assert m.name == "memory" and m.policy_name == "Static"


def test_new_requires_system_reserved_memory() -> None:
    with pytest.raises(ConfigError, match=r"^\[memorymanager\] you should specify the system reserved memory"):
        MemoryManagerStatic([NUMANodeMemory(0, GB)], {0: {}, 1: {HP1G: GB}})
    MemoryManagerStatic([NUMANodeMemory(0, GB), NUMANodeMemory(1, GB)], {0: {}, 1: {"memory": 512 * MB}})


def test_managers_of_one_machine_share_its_default_state_but_never_each_others() -> None:
    # The empty machine's state is worked out once per (nodes, reservations) and shared by the managers
    # built from them (a simulated pool's); each manager allocates on its own copy.
    a, b = manager(4 * GB, 2), manager(4 * GB, 2)
    p = pod("pod1", [ctn("container1", "1Gi", "1Gi")])
    a.allocate(p, p.containers[0])
    a.start()  # Start again from an empty state: the default one, untouched by a's allocation
    assert a.snapshot() == b.snapshot()
    b.allocate(p, p.containers[0])
    assert manager(4 * GB, 2).machine_state == a.default_machine_state() == b.default_machine_state()
    assert b.machine_state[0].memory_map[HP1G].free == GB and a.machine_state[0].memory_map[HP1G].free == 2 * GB


def test_non_guaranteed_pods_get_no_hints_and_no_memory() -> None:
    m = manager(4 * GB, 2)
    p = pod("pod1", [ctn("container1", "1Gi", "1Gi", burstable=True)])
    assert m.get_topology_hints(p, p.containers[0]) is None
    assert m.get_pod_topology_hints(p) is None
    m.allocate(p, p.containers[0])
    assert m.assignments == {} and m.pinning_requests_total == 0


def test_allocate_is_idempotent_for_a_container_in_state() -> None:
    m = manager(4 * GB, 2)
    p = pod("pod1", [ctn("container1", "1Gi", "1Gi")])
    m.allocate(p, p.containers[0])
    state = m.snapshot()
    m.allocate(p, p.containers[0])
    assert m.snapshot() == state
    assert m.pinning_requests_total == 2 and m.pinning_errors_total == 0
    assert m.get_memory("pod1", "container1") == [Block([0], HP1G, GB), Block([0], "memory", GB)]


def test_allocate_error_counts_and_keeps_state() -> None:
    m = manager(2 * GB, 1)
    p = pod("pod1", [ctn("container1", "4Gi")])
    before = m.snapshot()
    with pytest.raises(AllocationError, match="failed to get the default NUMA affinity"):
        m.allocate(p, p.containers[0])
    assert m.snapshot() == before and m.pinning_errors_total == 1


# ---- init containers (upstream TestStaticPolicyAllocateWithInitContainers) ------------------------


@pytest.mark.parametrize(
    ("inits", "apps", "node_gb", "expected_sizes", "reserved_gb"),
    [
        # init 1Gi, 2Gi; apps 3Gi, 4Gi -> all init memory reused
        ((1, 2), (3, 4), 8, {"initContainer1": 0, "initContainer2": 0, "container1": 3, "container2": 4}, 7),
        # init 4Gi, 3Gi; apps 2Gi, 1Gi -> initContainer2 keeps 1Gi
        ((4, 3), (2, 1), 8, {"initContainer1": 0, "initContainer2": 1, "container1": 2, "container2": 1}, 4),
        # init 7Gi, 4Gi; apps 4Gi, 3Gi
        ((7, 4), (4, 3), 8, {"initContainer1": 0, "initContainer2": 0, "container1": 4, "container2": 3}, 7),
        # init 7Gi, 4Gi; apps 5Gi, 2Gi (on a 10Gi node)
        ((7, 4), (5, 2), 10, {"initContainer1": 0, "initContainer2": 0, "container1": 5, "container2": 2}, 7),
    ],
)
def test_init_container_memory_is_reused(
    inits: tuple[int, int], apps: tuple[int, int], node_gb: int,
    expected_sizes: dict[str, int], reserved_gb: int,
) -> None:
    m = manager(node_gb * GB + 512 * MB + node_gb * GB, node_gb)
    init_ctns = [ctn(f"initContainer{i + 1}", f"{g}Gi", f"{g}Gi", init=True) for i, g in enumerate(inits)]
    app_ctns = [ctn(f"container{i + 1}", f"{g}Gi", f"{g}Gi") for i, g in enumerate(apps)]
    p = pod("pod1", app_ctns, init_ctns)
    if inits == (7, 4) and apps == (5, 2):
        m.allocate(pod("pod0", [ctn("c", "1Gi", "1Gi")]), ctn("c", "1Gi", "1Gi"))  # another pod's bookkeeping
        m.remove_container("pod0", "c")
    for c in (*init_ctns, *app_ctns):
        m.allocate(p, c)
    for name, size in expected_sizes.items():
        assert m.get_memory("pod1", name) == [Block([0], HP1G, size * GB), Block([0], "memory", size * GB)], name
    node = m.machine_state[0]
    assert node.number_of_assignments == 8 and node.cells == [0]
    assert node.memory_map["memory"].reserved == reserved_gb * GB
    assert node.memory_map[HP1G].reserved == reserved_gb * GB
    # the pod's blocks add up to what the node holds for it
    total = sum(b.size for c in m.assignments["pod1"].values() for b in c if b.type == "memory")
    assert total == reserved_gb * GB


def test_sidecar_reuses_init_memory_but_is_never_reused() -> None:
    m = manager(16 * GB, 1)
    init = ctn("init", "1Gi", init=True)
    sidecar = ctn("sidecar", "2Gi", init=True, sidecar=True)
    late_init = ctn("late-init", "1Gi", init=True)
    app = ctn("app", "1Gi")
    p = pod("p", [app], [init, sidecar, late_init])
    assert get_pod_requested_resources(p) == {"memory": 3 * GB}  # max(app 1 + sidecar 2, 2 + late 1)
    for c in (init, sidecar, late_init, app):
        m.allocate(p, c)
    sizes = {name: m.get_memory("p", name) for name in ("init", "sidecar", "late-init", "app")}
    assert sizes == {
        "init": [Block([0], "memory", 0)],
        "sidecar": [Block([0], "memory", 2 * GB)],
        "late-init": [Block([0], "memory", 0)],
        "app": [Block([0], "memory", GB)],
    }
    assert m.machine_state[0].memory_map["memory"].reserved == 3 * GB


def test_add_container_releases_finished_init_containers_but_not_sidecars() -> None:
    m = manager(16 * GB, 1)
    init = ctn("init", "2Gi", init=True)
    sidecar = ctn("sidecar", "1Gi", init=True, sidecar=True)
    app = ctn("app", "1Gi")
    p = pod("p", [app], [init, sidecar])
    # kubelet order: every container is allocated at admission, then each is added as it starts
    for c in (init, sidecar, app):
        m.allocate(p, c)
    assert m.get_memory("p", "init") == [Block([0], "memory", 0)]  # all of it reused
    assert m.machine_state[0].memory_map["memory"].reserved == 2 * GB
    m.add_container(p, init)
    assert m.get_memory("p", "init") is not None  # the current container is never released
    m.add_container(p, sidecar)
    assert m.get_memory("p", "init") is None
    m.add_container(p, app)
    assert m.get_memory("p", "sidecar") == [Block([0], "memory", GB)]
    assert m.machine_state[0].number_of_assignments == 2
    assert m.machine_state[0].memory_map["memory"].reserved == 2 * GB
    assert m.get_memory_numa_nodes(p, app) == {0}
    assert m.get_memory_numa_nodes(p, init) is None


def test_add_container_of_the_second_init_removes_the_first() -> None:
    m = manager(16 * GB, 1)
    i1, i2 = ctn("i1", "1Gi", init=True), ctn("i2", "1Gi", init=True)
    p = pod("p", [ctn("app", "1Gi")], [i1, i2])
    m.allocate(p, i1)
    m.allocate(p, i2)
    m.add_container(p, i2)
    assert m.get_memory("p", "i1") is None and m.get_memory("p", "i2") is not None


# ---- hints through the provider -------------------------------------------------------------------


def test_container_hints_use_state_then_regenerate_after_allocation() -> None:
    m = manager(4 * GB + 512 * MB, 2, nodes=2)
    p = pod("pod1", [ctn("c", "2Gi", "1Gi")])
    hints = m.get_topology_hints(p, p.containers[0])
    one = [TopologyHint(mask_of([0]), True), TopologyHint(mask_of([1]), True),
           TopologyHint(mask_of([0, 1]), False)]
    assert hints == {"memory": one, HP1G: one}
    m.allocate(p, p.containers[0])
    regenerated = m.get_topology_hints(p, p.containers[0])
    assert regenerated == {"memory": [TopologyHint(mask_of([0]), True)], HP1G: [TopologyHint(mask_of([0]), True)]}


def test_pod_hints_regenerate_against_pod_totals() -> None:
    m = manager(8 * GB + 512 * MB, 2, nodes=2)
    a, b = ctn("a", "1Gi"), ctn("b", "2Gi")
    p = pod("p", [a, b])
    hints = m.get_pod_topology_hints(p)
    assert hints is not None and hints["memory"][0] == TopologyHint(mask_of([0]), True)
    m.allocate(p, a)
    # container a's 1Gi block does not match the pod's 3Gi: nil ("don't care"), not []
    assert m.get_pod_topology_hints(p) is None


def test_quantity_that_is_not_whole_bytes_gives_no_hints_and_fails_allocate() -> None:
    m = manager(4 * GB, 2)
    c = Container("c", requests={"cpu": Quantity.parse("1"), "memory": Quantity.parse("1.5")},
                  limits={"cpu": Quantity.parse("1"), "memory": Quantity.parse("1.5")})
    p = pod("p", [c])
    assert m.get_topology_hints(p, c) is None
    with pytest.raises(AllocationError, match=r"failed to represent quantity as int64"):
        m.allocate(p, c)


# ---- queries, stale state, snapshot/restore -------------------------------------------------------


def test_allocatable_memory_per_node_and_resource() -> None:
    m = MemoryManagerStatic([NUMANodeMemory(0, 4 * GB, (HugePagesInfo(2048, 0),)), NUMANodeMemory(1, 2 * GB)],
                            {0: {"memory": GB}})
    assert m.get_allocatable_memory() == [Block([0], "memory", 3 * GB), Block([1], "memory", 2 * GB)]


def test_remove_stale_state_drops_inactive_containers() -> None:
    m = manager(8 * GB, 1)
    p1, p2 = pod("p1", [ctn("a", "1Gi")]), pod("p2", [ctn("b", "1Gi")])
    m.allocate(p1, p1.containers[0])
    m.allocate(p2, p2.containers[0])
    assert m.remove_stale_state([p2]) == [("p1", "a")]
    assert set(m.assignments) == {"p2"}
    assert m.machine_state[0].memory_map["memory"].reserved == GB


def test_snapshot_restore_round_trip() -> None:
    m = manager(4 * GB + 512 * MB, 2, nodes=2)
    p = pod("pod1", [ctn("c", "3Gi", "2Gi")])
    m.allocate(p, p.containers[0])
    snap = file_document(m)
    assert snap["policyName"] == "Static"
    assert snap["entries"] == {"pod1": {"c": [{"numaAffinity": [0, 1], "type": HP1G, "size": 2 * GB},
                                              {"numaAffinity": [0, 1], "type": "memory", "size": 3 * GB}]}}
    assert snap["machineState"]["1"]["memoryMap"]["memory"] == {
        "total": 4 * GB + 512 * MB, "systemReserved": 512 * MB, "allocatable": 2 * GB,
        "reserved": GB, "free": GB}
    assert snap["machineState"]["0"]["cells"] == [0, 1]
    restored = manager(4 * GB + 512 * MB, 2, nodes=2)
    restore_document(restored, snap)
    assert file_document(restored) == snap
    assert restored.get_memory_numa_nodes(p, p.containers[0]) == {0, 1}


def test_empty_snapshot_has_no_entries_and_restores_default() -> None:
    m = manager(4 * GB, 2)
    assert "entries" not in file_document(m)
    restore_document(m, {"policyName": "Static", "machineState": {}})
    assert m.machine_state == manager(4 * GB, 2).machine_state


def test_restore_refuses_other_policy_and_mismatching_state() -> None:
    m = manager(4 * GB, 2)
    with pytest.raises(CheckpointError, match='configured policy "Static" differs from state checkpoint policy "None"'):
        restore_document(m, {"policyName": "None", "machineState": {}})
    snap = file_document(m)
    snap["machineState"]["0"]["memoryMap"]["memory"]["total"] = GB
    with pytest.raises(CheckpointError, match="expected machine state is different"):
        restore_document(m, snap)


def test_start_with_explicit_state() -> None:
    m = manager(3 * GB, 1)
    ms = {0: NUMANodeState(2, {"memory": MemoryTable(3 * GB, 512 * MB, 1536 * MB, GB, 512 * MB),
                               HP1G: MemoryTable(GB, 0, GB, GB, 0)}, [0])}
    m.start(ms, {"p": {"c": [Block([0], "memory", GB), Block([0], HP1G, GB)]}})
    assert m.get_memory("p", "c") == [Block([0], "memory", GB), Block([0], HP1G, GB)]


# ---- restartable init containers (upstream TestStaticPolicyAllocateWithRestartableInitContainers) -


def test_restartable_init_container_memory_is_not_reused() -> None:
    m = manager(7 * GB + 512 * MB + 7 * GB, 7)
    assert m.machine_state[0].memory_map["memory"].allocatable == 7 * GB
    inits = [
        ctn("initContainer1", "1Gi", "1Gi", init=True),
        ctn("restartableInitContainer2", "2Gi", "2Gi", init=True, sidecar=True),
        ctn("initContainer3", "3Gi", "3Gi", init=True),
        ctn("restartableInitContainer4", "4Gi", "4Gi", init=True, sidecar=True),
    ]
    app = ctn("container1", "1Gi", "1Gi")
    p = pod("pod1", [app], inits)
    for c in (*inits, app):
        m.allocate(p, c)
    expected = {"initContainer1": 0, "restartableInitContainer2": 2, "initContainer3": 0,
                "restartableInitContainer4": 4, "container1": 1}
    for name, size in expected.items():
        assert m.get_memory("pod1", name) == [Block([0], HP1G, size * GB), Block([0], "memory", size * GB)], name
    node = m.machine_state[0]
    assert node.number_of_assignments == 10 and node.cells == [0]
    assert node.memory_map["memory"].free == 0 and node.memory_map["memory"].reserved == 7 * GB
    assert node.memory_map[HP1G].free == 0 and node.memory_map[HP1G].reserved == 7 * GB


def test_restartable_init_containers_already_in_state_are_left_alone() -> None:
    m = manager(3 * GB, 0)
    m.machine_state = {0: NUMANodeState(0, {"memory": MemoryTable(3 * GB, 512 * MB, 2560 * MB, 2 * GB, 512 * MB),
                                            HP1G: MemoryTable(2 * GB, 0, 2 * GB, 0, 2 * GB)}, [])}
    m.assignments = {"pod1": {"initContainer1": [Block([0], "memory", GB)], "container1": [Block([0], "memory", GB)]}}
    before = m.snapshot()
    p = pod("pod1", [ctn("container1", "1Gi", "1Gi")], [ctn("initContainer1", "1Gi", "1Gi", init=True, sidecar=True)])
    for c in p.all_containers():
        m.allocate(p, c)
    assert m.snapshot() == before


def test_for_machine_reads_memory_and_hugepages_from_the_machine_model() -> None:
    for name in example_names():
        machine = example(name)
        ids = machine.numa_ids()
        m = MemoryManagerStatic.for_machine(machine, {ids[0]: {"memory": 256 * MB}})
        assert sorted(m.machine_state) == sorted(ids)
        for n in machine.numa_nodes:
            table = m.machine_state[n.id].memory_map["memory"]
            assert table.total == n.memory_bytes
            assert table.allocatable == n.memory_bytes - n.hugepages_bytes() - (256 * MB if n.id == ids[0] else 0)
            for size, count in n.hugepages.items():
                hp_tables = [t for r, t in m.machine_state[n.id].memory_map.items() if r.startswith("hugepages-")]
                assert any(t.total == size * count for t in hp_tables)


def test_restore_reads_a_kubelet_file_with_the_old_nodes_field() -> None:
    # Shape of /var/lib/kubelet/memory_manager_state in the memory manager blog post (node 0 as shown
    # there, node 1 completed consistently): a 150Gi pod over nodes 0 and 1, zero-page hugepage tables.
    zero = {"total": 0, "systemReserved": 0, "allocatable": 0, "reserved": 0, "free": 0}
    data = {
        "policyName": "Static",
        "machineState": {
            "0": {"numberOfAssignments": 1, "nodes": [0, 1], "memoryMap": {
                "hugepages-1Gi": zero,
                "memory": {"total": 134987354112, "systemReserved": 3221225472, "allocatable": 131766128640,
                           "reserved": 131766128640, "free": 0}}},
            "1": {"numberOfAssignments": 1, "nodes": [0, 1], "memoryMap": {
                "hugepages-1Gi": zero,
                "memory": {"total": 135286722560, "systemReserved": 2252341248, "allocatable": 133034381312,
                           "reserved": 29295144960, "free": 103739236352}}},
        },
        "entries": {"fa9bdd38-6df9-4cf9-aa67-8c4814da37a8": {"guaranteed": [
            {"numaAffinity": [0, 1], "type": "memory", "size": 161061273600}]}},
    }
    m = MemoryManagerStatic(
        [NUMANodeMemory(0, 134987354112, (HugePagesInfo(PAGE_1G_KIB, 0),)),
         NUMANodeMemory(1, 135286722560, (HugePagesInfo(PAGE_1G_KIB, 0),))],
        {0: {"memory": 3221225472}, 1: {"memory": 2252341248}},
    )
    restore_document(m, data)
    assert m.machine_state[1].cells == [0, 1]
    assert m.get_memory("fa9bdd38-6df9-4cf9-aa67-8c4814da37a8", "guaranteed") == [
        Block([0, 1], "memory", 161061273600)]
    assert file_document(m)["machineState"]["0"]["cells"] == [0, 1]
