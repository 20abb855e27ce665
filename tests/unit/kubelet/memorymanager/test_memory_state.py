"""Memory manager state: default state, vector encoding, validate_state (upstream TestStaticPolicyStart)
and reservedMemory validation (upstream TestValidateReservedMemory / TestConvertPreReserved)."""

from __future__ import annotations

import pytest

from numalign.errors import CheckpointError, ConfigError, InvalidInputError
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.kubelet.memorymanager.reserved import (
    MemoryReservation,
    convert_reserved,
    get_system_reserved_memory,
    node_allocatable_reservation,
    validate_reserved_memory,
)
from numalign.kubelet.memorymanager.state import (
    Block,
    HugePagesInfo,
    MemoryTable,
    NUMANodeMap,
    NUMANodeMemory,
    NUMANodeState,
    blocks_from_json,
    blocks_to_json,
    clone_machine_state,
    default_machine_state,
    hugepage_resource_name,
    machine_state_from_json,
    machine_state_to_json,
    validate_state,
)

MB = 1024 * 1024
GB = 1024 * MB
PAGE_1G_KIB = 1048576
HP1G = "hugepages-1Gi"
HP2M = "hugepages-2Mi"


def tbl(allocatable: int, free: int, reserved: int, system_reserved: int, total: int) -> MemoryTable:
    return MemoryTable(total=total, system_reserved=system_reserved, allocatable=allocatable,
                       reserved=reserved, free=free)


def node(cells: list[int], assignments: int, **tables: MemoryTable) -> NUMANodeState:
    return NUMANodeState(assignments, {k.replace("_", "-"): v for k, v in tables.items()}, cells)


def one_node_machine(memory: int, pages_1g: int) -> list[NUMANodeMemory]:
    return [NUMANodeMemory(0, memory, (HugePagesInfo(PAGE_1G_KIB, pages_1g),))]


RESERVED_512M = {0: {"memory": 512 * MB}}


# ---- default state and encoding ------------------------------------------------------------------


def test_default_state_fills_memory_and_hugepages() -> None:
    # "should fill the state with default values, when the state is empty"
    state = validate_state({}, {}, default_machine_state(one_node_machine(3 * GB, 1), RESERVED_512M))
    assert state == {
        0: NUMANodeState(0, {"memory": tbl(1536 * MB, 1536 * MB, 0, 512 * MB, 3 * GB),
                             HP1G: tbl(GB, GB, 0, 0, GB)}, [0])
    }


def test_default_state_subtracts_hugepage_reservations_only_from_their_own_table() -> None:
    nodes = [NUMANodeMemory(1, 8 * GB, (HugePagesInfo(2048, 512), HugePagesInfo(PAGE_1G_KIB, 2)))]
    state = default_machine_state(nodes, {1: {"memory": GB, HP2M: 256 * MB}})
    assert state[1].memory_map[HP2M] == tbl(768 * MB, 768 * MB, 0, 256 * MB, GB)
    assert state[1].memory_map[HP1G] == tbl(2 * GB, 2 * GB, 0, 0, 2 * GB)
    # memory allocatable = total - reserved - all hugepage totals
    assert state[1].memory_map["memory"].allocatable == 8 * GB - GB - GB - 2 * GB
    assert state[1].cells == [1]


def test_default_state_rejects_reservation_larger_than_node() -> None:
    with pytest.raises(InvalidInputError, match="exceeds"):
        default_machine_state(one_node_machine(GB, 1), RESERVED_512M)


@pytest.mark.parametrize(
    ("page_bytes", "name"),
    [(2048 * 1024, "hugepages-2Mi"), (GB, "hugepages-1Gi"), (64 * 1024, "hugepages-64Ki"),
     (16 * GB, "hugepages-16Gi"), (3 * 512 * 1024, "hugepages-1536Ki")],
)
def test_hugepage_resource_name(page_bytes: int, name: str) -> None:
    assert hugepage_resource_name(page_bytes) == name


