"""Upstream cpu_assignment_test.go tables (accumulator orderings, packed, spread, distributed).

The topologies are upstream's policy_test.go fixtures, built by rule. The older fixtures leave
UncoreCacheID unset, so every CPU reads uncore cache 0; kept as is.
"""

from __future__ import annotations

import pytest

from numalign.errors import AllocationError
from numalign.k8s.cpuset import parse_cpuset
from numalign.kubelet.cpumanager.accumulator import PACKED, SPREAD, CPUAccumulator, take_by_topology_numa_packed
from numalign.kubelet.cpumanager.distributed import go_combinations, take_by_topology_numa_distributed
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology


def build(rows: dict[int, tuple[int, int, int, int]]) -> CPUTopology:
    """rows: cpu -> (core, socket, numa, uncore)."""
    return CPUTopology.from_cpu_infos(
        CPUInfo(cpu=c, core=core, socket=s, numa_node=n, uncore=u) for c, (core, s, n, u) in rows.items()
    )

# 8 CPUs, 1 socket, 4 cores, HT siblings i / i+4.
SINGLE_SOCKET_HT = build({c: (c % 4, 0, 0, 0) for c in range(8)})

# 12 CPUs, 2 sockets (even / odd ids), 6 cores, HT siblings i / i+6.
DUAL_SOCKET_HT = build({c: (c % 6, c % 2, c % 2, 0) for c in range(12)})

