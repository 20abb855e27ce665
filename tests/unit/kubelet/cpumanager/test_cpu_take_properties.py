"""Properties of allocateCPUs / takeByTopology over random regular machines and free sets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import regular_cpu_topologies

from numalign.errors import AllocationError
from numalign.kubelet.cpumanager.take import TakeOptions, aligned_cpus, allocate_cpus
from numalign.kubelet.cpumanager.topology import CPUTopology

OPTION_SETS = [
    TakeOptions(),
    TakeOptions(full_pcpus_only=True),
    TakeOptions(distribute_cpus_across_numa=True),
    TakeOptions(distribute_cpus_across_numa=True, full_pcpus_only=True),
    TakeOptions(distribute_cpus_across_cores=True),
    TakeOptions(prefer_align_cpus_by_uncorecache=True),
    TakeOptions(align_by_socket=True),
]


@settings(max_examples=150)
@given(regular_cpu_topologies(), st.data())
def test_allocate_gives_exactly_n_allocatable_cpus(topo: CPUTopology, data: st.DataObject) -> None:
    all_cpus = sorted(topo.details.cpus())
    free = frozenset(data.draw(st.sets(st.sampled_from(all_cpus))))
    n = data.draw(st.integers(1, len(all_cpus)))
    options = data.draw(st.sampled_from(OPTION_SETS))
    nodes = sorted(topo.details.numa_nodes())
    affinity_nodes = data.draw(st.none() | st.sets(st.sampled_from(nodes), min_size=1))
    mask = None if affinity_nodes is None else sum(1 << i for i in affinity_nodes)
    if n > len(free):
        try:
            allocate_cpus(topo, n, mask, free, (), options)
        except AllocationError as e:
            assert "not enough cpus available to satisfy request" in str(e)
            return
        raise AssertionError("expected a not-enough-CPUs error")
    got = allocate_cpus(topo, n, mask, free, (), options)
    assert len(got) == n
    assert got <= free
    if mask is not None:
        aligned = aligned_cpus(topo, mask, free, options.align_by_socket)
        # Aligned CPUs are taken first: the result holds min(n, |aligned|) of them.
        assert len(got & aligned) == min(n, len(aligned))


def test_take_options_equality_and_hash_read_every_field() -> None:
    # TakeOptions writes its __eq__ and __hash__ out (allocate_cpus_kept's memo key): each field must
    # count, or two option sets that take differently would share memoised answers.
    import dataclasses

    base = TakeOptions()
    names = [f.name for f in dataclasses.fields(TakeOptions)]
    assert len(base.fields()) == len(names)
    assert base == TakeOptions() and hash(base) == hash(TakeOptions())
    for name in names:
        other = dataclasses.replace(base, **{name: not getattr(base, name)})
        assert other != base, name
        assert other.fields() == tuple(getattr(other, n) for n in names)
        assert {other: 1}.get(dataclasses.replace(base, **{name: not getattr(base, name)})) == 1
    assert base != "not options"
