"""Memory manager hints: calculateHints / regenerateHints (upstream TestStaticPolicyGetTopologyHints)
plus the quirks the spec lists (minAffinitySize from allocatable, grouping rule, reusable memory)."""

from __future__ import annotations

import pytest

from numalign.core.bitmask import mask_of, mask_string
from numalign.core.hint import TopologyHint
from numalign.kubelet.memorymanager.hints import (
    calculate_hints,
    find_best_hint,
    is_subset_mask,
    regenerate_hints,
    violates_grouping,
)
from numalign.kubelet.memorymanager.state import Block, MemoryTable, NUMANodeMap, NUMANodeState

MB = 1024 * 1024
GB = 1024 * MB
HP1G = "hugepages-1Gi"
HP2M = "hugepages-2Mi"
REQ = {"memory": GB, HP1G: GB}  # upstream requirementsGuaranteed


def tbl(allocatable: int, free: int, total: int = 0, system_reserved: int = 0) -> MemoryTable:
    return MemoryTable(total or allocatable, system_reserved, allocatable, allocatable - free, free)


def h(*nodes: int, preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(nodes), preferred)


def test_regenerates_hints_from_existing_blocks() -> None:
    blocks = [Block([0], "memory", GB), Block([0], HP1G, GB)]
    assert regenerate_hints(blocks, REQ) == {"memory": [h(0, preferred=True)], HP1G: [h(0, preferred=True)]}


@pytest.mark.parametrize(
    ("description", "blocks"),
    [
        ("number of blocks differs from the requested resources", [Block([0], "memory", GB)]),
        ("a block type is not requested", [Block([0], "memory", GB), Block([0], HP2M, GB)]),
        ("a block size differs from the request", [Block([0], "memory", 512 * MB), Block([0], HP1G, GB)]),
    ],
)
def test_regenerate_returns_none_on_mismatch(description: str, blocks: list[Block]) -> None:
    assert regenerate_hints(blocks, REQ) is None, description


def test_regenerate_keeps_empty_list_when_blocks_share_a_type() -> None:
    got = regenerate_hints([Block([0], "memory", GB), Block([1], "memory", GB)], REQ | {"memory": GB})
    assert got == {"memory": [h(0, preferred=True), h(1, preferred=True)], HP1G: []}


def four_nodes_with_group_01() -> NUMANodeMap:
    used = {"memory": tbl(1536 * MB, 0), HP1G: tbl(GB, 0)}
    half = {"memory": tbl(1536 * MB, GB), HP1G: tbl(GB, 0)}
    free = {"memory": tbl(1536 * MB, 1536 * MB), HP1G: tbl(GB, GB)}
    return {
        0: NUMANodeState(2, used, [0, 1]),
        1: NUMANodeState(2, half, [0, 1]),
        2: NUMANodeState(0, {k: v.copy() for k, v in free.items()}, [2]),
        3: NUMANodeState(0, {k: v.copy() for k, v in free.items()}, [3]),
    }


def test_calculates_hints_around_an_existing_group() -> None:
    # "should calculate new topology hints, when the container does not exist under assignments"
    got = calculate_hints(four_nodes_with_group_01(), REQ)
    expected = [h(2, preferred=True), h(3, preferred=True), h(2, 3, preferred=False)]
    assert got == {"memory": expected, HP1G: expected}


def test_single_numa_fit_by_allocatable_makes_group_hint_not_preferred() -> None:
    # "should not return preferred hints with multiple NUMA nodes for the pod with resources satisfied by a
    # single NUMA node": node 1 alone could hold 1Gi by allocatable, so [0,1] is not preferred.
    ms: NUMANodeMap = {
        0: NUMANodeState(2, {"memory": tbl(1536 * MB, 0), HP2M: tbl(20 * MB, 0)}, [0, 1]),
        1: NUMANodeState(2, {"memory": tbl(1536 * MB, GB), HP2M: tbl(20 * MB, 16 * MB)}, [0, 1]),
    }
    got = calculate_hints(ms, {"memory": GB, HP2M: 16 * MB})
    assert got == {"memory": [h(0, 1, preferred=False)], HP2M: [h(0, 1, preferred=False)]}


def test_no_mask_fits_gives_empty_map() -> None:
    ms: NUMANodeMap = {0: NUMANodeState(0, {"memory": tbl(GB, GB)}, [0])}
    got = calculate_hints(ms, {"memory": 2 * GB})
    assert got == {} and got is not None


