"""The static CPU policy's alignment counters as the kubelet exposes them: upstream's staticPolicy.Start
(initializeMetrics) makes kubelet_container_aligned_compute_resources_count{scope=container,
boundary=physical_cpu|uncore_cache} and ..._failure_count{scope=container, boundary=physical_cpu} exist at
zero, and its Allocate counts a physical_cpu alignment (or failure) under full-pcpus-only and an
uncore_cache one when the CPUs it gave share an uncore cache (updateMetricsOnAllocate), every release
1.33-1.37. The conformance admit area compares these counters with the real managers'."""

from __future__ import annotations

import pytest

from numalign import metrics as m
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.examples import example

MACHINE = example("dual-socket")
CONFIG = """
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: {cpu}
{options}
reservedSystemCPUs: "0,64"
topologyManagerPolicy: none
systemReserved: {{memory: 1Gi}}
evictionHard: {{memory.available: 100Mi}}
"""
PHYSICAL_CPU = {"scope": "container", "boundary": "physical_cpu"}
UNCORE_CACHE = {"scope": "container", "boundary": "uncore_cache"}


def node(cpu: str = "static", options: str = "") -> Node:
    return Node(MACHINE, config_from_yaml(CONFIG.format(cpu=cpu, options=options)))


def pod(name: str, cpus: int) -> Pod:
    res = {"cpu": Quantity.from_int(cpus), "memory": Quantity.parse("1Gi")}
    return Pod(name=name, uid=f"uid-{name}", containers=(Container("app", requests=res, limits=res),))


def series(n: Node, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return next(f.values for f in n.metrics.families() if f.name == name)


def test_the_static_policy_makes_its_alignment_series_exist_at_zero() -> None:
    n = node()
    assert series(n, m.ALIGNED_COUNT) == {tuple(sorted(PHYSICAL_CPU.items())): 0.0,
                                          tuple(sorted(UNCORE_CACHE.items())): 0.0}
    assert series(n, m.ALIGNED_FAILURE) == {tuple(sorted(PHYSICAL_CPU.items())): 0.0}
    # the none policy starts no static policy, and the none Topology Manager policy makes no series
    assert series(node("none"), m.ALIGNED_COUNT) == {} and series(node("none"), m.ALIGNED_FAILURE) == {}


def test_full_pcpus_only_counts_each_pinning_as_physical_cpu_aligned_or_failed() -> None:
    n = node(options='cpuManagerPolicyOptions: {"full-pcpus-only": "true"}')
    assert n.admit(pod("whole", 4)).result.admit
    assert n.metrics.value(m.ALIGNED_COUNT, **PHYSICAL_CPU) == 1
    assert not n.admit(pod("odd", 3)).result.admit  # SMTAlignmentError: 3 CPUs on cores of 2 threads
    assert n.metrics.value(m.ALIGNED_FAILURE, **PHYSICAL_CPU) == 1
    assert n.metrics.value(m.CPU_PINNING_REQUESTS) == 2 and n.metrics.value(m.CPU_PINNING_ERRORS) == 1
    # without the option nothing is counted on that boundary
    plain = node()
    assert plain.admit(pod("whole", 4)).result.admit
    assert plain.metrics.value(m.ALIGNED_COUNT, **PHYSICAL_CPU) == 0


def test_an_allocation_within_one_uncore_cache_is_counted_and_a_probe_counts_nothing() -> None:
    n = node()
    probed = n.probe(pod("small", 2))
    assert probed.result.admit and n.metrics.value(m.ALIGNED_COUNT, **UNCORE_CACHE) == 0
    assert n.admit(pod("small", 2)).result.admit
    cpus = n.cpu.get_cpu_set("uid-small", "app")
    assert cpus is not None
    assert n.cpu.topology.check_alignment_uncore(cpus)  # 2 CPUs of one core: one uncore cache
    assert n.metrics.value(m.ALIGNED_COUNT, **UNCORE_CACHE) == 1


def test_a_counter_kept_elsewhere_is_published_as_inc_would_publish_it() -> None:
    # ContainerManager.sync_metrics raises the pinning and alignment series to the providers' plain counts
    # (Metrics.catch_up) and the scopes count alignment by a kept series key (Metrics.inc_series): the
    # values are the ones inc(name, delta, **labels) gives, and a count never goes down.
    by_inc, by_key = m.Metrics(), m.Metrics()
    key = tuple(sorted(UNCORE_CACHE.items()))
    for count in (0, 2, 1, 5):
        delta = count - int(by_inc.value(m.ALIGNED_COUNT, **UNCORE_CACHE))
        if delta > 0:
            by_inc.inc(m.ALIGNED_COUNT, float(delta), **UNCORE_CACHE)
        by_key.catch_up(m.ALIGNED_COUNT, key, count)
        assert by_key.value(m.ALIGNED_COUNT, **UNCORE_CACHE) == by_inc.value(m.ALIGNED_COUNT, **UNCORE_CACHE)
    assert by_key.value(m.ALIGNED_COUNT, **UNCORE_CACHE) == 5.0
    by_key.inc_series(m.ALIGNED_COUNT, key)
    by_inc.inc(m.ALIGNED_COUNT, scope="container", boundary="uncore_cache")
    assert by_key.families() == by_inc.families()
    with pytest.raises(KeyError, match="is not a registered counter"):
        by_key.catch_up(m.TM_ADMISSION_DURATION, (), 1)  # a histogram is not a counter


def test_the_pinning_counters_follow_each_admission_and_removal() -> None:
    n = node()
    for i in range(3):
        assert n.admit(pod(f"g{i}", 2)).result.admit
        n.remove(f"uid-g{i}")
    assert n.metrics.value(m.CPU_PINNING_REQUESTS) == 3.0
    assert n.metrics.value(m.MEM_PINNING_REQUESTS) == 0.0  # memory manager None: no pinning counted
    assert n._tx is None  # every in-memory transaction ended