def test_vector_encoding_round_trips() -> None:
    ms: NUMANodeMap = {
        0: node([0, 1], 2, memory=tbl(640 * MB, 0, 640 * MB, 512 * MB, 2176 * MB)),
        1: node([0, 1], 2, memory=tbl(640 * MB, 256 * MB, 384 * MB, 512 * MB, 2176 * MB)),
    }
    enc = machine_state_to_json(ms)
    assert enc["1"]["memory"] == {"total": 2176 * MB, "system_reserved": 512 * MB,
                                  "allocatable": 640 * MB, "reserved": 384 * MB, "free": 256 * MB}
    assert enc["0"]["cells"] == [0, 1] and enc["0"]["number_of_assignments"] == 2
    assert machine_state_from_json(enc) == ms
    blocks = [Block([0, 1], "memory", GB), Block([2], HP1G, 0)]
    assert blocks_from_json(blocks_to_json(blocks)) == blocks


def test_clone_is_deep() -> None:
    ms: NUMANodeMap = {0: node([0], 0, memory=tbl(GB, GB, 0, 0, GB))}
    clone = clone_machine_state(ms)
    clone[0].memory_map["memory"].free = 0
    clone[0].cells.append(1)
    assert ms[0].memory_map["memory"].free == GB and ms[0].cells == [0]


@pytest.mark.parametrize(
    "bad",
    [{"x": {}}, {"0": {"memory": {"free": -1}}}, {"0": {"cells": "0"}}, {"0": {"memory": 5}}, []],
)
def test_vector_encoding_rejects_bad_input(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        machine_state_from_json(bad)


# ---- validate_state (upstream TestStaticPolicyStart) ---------------------------------------------

MISMATCH = "[memorymanager] the expected machine state is different from the real one"


def test_start_fails_on_empty_state_with_assignments() -> None:
    with pytest.raises(CheckpointError) as e:
        validate_state({}, {"pod": {"container1": [Block([0], "memory", 512 * MB)]}},
                       default_machine_state(one_node_machine(3 * GB, 1), RESERVED_512M))
    assert str(e.value).startswith("[memorymanager] machine state can not be empty when it has memory assignments")


def _start_case(machine: list[NUMANodeMemory], ms: NUMANodeMap,
                assignments: dict[str, dict[str, list[Block]]] | None = None) -> NUMANodeMap:
    return validate_state(ms, assignments or {}, default_machine_state(machine, RESERVED_512M))


def good_2g_node(assignments: int = 0, hp: MemoryTable | None = None) -> NUMANodeState:
    return NUMANodeState(assignments, {"memory": tbl(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                                       HP1G: hp or tbl(GB, GB, 0, 0, GB)}, [0])


@pytest.mark.parametrize(
    ("description", "machine", "ms", "assignments"),
    [
        ("machine state does not have all NUMA nodes",
         [*one_node_machine(2 * GB, 1), NUMANodeMemory(1, 2 * GB, (HugePagesInfo(PAGE_1G_KIB, 1),))],
         {0: good_2g_node()}, None),
        ("machine state does not have memory resource", one_node_machine(2 * GB, 1),
         {0: NUMANodeState(0, {HP1G: tbl(GB, GB, 0, 0, GB)}, [0])}, None),
        ("wrong size of total memory", one_node_machine(2 * GB, 1),
         {0: NUMANodeState(0, {"memory": tbl(1536 * MB, 1536 * MB, 0, 512 * MB, 1536 * MB)}, [0])}, None),
        ("wrong size of system reserved memory", one_node_machine(2 * GB, 1),
         {0: NUMANodeState(0, {"memory": tbl(1536 * MB, 1536 * MB, 0, 1024, 2 * GB)}, [0])}, None),
        ("reserved memory differs from the container assignments", one_node_machine(2 * GB, 1),
         {0: NUMANodeState(1, {"memory": tbl(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB)}, [0])},
         {"pod": {"container1": [Block([0], "memory", 512 * MB)]}}),
        # Upstream's tables give these machines 2Gi of memory, where 2Gi - 512Mi - hugepages wraps around
        # in uint64; we refuse such a machine outright (see the test below), so they get 4Gi and 8Gi.
        ("wrong size of hugepages", one_node_machine(4 * GB, 2), {0: good_2g_node()}, None),
        ("wrong size of system reserved hugepages", one_node_machine(4 * GB, 2),
         {0: good_2g_node(hp=tbl(GB, GB, 0, GB, 2 * GB))}, None),
        ("hugepages reserved differ from the assignments", one_node_machine(8 * GB, 4),
         {0: good_2g_node(2, tbl(4 * GB, GB, 3 * GB, 0, 4 * GB))},
         {"pod1": {"container1": [Block([0], HP1G, GB)]}, "pod2": {"container2": [Block([0], HP1G, GB)]}}),
        ("number of assignments differs", one_node_machine(2 * GB, 1), {0: good_2g_node(1)},
         {"pod1": {"container1": [Block([0], "memory", GB), Block([0], HP1G, GB)]}}),
    ],
)
def test_start_detects_mismatching_state(
    description: str, machine: list[NUMANodeMemory], ms: NUMANodeMap,
    assignments: dict[str, dict[str, list[Block]]] | None,
) -> None:
    with pytest.raises(CheckpointError) as e:
        _start_case(machine, ms, assignments)
    assert str(e.value).startswith(MISMATCH), description
    assert "delete the memory_manager_state file" in str(e.value)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (Block([1], "memory", GB),
         "[memorymanager] (pod: pod1, container: container1) the memory assignment uses the NUMA that does not exist"),
        (Block([0], HP2M, GB),
         "[memorymanager] (pod: pod1, container: container1) the memory assignment uses memory resource that "
         "does not exist"),
    ],
)
def test_start_rejects_assignments_outside_the_machine(block: Block, message: str) -> None:
    blocks = [Block([0], "memory", GB), block] if block.type == HP2M else [block]
    with pytest.raises(CheckpointError) as e:
        _start_case(one_node_machine(2 * GB, 1), {0: good_2g_node(len(blocks))}, {"pod1": {"container1": blocks}})
    assert str(e.value).startswith(message)