# 18 CPUs, 3 sockets, sibling pairs (2k, 2k+1); socket of cores 0-2 is 1, 3-5 is 0, 6-8 is 2.
TRIPLE_SOCKET_HT = build({c: (c // 2, [1, 0, 2][c // 6], [1, 0, 2][c // 6], 0) for c in range(18)})

# 8 CPUs, 2 sockets of 4, no HT.
DUAL_SOCKET_NO_HT = build({c: (c, c // 4, c // 4, 0) for c in range(8)})

# Dual Xeon Gold 6230: NUMA n holds 10n..10n+9 and 40+10n..40+10n+9; sockets hold 2 NUMA nodes.
DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT = build(
    {c: (c % 40, (c % 40) // 20, (c % 40) // 10, 0) for c in range(80)}
)

# The same with NUMA cells and sockets flipped: 4 sockets of 10 cores, 2 NUMA nodes.
FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT = build(
    {c: (c % 40, (c % 40) // 10, (c % 40) // 20, 0) for c in range(80)}
)

# 16 CPUs, 1 socket, 1 NUMA node, 4 uncore caches of 4 CPUs, no SMT.
UNCORE_SINGLE_SOCKET_NO_SMT = build({c: (c, 0, 0, c // 4) for c in range(16)})

# 16 CPUs, 2 sockets / 2 NUMA nodes, 4 uncore caches of 4 CPUs, no SMT.
UNCORE_DUAL_SOCKET_NO_SMT = build({c: (c, c // 8, c // 8, c // 4) for c in range(16)})

# 16 CPUs, 1 socket, 2 NUMA nodes, 4 uncore caches of 4 CPUs, no SMT.
UNCORE_SINGLE_SOCKET_MULTI_NUMA = build({c: (c, 0, c // 8, c // 4) for c in range(16)})

# 16 CPUs, 1 socket, 8 cores (siblings i / i+8), 2 uncore caches of 4 cores.
UNCORE_SINGLE_SOCKET_SMT = build({c: (c % 8, 0, 0, (c % 8) // 4) for c in range(16)})

P = parse_cpuset
MULTI = DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT
FAKE = FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT


def acc(topo: CPUTopology, avail: str, n: int = 0) -> CPUAccumulator:
    return CPUAccumulator(topo, P(avail), n, PACKED)


@pytest.mark.parametrize(
    ("topo", "avail", "expect"),
    [
        (SINGLE_SOCKET_HT, "0-7", [0]),
        (SINGLE_SOCKET_HT, "1-7", []),
        (DUAL_SOCKET_HT, "0-11", [0, 1]),
        (DUAL_SOCKET_HT, "0-9,11", [1]),
        (DUAL_SOCKET_HT, "0,2-9,11", []),
        (MULTI, "0-79", [0, 1]),
        (MULTI, "1-79", [1]),
        (MULTI, "1-78", []),
        (FAKE, "0-79", [0, 1, 2, 3]),
        (FAKE, "0-19,21-79", [0, 1, 3]),
        (FAKE, "0-59,61-78", [0, 1]),
        (FAKE, "1-19,21-38,41-60,61-78", [1]),
        (FAKE, "0-40,42-49,51-68,71-79", []),
    ],
)
def test_free_sockets(topo: CPUTopology, avail: str, expect: list[int]) -> None:
    assert sorted(acc(topo, avail).free_sockets()) == expect


@pytest.mark.parametrize(
    ("topo", "avail", "expect"),
    [
        (SINGLE_SOCKET_HT, "0-7", [0]),
        (SINGLE_SOCKET_HT, "1-7", []),
        (DUAL_SOCKET_HT, "0-11", [0, 1]),
        (DUAL_SOCKET_HT, "0-9,11", [1]),
        (DUAL_SOCKET_HT, "0,2-9,11", []),
        (MULTI, "0-79", [0, 1, 2, 3]),
        (MULTI, "1-79", [1, 2, 3]),
        (MULTI, "1-9,11-79", [2, 3]),
        (MULTI, "1-9,11-59,61-79", [3]),
        (MULTI, "1-9,11-59,61-78", []),
        (FAKE, "0-79", [0, 1]),
        (FAKE, "0-9,11-79", [1]),
        (FAKE, "0-9,11-59,61-79", []),
    ],
)
def test_free_numa_nodes(topo: CPUTopology, avail: str, expect: list[int]) -> None:
    assert acc(topo, avail).free_numa_nodes() == expect


@pytest.mark.parametrize(
    ("avail", "sockets", "numas"),
    [
        ("0-79", [0, 1], [0, 1, 2, 3]),
        ("1-79", [1], [1, 2, 3]),
        ("1-9,11-79", [1], [2, 3]),
        ("1-59,61-79", [], [1, 3]),
    ],
)
def test_free_sockets_and_numa_nodes(avail: str, sockets: list[int], numas: list[int]) -> None:
    a = acc(MULTI, avail)
    assert a.free_numa_nodes() == numas
    assert a.free_sockets() == sockets


@pytest.mark.parametrize(
    ("topo", "avail", "expect"),
    [
        (SINGLE_SOCKET_HT, "0-7", [0, 1, 2, 3]),
        (SINGLE_SOCKET_HT, "0-2,4-6", [0, 1, 2]),
        (SINGLE_SOCKET_HT, "0-6", [0, 1, 2]),
        (SINGLE_SOCKET_HT, "", []),
        (SINGLE_SOCKET_HT, "0-3", []),
        (DUAL_SOCKET_HT, "0-11", [0, 2, 4, 1, 3, 5]),
        (DUAL_SOCKET_HT, "1-5,7-11", [2, 4, 1, 3, 5]),
        (DUAL_SOCKET_HT, "2-5,8-11", [2, 4, 3, 5]),
    ],
)
def test_free_cores(topo: CPUTopology, avail: str, expect: list[int]) -> None:
    assert acc(topo, avail).free_cores() == expect


@pytest.mark.parametrize(
    ("topo", "avail", "expect"),
    [
        (SINGLE_SOCKET_HT, "0-7", [0, 4, 1, 5, 2, 6, 3, 7]),
        (SINGLE_SOCKET_HT, "3-7", [4, 5, 6, 3, 7]),
        (DUAL_SOCKET_HT, "0-11", [0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        (DUAL_SOCKET_HT, "1-11", [6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        (DUAL_SOCKET_HT, "1-5,7-11", [2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        (TRIPLE_SOCKET_HT, "0-3,6-13", [12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11]),
    ],
)
def test_free_cpus_packed_order(topo: CPUTopology, avail: str, expect: list[int]) -> None:
    assert acc(topo, avail).sort_cpus() == expect


@pytest.mark.parametrize(
    ("avail", "takes", "n", "satisfied", "failed"),
    [
        ("0-7", [""], 1, False, False),
        ("", [""], 1, False, True),
        ("0-7", ["0"], 1, True, False),
        ("0-7", ["0"], 2, False, False),
        ("0-2", ["0", "1"], 4, False, True),
        ("0-7", ["0", "1", "2", "3", "4", "5", "6", "7"], 8, True, False),
    ],
)
def test_accumulator_take(avail: str, takes: list[str], n: int, satisfied: bool, failed: bool) -> None:
    a = acc(SINGLE_SOCKET_HT, avail, n)
    total = 0
    for t in takes:
        a.take(P(t))
        total += len(P(t))
    assert a.is_satisfied() is satisfied
    assert a.is_failed() is failed
    for t in takes:
        assert not P(t) & a.free.cpus()
        assert P(t) <= a.result
    assert a.needed == n - total


# commonTakeByTopologyTestCases: (topo, available, n, error, expected)
COMMON = [
    (SINGLE_SOCKET_HT, "0,2,4,6", 5, "not enough cpus available to satisfy request: requested=5, available=4", ""),
    (SINGLE_SOCKET_HT, "0-7", 0, "", ""),
    (SINGLE_SOCKET_HT, "0-7", 1, "", "0"),
    (SINGLE_SOCKET_HT, "1,3,5,6,7", 1, "", "6"),
    (SINGLE_SOCKET_HT, "0-7", 2, "", "0,4"),
    (SINGLE_SOCKET_HT, "0-7", 8, "", "0-7"),
    (SINGLE_SOCKET_HT, "0-3,6", 2, "", "2,6"),
    (DUAL_SOCKET_HT, "0-11", 6, "", "0,2,4,6,8,10"),
    (MULTI, "0-79", 40, "", "0-19,40-59"),
    (MULTI, "0-79", 20, "", "0-9,40-49"),
    (MULTI, "10-39,50-79", 20, "", "10-19,50-59"),
    (MULTI, "0-79", 60, "", "0-29,40-69"),
    (MULTI, "1-39,41-79", 60, "", "10-39,50-79"),
]

PACKED_EXTRA = [
    (DUAL_SOCKET_HT, "1-5,7-11", 1, False, "2"),
    (DUAL_SOCKET_HT, "0-11", 8, False, "0,6,2,8,4,10,1,7"),
    (MULTI, "0-79", 64, False, "0-29,40-69,30,31,70,71"),
    (UNCORE_SINGLE_SOCKET_NO_SMT, "1-15", 10, True, "1,2,4-11"),
    (DUAL_SOCKET_HT, "1-5,7-11", 1, True, "1"),
    (UNCORE_DUAL_SOCKET_NO_SMT, "0-15", 4, True, "0-3"),
    (UNCORE_DUAL_SOCKET_NO_SMT, "2-15", 6, True, "2-7"),
    (UNCORE_DUAL_SOCKET_NO_SMT, "8-15", 4, True, "8-11"),
    (UNCORE_SINGLE_SOCKET_MULTI_NUMA, "3,4-8,12", 2, True, "4,5"),
    (UNCORE_SINGLE_SOCKET_SMT, "2-3,10-11,4-7,12-15", 6, True, "4-6,12-14"),
    (UNCORE_SINGLE_SOCKET_SMT, "1-7,9-15", 10, True, "4-7,12-15,1,9"),
]


@pytest.mark.parametrize(("topo", "avail", "n", "err", "expect"), COMMON)
def test_packed_common(topo: CPUTopology, avail: str, n: int, err: str, expect: str) -> None:
    if err:
        with pytest.raises(AllocationError) as e:
            take_by_topology_numa_packed(topo, P(avail), n)
        assert str(e.value) == err
    else:
        assert take_by_topology_numa_packed(topo, P(avail), n) == P(expect)


@pytest.mark.parametrize(("topo", "avail", "n", "uncore", "expect"), PACKED_EXTRA)
def test_packed_extra(topo: CPUTopology, avail: str, n: int, uncore: bool, expect: str) -> None:
    assert take_by_topology_numa_packed(topo, P(avail), n, PACKED, uncore) == P(expect)


@pytest.mark.parametrize(
    ("topo", "avail", "n", "expect"),
    [
        (SINGLE_SOCKET_HT, "0-7", 3, "0-2"),
        (DUAL_SOCKET_HT, "0-11", 2, "0,2"),
        (DUAL_SOCKET_HT, "0-11", 3, "0,2,4"),
        (DUAL_SOCKET_HT, "0-11", 6, "0,2,4,6,8,10"),
        (DUAL_SOCKET_HT, "0-11", 8, "0,2,4,6,8,10,1,3"),
        (DUAL_SOCKET_NO_HT, "0-7", 2, "0,1"),
        (MULTI, "0-79", 8, "0-7"),
    ],
)
def test_spread(topo: CPUTopology, avail: str, n: int, expect: str) -> None:
    assert take_by_topology_numa_packed(topo, P(avail), n, SPREAD) == P(expect)


DISTRIBUTED_EXTRA = [
    (DUAL_SOCKET_HT, "0-11", 8, 1, "0,6,2,8,1,7,3,9"),
    (MULTI, "0-79", 64, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"),
    (MULTI, "0-79", 48, 1, "0-7,10-17,20-27,40-47,50-57,60-67"),
    (MULTI, "1-29,32-39,41-69,72-79", 48, 1, "1-8,10-17,20-27,41-48,50-57,60-67"),
    (MULTI, "2-29,31-39,42-69,71-79", 48, 1, "10-17,20-27,31-38,50-57,60-67,71-78"),
    (MULTI, "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16, 1, "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"),
    (DUAL_SOCKET_HT, "1-5,7-11", 1, 1, "1"),
    (DUAL_SOCKET_HT, "1-5,7-11", 1, 2, "2"),
    (MULTI, "0-79", 26, 1, "0-6,10-16,40-45,50-55"),
    (MULTI, "0-79", 26, 2, "0-6,10-15,40-46,50-55"),
    (MULTI, "0-79", 62, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"),
    (MULTI, "0-79", 62, 2, "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"),
    (MULTI, "0-8,10-18,20-39,40-48,50-58,60-79", 62, 1, "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"),
    (MULTI, "0-8,10-18,20-39,40-48,50-58,60-79", 62, 2, "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"),
    (MULTI, "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", 34, 1, "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"),
]


@pytest.mark.parametrize(("topo", "avail", "n", "err", "expect"), COMMON)
def test_distributed_common(topo: CPUTopology, avail: str, n: int, err: str, expect: str) -> None:
    if err:
        with pytest.raises(AllocationError) as e:
            take_by_topology_numa_distributed(topo, P(avail), n, 1)
        assert str(e.value) == err
    else:
        assert take_by_topology_numa_distributed(topo, P(avail), n, 1) == P(expect)


@pytest.mark.parametrize(("topo", "avail", "n", "group", "expect"), DISTRIBUTED_EXTRA)
def test_distributed_extra(topo: CPUTopology, avail: str, n: int, group: int, expect: str) -> None:
    assert take_by_topology_numa_distributed(topo, P(avail), n, group) == P(expect)


# Dual AMD EPYC 7742, NPS=4: NUMA n holds 16n..16n+15 and 128+16n..; 4 NUMA nodes per socket.
EPYC_7742_NPS4 = build({c: (c % 128, (c % 128) // 64, (c % 128) // 16, 0) for c in range(256)})


def test_distributed_live_machine_regression() -> None:
    avail = P(
        "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,"
        "229-239,126,127,254,255"
    )
    expect = P("43-47,75-79,96,101-105,171-174,203-206,229-232")
    assert take_by_topology_numa_distributed(EPYC_7742_NPS4, avail, 28, 1) == expect


def testgo_combinations_order_and_slice_aliasing() -> None:
    plain = [c.values() for c in go_combinations([0, 1, 2, 3, 4], 3, alias=False)]
    assert plain[:4] == [[0, 1, 2], [0, 1, 3], [0, 1, 4], [0, 2, 3]] and len(plain) == 10
    # Go appends the 4th element in place into an array shared by sibling combinations, so a kept
    # reference to (0,1,2,3) reads (0,1,2,5) once its siblings were generated; 5-element ones are fresh.
    kept = list(go_combinations([0, 1, 2, 3, 4, 5], 4, alias=True))
    assert kept[0].values() == [0, 1, 2, 5]
    assert kept[-1].values() == [2, 3, 4, 5]
    fresh = list(go_combinations([0, 1, 2, 3, 4, 5], 5, alias=True))
    assert fresh[0].values() == [0, 1, 2, 3, 4]
    assert next(c.values() for c in go_combinations([0, 1, 2, 3, 4, 5], 4, alias=False)) == [0, 1, 2, 3]
