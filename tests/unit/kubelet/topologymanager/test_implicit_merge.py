"""Unit tests of the implicit hint machinery: the searches, the closed-form arguments, big machines."""

from __future__ import annotations

from itertools import combinations

import pytest
from support.reference_merge import policy_merge, ref_merge_lists, ref_policy_merge

from numalign.core.bitmask import iterate_bitmasks, mask_of
from numalign.core.decision import provider_answer_to_json
from numalign.core.hint import DONT_CARE, TopologyHint
from numalign.core.implicit.closest import search_closest
from numalign.core.implicit.hints import ImplicitHints, NodeSums, search_masks
from numalign.core.implicit.merge import MERGE_WORK_BOUND, ImplicitMerger
from numalign.core.merge import merge_lists
from numalign.core.numa import NUMAInfo
from numalign.errors import ConfigError, InvalidInputError


def up(n: int, *generators: tuple[int, ...]) -> list[int]:
    """Every mask over n nodes containing one of the generator sets."""
    gens = [mask_of(g) for g in generators]
    return [m for m in iterate_bitmasks(list(range(n))) if any(g & m == g for g in gens)]


def test_search_masks_walks_one_count_in_numeric_order() -> None:
    nodes = [0, 2, 3, 5, 7]
    got = list(search_masks(nodes, 3, lambda m: True, lambda inc, allowed: True))
    want = sorted(mask_of(c) for c in combinations(nodes, 3))
    assert got == want


def test_search_masks_prunes_only_what_the_bound_excludes() -> None:
    nodes = list(range(8))
    def leaf(m: int) -> bool:
        return m & 0b1000_0001 == 0b1000_0001  # nodes 0 and 7 both

    def prune(inc: int, allowed: int) -> bool:
        return allowed & 0b1000_0001 == 0b1000_0001

    got = list(search_masks(nodes, 3, leaf, prune))
    assert got == sorted(m for m in (mask_of(c) for c in combinations(nodes, 3)) if leaf(m))


def test_node_sums_match_direct_sums() -> None:
    values = {0: 3, 5: 1, 9: 7, 63: 2, 64: 5}
    sums = NodeSums(values)
    for mask in [0, 1, 1 << 9, (1 << 63) | 1, (1 << 64) | (1 << 5), (1 << 70) - 1]:
        assert sums.sum(mask) == sum(v for n, v in values.items() if mask >> n & 1)
    assert sums.topk((1 << 70) - 1, 2) == 12
    assert sums.topk((1 << 9) | 1, 5) == 10


def test_counterexample_count_b_reachable_only_as_intersection() -> None:
    # B = 2, and {0,1} is reachable only as {0,1,3} & {0,1,2}; it beats every single-list
    # 2-node member ({2,3}, {0,3}, {1,3}, {0,2}, {1,2} are all numerically larger)
    numa = NUMAInfo.create([0, 1, 2, 3])
    u1 = up(4, (2, 3))
    u2 = sorted(set(up(4, (0, 1, 3)) + up(4, (2,))))
    u3 = sorted(set(up(4, (0, 1, 2)) + up(4, (3,))))
    lists = [[TopologyHint(m, False) for m in u] for u in (u1, u2, u3)]
    assert ref_merge_lists(lists, numa, False) == TopologyHint(0b0011, False)
    assert merge_lists(lists, numa, False) == TopologyHint(0b0011, False)
    assert ImplicitMerger([tuple(x) for x in lists], numa, False).merge() == TopologyHint(0b0011, False)
    # the same lists described implicitly
    fams = [
        ImplicitHints(top=0b1111, up_pass=set(u).__contains__, is_preferred=lambda m: False,
                      min_count=min(m.bit_count() for m in u))
        for u in (u1, u2, u3)
    ]
    got = policy_merge([{"a": fams[0], "b": fams[1]}, {"c": fams[2]}], numa, "best-effort")
    assert got.hint == TopologyHint(0b0011, False)
    assert got.best_non_preferred_affinity_count == 2


def test_upward_closed_lists_win_at_count_b() -> None:
    # upward-closed lists whose narrowest members differ: the winner has exactly B nodes
    numa = NUMAInfo.create(list(range(5)))
    lists = [[TopologyHint(m, False) for m in up(5, (4,))], [TopologyHint(m, False) for m in up(5, (0, 1), (2, 3))]]
    best = ref_merge_lists(lists, numa, False)
    assert best.mask is not None and best.mask.bit_count() == 2
    assert ImplicitMerger([tuple(x) for x in lists], numa, False).merge() == best