def test_start_accepts_cross_numa_state_compared_group_wise() -> None:
    # "should validate cross NUMA reserved memory vs container assignments": node 0 holds 640Mi and node 1
    # 384Mi of the 1Gi reserved; the replay spills in a different order, only group sums must match.
    machine = [NUMANodeMemory(n, 2176 * MB, (HugePagesInfo(PAGE_1G_KIB, 1),)) for n in (0, 1)]
    hp = tbl(GB, 0, GB, 0, GB)
    ms: NUMANodeMap = {
        0: NUMANodeState(4, {"memory": tbl(640 * MB, 0, 640 * MB, 512 * MB, 2176 * MB), HP1G: hp.copy()}, [0, 1]),
        1: NUMANodeState(4, {"memory": tbl(640 * MB, 256 * MB, 384 * MB, 512 * MB, 2176 * MB), HP1G: hp.copy()},
                         [0, 1]),
    }
    assignments = {
        "pod1": {"container1": [Block([0, 1], "memory", 768 * MB), Block([0, 1], HP1G, GB)]},
        "pod2": {"container2": [Block([0, 1], "memory", 256 * MB), Block([0, 1], HP1G, GB)]},
    }
    got = validate_state(ms, assignments, default_machine_state(machine, {0: {"memory": 512 * MB},
                                                                          1: {"memory": 512 * MB}}))
    assert got == ms and got is not ms


def test_start_accepts_a_state_that_replays_exactly() -> None:
    machine = one_node_machine(3 * GB, 1)
    ms: NUMANodeMap = {0: NUMANodeState(2, {"memory": tbl(1536 * MB, 512 * MB, GB, 512 * MB, 3 * GB),
                                            HP1G: tbl(GB, 0, GB, 0, GB)}, [0])}
    assignments = {"pod1": {"container1": [Block([0], "memory", GB), Block([0], HP1G, GB)]}}
    assert _start_case(machine, ms, assignments) == ms


# ---- reservedMemory (upstream TestValidateReservedMemory, TestConvertPreReserved) ----------------

NOT_EQUAL = 'the total amount "{}" of type "{}" is not equal to the value "{}" determined by Node Allocatable feature'


