"""Implicit provider hints equal the exhaustive generators, and merging them decides as upstream.

For every mask of random machines (up to 10 NUMA nodes, non-contiguous ids) the implicit family
holds exactly the exhaustive generator's (mask, preferred) pairs and the same narrowest count; and
merging CPU + device + memory (+ an explicit list) answers decides exactly like the policies over
the exhaustive lists.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from support.reference_merge import policy_merge
from support.strategies import (
    CPUCase,
    DeviceCase,
    HintScenario,
    MemoryCase,
    cpu_cases,
    device_cases,
    hint_scenarios,
    memory_cases,
)

from numalign.core.bitmask import iterate_bitmasks
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints
from numalign.core.policies import PolicyOptions, make_policy
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.implicit_hints import cpu_topology_hints
from numalign.kubelet.devicemanager.hints import generate_device_topology_hints
from numalign.kubelet.devicemanager.implicit_hints import device_topology_hints
from numalign.kubelet.memorymanager.hints import calculate_hints, find_best_hint
from numalign.kubelet.memorymanager.implicit_hints import best_member_hint, memory_topology_hints
from numalign.kubelet.topologymanager.provider import ListOrImplicit


def pairs(src: ListOrImplicit, nodes: Sequence[int]) -> set[tuple[int | None, bool]]:
    if isinstance(src, list):
        return {(h.mask, h.preferred) for h in src}
    out = {(m, src.is_preferred(m)) for m in iterate_bitmasks(sorted(nodes)) if src.in_up(m)}
    return out | {(h.mask, h.preferred) for h in src.extras}


def check_family(src: ListOrImplicit, expected: list[TopologyHint], nodes: Sequence[int]) -> None:
    assert pairs(src, nodes) == {(h.mask, h.preferred) for h in expected}
    if isinstance(src, ImplicitHints):
        assert expected, "an implicit list is never empty"
        assert src.min_count == min(h.mask.bit_count() for h in expected if h.mask is not None)
        assert src.materialize is not None and src.materialize() == expected


@settings(max_examples=150)
@given(cpu_cases(max_nodes=10))
def test_cpu_family_equals_exhaustive(c: CPUCase) -> None:
    expected = generate_cpu_topology_hints(c.topo, c.available, c.reusable, c.request, c.align_by_socket)
    got = cpu_topology_hints(c.topo, c.available, c.reusable, c.request, c.align_by_socket)
    check_family(got, expected, sorted(c.topo.details.numa_nodes()))


@settings(max_examples=150)
@given(device_cases(max_nodes=10))
def test_device_family_equals_exhaustive(c: DeviceCase) -> None:
    expected = generate_device_topology_hints(c.nodes, c.devices, c.available, c.reusable, c.request)
    got = device_topology_hints(c.nodes, c.devices, c.available, c.reusable, c.request)
    check_family(got, expected, c.nodes)


@settings(max_examples=150)
@given(memory_cases(max_nodes=9))
def test_memory_family_equals_exhaustive(c: MemoryCase) -> None:
    expected = calculate_hints(c.state, c.requested, c.reusable)
    got = memory_topology_hints(c.state, c.requested, c.reusable)
    assert sorted(got) == sorted(expected)  # {} exactly when nothing passes
    for r, hints in expected.items():
        check_family(got[r], hints, sorted(c.state))


def check_admission(s: HintScenario) -> None:
    fast, slow, numa, policy, closest = s
    want = make_policy(policy, numa, PolicyOptions(prefer_closest_numa=closest)).merge(slow)
    got = policy_merge(fast, numa, policy, closest)
    assert (got.hint, got.admit) == (want.hint, want.admit)
    assert got.best_non_preferred_affinity_count == want.best_non_preferred_affinity_count


@settings(max_examples=150)
@given(hint_scenarios(max_nodes=7))
def test_merge_of_implicit_provider_hints_equals_exhaustive(s: HintScenario) -> None:
    check_admission(s)


@settings(max_examples=25)
@given(hint_scenarios(max_nodes=10))
def test_merge_up_to_ten_nodes(s: HintScenario) -> None:
    check_admission(s)


@settings(max_examples=150)
@given(memory_cases(max_nodes=8), st.data())
def test_best_member_hint_equals_find_best_hint(c: MemoryCase, data: st.DataObject) -> None:
    nodes = sorted(c.state)
    containing = 0
    for n in data.draw(st.sets(st.sampled_from(nodes), max_size=3)):
        containing |= 1 << n
    expected = calculate_hints(c.state, c.requested, c.reusable)
    got = memory_topology_hints(c.state, c.requested, c.reusable)
    for r, hints in expected.items():
        want = find_best_hint(h for h in hints if h.mask is not None and h.mask & containing == containing)
        assert best_member_hint(got[r], containing) == want
