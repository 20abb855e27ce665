"""CPUTopology queries and the exact hint generator (spec §1.1, §1.4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.core.hint import TopologyHint
from numalign.errors import InvalidInputError
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints, is_hint_socket_aligned
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology


def build(rows: dict[int, tuple[int, int, int, int]]) -> CPUTopology:
    return CPUTopology.from_cpu_infos(
        CPUInfo(cpu=c, core=core, socket=s, numa_node=n, uncore=u) for c, (core, s, n, u) in rows.items()
    )


# 2 sockets x 2 NUMA nodes x 4 cores x 2 threads; sibling of c is c + 16; 2 uncore caches per node.
QUAD = build({c: (c % 16, (c % 16) // 8, (c % 16) // 4, (c % 16) // 2) for c in range(32)})


def test_counts_and_derived() -> None:
    assert (QUAD.num_cpus, QUAD.num_cores, QUAD.num_sockets, QUAD.num_numa_nodes, QUAD.num_uncore_cache) == (
        32, 16, 2, 4, 8,
    )
    assert (QUAD.cpus_per_core(), QUAD.cpus_per_socket(), QUAD.cpus_per_uncore()) == (2, 16, 4)


def test_queries() -> None:
    d = QUAD.details
    assert d.cpus_in_numa_nodes(1) == {4, 5, 6, 7, 20, 21, 22, 23}
    assert d.sockets_in_numa_nodes(1, 2) == {0, 1}
    assert d.numa_nodes_in_sockets(1) == {2, 3}
    assert d.cores_in_sockets(0) == set(range(8))
    assert d.uncore_in_numa_nodes(3) == {6, 7}
    assert d.cores_needed_in_uncore_cache(1, 6) == {12}
    assert d.cores_needed_in_uncore_cache(5, 6) == {12, 13}
    assert d.are_numa_nodes_in_same_socket([0, 1])
    assert not d.are_numa_nodes_in_same_socket([1, 2])
    assert not d.are_numa_nodes_in_same_socket([9])
    sub = QUAD.keep_only({0, 16, 5, 99})
    assert sub.cpus() == {0, 5, 16}
    assert sub.numa_nodes() == {0, 1}
    assert sub.cpus_in_cores(0) == {0, 16}
    assert QUAD.check_alignment_uncore({0, 1, 16}) and not QUAD.check_alignment_uncore({0, 2})
    assert QUAD.check_alignment_uncore(set())


def test_invalid_topology() -> None:
    with pytest.raises(InvalidInputError, match="listed twice"):
        CPUTopology.from_cpu_infos([CPUInfo(0, 0, 0, 0, 0), CPUInfo(0, 0, 0, 0, 0)])
    with pytest.raises(InvalidInputError, match="expected an integer >= 0"):
        CPUTopology.from_cpu_infos([CPUInfo(-1, 0, 0, 0, 0)])
    # NUMA node -1 is cadvisor's node for an unknown package id; -2 is nothing cadvisor gives
    assert CPUTopology.from_cpu_infos([CPUInfo(0, -1, -1, 0, -1)]).details.numa_nodes() == {-1}
    with pytest.raises(InvalidInputError, match="numa_node=-2; expected an integer >= -1"):
        CPUTopology.from_cpu_infos([CPUInfo(0, -2, 0, 0, 0)])
    with pytest.raises(InvalidInputError, match="no CPUs"):
        CPUTopology.from_cpu_infos([])


def H(nodes: list[int], pref: bool) -> TopologyHint:
    return TopologyHint.of(nodes, pref)


def test_min_affinity_uses_machine_total_not_free() -> None:
    # Node 0 is full; 6 CPUs fit one node by capacity, so only 1-node masks are preferred.
    avail = set(range(32)) - QUAD.details.cpus_in_numa_nodes(0)
    hints = generate_cpu_topology_hints(QUAD, avail, (), 6)
    assert hints[:3] == [H([1], True), H([2], True), H([3], True)]
    assert all(not h.preferred for h in hints[3:])
    assert H([0], True) not in hints


def test_reusable_outside_mask_rejects_it() -> None:
    hints = generate_cpu_topology_hints(QUAD, set(range(32)), {4}, 2)
    assert [h.nodes() for h in hints][:3] == [[1], [0, 1], [1, 2]]


def test_align_by_socket_prefers_socket_aligned_wider_masks() -> None:
    hints = generate_cpu_topology_hints(QUAD, set(range(32)), (), 2, align_by_socket=True)
    preferred = [h.nodes() for h in hints if h.preferred]
    assert preferred == [[0], [1], [2], [3], [0, 1], [2, 3]]
    assert is_hint_socket_aligned(QUAD, 0b0011, 1)
    assert not is_hint_socket_aligned(QUAD, 0b0110, 1)


def test_not_enough_cpus_gives_empty_list() -> None:
    assert generate_cpu_topology_hints(QUAD, {0, 1}, (), 3) == []


@settings(max_examples=60)
@given(st.sets(st.integers(0, 31)), st.integers(1, 32))
def test_hints_match_brute_force(avail: set[int], request: int) -> None:
    hints = generate_cpu_topology_hints(QUAD, avail, (), request)
    d = QUAD.details
    expect_masks = []
    for mask in range(1, 16):
        nodes = [n for n in range(4) if mask >> n & 1]
        if len(avail & d.cpus_in_numa_nodes(*nodes)) >= request:
            expect_masks.append(mask)
    assert sorted(h.mask or 0 for h in hints) == sorted(expect_masks)
    min_size = min(bin(m).count("1") for m in range(1, 16) if len(d.cpus_in_numa_nodes(
        *[n for n in range(4) if m >> n & 1])) >= request)
    assert all(h.preferred == ((h.mask or 0).bit_count() == min_size) for h in hints)
