"""Preview inplace-resize-exclusive-cpus (KEP-5554, k/k PR #140629): a resize of a container's exclusive
CPUs on a node, as the static policy with InPlacePodVerticalScalingExclusiveCPUs would do it.

Machine: 1 socket, 2 NUMA nodes x 4 cores x 2 threads (node 0 = CPUs 0-3,8-11, node 1 = 4-7,12-15), one
GPU per NUMA node, CPU 0 reserved (reservedSystemCPUs)."""

from __future__ import annotations

from typing import Any

import pytest

from numalign.adapters.sysfs import load_machine
from numalign.errors import InvalidInputError
from numalign.k8s.kubeletconfig_read import config_from_dict
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.k8s.previews import INPLACE_RESIZE_EXCLUSIVE_CPUS, NO_PREVIEWS, Previews
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.node import Node
from numalign.kubelet.previews.inplace_resize import ResizeResult, resize_container

MACHINE = "1s x 2n x 4c x 2t, 8Gi/node, nvidia.com/gpu=1/node"
NODE0 = frozenset({0, 1, 2, 3, 8, 9, 10, 11})
NODE1 = frozenset({4, 5, 6, 7, 12, 13, 14, 15})
ON = Previews.parse([INPLACE_RESIZE_EXCLUSIVE_CPUS])


def _config(policy: str = "single-numa-node", **fields: Any) -> Any:
    return config_from_dict({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                             "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                             "topologyManagerPolicy": policy, **fields}, "test")


def _pod(name: str, cpus: str, extra: dict[str, str] | None = None) -> Pod:
    limits = {"cpu": cpus, "memory": "256Mi", **(extra or {})}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}, name)


def _node(policy: str = "single-numa-node", previews: Previews = ON, **fields: Any) -> Node:
    return Node(load_machine(MACHINE), _config(policy, **fields), previews=previews)


def _static(node: Node) -> StaticPolicy:
    assert isinstance(node.cpu, StaticPolicy)
    return node.cpu


def _cpus(node: Node, pod: Pod) -> frozenset[int]:
    return frozenset(node.allocation(pod.uid, "c").cpus)


def _admitted(node: Node, pod: Pod) -> Pod:
    assert node.admit(pod).result.admit
    return pod


def _resize(node: Node, pod: Pod, cpus: str) -> ResizeResult:
    return resize_container(node, node.pods[pod.uid], "c", cpus)


def test_a_grow_keeps_the_baseline_and_adds_cpus_on_the_containers_numa_node() -> None:
    node = _node()
    pod = _admitted(node, _pod("web", "2"))
    baseline = _cpus(node, pod)
    assert baseline <= NODE0
    out = _resize(node, pod, "4")
    assert out.resized and out.affinity == [0] and out.numa_nodes == [0]
    after = _cpus(node, pod)
    assert len(after) == 4 and baseline < after <= NODE0
    assert set(out.baseline) == baseline and _static(node).state.baselines == {pod.uid: {"c": baseline}}
    # the added CPUs left the shared pool; the reserved CPU 0 was never taken
    assert not after & _static(node).get_default_cpu_set() and 0 not in after
    # a second grow is a superset of the first (baseline < resized_1 < resized_2)
    assert _resize(node, pod, "6").resized
    assert after < _cpus(node, pod) <= NODE0
    # the pod as the node keeps it now asks for 6 CPUs, so its hints are regenerated for 6
    assert str(node.pods[pod.uid].containers[0].limits["cpu"]) == "6"


def test_a_shrink_returns_towards_the_baseline_and_never_below() -> None:
    node = _node()
    pod = _admitted(node, _pod("web", "2"))
    baseline = _cpus(node, pod)
    assert _resize(node, pod, "5").resized
    grown = _cpus(node, pod)
    out = _resize(node, pod, "3")
    assert out.resized and baseline < _cpus(node, pod) < grown
    assert set(out.before) - set(out.after) <= _static(node).get_default_cpu_set()  # released to the shared pool
    assert _resize(node, pod, "2").resized and _cpus(node, pod) == baseline
    below = _resize(node, pod, "1")
    assert not below.resized and below.reason == "prohibitedCPUAllocationError"
    assert below.message == (
        "prohibitedCPUAllocation Error: Skip resize, Not allowed to reduce container exclusively allocated pool "
        "below promised, (requested CPUs = 1, allocated CPUs = 2, promised CPUs = 2, guaranteed CPUs = 1)")
    assert _cpus(node, pod) == baseline