def test_search_closest_picks_lowest_average_then_lowest_mask() -> None:
    dist = {i: [10 if i == j else 11 if i // 2 == j // 2 else 30 for j in range(6)] for i in range(6)}
    numa = NUMAInfo.create(list(range(6)), dist)
    allowed = {0b000011, 0b001100, 0b000101, 0b110000}
    got = search_closest(range(6), 2, lambda m: m in allowed, lambda inc, a: True, dist, numa.closest)
    assert got == 0b000011
    got = search_closest(range(6), 2, lambda m: m in allowed - {0b000011}, lambda inc, a: True, dist, numa.closest)
    assert got == 0b001100


def test_policy_none_and_unknown_policy() -> None:
    numa = NUMAInfo.create([0, 1])
    assert policy_merge([{"cpu": [TopologyHint(1, True)]}], numa, "none").hint == TopologyHint(None, False)
    with pytest.raises(ConfigError, match='unknown policy: "strict"'):
        policy_merge([], numa, "strict")


def test_single_numa_node_uses_single_node_preferred_members() -> None:
    numa = NUMAInfo.create([0, 1, 2])
    fam = ImplicitHints(top=0b111, up_pass=lambda m: bool(m & 0b110), is_preferred=lambda m: m.bit_count() == 1,
                        min_count=1)
    got = policy_merge([{"cpu": fam}], numa, "single-numa-node")
    explicit = [{"cpu": [TopologyHint(m, m.bit_count() == 1) for m in iterate_bitmasks([0, 1, 2]) if m & 0b110]}]
    assert (got.hint, got.admit) == ref_policy_merge("single-numa-node", explicit, numa, False)
    assert got.hint == TopologyHint(0b010, True)


def test_an_implicit_list_without_members_reads_as_cannot_satisfy() -> None:
    numa = NUMAInfo.create([0, 1])
    empty = ImplicitHints(top=0b11, up_pass=lambda m: False, is_preferred=lambda m: True, min_count=1)
    got = policy_merge([{"cpu": empty}], numa, "restricted")
    assert (got.hint, got.admit) == ref_policy_merge("restricted", [{"cpu": []}], numa, False)


def test_the_record_summarises_implicit_lists_without_listing_them() -> None:
    numa = NUMAInfo.create([0, 1, 2])
    fam = ImplicitHints(top=0b111, up_pass=lambda m: True, is_preferred=lambda m: m.bit_count() == 1, min_count=1,
                        pref_sizes=frozenset({1}), extras=(TopologyHint(0b1000, False),), label="cpu")
    got = policy_merge([{"cpu": fam}, None], numa, "best-effort")
    assert [(f.provider, f.resource, f.hints) for f in got.lists] == [(0, "cpu", fam), (1, None, (DONT_CARE,))]
    assert provider_answer_to_json({"cpu": fam}) == {"cpu": {
        "implicit": True, "label": "cpu", "nodes": [0, 1, 2], "narrowest_count": 1, "preferred_counts": [1],
        "listed": [{"mask": [3], "preferred": False}]}}
    assert got.hint == TopologyHint(0b001, True)


def _free_cpu_list(free: dict[int, int], request: int, top: int, calls: list[int]) -> ImplicitHints:
    """A CPU-like implicit list: a mask passes when its free capacity covers the request (never preferred,
    so the merge takes the non-preferred path); `calls` counts the predicate's evaluations."""
    sums = NodeSums(free)

    def up_pass(m: int) -> bool:
        calls.append(m)
        return sums.sum(m) >= request

    def up_bound(inc: int, allowed: int, size: int) -> bool:
        return sums.topk(allowed, size) >= request

    narrowest = next(k for k in range(1, len(free) + 1) if sums.topk(top, k) >= request)
    return ImplicitHints(top=top, up_pass=up_pass, is_preferred=lambda m: False, min_count=narrowest,
                         up_bound=up_bound)


def test_a_sole_implicit_list_beside_nil_hints_merges_as_the_reference_does() -> None:
    # Every other list says "no preference" (a nil hint): R is the implicit list's own upward part, and
    # its bound cuts the non-preferred search without changing the winner.
    for n, free, request in [(5, {0: 1, 1: 3, 2: 0, 3: 2, 4: 4}, 6), (6, {0: 2, 1: 2, 2: 2, 3: 0, 4: 1, 5: 5}, 7),
                             (4, {0: 1, 1: 1, 2: 1, 3: 1}, 3)]:
        numa = NUMAInfo.create(list(range(n)))
        fam = _free_cpu_list(free, request, (1 << n) - 1, [])
        explicit = [TopologyHint(m, False) for m in iterate_bitmasks(list(range(n))) if fam.in_up(m)]
        nil = (TopologyHint(None, True),)
        want = ref_merge_lists([list(nil), explicit], numa, False)
        assert ImplicitMerger([nil, fam], numa, False).merge() == want


def test_a_nearly_full_64_node_machine_merges_without_walking_every_mask() -> None:
    # 21 pods of 40 CPUs left 8 CPUs free on one node of each 3-node group and node 63 whole: the narrowest
    # mask holding 40 CPUs has 4 nodes and includes node 63, numerically after the 595,665 four-node masks
    # without it; the other list's only hint is a non-preferred nil (no NUMA preference, not preferred). Before,
    # each of those masks was tested (minutes for one admission); the CPU list's bound cuts them.
    free = {n: (8 if n % 3 == 2 else 0) for n in range(63)} | {63: 16}
    calls: list[int] = []
    numa = NUMAInfo.create(list(range(64)))
    fam = _free_cpu_list(free, 40, (1 << 64) - 1, calls)
    got = ImplicitMerger([(TopologyHint(None, False),), fam], numa, False).merge()
    assert got == TopologyHint(mask_of((2, 5, 8, 63)), False)
    assert len(calls) < 5_000


def _sum_list(free: dict[int, int], request: int, top: int) -> ImplicitHints:
    """A provider-like implicit list: a mask passes when its free capacity covers the request, and the
    narrowest masks are preferred (upstream's minAffinitySize rule)."""
    sums = NodeSums(free)
    narrowest = next((k for k in range(1, len(free) + 1) if sums.topk(top, k) >= request), len(free))
    return ImplicitHints(top=top, up_pass=lambda m: sums.sum(m) >= request,
                         is_preferred=lambda m: m.bit_count() == narrowest, min_count=narrowest,
                         pref_sizes=frozenset({narrowest}),
                         up_bound=lambda inc, allowed, size: sums.topk(allowed, size) >= request, label="cpu")


def test_constraining_lists_on_small_machines_merge_as_the_reference_far_below_the_work_bound() -> None:
    # Two or three lists constrain the merge (no per-list bound is sound for their intersections): the
    # answer is the reference's, and the work counted is a tiny part of the bound, so at 8 NUMA nodes or
    # fewer the bound never decides.
    import random

    rng = random.Random(7)
    most = 0
    for n, lists in [(8, 2)] * 25 + [(5, 3)] * 15:
        numa = NUMAInfo.create(list(range(n)))
        fams = []
        for _ in range(lists):
            free = {x: rng.choice((0, 0, 1, 2, 3)) for x in range(n)}
            if not any(free.values()):
                free[rng.randrange(n)] = 1
            fams.append(_sum_list(free, rng.randint(1, sum(free.values())), (1 << n) - 1))
        explicit = [[TopologyHint(m, f.is_preferred(m)) for m in iterate_bitmasks(list(range(n))) if f.in_up(m)]
                    for f in fams]
        merger = ImplicitMerger(fams, numa, False)
        assert merger.merge() == ref_merge_lists(explicit, numa, False)
        most = max(most, merger.work)
    assert most < MERGE_WORK_BOUND // 1000


def test_two_lists_needing_the_same_nodes_stop_at_the_work_bound_with_one_line() -> None:
    # CPUs and memory free only on the same 40 of 64 nodes, each request needing about half of them: no
    # 21-node mask is preferred in both lists, and proving that a mask without free capacity is no
    # intersection of the two lists tries ~C(40, 20) shares of the other nodes. Before the bound one
    # admission ran without end; now it stops at the bound, naming it, the lists and the fix.
    free = {n: (1 if n >= 24 else 0) for n in range(64)}
    numa = NUMAInfo.create(list(range(64)))
    merger = ImplicitMerger([_sum_list(free, 20, (1 << 64) - 1), _sum_list(free, 21, (1 << 64) - 1)], numa, False,
                            work_bound=20_000)
    with pytest.raises(InvalidInputError) as e:
        merger.merge()
    assert str(e.value).startswith("Topology Manager merge over 64 NUMA nodes: no preferred placement, and ranking "
                                   "the intersections of 2 constraining hint lists (cpu, cpu) stopped at numalign's "
                                   "work bound (20,000 steps;")
    assert "; fix: topologyManagerPolicy single-numa-node" in str(e.value)
    assert "\n" not in str(e.value)
    assert merger.work == 20_001
