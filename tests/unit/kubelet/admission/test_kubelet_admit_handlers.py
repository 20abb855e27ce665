"""The kubelet's admit handlers around the Topology Manager: the eviction manager's (node conditions)
before it, the predicate handler's resource fit and pods limit after it, with the kubelet's reasons
and messages."""

from __future__ import annotations

from typing import Any

import pytest
from support.configs import static_node_config
from support.machines import gpu_node

from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_flags import apply_flags
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.kubelet.admission.eviction import NodeCondition, eviction_admit
from numalign.kubelet.admission.predicate import insufficient_resources, requested_by
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.node import Node


def pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Pod:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": res}]}}, name)


def test_600_burstable_pods_of_500m_stop_at_out_of_cpu_on_224_cpus() -> None:
    # reservedSystemCPUs 0 (one CPU) plus memory reservations: 223 CPUs allocatable, 446 pods of 500m.
    config = apply_flags(static_node_config(reserved="0"), [("max-pods", "1000")])
    node = Node(gpu_node(), config)
    answers = [node.admit(pod(f"web-{i}", {"cpu": "500m", "memory": "256Mi"})).result for i in range(600)]
    assert sum(a.admit for a in answers) == 446
    first = next(a for a in answers if not a.admit)
    assert first.reason == "OutOfcpu"
    assert first.message == "Node didn't have enough resource: cpu, requested: 500, used: 223000, capacity: 223000"
    assert all(a.reason == "OutOfcpu" for a in answers[446:])


def test_kube_and_system_reserved_cpu_count_without_reserved_cpus() -> None:
    config = apply_flags(KubeletConfig(), [("kube-reserved", "cpu=1500m"), ("system-reserved", "cpu=500m")])
    node = Node(gpu_node(), config)
    assert node.admit(pod("big", {"cpu": "222"})).result.admit
    assert node.admit(pod("one-more", {"cpu": "1m"})).result.message == (
        "Node didn't have enough resource: cpu, requested: 1, used: 222000, capacity: 222000")


def test_max_pods_gives_out_of_pods_first() -> None:
    node = Node(gpu_node(), apply_flags(KubeletConfig(), [("max-pods", "3")]))
    for i in range(3):
        assert node.admit(pod(f"p{i}")).result.admit
    r = node.admit(pod("p3", {"cpu": "300"})).result   # also OutOfcpu: the pods limit is checked first
    assert (r.reason, r.message) == ("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, "
                                                  "capacity: 3")


