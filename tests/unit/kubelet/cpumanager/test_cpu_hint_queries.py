"""CPUHintQueries answers exactly what the exhaustive generator lists, mask by mask."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import uneven_cpu_topologies

from numalign.errors import InvalidInputError
from numalign.kubelet.cpumanager.hint_queries import CPUHintQueries
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology


@settings(max_examples=200)
@given(uneven_cpu_topologies(), st.data())
def test_hint_queries_equal_exhaustive(topo: CPUTopology, data: st.DataObject) -> None:
    cpus = sorted(topo.details.cpus())
    avail = data.draw(st.sets(st.sampled_from(cpus)))
    reusable = data.draw(st.sets(st.sampled_from(cpus), max_size=2)) - avail
    request = data.draw(st.integers(1, len(cpus) + 2))
    align = data.draw(st.booleans())
    exhaustive = generate_cpu_topology_hints(topo, avail, reusable, request, align)
    space = CPUHintQueries(topo, avail, reusable, request, align)
    assert list(space.iter_hints()) == exhaustive
    by_mask = {h.mask: h for h in exhaustive}
    for mask in range(1, 1 << len(topo.details.numa_nodes())):
        assert space.hint_for(mask) == by_mask.get(mask)
    k = data.draw(st.integers(1, 8))
    assert list(space.iter_hints(k)) == [h for h in exhaustive if (h.mask or 0).bit_count() <= k]


def test_large_machine_queries_without_enumeration() -> None:
    # 64 NUMA nodes x 4 CPUs: 2^64 masks could never be listed; single masks are answered directly.
    topo = CPUTopology.from_cpu_infos(CPUInfo(c, c // 4, c // 32, c, c // 4) for c in range(256))
    space = CPUHintQueries(topo, range(4, 256), (), 4)
    assert space.min_affinity_size == 1
    assert space.hint_for(1) is None  # node 0 has no free CPU
    hint = space.hint_for(1 << 5)
    assert hint is not None and hint.preferred
    wide = space.hint_for((1 << 64) - 1)
    assert wide is not None and not wide.preferred
    assert len(list(space.iter_hints(1))) == 63


def test_exhaustive_generator_refuses_what_it_cannot_finish() -> None:
    topo = CPUTopology.from_cpu_infos(CPUInfo(c, c, 0, c, 0) for c in range(21))
    with pytest.raises(InvalidInputError, match="2\\^21 NUMA masks"):
        generate_cpu_topology_hints(topo, range(21), (), 1)