def test_a_grow_the_numa_node_cannot_hold_is_refused_with_the_reason_and_changes_nothing() -> None:
    node = _node()
    pod = _admitted(node, _pod("web", "2"))
    before, shared = _cpus(node, pod), _static(node).get_default_cpu_set()
    # node 0 has 7 allocatable CPUs (CPU 0 is reserved): 8 would need node 1 too, single-numa-node says no
    out = _resize(node, pod, "8")
    assert not out.resized and out.reason == "TopologyAffinityError"
    assert out.message.startswith("Resources cannot be allocated with Topology locality")
    assert _cpus(node, pod) == before and _static(node).get_default_cpu_set() == shared
    assert _static(node).state.baselines == {} and str(node.pods[pod.uid].containers[0].limits["cpu"]) == "2"


def test_a_grow_past_the_free_cpus_is_refused_as_upstream_says() -> None:
    node = _node("none")
    pod = _admitted(node, _pod("web", "2"))
    out = _resize(node, pod, "20")  # 15 allocatable CPUs, 2 of them held already: 13 free, 18 asked
    assert not out.resized and out.reason == "resizeAllocateCPUsError"
    assert out.message == "not enough cpus available to satisfy request: requested=18, available=13"


def test_the_devices_of_the_container_keep_its_cpus_on_their_numa_node() -> None:
    # best-effort admits anything, but the merged affinity follows the GPU the container holds: on node 1,
    # where the lowest-id default would have taken node 0's free CPUs
    node = _node("best-effort")
    _admitted(node, _pod("gpu0", "1", {"nvidia.com/gpu": "1"}))  # node 0's GPU
    pod = _admitted(node, _pod("gpu1", "2", {"nvidia.com/gpu": "1"}))
    devices = node.allocation(pod.uid, "c").devices["nvidia.com/gpu"]
    assert list(devices.values()) == [(1,)]
    held = _cpus(node, pod)
    assert held <= NODE1
    out = _resize(node, pod, "4")
    assert out.resized and out.affinity == [1] and held < _cpus(node, pod) <= NODE1


def test_a_container_in_the_shared_pool_or_a_fraction_is_refused_with_upstreams_text() -> None:
    node = _node("none")
    shared = _admitted(node, _pod("shared", "1500m"))
    out = _resize(node, shared, "2")
    assert not out.resized and out.reason == "inconsistentCPUAllocationError"
    assert "Not allowed to move a container from shared pool to exclusively allocated pool" in out.message
    pod = _admitted(node, _pod("web", "2"))
    out = _resize(node, pod, "2500m")
    assert out.message.startswith("inconsistentCPUAllocation Error: Not allowed to move a container from  "
                                  "exclusively allocated pool to shared pool")
    assert _resize(node, pod, "2").message == ("inconsistentCPUAllocation Error: Skip resize, nothing to be done, "
                                               "(requested CPUs = 2 equal to allocated CPUs = 2)")


def test_without_the_preview_the_resize_is_refused_naming_the_flag() -> None:
    node = _node(previews=NO_PREVIEWS)
    pod = _admitted(node, _pod("web", "2"))
    with pytest.raises(InvalidInputError, match=f"--preview {INPLACE_RESIZE_EXCLUSIVE_CPUS}"):
        _resize(node, pod, "4")
    with pytest.raises(InvalidInputError, match="cpuManagerPolicy is 'none'"):
        resize_container(Node(load_machine(MACHINE), config_from_dict(
            {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}, "t"), previews=ON),
            pod, "c", "4")


def test_the_preview_changes_no_admission() -> None:
    pods = [_pod("a", "3"), _pod("b", "2", {"nvidia.com/gpu": "1"}), _pod("c", "500m"), _pod("d", "6")]
    with_preview, without = _node(previews=ON), _node(previews=NO_PREVIEWS)
    for pod in pods:
        assert with_preview.admit(pod).result == without.admit(pod).result
        assert with_preview.allocation(pod.uid, "c") == without.allocation(pod.uid, "c")
    assert with_preview.cpu.snapshot() == without.cpu.snapshot()


def test_removing_a_resized_pod_drops_its_baseline() -> None:
    node = _node()
    pod = _admitted(node, _pod("web", "2"))
    assert _resize(node, pod, "3").resized and _static(node).state.baselines
    node.remove(pod.uid)
    assert _static(node).state.baselines == {} and _static(node).get_default_cpu_set() == NODE0 | NODE1


def test_a_grow_on_a_machine_past_the_enumeration_bound_is_refused_in_one_line() -> None:
    machine = load_machine("1s x 20n x 2c x 1t, 1Gi/node")
    node = Node(machine, _config("best-effort", topologyManagerPolicyOptions={"max-allowable-numa-nodes": "20"}),
                previews=ON)
    pod = _admitted(node, _pod("web", "2"))
    with pytest.raises(InvalidInputError, match="20 NUMA nodes is not modelled past 16"):
        _resize(node, pod, "3")
    # without a Topology Manager policy no hint is asked for: the grow is allowed at any size
    plain = Node(machine, _config("none"), previews=ON)
    other = _admitted(plain, _pod("web", "2"))
    assert _resize(plain, other, "3").resized