def q(v: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
    return Quantity.from_int(v, fmt)


@pytest.mark.parametrize(
    ("description", "allocatable", "reservations", "error"),
    [
        ("Node Allocatable not set, reserved not set", {}, [], None),
        ("Node Allocatable set to zero, reserved set to zero", {"memory": q(0)},
         [MemoryReservation(0, {"memory": q(0)})], None),
        ("Node Allocatable not set (equal zero), reserved set", {},
         [MemoryReservation(0, {"memory": q(12)})], NOT_EQUAL.format("12", "memory", "0")),
        ("Node Allocatable set, reserved not set", {HP2M: q(5)}, [], NOT_EQUAL.format("0", HP2M, "5")),
        ("Reserved not equal to Node Allocatable", {"memory": q(5)},
         [MemoryReservation(0, {"memory": q(12)})], NOT_EQUAL.format("12", "memory", "5")),
        ("Reserved contains the NUMA node that does not exist under the machine", {"memory": q(17)},
         [MemoryReservation(0, {"memory": q(12)}), MemoryReservation(2, {"memory": q(5)})],
         "the reserved memory configuration references a NUMA node 2 that does not exist on this machine"),
        ("Reserved total equal to Node Allocatable", {"memory": q(17), HP2M: q(77), HP1G: q(13)},
         [MemoryReservation(0, {"memory": q(12), HP2M: q(70), HP1G: q(13)}),
          MemoryReservation(1, {"memory": q(5), HP2M: q(7)})], None),
        ("Reserved total hugapages-2M not equal to Node Allocatable", {"memory": q(17), HP2M: q(14), HP1G: q(13)},
         [MemoryReservation(0, {"memory": q(12), HP2M: q(70), HP1G: q(13)}),
          MemoryReservation(1, {"memory": q(5), HP2M: q(7)})], NOT_EQUAL.format("77", HP2M, "14")),
        ("binary quantities keep their format", {},
         [MemoryReservation(0, {"memory": q(GB, QuantityFormat.BINARY_SI)})], NOT_EQUAL.format("1Gi", "memory", "0")),
    ],
)
def test_validate_reserved_memory(description: str, allocatable: dict[str, Quantity],
                                  reservations: list[MemoryReservation], error: str | None) -> None:
    if error is None:
        validate_reserved_memory([0, 1], allocatable, reservations)
        return
    with pytest.raises(ConfigError) as e:
        validate_reserved_memory([0, 1], allocatable, reservations)
    assert str(e.value) == error, description


def test_convert_reserved_has_an_entry_per_node() -> None:
    assert convert_reserved([0, 1], []) == {0: {}, 1: {}}
    got = convert_reserved([0, 1], [MemoryReservation(0, {"memory": q(12), HP2M: q(70), HP1G: q(13)}),
                                    MemoryReservation(1, {"memory": q(5), HP2M: q(7)})])
    assert got == {0: {"memory": 12, HP2M: 70, HP1G: 13}, 1: {"memory": 5, HP2M: 7}}


def test_get_system_reserved_memory_validates_then_converts() -> None:
    binary = QuantityFormat.BINARY_SI
    assert get_system_reserved_memory([0, 1], {}, []) == {0: {}, 1: {}}
    with pytest.raises(ConfigError, match='"1Gi" of type "memory"'):
        get_system_reserved_memory([0, 1], {}, [MemoryReservation(0, {"memory": q(GB, binary)})])
    got = get_system_reserved_memory(
        [0, 1], {"memory": q(2 * GB, binary)},
        [MemoryReservation(0, {"memory": q(GB, binary)}), MemoryReservation(1, {"memory": q(GB, binary)})],
    )
    assert got == {0: {"memory": GB}, 1: {"memory": GB}}


def test_convert_reserved_rejects_fractional_bytes() -> None:
    with pytest.raises(ConfigError, match="could not covert a variable of type Quantity to int64"):
        convert_reserved([0], [MemoryReservation(0, {"memory": Quantity.parse("1.5")})])


def test_node_allocatable_reservation_sums_sources_and_drops_zero() -> None:
    got = node_allocatable_reservation(
        ["cpu", "memory", HP2M],
        system_reserved={"memory": Quantity.parse("1Gi")},
        kube_reserved={"memory": Quantity.parse("512Mi"), "cpu": Quantity.parse("0")},
        eviction_reservation={"memory": Quantity.parse("100Mi")},
    )
    assert got == {"memory": Quantity.parse("1636Mi")}
    assert str(got["memory"]) == "1636Mi"
