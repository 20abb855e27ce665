"""cadvisor MachineInfo JSON: the kubelet's view of the machine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from support.strategies import regular_machines

from numalign.errors import InvalidInputError
from numalign.machine.cadvisor import is_cadvisor_machine_info, machine_from_cadvisor, machine_to_cadvisor
from numalign.machine.examples import example, example_names
from numalign.machine.fileformat import machine_to_dict
from numalign.machine.topology import CPU, Machine, NUMANode

# Shaped like `GET /api/v2.0/machine` of a 1-socket SNC2 box: L3 id 0 spans both nodes, so cadvisor
# reports it per core (uncore_caches); hugepage sizes in KiB.
MACHINE_INFO: dict[str, Any] = {
    "num_cores": 8,
    "num_physical_cores": 4,
    "num_sockets": 1,
    "memory_capacity": 34359738368,
    "machine_id": "abc123",
    "topology": [
        {
            "node_id": 0,
            "memory": 17179869184,
            "hugepages": [{"page_size": 1048576, "num_pages": 2}, {"page_size": 2048, "num_pages": 128}],
            "cores": [
                {
                    "core_id": 0,
                    "thread_ids": [0, 4],
                    "socket_id": 0,
                    "caches": [],
                    "uncore_caches": [{"id": 0, "size": 31457280, "type": "Unified", "level": 3}],
                },
                {
                    "core_id": 1,
                    "thread_ids": [5, 1],
                    "socket_id": 0,
                    "caches": [],
                    "uncore_caches": [{"id": 0, "size": 31457280, "type": "Unified", "level": 3}],
                },
            ],
            "caches": [],
            "distances": [10, 11],
        },
        {
            "node_id": 1,
            "memory": 17179869184,
            "hugepages": [{"page_size": 2048, "num_pages": 0}],
            "cores": [
                {
                    "core_id": 2,
                    "thread_ids": [2, 6],
                    "socket_id": 0,
                    "uncore_caches": [{"id": 0, "size": 31457280, "type": "Unified", "level": 3}],
                },
                {
                    "core_id": 3,
                    "thread_ids": [3, 7],
                    "socket_id": 0,
                    "uncore_caches": [{"id": 0, "size": 31457280, "type": "Unified", "level": 3}],
                },
            ],
            "distances": [11, 10],
        },
    ],
}


def test_import() -> None:
    assert is_cadvisor_machine_info(MACHINE_INFO)
    m = machine_from_cadvisor(MACHINE_INFO, "mi.json")
    assert m.name == "abc123"
    assert m.numa_ids() == [0, 1]
    assert m.node(0).cpus == {0, 1, 4, 5}
    assert dict(m.node(0).hugepages) == {1 << 30: 2, 2 << 20: 128}
    assert m.distance_matrix() == {0: [10, 11], 1: [11, 10]}
    infos = {i.id: i for i in m.cpu_infos()}
    assert infos[5].core == 1 and infos[4].core == 0
    assert {i.uncore for i in infos.values()} == {0}
    assert {i.numa_node for i in infos.values() if i.id in (2, 3, 6, 7)} == {1}


def test_node_level_l3_means_socket_uncore() -> None:
    info = json.loads(json.dumps(MACHINE_INFO))
    for node in info["topology"]:
        node["caches"] = [{"id": 40 + node["node_id"], "size": 1, "type": "Unified", "level": 3}]
        for core in node["cores"]:
            core["uncore_caches"] = []
            core["socket_id"] = 7
    m = machine_from_cadvisor(info, "mi.json")
    assert {i.uncore for i in m.cpu_infos()} == {7}


@pytest.mark.parametrize("name", example_names())
def test_export_import_keeps_the_kubelet_view(name: str) -> None:
    m = example(name)
    info = json.loads(json.dumps(machine_to_cadvisor(m)))
    back = machine_from_cadvisor(info, "x")
    assert back.cpu_infos() == m.cpu_infos()
    assert back.memory_by_node() == m.memory_by_node()
    assert back.hugepages_by_node() == m.hugepages_by_node()
    assert back.distance_matrix() == m.distance_matrix()
    assert info["num_cores"] == len(m.cpu_infos())


def test_machine_file_is_not_mistaken_for_cadvisor() -> None:
    assert not is_cadvisor_machine_info(machine_to_dict(example("gb200")))
    assert not is_cadvisor_machine_info([1])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda i: i["topology"][0].update(node_id=-2), "topology[0].node_id: -2 is out of range"),
        (lambda i: i["topology"][0]["cores"][0].update(thread_ids=[0, 0]), "expected unique CPU ids"),
        (lambda i: i["topology"][0]["cores"][0].update(thread_ids=[]), "expected unique CPU ids"),
        (lambda i: i["topology"][0].update(memory="big"), "topology[0].memory: expected an integer"),
    ],
)
def test_errors(edit: Any, message: str) -> None:  # (an empty topology, or node -1, is a machine)
    info = json.loads(json.dumps(MACHINE_INFO))
    edit(info)
    with pytest.raises(InvalidInputError) as e:
        machine_from_cadvisor(info, "mi.json")
    assert message in str(e.value) and "mi.json" in str(e.value)


@settings(max_examples=80)
@given(regular_machines())
def test_kubelet_view_invariants_and_cadvisor_round_trip(m: Machine) -> None:
    infos = m.cpu_infos()
    by_id = {i.id: i for i in infos}
    assert set(by_id) == {c.id for c in m.cpus if c.online}
    for info in infos:
        cpu = m.cpu(info.id)
        siblings = [
            c.id
            for c in m.cpus
            if c.online and (c.numa_node, c.socket, c.core) == (cpu.numa_node, cpu.socket, cpu.core)
        ]
        assert info.core == min(siblings)
        assert info.uncore in (cpu.socket, cpu.l3)
        sharers = sum(1 for c in m.cpus if c.online and c.l3 == cpu.l3)
        node_cores = {(c.socket, c.core) for c in m.cpus if c.online and c.numa_node == cpu.numa_node}
        uncore_is_l3 = sharers != len(node_cores) * len(siblings)
        assert info.uncore == (cpu.l3 if uncore_is_l3 else cpu.socket)
    back = machine_from_cadvisor(json.loads(json.dumps(machine_to_cadvisor(m))), "x")
    assert back.cpu_infos() == infos
    assert back.hugepages_by_node() == m.hugepages_by_node()


def _offline_machine(spec: list[tuple[int, int, int, int, bool]], n_nodes: int) -> Machine:
    """spec: (socket, core, numa node, l3, online) per CPU id."""
    cpus = tuple(CPU(i, s, c, n, 0, l3, on) for i, (s, c, n, l3, on) in enumerate(spec))
    nodes = tuple(
        NUMANode(i, frozenset(c.id for c in cpus if c.online and c.numa_node == i), 1 << 30, {},
                 tuple(10 if i == j else 20 for j in range(n_nodes)))
        for i in range(n_nodes)
    )
    return Machine("offline", nodes, cpus)


@pytest.mark.parametrize(
    "machine",
    [
        # node 1 lists two node-level L3s (0 and 1) for its two one-thread cores; each is also an
        # uncore cache of a one-CPU node beside it.
        _offline_machine([(0, 0, 0, 0, False), (0, 1, 0, 0, True), (0, 2, 1, 0, True), (0, 3, 1, 1, True),
                          (0, 4, 2, 1, False), (0, 5, 2, 1, True)], 3),
        # offline siblings give node 1 cores of one and two threads: the same L3 is node-level for
        # the former and uncore for the latter.
        _offline_machine([(0, 0, 0, 0, False), (0, 0, 0, 0, False), (0, 1, 0, 0, False), (0, 1, 0, 0, False),
                          (0, 2, 0, 1, True), (0, 2, 0, 1, True), (0, 3, 1, 1, False), (0, 3, 1, 1, True),
                          (0, 4, 1, 2, False), (0, 4, 1, 2, True), (0, 5, 1, 2, True), (0, 5, 1, 2, True)], 2),
    ],
)
def test_cadvisor_round_trip_keeps_the_kubelet_view_with_offline_cpus(machine: Machine) -> None:
    back = machine_from_cadvisor(json.loads(json.dumps(machine_to_cadvisor(machine))), "x")
    assert back.cpu_infos() == machine.cpu_infos()


def test_a_cpu_listed_under_two_nodes_belongs_to_the_last_as_in_the_kubelet() -> None:
    # topology.Discover writes CPU details node by node: the later node overwrites the earlier.
    info = json.loads(json.dumps(MACHINE_INFO))
    info["topology"][1]["cores"][0]["thread_ids"].append(0)
    m = machine_from_cadvisor(info, "dup")
    assert m.cpu(0).numa_node == info["topology"][1]["node_id"]
    assert 0 not in m.node(info["topology"][0]["node_id"]).cpus


def test_distance_rows_are_indexed_by_node_id() -> None:
    info = json.loads(json.dumps(MACHINE_INFO))
    ids = [n["node_id"] for n in info["topology"]]
    width = max(ids) + 1
    for n in info["topology"]:
        n["distances"] = [10 if j == n["node_id"] else 20 + j for j in range(width)]
    m = machine_from_cadvisor(info, "rows")
    assert m.distance_matrix() == {i: [10 if j == i else 20 + j for j in sorted(ids)] for i in ids}
    assert machine_to_cadvisor(m)["topology"][0]["distances"][: len(ids)] == info["topology"][0]["distances"][
        : len(ids)]


def test_an_empty_topology_is_a_machine_without_numa_nodes() -> None:
    info = {**json.loads(json.dumps(MACHINE_INFO)), "topology": [], "num_cores": 4, "memory_capacity": 1 << 30}
    m = machine_from_cadvisor(info, "mi.json")
    assert m.numa_nodes == () and m.cpus == () and m.capacity_cpus() == 4 and m.capacity_memory() == 1 << 30
    back = machine_to_cadvisor(m)
    assert back["topology"] == [] and back["num_cores"] == 4 and back["memory_capacity"] == 1 << 30
    assert machine_from_cadvisor(back, "again").cadvisor == m.cadvisor


def test_node_minus_one_is_kept_with_its_cpus() -> None:
    info = json.loads(json.dumps(MACHINE_INFO))
    info["topology"] = info["topology"][:1]
    info["topology"][0].update(node_id=-1, distances=[10])
    m = machine_from_cadvisor(info, "mi.json")
    assert m.numa_ids() == [-1] and {i.numa_node for i in m.cpu_infos()} == {-1}
    # cadvisor's raw row is kept by id, but no by-position row can place node -1
    assert m.numa_nodes[0].distances is None and m.cadvisor is not None and m.cadvisor.distances == {-1: (10,)}
    assert machine_from_cadvisor(machine_to_cadvisor(m), "again").cpu_infos() == m.cpu_infos()


def test_machine_level_hugepages_are_exported_as_cadvisor_reads_them() -> None:
    """Issue 33 (c): MachineInfo.hugepages (/sys/kernel/mm/hugepages), which the kubelet's hugepages-<size>
    capacity comes from: each size's pages over every NUMA node, in cadvisor's directory-name order."""
    m = example("dual-socket")
    out = machine_to_cadvisor(m)
    per_node: dict[int, int] = {}
    for node in out["topology"]:
        for hp in node["hugepages"]:
            per_node[hp["page_size"]] = per_node.get(hp["page_size"], 0) + hp["num_pages"]
    assert out["hugepages"] == [{"page_size": 1048576, "num_pages": per_node[1048576]},
                                {"page_size": 2048, "num_pages": per_node[2048]}]
    assert per_node[2048] > 0 and per_node[1048576] > 0
    assert list(out)[:5] == ["num_cores", "num_physical_cores", "num_sockets", "memory_capacity", "hugepages"]
    assert machine_to_cadvisor(Machine("bare", (NUMANode(0, frozenset({0}), 1 << 30),),
                                       (CPU(0, 0, 0, 0),)))["hugepages"] == []
