"""The pure machine model: validation and the kubelet's view of CPUs (cadvisor + topology.Discover)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from numalign.errors import InvalidInputError
from numalign.machine.topology import CPU, CPUInfo, Device, Machine, NUMANode


def _machine(
    cpus: list[CPU],
    nodes: dict[int, int] | None = None,
    distances: dict[int, tuple[int, ...]] | None = None,
    devices: tuple[Device, ...] = (),
) -> Machine:
    """Nodes derived from the CPUs (online ones), memory 1 GiB each."""
    ids = sorted(nodes or {c.numa_node for c in cpus if c.numa_node is not None})
    return Machine(
        "t",
        tuple(
            NUMANode(
                i,
                frozenset(c.id for c in cpus if c.online and c.numa_node == i),
                1 << 30,
                {},
                None if distances is None else distances[i],
            )
            for i in ids
        ),
        tuple(cpus),
        devices,
    )


def test_core_is_lowest_thread_and_uncore_is_socket_without_l3() -> None:
    # cores listed with the higher sibling first: core id must still be the lowest CPU id
    cpus = [CPU(5, 0, 0, 0), CPU(1, 0, 0, 0), CPU(2, 1, 0, 1), CPU(6, 1, 0, 1)]
    infos = _machine(cpus).cpu_infos()
    assert infos == [
        CPUInfo(1, 0, 0, 1, 0),
        CPUInfo(2, 1, 1, 2, 1),
        CPUInfo(5, 0, 0, 1, 0),
        CPUInfo(6, 1, 1, 2, 1),
    ]


def test_l3_spanning_exactly_the_node_is_not_an_uncore_cache() -> None:
    # cadvisor files an L3 shared by exactly the node's threads under node caches; the kubelet then
    # falls back to the socket id (here 3) for the uncore id.
    cpus = [CPU(i, 3, i // 2, 0, 0, 7) for i in range(4)]
    assert {i.uncore for i in _machine(cpus).cpu_infos()} == {3}


def test_l3_shared_by_two_nodes_or_part_of_a_node_is_an_uncore_cache() -> None:
    # SNC2: one L3 (id 9) for a socket split in two nodes
    snc = [CPU(i, 0, i, i // 2, 0, 9) for i in range(4)]
    assert {i.uncore for i in _machine(snc).cpu_infos()} == {9}
    # CCX: two L3s inside one node
    ccx = [CPU(i, 0, i, 0, 0, 10 + i // 2) for i in range(4)]
    assert [i.uncore for i in _machine(ccx).cpu_infos()] == [10, 10, 11, 11]


def test_offline_and_unattached_cpus_are_invisible_to_the_kubelet() -> None:
    cpus = [CPU(0, 0, 0, 0), CPU(1, 0, 1, 0, online=False), CPU(2, 0, 2, None)]
    m = _machine(cpus, nodes={0: 0})
    assert [i.id for i in m.cpu_infos()] == [0]
    assert m.all_offline_cpus() == {1}
    assert m.online_cpus() == {0, 2}


def test_cores_are_grouped_per_node_like_cadvisor() -> None:
    # core_id 0 in socket 0 appears in two nodes (AMD Magny-Cours numbers cores per die): two cores
    cpus = [CPU(0, 0, 0, 0), CPU(1, 0, 0, 1)]
    m = _machine(cpus)
    assert [i.core for i in m.cpu_infos()] == [0, 1]
    assert m.physical_cores() == [frozenset({0}), frozenset({1})]


def test_cadvisor_lists_nodes_in_string_order() -> None:
    cpus = [CPU(i, 0, i, i) for i in range(12)]
    m = _machine(cpus)
    assert m.cadvisor_numa_order()[:4] == [0, 1, 10, 11]
    assert m.numa_ids() == list(range(12))


def test_distance_matrix_needs_every_row() -> None:
    cpus = [CPU(0, 0, 0, 0), CPU(1, 1, 0, 1)]
    m = _machine(cpus, distances={0: (10, 21), 1: (21, 10)})
    assert m.distance_matrix() == {0: [10, 21], 1: [21, 10]}
    assert _machine(cpus).distance_matrix() is None


def test_memory_and_hugepages_by_node() -> None:
    node = NUMANode(0, frozenset({0}), 8 << 30, {1 << 30: 2, 2 << 20: 10})
    m = Machine("t", (node,), (CPU(0, 0, 0, 0),))
    assert m.memory_by_node() == {0: 8 << 30}
    assert m.hugepages_by_node() == {0: {2 << 20: 10, 1 << 30: 2}}
    assert node.hugepages_bytes() == (2 << 30) + (20 << 20)
    assert node.has_cpu and node.has_memory
    assert hash(node) == hash(NUMANode(0, frozenset({0}), 8 << 30, {2 << 20: 10, 1 << 30: 2}))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Machine("m", (NUMANode(-2, frozenset(), 0),), ()), "include -2; expected ids >= 0 (or -1"),
        (lambda: Machine("m", (NUMANode(1, frozenset(), 0), NUMANode(0, frozenset(), 0)), ()), "ascending"),
        (lambda: Machine("m", (NUMANode(0, frozenset(), 0), NUMANode(0, frozenset(), 0)), ()), "more than once"),
        (lambda: Machine("m", (NUMANode(0, frozenset({0}), 0),), (CPU(0, 0, 0, 1),)), "NUMA node 1, which is not"),
        (lambda: Machine("m", (NUMANode(0, frozenset({0, 1}), 0),), (CPU(0, 0, 0, 0),)), "make the node's cpus"),
        (lambda: Machine("m", (NUMANode(0, frozenset(), 0, {}, (10, 20)),), ()), "expected one per NUMA node"),
        (lambda: Machine("m", (NUMANode(0, frozenset(), -1),), ()), "memory_bytes -1"),
        (lambda: Machine("m", (NUMANode(0, frozenset(), 0, {0: 1}),), ()), "positive page size"),
        (
            lambda: Machine("m", (NUMANode(0, frozenset({0}), 0),), (CPU(0, 0, 0, 0), CPU(0, 0, 1, 0))),
            "CPU ids [0] appear more than once",
        ),
        (
            lambda: Machine("m", (NUMANode(0, frozenset(), 0),), (), (Device("g", "x/gpu", (3,)),)),
            "names NUMA nodes [3]",
        ),
        (
            lambda: Machine("m", (NUMANode(0, frozenset(), 0),), (), (Device("g", "x/gpu", ()),)),
            "empty numa_nodes",
        ),
        (
            lambda: Machine("m", (NUMANode(0, frozenset(), 0),), (CPU(0, 0, 0, 0, online=False),), (), frozenset({0})),
            "also appear in cpus",
        ),
    ],
)
def test_invalid_machines_are_refused_with_a_reason(build: Callable[[], Machine], message: str) -> None:
    with pytest.raises(InvalidInputError, match="machine 'm'") as e:
        build()
    assert message in str(e.value)


def test_lookups_name_the_machine() -> None:
    m = _machine([CPU(0, 0, 0, 0)])
    assert m.node(0).cpus == {0}
    assert m.cpu(0).socket == 0
    with pytest.raises(InvalidInputError, match=r"no NUMA node 5; the machine has nodes \[0\]"):
        m.node(5)
    with pytest.raises(InvalidInputError, match="no CPU 9"):
        m.cpu(9)


def test_devices_by_resource() -> None:
    devs = (Device("a", "x.com/gpu", (0,)), Device("b", "x.com/gpu", None), Device("n", "y.com/nic", (0,)))
    m = _machine([CPU(0, 0, 0, 0)], devices=devs)
    assert {k: [d.id for d in v] for k, v in m.devices_by_resource().items()} == {
        "x.com/gpu": ["a", "b"],
        "y.com/nic": ["n"],
    }