def test_pods_per_core_caps_max_pods() -> None:
    config = config_from_yaml(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\npodsPerCore: 1\nmaxPods: 500")
    node = Node(gpu_node(), config)
    assert node.handlers.allocatable(node.devices.healthy)["pods"] == 224


def test_extended_resource_and_hugepages_out_of() -> None:
    # Topology Manager none: the device manager still allocates; the predicate counts requests.
    node = Node(gpu_node(), KubeletConfig())
    assert node.admit(pod("g", limits={"nvidia.com/gpu": "8"})).result.admit
    r = node.admit(pod("h", limits={"hugepages-1Gi": "65Gi", "memory": "1Gi", "cpu": "1"})).result
    assert r.reason == "OutOfhugepages-1Gi"
    assert r.message == ("Node didn't have enough resource: hugepages-1Gi, requested: 69793218560, used: 0, "
                         "capacity: 68719476736")
    # Requests of extended resources no plugin reports are dropped before the fit check.
    assert node.admit(pod("x", limits={"example.com/fpga": "1"})).result.admit


def test_extended_resource_failure_reason_names_the_resource() -> None:
    failures = insufficient_resources({"nvidia.com/gpu": 2, "cpu": 100}, {"nvidia.com/gpu": 1, "cpu": 1000, "pods": 9},
                                      {}, 0)
    assert [(f.reason, f.message) for f in failures] == [
        ("OutOfnvidia.com/gpu", "Node didn't have enough resource: nvidia.com/gpu, requested: 2, used: 0, capacity: 1")]


def test_topology_manager_decides_before_the_resource_fit() -> None:
    node = Node(gpu_node(), apply_flags(static_node_config(), [("max-pods", "1")]))
    assert node.admit(pod("a", limits={"cpu": "1", "memory": "1Gi"})).result.admit
    # Cannot fit on one NUMA node AND beyond the pods limit: the Topology Manager's answer comes first.
    r = node.admit(pod("b", limits={"cpu": "60", "memory": "1Gi"})).result
    assert r.reason == "TopologyAffinityError"
    # Aligned but beyond the pods limit: OutOfpods, and the CPUs it was given are released.
    assert isinstance(node.cpu, StaticPolicy)
    free = len(node.cpu.get_available_cpus())
    assert node.admit(pod("c", limits={"cpu": "4", "memory": "1Gi"})).result.reason == "OutOfpods"
    assert len(node.cpu.get_available_cpus()) == free
    assert "c" not in node.pods


@pytest.mark.parametrize(
    ("conditions", "qos_pods", "admitted"),
    [
        ((NodeCondition.MEMORY_PRESSURE,), ["besteffort", "burstable", "guaranteed"], [False, True, True]),
        ((NodeCondition.DISK_PRESSURE,), ["besteffort", "burstable", "guaranteed"], [False, False, False]),
        ((NodeCondition.MEMORY_PRESSURE, NodeCondition.PID_PRESSURE), ["guaranteed"], [False]),
        ((), ["besteffort"], [True]),
    ],
)
def test_eviction_manager_admission(conditions: tuple[NodeCondition, ...], qos_pods: list[str],
                                    admitted: list[bool]) -> None:
    shapes = {"besteffort": pod("be"), "burstable": pod("bu", {"cpu": "1"}),
              "guaranteed": pod("gu", limits={"cpu": "1", "memory": "1Gi"})}
    results = [eviction_admit(shapes[q], conditions) for q in qos_pods]
    assert [r.admit for r in results] == admitted
    for r in results:
        if not r.admit:
            assert r.reason == "Evicted"
            assert r.message == f"The node had condition: [{' '.join(c.value for c in conditions)}]. "


def test_node_condition_rejects_before_the_topology_manager() -> None:
    node = Node(gpu_node(), static_node_config(), node_conditions=[NodeCondition.DISK_PRESSURE])
    rec = node.admit(pod("g", limits={"cpu": "2", "memory": "1Gi"}))
    assert (rec.result.reason, rec.decisions) == ("Evicted", ())
    assert node.metrics.value("kubelet_admission_rejections_total", reason="Evicted") == 1


def test_node_condition_parse() -> None:
    assert NodeCondition.parse("memorypressure") is NodeCondition.MEMORY_PRESSURE
    with pytest.raises(ValueError, match="expected one of MemoryPressure, DiskPressure, PIDPressure"):
        NodeCondition.parse("Hot")


def test_the_requests_sum_of_a_long_running_node_keeps_to_the_pods_it_holds() -> None:
    # An agent admits and removes pods for weeks: removed pods' requests must not pile up.
    node = Node(gpu_node(), KubeletConfig())
    node.admit(pod("stays", {"cpu": "1"}))
    for i in range(200):  # each admitted while the one before is held, so each is once among the others
        assert node.admit(pod(f"churn-{i}", {"cpu": "1"})).result.admit
        if i:
            node.remove(f"churn-{i - 1}")
    node.remove("churn-199")
    assert len(node.handlers.counted_pods) == 2  # of the 201 pods that came and went, those held at the last admission
    r = node.admit(pod("late", {"cpu": "1000"})).result  # the pod still held is still counted
    assert r.message == "Node didn't have enough resource: cpu, requested: 1000000, used: 1000, capacity: 224000"


def test_the_running_sum_of_requests_is_the_sum_over_the_pods_held() -> None:
    # Kept from one admission to the next (pods added and removed in any order, a uid reused by another
    # pod); it must equal requested_by over the pods held, with no zero entries left behind.
    node = Node(gpu_node(), KubeletConfig())
    shapes = [{"cpu": "1"}, {"cpu": "500m", "memory": "1Gi"}, {"memory": "3Gi"}, {}]
    for i in range(24):
        name = f"p{i % 7}"
        if any(p.name == name for p in node.pods.values()):
            node.remove(next(uid for uid, p in node.pods.items() if p.name == name))
        assert node.admit(pod(name, shapes[i % len(shapes)])).result.admit
        others = list(node.pods.values())
        assert node.handlers.requested({p.uid: p for p in others}) == requested_by(
            node.handlers.requests_of(others))
