"""The two dumps without a NUMA node directory, admitted as the kubelet admits on them, at every
kubelet version numalign supports.

- 2ps3-2t: no CPU has a physical_package_id, so cadvisor gives no NUMA node at all and counts the 2
  cpuN directories as NumCores. Discover succeeds with empty CPU details.
- 20s390-2g6s4c: every package id is -1, so cadvisor gives one node, -1, holding all 20 CPUs (memory
  0 on the node; MemoryCapacity from /proc/meminfo).

What the kubelet does (pkg/kubelet/cm, bitmask.NewBitMask refuses bits outside 0-63 and callers
ignore the error):
- policy none never builds a mask (scope admitPolicyNone calls Allocate only): both machines run.
- any other policy on node -1 merges from DefaultAffinityMask() == nil and panics at the first pod;
  on no node it merges from the empty mask: no merged hint counts, so best-effort admits with the
  empty affinity and restricted / single-numa-node reject every pod (TopologyAffinityError).
- the static CPU manager reserves by takeByTopology over the CPU details: on no node there are none
  ("unable to reserve ..."); reservedSystemCPUs cannot name any either (unknown CPU ID).
- the Static memory manager: on no node every reservedMemory entry names a node that does not exist
  (start error); on node -1 the first Guaranteed pod's hints iterate masks over [-1] and panic.
"""

from __future__ import annotations

import pickle

import pytest
from support.dumps import TARBALLS

from numalign.adapters.sysfs import load_machine
from numalign.answer.rejected import Rejected
from numalign.answer.why import explain_rejection
from numalign.core.policies.startup import StartupError
from numalign.errors import ConfigError
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.k8s.version import SUPPORTED, KubeletVersion
from numalign.kubelet.node import Node
from numalign.machine.topology import Machine

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
VERSIONS = list(SUPPORTED)  # every release and patch numalign decides as


def _machine(name: str) -> Machine:
    (tarball,) = [t for t in TARBALLS if t.name.startswith(name + ".")]
    return load_machine(str(tarball))


@pytest.fixture(scope="module")
def no_node() -> Machine:
    return _machine("2ps3-2t")


@pytest.fixture(scope="module")
def node_minus_one() -> Machine:
    return _machine("20s390-2g6s4c")


def _config(topology: str, cpu: str = "none", memory: str = "None", *, reserved_cpus: str = "",
            reserved_memory_node: int | None = None) -> str:
    lines = [
        "apiVersion: kubelet.config.k8s.io/v1beta1",
        "kind: KubeletConfiguration",
        f"topologyManagerPolicy: {topology}",
        f"cpuManagerPolicy: {cpu}",
        f"memoryManagerPolicy: {memory}",
        "kubeReserved: {cpu: '1', memory: 1Gi}",
        "evictionHard: {memory.available: 100Mi}",
    ]
    if reserved_cpus:
        lines.append(f'reservedSystemCPUs: "{reserved_cpus}"')
    if reserved_memory_node is not None:
        lines.append(f"reservedMemory: [{{numaNode: {reserved_memory_node}, limits: {{memory: 1124Mi}}}}]")
    return "\n".join(lines) + "\n"


def _pod(name: str, cpu: str | None, memory: str | None = None) -> Pod:
    resources = {}
    if cpu is not None:
        amounts = {"cpu": cpu, **({"memory": memory} if memory else {})}
        resources = {"requests": amounts, "limits": amounts}
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]},
    })


BEST_EFFORT = ("be", None)
GUARANTEED = ("g2", "2", "100Mi")
BURSTABLE_SHARED = ("half", "500m", "100Mi")


# ---- no NUMA node at all (2ps3-2t) ----------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_no_node_policy_none_admits_what_the_shared_pool_and_capacity_allow(
    no_node: Machine, version: KubeletVersion
) -> None:
    node = Node(no_node, config_from_yaml(_config("none")), kubelet_version=version)
    assert node.admit(_pod(*BEST_EFFORT)).result.admit
    # cpu capacity is cadvisor's NumCores (2) less kubeReserved (1): a whole CPU fits, two do not.
    # (The dump has no /proc/meminfo, so its memory capacity is unknown: these pods ask for none.)
    assert node.admit(_pod("one", "1")).result.admit
    more = _pod("more", "1")
    record = node.admit(more)
    rejected = record.result
    assert not rejected.admit and rejected.reason == "OutOfcpu"
    assert "capacity: 1000" in rejected.message
    # the why names the CPUs the kubelet counts, not the none it could place
    why = explain_rejection(node, Rejected(node, more, record))
    assert any("(2 CPUs less reservedSystemCPUs" in line for line in why)


