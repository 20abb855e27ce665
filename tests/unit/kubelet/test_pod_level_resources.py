"""Pod-level resources (pod.spec.resources; PodLevelResources beta and on by default since 1.34):
QoS comes from the pod-level values only; the static CPU and memory manager policies leave such pods
alone (no hints, no exclusive CPUs, no pinned memory, no pinning counted); devices are still aligned;
with the gate off the kubelet refuses the pod."""

from __future__ import annotations

import pytest
from support.configs import static_node_config, static_node_yaml

from numalign.answer.present.admit import record_text
from numalign.errors import InvalidInputError
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import pod_to_manifest
from numalign.k8s.qos import compute_pod_qos
from numalign.kubelet.node import Node
from numalign.machine.examples import example


def _pod(
    pod_resources: dict[str, object] | None, container_limits: dict[str, str], name: str = "p"
) -> dict[str, object]:
    spec: dict[str, object] = {"containers": [{"name": "c", "resources": {"limits": container_limits}}]}
    if pod_resources is not None:
        spec["resources"] = pod_resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name}, "spec": spec}


@pytest.mark.parametrize(
    ("pod_resources", "container_limits", "qos"),
    [
        # pod-level limits for cpu and memory, requests defaulted from them: Guaranteed, whatever the
        # containers say (here a container with a cpu limit only, which alone would be Burstable)
        ({"limits": {"cpu": "4", "memory": "4Gi"}}, {"cpu": "2"}, "Guaranteed"),
        # pod-level requests only: Burstable even though the container is Guaranteed-shaped
        ({"requests": {"cpu": "1", "memory": "1Gi"}}, {"cpu": "2", "memory": "1Gi"}, "Burstable"),
        # pod-level limit for cpu only: not Guaranteed
        ({"limits": {"cpu": "2"}}, {"cpu": "2", "memory": "1Gi"}, "Burstable"),
    ],
)
def test_qos_comes_from_pod_level_resources(
    pod_resources: dict[str, object], container_limits: dict[str, str], qos: str
) -> None:
    assert compute_pod_qos(pod_from_dict(_pod(pod_resources, container_limits))) == qos


def test_static_cpu_and_memory_policies_leave_pod_level_pods_in_the_shared_pool() -> None:
    node = Node(example("dual-socket"), static_node_config(reserved="0,64"))
    pod = pod_from_dict(_pod({"limits": {"cpu": "4", "memory": "4Gi"}},
                             {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}))
    rec = node.admit(pod)
    assert rec.result.admit, record_text(rec)
    alloc = node.allocation(pod.uid, "c")
    assert not alloc.exclusive and alloc.memory == ()
    assert alloc.devices["nvidia.com/gpu"]  # the device manager still serves and aligns the pod
    by_name = {p.provider: p for p in rec.decisions[0].providers}
    assert by_name["cpu"].hints is None and by_name["memory"].hints is None
    assert node.metrics.value("kubelet_cpu_manager_pinning_requests_total") == 0
    assert node.metrics.value("kubelet_memory_manager_pinning_requests_total") == 0
    # The same container without pod-level resources gets exclusive CPUs and pinned memory.
    plain = pod_from_dict(_pod(None, {"cpu": "2", "memory": "1Gi"}, name="plain"))
    assert node.admit(plain).result.admit
    assert node.allocation(plain.uid, "c").exclusive


def test_with_the_gate_off_the_kubelet_refuses_pod_level_pods() -> None:
    config = config_from_yaml(static_node_yaml(reserved="0,64") + "featureGates: {PodLevelResources: false}\n")
    node = Node(example("dual-socket"), config)
    rec = node.admit(pod_from_dict(_pod({"limits": {"cpu": "4", "memory": "4Gi"}}, {"cpu": "2", "memory": "1Gi"})))
    assert not rec.result.admit
    assert (rec.result.reason, rec.result.message) == (
        "PodLevelResourcesNotSupported", "PodLevelResources feature gate is disabled")
    assert node.pods == {}


def test_pod_level_resources_survive_the_pod_list_round_trip_and_are_validated() -> None:
    pod = pod_from_dict(_pod({"limits": {"cpu": "4", "memory": "4Gi"}}, {"cpu": "2"}))
    assert pod_from_dict(pod_to_manifest(pod)).pod_limits == pod.pod_limits
    with pytest.raises(InvalidInputError, match="not supported at pod level"):
        pod_from_dict(_pod({"limits": {"nvidia.com/gpu": "1"}}, {"cpu": "2"}))


def test_the_resource_fit_counts_pod_level_requests() -> None:
    """PodRequests: a pod-level request replaces the containers' sum for cpu, memory and hugepages (the
    predicate handler's fit, and the requests the pod then holds). Found by the admit conformance area:
    a pod of empty containers with spec.resources cpu 6 was admitted on a node with 3.5 CPUs allocatable."""
    from numalign.k8s.quantity import Quantity
    from numalign.k8s.requests import pod_requests

    pod = pod_from_dict(_pod({"limits": {"cpu": "6", "memory": "1Gi"}}, {"nvidia.com/gpu": "1"}))
    assert pod_requests(pod) == {"cpu": Quantity.parse("6"), "memory": Quantity.parse("1Gi"),
                                 "nvidia.com/gpu": Quantity.parse("1")}
    node = Node(example("dual-socket"), static_node_config(reserved="0,64"))
    allocatable = node.machine.capacity_cpus() - 2
    big = pod_from_dict(_pod({"limits": {"cpu": str(allocatable + 1), "memory": "1Gi"}}, {}, name="big"))
    rec = node.admit(big)
    assert (rec.result.admit, rec.result.reason) == (False, "OutOfcpu")
    assert rec.result.message == (f"Node didn't have enough resource: cpu, requested: {(allocatable + 1) * 1000}, "
                                  f"used: 0, capacity: {allocatable * 1000}")