def test_single_numa_users_block_multi_numa_masks() -> None:
    ms: NUMANodeMap = {
        0: NUMANodeState(1, {"memory": tbl(GB, 512 * MB)}, [0]),
        1: NUMANodeState(0, {"memory": tbl(GB, GB)}, [1]),
        2: NUMANodeState(0, {"memory": tbl(GB, GB)}, [2]),
    }
    got = calculate_hints(ms, {"memory": 1536 * MB})
    # [0,1] and [0,2] would mix node 0's single-NUMA use with a group; [0,1,2] too.
    assert got == {"memory": [h(1, 2, preferred=True)]}
    assert violates_grouping(ms, [0, 1]) and not violates_grouping(ms, [0]) and not violates_grouping(ms, [1, 2])


def test_group_member_is_never_used_alone_and_only_with_its_own_group() -> None:
    ms: NUMANodeMap = {
        0: NUMANodeState(1, {"memory": tbl(GB, GB)}, [0, 1]),
        1: NUMANodeState(1, {"memory": tbl(GB, GB)}, [0, 1]),
        2: NUMANodeState(0, {"memory": tbl(GB, GB)}, [2]),
    }
    got = calculate_hints(ms, {"memory": 512 * MB})
    assert got == {"memory": [h(2, preferred=True), h(0, 1, preferred=False)]}


def test_min_affinity_size_counts_masks_rejected_for_free_memory() -> None:
    # Node 0 could hold the request by allocatable but has no free memory left: the only hint [1,2] is
    # still not preferred, because the minimal size (1) came from the allocatable check.
    ms: NUMANodeMap = {
        0: NUMANodeState(1, {"memory": tbl(2 * GB, 0)}, [0]),
        1: NUMANodeState(0, {"memory": tbl(GB, GB)}, [1]),
        2: NUMANodeState(0, {"memory": tbl(GB, GB)}, [2]),
    }
    assert calculate_hints(ms, {"memory": 2 * GB}) == {"memory": [h(1, 2, preferred=False)]}


def test_reusable_memory_counts_only_for_its_exact_mask() -> None:
    ms: NUMANodeMap = {
        0: NUMANodeState(1, {"memory": tbl(2 * GB, GB)}, [0]),
        1: NUMANodeState(0, {"memory": tbl(2 * GB, 2 * GB)}, [1]),
    }
    req = {"memory": 3 * GB // 2}
    without = calculate_hints(ms, req)
    assert without == {"memory": [h(1, preferred=True)]}
    reusable = {mask_string(mask_of([0])): {"memory": GB}}
    assert calculate_hints(ms, req, reusable) == {"memory": [h(0, preferred=True), h(1, preferred=True)]}
    # the same amount keyed by another mask does not help node 0
    other = {mask_string(mask_of([0, 1])): {"memory": GB}}
    assert calculate_hints(ms, req, other) == without


def test_hint_lists_are_identical_across_resources_and_in_mask_order() -> None:
    ms: NUMANodeMap = {n: NUMANodeState(0, {"memory": tbl(GB, GB), HP2M: tbl(GB, GB)}, [n]) for n in (3, 0, 2)}
    got = calculate_hints(ms, {"memory": 1536 * MB, HP2M: 0})
    expected = [h(0, 2, preferred=True), h(0, 3, preferred=True), h(2, 3, preferred=True),
                h(0, 2, 3, preferred=False)]
    assert got == {"memory": expected, HP2M: expected}


def test_find_best_hint_prefers_preferred_then_narrower() -> None:
    assert find_best_hint([]) is None
    hints = [h(0, 1, preferred=False), h(2, preferred=False), h(1, 2, preferred=True), h(0, 3, preferred=True)]
    assert find_best_hint(hints) == h(1, 2, preferred=True)
    assert find_best_hint([h(1, 2, preferred=False), h(0, 3, preferred=False)]) == h(1, 2, preferred=False)
    assert find_best_hint([h(1, 3, preferred=False), h(0, 3, preferred=False)]) == h(0, 3, preferred=False)


def test_is_subset_mask() -> None:
    assert is_subset_mask(mask_of([1]), mask_of([0, 1]))
    assert is_subset_mask(0, mask_of([2]))
    assert not is_subset_mask(mask_of([1, 2]), mask_of([0, 1]))
