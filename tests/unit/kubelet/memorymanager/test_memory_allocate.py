"""Memory manager allocation and release (upstream TestStaticPolicyAllocate and
TestStaticPolicyRemoveContainer, at the level of allocate_blocks / release_blocks)."""

from __future__ import annotations

import pytest

from numalign.core.bitmask import mask_of, mask_string
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError
from numalign.kubelet.memorymanager.allocate import (
    ERR_NO_DEFAULT_AFFINITY,
    ERR_NO_DEFAULT_PREFERRED,
    ERR_NO_EXTENDED_PREFERRED,
    ERR_NO_EXTENSION,
    ERR_VIOLATES_GROUPING,
    allocate_blocks,
    choose_affinity,
    release_blocks,
    update_machine_state,
)
from numalign.kubelet.memorymanager.state import Block, MemoryTable, NUMANodeMap, NUMANodeState, clone_machine_state

MB = 1024 * 1024
GB = 1024 * MB
HP1G = "hugepages-1Gi"
REQ = {"memory": GB, HP1G: GB}  # upstream requirementsGuaranteed
NO_AFFINITY = TopologyHint(None, False)


def tbl(allocatable: int, free: int, total: int, system_reserved: int = 512 * MB) -> MemoryTable:
    return MemoryTable(total, system_reserved, allocatable, allocatable - free, free)


def hp(allocatable: int, free: int) -> MemoryTable:
    return MemoryTable(allocatable, 0, allocatable, allocatable - free, free)


def at(*nodes: int, preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(nodes), preferred)


def test_default_hint_when_the_topology_manager_has_no_affinity() -> None:
    ms: NUMANodeMap = {0: NUMANodeState(0, {"memory": tbl(1536 * MB, 1536 * MB, 2 * GB), HP1G: hp(GB, GB)}, [0])}
    blocks = allocate_blocks(ms, REQ, NO_AFFINITY)
    assert blocks == [Block([0], HP1G, GB), Block([0], "memory", GB)]  # sorted by type
    assert ms == {0: NUMANodeState(2, {"memory": tbl(1536 * MB, 512 * MB, 2 * GB), HP1G: hp(GB, 0)}, [0])}


def test_fails_when_no_default_affinity_can_be_computed() -> None:
    ms: NUMANodeMap = {0: NUMANodeState(2, {"memory": tbl(1536 * MB, 512 * MB, 2 * GB), HP1G: hp(GB, 0)}, [0])}
    before = clone_machine_state(ms)
    with pytest.raises(AllocationError) as e:
        allocate_blocks(ms, REQ, NO_AFFINITY)
    assert str(e.value) == ERR_NO_DEFAULT_AFFINITY
    assert e.value.reason is None  # reported as UnexpectedAdmissionError
    assert ms == before


def three_nodes_node0_half_used() -> NUMANodeMap:
    return {
        0: NUMANodeState(1, {"memory": tbl(GB, 512 * MB, 1536 * MB), HP1G: hp(GB, GB)}, [0]),
        1: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, 1536 * MB), HP1G: hp(GB, GB)}, [1]),
        2: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, 1536 * MB), HP1G: hp(GB, GB)}, [2]),
    }


def test_fails_when_preferred_requested_but_default_hint_is_not_preferred() -> None:
    with pytest.raises(AllocationError) as e:
        allocate_blocks(three_nodes_node0_half_used(), REQ, TopologyHint(None, True))
    assert str(e.value) == ERR_NO_DEFAULT_PREFERRED


def test_fails_when_the_hint_cannot_be_extended() -> None:
    ms: NUMANodeMap = {
        0: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, GB), HP1G: hp(GB, GB)}, [0]),
        1: NUMANodeState(1, {"memory": tbl(1536 * MB, 512 * MB, 2 * GB), HP1G: hp(GB, GB)}, [1, 2]),
        2: NUMANodeState(1, {"memory": tbl(1536 * MB, 512 * MB, 2 * GB), HP1G: hp(GB, GB)}, [1, 2]),
    }
    with pytest.raises(AllocationError) as e:
        allocate_blocks(ms, REQ, at(0, preferred=False))
    assert str(e.value) == ERR_NO_EXTENSION


def test_fails_when_the_extended_hint_is_not_preferred() -> None:
    with pytest.raises(AllocationError) as e:
        allocate_blocks(three_nodes_node0_half_used(), REQ, at(1, preferred=True))
    assert str(e.value) == ERR_NO_EXTENDED_PREFERRED


def test_allocates_from_multiple_numa_nodes() -> None:
    ms: NUMANodeMap = {
        n: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, GB), HP1G: hp(GB, GB)}, [n]) for n in range(4)
    }
    blocks = allocate_blocks(ms, REQ, TopologyHint(None, True))
    assert blocks == [Block([0, 1], HP1G, GB), Block([0, 1], "memory", GB)]
    assert ms[0] == NUMANodeState(2, {"memory": tbl(512 * MB, 0, GB), HP1G: hp(GB, 0)}, [0, 1])
    # hugepages came entirely from node 0, yet node 1 joins the group and counts both blocks
    assert ms[1] == NUMANodeState(2, {"memory": tbl(512 * MB, 0, GB), HP1G: hp(GB, GB)}, [0, 1])
    assert ms[2].number_of_assignments == ms[3].number_of_assignments == 0


