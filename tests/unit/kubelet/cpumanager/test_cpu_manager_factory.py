"""new_cpu_manager_policy (NewManager) and CPUTopology.from_machine on the built-in machines."""

from __future__ import annotations

import pytest

from numalign.errors import ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.manager import NonePolicy, new_cpu_manager_policy
from numalign.kubelet.cpumanager.policy import CPUPolicy
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.take import TakeOptions, take_by_topology
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.topologymanager.provider import HintProvider
from numalign.machine.examples import example, example_names


@pytest.mark.parametrize("name", example_names())
def test_from_machine_matches_machine_model(name: str) -> None:
    m = example(name)
    topo = CPUTopology.from_machine(m)
    assert topo.num_cpus == len(m.online_cpus())
    assert topo.num_numa_nodes == len({c.numa_node for c in m.cpu_infos()})
    assert topo.num_sockets == len(m.sockets())
    # Every core id is the lowest thread id of its core, so it names one of its own CPUs.
    for core in topo.details.cores():
        assert core == min(topo.details.cpus_in_cores(core))
    # Packing the whole machine takes everything, and one CPU takes one.
    assert take_by_topology(topo, topo.details.cpus(), 1, TakeOptions()) <= topo.details.cpus()


def test_none_policy() -> None:
    topo = CPUTopology.from_machine(example())
    p = new_cpu_manager_policy("none", topo)
    assert isinstance(p, NonePolicy) and isinstance(p, HintProvider)
    q = {"cpu": Quantity.parse("2"), "memory": Quantity.parse("1Gi")}
    c = Container("c", requests=q, limits=q)
    assert p.get_topology_hints(Pod("p", containers=(c,)), c) is None
    with pytest.raises(ConfigError, match="None policy: cannot create with options"):
        new_cpu_manager_policy("none", topo, policy_options={"full-pcpus-only": "true"})


def test_none_policy_is_a_null_cpu_policy() -> None:
    """Read through CPUPolicy, none answers what a policy that pins nothing would: the machine's
    topology, no option set, nothing allocatable or held, zero counters; static says it pins."""
    topo = CPUTopology.from_machine(example("dual-socket"))
    none: CPUPolicy = new_cpu_manager_policy("none", topo)
    static: CPUPolicy = new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.parse("1"))
    assert (none.pins, static.pins) == (False, True)
    assert none.topology is topo and not none.options.full_pcpus_only and none.reserved_cpus == frozenset()
    assert none.get_allocatable_cpus() == none.get_available_cpus() == frozenset()
    assert none.get_default_cpu_set() == none.snapshot().default_cpu_set == frozenset()
    assert none.allocated_per_numa() == {} and none.snapshot().entries == {}
    assert (none.pinning_requests_total, none.pinning_errors_total) == (0, 0)
    q = {"cpu": Quantity.parse("2"), "memory": Quantity.parse("1Gi")}
    c = Container("c", requests=q, limits=q)
    none.allocate(Pod("p", uid="p", containers=(c,)), c)
    assert none.get_exclusive_cpus("p", "c") == frozenset() and none.cpus_for_container("p", "c") == topo.details.cpus()
    assert none.get_cpu_set("p", "c") is None


def test_unknown_policy() -> None:
    with pytest.raises(ConfigError, match='unknown policy: "dynamic"'):
        new_cpu_manager_policy("dynamic", CPUTopology.from_machine(example()))


def test_static_reservation_rules() -> None:
    topo = CPUTopology.from_machine(example())
    with pytest.raises(ConfigError, match="unable to determine reserved CPU resources"):
        new_cpu_manager_policy("static", topo)
    with pytest.raises(ConfigError, match="greater than zero"):
        new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.parse("0"))
    p = new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.parse("1500m"))
    assert isinstance(p, StaticPolicy) and len(p.reserved_cpus) == 2
    # reservedSystemCPUs wins over kube/system-reserved and sets the count.
    p = new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.parse("8"), reserved_system_cpus={0, 1, 2})
    assert isinstance(p, StaticPolicy) and p.reserved_cpus == {0, 1, 2}
    with pytest.raises(ConfigError, match=r"new static policy error: .*Alpha-level"):
        new_cpu_manager_policy(
            "static", topo, reserved_cpu=Quantity.parse("1"), policy_options={"align-by-socket": "true"}
        )


def test_reserving_more_cpus_than_the_machine_has_says_how_many_fit_and_the_fix() -> None:
    # upstream's words (an empty set: takeByTopology refused the count), then what fits and the fix (review-2 L3)
    topo = CPUTopology.from_machine(example())
    with pytest.raises(ConfigError) as e:
        new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.parse("200"))
    assert str(e.value) == (
        "new static policy error: [cpumanager] unable to reserve the required amount of CPUs (size of  did not "
        f"equal 200); kubeReserved.cpu + systemReserved.cpu (200) round up to 200 CPUs, more than this machine's "
        f"{topo.num_cpus}: reserve at most {topo.num_cpus} (lower kubeReserved or systemReserved cpu), or name the "
        "CPUs to reserve with reservedSystemCPUs")
    # within the machine, or named with reservedSystemCPUs: it starts
    assert isinstance(new_cpu_manager_policy("static", topo, reserved_cpu=Quantity.parse(str(topo.num_cpus))),
                      StaticPolicy)