@pytest.mark.parametrize("policy", ["restricted", "single-numa-node"])
@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_no_node_restricted_policies_reject_every_pod(no_node: Machine, policy: str, version: KubeletVersion) -> None:
    # The merge starts from the empty default mask; no merged hint has a node, so the best hint is
    # {empty, not preferred}: these policies admit only preferred hints, a BestEffort pod's included.
    node = Node(no_node, config_from_yaml(_config(policy)), kubelet_version=version)
    for pod in (_pod(*BEST_EFFORT), _pod(*BURSTABLE_SHARED)):
        result = node.admit(pod).result
        assert not result.admit
        assert result.reason == "TopologyAffinityError"
        assert result.message == "Resources cannot be allocated with Topology locality"


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_no_node_best_effort_admits_with_the_empty_affinity(no_node: Machine, version: KubeletVersion) -> None:
    node = Node(no_node, config_from_yaml(_config("best-effort")), kubelet_version=version)
    record = node.admit(_pod(*BEST_EFFORT))
    assert record.result.admit
    assert [str(d.merged) for d in record.decisions] == ["{}"]


@pytest.mark.parametrize("policy", POLICIES)
def test_no_node_static_cpu_manager_cannot_reserve(no_node: Machine, policy: str) -> None:
    reserve = r"unable to reserve the required amount of CPUs \(size of  did not equal 1\)"
    with pytest.raises(ConfigError, match=reserve):
        Node(no_node, config_from_yaml(_config(policy, "static")))
    with pytest.raises(ConfigError, match="unknown CPU ID: 0"):
        Node(no_node, config_from_yaml(_config(policy, "static", reserved_cpus="0")))


@pytest.mark.parametrize("policy", POLICIES)
def test_no_node_static_memory_manager_has_no_node_to_reserve_on(no_node: Machine, policy: str) -> None:
    with pytest.raises(ConfigError, match="references a NUMA node 0 that does not exist on this machine"):
        Node(no_node, config_from_yaml(_config(policy, memory="Static", reserved_memory_node=0)))


# ---- node -1 (20s390-2g6s4c) ------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS, ids=str)
@pytest.mark.parametrize("cpu", ["none", "static"])
def test_node_minus_one_policy_none_runs(node_minus_one: Machine, cpu: str, version: KubeletVersion) -> None:
    node = Node(node_minus_one, config_from_yaml(_config("none", cpu)), kubelet_version=version)
    assert node.admit(_pod(*BEST_EFFORT)).result.admit
    record = node.admit(_pod(*GUARANTEED))
    assert record.result.admit, record.result
    given = node.allocation("uid-g2", "c")
    if cpu == "static":
        # takeByTopology over node -1 (socket -1, cores of 1 to 7 threads, 3 CPUs per core on average):
        # fewer CPUs than a core, so the best-fitting core: 13+14, exactly two threads.
        assert given.exclusive and list(given.cpus) == [13, 14]
        assert not set(given.cpus) & node.cpu.reserved_cpus
    else:
        assert not given.exclusive and len(given.cpus) == 20


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
@pytest.mark.parametrize("cpu", ["none", "static"])
def test_node_minus_one_other_policies_are_refused_as_the_kubelet_panics(
    node_minus_one: Machine, policy: str, cpu: str
) -> None:
    with pytest.raises(StartupError) as caught:
        Node(node_minus_one, config_from_yaml(_config(policy, cpu)))
    assert "then panics at its first pod admission" in caught.value.kubelet_message
    assert f"topology manager policy {policy}" in caught.value.kubelet_message
    assert "--topology-manager-policy none" in caught.value.fix


def test_node_minus_one_static_memory_manager_is_refused_as_the_kubelet_panics(node_minus_one: Machine) -> None:
    with pytest.raises(StartupError) as caught:
        Node(node_minus_one, config_from_yaml(_config("none", memory="Static", reserved_memory_node=-1)))
    assert "first Guaranteed pod" in caught.value.kubelet_message
    assert "--memory-manager-policy None" in caught.value.fix


def test_node_minus_one_kubelet_start_errors_come_before_the_panic(node_minus_one: Machine) -> None:
    # reservedMemory on a node the machine lacks fails NewManager: the kubelet never starts.
    with pytest.raises(ConfigError, match="references a NUMA node 0 that does not exist") as caught:
        Node(node_minus_one, config_from_yaml(_config("best-effort", memory="Static", reserved_memory_node=0)))
    assert not isinstance(caught.value, StartupError)


def test_the_refusal_survives_a_process_boundary(node_minus_one: Machine) -> None:
    # simulate builds nodes in worker processes: the error is pickled back whole, not a broken pool.
    with pytest.raises(StartupError) as caught:
        Node(node_minus_one, config_from_yaml(_config("restricted")))
    again = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(again, StartupError) and str(again) == str(caught.value) and again.fix == caught.value.fix


def test_node_minus_one_static_memory_without_a_memory_reservation_gets_the_kubelets_error(
    node_minus_one: Machine,
) -> None:
    # Nothing reserved: NewPolicyStatic refuses to start before any admission could panic.
    config = config_from_yaml(_config("none", memory="Static").replace(
        "evictionHard: {memory.available: 100Mi}", "evictionHard: {nodefs.available: 10%}").replace(
        "kubeReserved: {cpu: '1', memory: 1Gi}", "kubeReserved: {cpu: '1'}"))
    with pytest.raises(ConfigError, match="you should specify the system reserved memory") as caught:
        Node(node_minus_one, config)
    assert not isinstance(caught.value, StartupError)