def test_extends_a_narrowed_hint_to_the_group_that_holds_the_request() -> None:
    ms: NUMANodeMap = {
        n: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, GB)}, [n]) for n in range(3)
    }
    blocks = allocate_blocks(ms, {"memory": GB}, at(1, preferred=True))
    assert blocks == [Block([0, 1], "memory", GB)]


def test_preferred_hint_violating_the_grouping_rule_is_refused() -> None:
    ms: NUMANodeMap = {
        0: NUMANodeState(1, {"memory": tbl(GB, 512 * MB, 2 * GB)}, [0]),
        1: NUMANodeState(0, {"memory": tbl(GB, GB, 2 * GB)}, [1]),
    }
    with pytest.raises(AllocationError) as e:
        allocate_blocks(ms, {"memory": 256 * MB}, at(0, 1, preferred=True))
    assert str(e.value) == ERR_VIOLATES_GROUPING


def test_unknown_node_in_affinity_is_a_clear_error() -> None:
    ms: NUMANodeMap = {0: NUMANodeState(0, {"memory": tbl(GB, GB, 2 * GB)}, [0])}
    with pytest.raises(AllocationError, match=r"names NUMA node\(s\) \[3\]"):
        choose_affinity(ms, {"memory": GB}, at(3, preferred=True))


def test_reusable_memory_reduces_what_is_taken_but_not_the_block_size() -> None:
    ms: NUMANodeMap = {0: NUMANodeState(2, {"memory": tbl(4 * GB, GB, 5 * GB)}, [0])}
    reusable = {mask_string(mask_of([0])): {"memory": 3 * GB}}
    blocks = allocate_blocks(ms, {"memory": 2 * GB}, at(0, preferred=True), reusable)
    assert blocks == [Block([0], "memory", 2 * GB)]
    assert ms[0].memory_map["memory"].free == GB  # fully covered by reusable memory
    assert ms[0].number_of_assignments == 3


def test_update_machine_state_spills_in_mask_order() -> None:
    ms: NUMANodeMap = {n: NUMANodeState(0, {"memory": tbl(GB, GB, 2 * GB)}, [n]) for n in (0, 1, 2)}
    update_machine_state(ms, [1, 2], "memory", 1536 * MB)
    assert [ms[n].memory_map["memory"].free for n in (0, 1, 2)] == [GB, 0, 512 * MB]
    assert [ms[n].cells for n in (0, 1, 2)] == [[0], [1, 2], [1, 2]]


# ---- release (upstream TestStaticPolicyRemoveContainer) -------------------------------------------


def test_release_single_numa_container() -> None:
    ms: NUMANodeMap = {0: NUMANodeState(2, {"memory": tbl(1536 * MB, 512 * MB, 2 * GB), HP1G: hp(GB, 0)}, [0])}
    release_blocks(ms, [Block([0], "memory", GB), Block([0], HP1G, GB)])
    assert ms == {0: NUMANodeState(0, {"memory": tbl(1536 * MB, 1536 * MB, 2 * GB), HP1G: hp(GB, GB)}, [0])}


def test_release_cross_numa_container_dissolves_the_group() -> None:
    ms: NUMANodeMap = {
        0: NUMANodeState(2, {"memory": tbl(512 * MB, 0, GB), HP1G: hp(GB, 0)}, [0, 1]),
        1: NUMANodeState(2, {"memory": tbl(512 * MB, 0, GB), HP1G: hp(GB, GB)}, [0, 1]),
    }
    release_blocks(ms, [Block([0, 1], "memory", GB), Block([0, 1], HP1G, GB)])
    assert ms == {
        0: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, GB), HP1G: hp(GB, GB)}, [0]),
        1: NUMANodeState(0, {"memory": tbl(512 * MB, 512 * MB, GB), HP1G: hp(GB, GB)}, [1]),
    }


def test_release_keeps_the_group_while_other_blocks_remain() -> None:
    ms: NUMANodeMap = {n: NUMANodeState(2, {"memory": tbl(GB, 0, 2 * GB)}, [0, 1]) for n in (0, 1)}
    release_blocks(ms, [Block([0, 1], "memory", GB)])
    assert [ms[n].cells for n in (0, 1)] == [[0, 1], [0, 1]]
    assert [ms[n].memory_map["memory"].free for n in (0, 1)] == [GB, 0]


def test_allocate_then_release_restores_the_state() -> None:
    ms: NUMANodeMap = {n: NUMANodeState(0, {"memory": tbl(GB, GB, 2 * GB), HP1G: hp(2 * GB, 2 * GB)}, [n])
                       for n in (0, 1)}
    before = clone_machine_state(ms)
    blocks = allocate_blocks(ms, {"memory": 1536 * MB, HP1G: GB}, NO_AFFINITY)
    assert ms != before
    release_blocks(ms, blocks)
    assert ms == before
