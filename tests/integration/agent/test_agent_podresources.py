"""What a PodResources v1 client (raw generated stubs over the agent's unix socket) sees from
`numalign serve`, compared with what the kubelet's server_v1.go and container manager report for the
same pods: every active pod (BestEffort ones too), sidecars before app containers, no regular init
containers; GetAllocatableResources as the CPU and memory managers compute it; the KubeletPodResourcesGet
feature gate; the v1alpha1 List the kubelet still serves on the same socket."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import grpc
import pytest
from integration.agent.conftest import Layout, wait_for, wait_pod

from numalign import metrics as m
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.adapters.grpc.gen.podresources.v1alpha1 import api_pb2 as alpha_pb
from numalign.adapters.grpc.gen.podresources.v1alpha1 import api_pb2_grpc as alpha_grpc
from numalign.agent import Agent
from numalign.errors import ConfigError
from numalign.machine.examples import example

MIXED = """apiVersion: v1
kind: Pod
metadata: {name: guaranteed, namespace: apps}
spec:
  initContainers:
  - name: setup
    image: x
    resources:
      limits: {cpu: "1", memory: 1Gi}
  - name: proxy
    image: x
    restartPolicy: Always
    resources:
      limits: {cpu: "2", memory: 1Gi}
  containers:
  - name: main
    image: x
    resources:
      limits: {cpu: "4", memory: 2Gi}
  - name: fractional
    image: x
    resources:
      limits: {cpu: 500m, memory: 1Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: besteffort, namespace: apps}
spec:
  containers:
  - name: idle
    image: x
---
apiVersion: v1
kind: Pod
metadata: {name: burstable, namespace: apps}
spec:
  containers:
  - name: web
    image: x
    resources:
      requests: {cpu: "2", memory: 1Gi}
"""

GUARANTEED = """apiVersion: v1
kind: Pod
metadata: {name: db, namespace: data}
spec:
  containers:
  - name: main
    image: x
    resources:
      limits: {cpu: "2", memory: 1Gi}
"""


def _started(layout: Layout, **config_changes: object) -> Agent:
    options = layout.options()
    options.config = dataclasses.replace(options.config, **config_changes)  # type: ignore[arg-type]
    agent = Agent(options)
    agent.start()
    return agent


def _containers(pod: pr.PodResources) -> list[tuple[str, int, list[str], int]]:
    return [(c.name, len(c.cpu_ids), [mem.memory_type for mem in c.memory], len(c.devices)) for c in pod.containers]


def test_list_reports_every_active_pod_sidecars_first(
    agent: Agent, layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    layout.write_manifest("mixed.yaml", MIXED)
    for name in ("guaranteed", "besteffort", "burstable"):
        wait_pod(layout, name, "admitted")
    s = pr_stub()
    pods = {p.name: p for p in s.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources}
    assert sorted(pods) == ["besteffort", "burstable", "guaranteed"]
    # The restartable init container (sidecar) first, then app containers in spec order; the regular
    # init container "setup" is not reported. Exclusive CPUs only for integral CPU requests of a
    # Guaranteed pod; memory blocks for every container of a Guaranteed pod (Static memory manager).
    assert _containers(pods["guaranteed"]) == [
        ("proxy", 2, ["memory"], 0),
        ("main", 4, ["memory"], 0),
        ("fractional", 0, ["memory"], 0),
    ]
    # BestEffort and Burstable pods are listed, with their containers and nothing assigned.
    assert _containers(pods["besteffort"]) == [("idle", 0, [], 0)]
    assert _containers(pods["burstable"]) == [("web", 0, [], 0)]
    for name, pod in pods.items():
        got = s.Get(pr.GetPodResourcesRequest(pod_name=name, pod_namespace="apps"), timeout=5).pod_resources
        assert got == pod
    with pytest.raises(grpc.RpcError) as info:
        s.Get(pr.GetPodResourcesRequest(pod_name="guaranteed", pod_namespace=""), timeout=5)
    assert isinstance(info.value, grpc.Call)
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    assert info.value.details() == "pod guaranteed in namespace  not found"
    assert agent.metrics.value(m.PR_REQUESTS, server_api_version="v1") == 5
    assert agent.metrics.value(m.PR_REQUESTS_GET, server_api_version="v1") == 4
    assert agent.metrics.value(m.PR_ERRORS_GET, server_api_version="v1") == 1

    # The v1alpha1 List on the same socket: app containers only, counted under its own version.
    with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
        alpha = alpha_grpc.PodResourcesListerStub(ch).List(alpha_pb.ListPodResourcesRequest(), timeout=5)
    assert {p.name: [c.name for c in p.containers] for p in alpha.pod_resources} == {
        "guaranteed": ["main", "fractional"],
        "besteffort": ["idle"],
        "burstable": ["web"],
    }
    assert agent.metrics.value(m.PR_REQUESTS, server_api_version="v1alpha1") == 1
    assert agent.metrics.value(m.PR_REQUESTS, server_api_version="v1") == 5


def test_none_cpu_policy_reports_no_allocatable_cpus(
    layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    # Upstream nonePolicy.GetAllocatableCPUs is the empty set: with no CPU manager pinning there is
    # nothing a client may count as allocatable, and no container has exclusive CPUs.
    agent = _started(layout, cpu_manager_policy="none", reserved_system_cpus="")
    try:
        layout.write_manifest("db.yaml", GUARANTEED)
        wait_pod(layout, "db", "admitted")
        s = pr_stub()
        (pod,) = s.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources
        assert _containers(pod) == [("main", 0, ["memory"], 0)]
        alloc = s.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
        assert list(alloc.cpu_ids) == []
        # The Static memory manager still reports one entry per (NUMA node, memory type).
        entries = sorted((mem.topology.nodes[0].ID, mem.memory_type) for mem in alloc.memory)
        assert entries == [
            (n.id, t) for n in example("dual-socket").numa_nodes for t in ("hugepages-1Gi", "hugepages-2Mi", "memory")
        ]
        assert all(len(mem.topology.nodes) == 1 for mem in alloc.memory)
    finally:
        agent.stop()


def test_static_cpu_policy_reports_all_cpus_but_the_reserved(
    agent: Agent, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    # staticPolicy.GetAllocatableCPUs: every CPU of the topology minus reservedSystemCPUs ("0,64").
    alloc = pr_stub().GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
    all_cpus = {c for n in example("dual-socket").numa_nodes for c in n.cpus}
    assert sorted(alloc.cpu_ids) == sorted(all_cpus - {0, 64})


def test_feature_gate_kubelet_pod_resources_get_cannot_be_turned_off_at_137(layout: Layout) -> None:
    """KubeletPodResourcesGet is GA and locked from 1.36 (k/k #136728): the default kubelet (1.37) refuses
    to start with it off, as the kubelet does. (With it off at 1.35, Get answers "PodResources API Get
    method disabled": that path needs serve's --kubelet-version.)"""
    options = layout.options()
    options.config = dataclasses.replace(options.config, feature_gates={"KubeletPodResourcesGet": False})
    agent = Agent(options)
    with pytest.raises(ConfigError, match="cannot set feature gate KubeletPodResourcesGet to false"):
        agent.start()


TOO_BIG = """apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: apps}
spec:
  containers:
  - name: main
    image: x
    resources:
      limits: {cpu: "40", memory: 1Gi}
"""


def test_pods_the_node_did_not_admit_are_known_to_get_and_v1alpha1_but_not_v1_list(
    layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    with Agent(layout.options(wait_for_device_plugins=True)):
        _not_admitted_pods_are_known(layout, pr_stub)


def _not_admitted_pods_are_known(layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]) -> None:
    # 40 exclusive CPUs fit no single NUMA node (single-numa-node): rejected, as the kubelet would. Its
    # pod manager keeps the pod, so Get and v1alpha1 List still find it, with no resources.
    layout.write_manifest("huge.yaml", TOO_BIG)
    wait_pod(layout, "huge", "rejected")
    layout.write_manifest("gpu.yaml", GUARANTEED.replace("name: db", "name: wants-gpu").replace(
        "memory: 1Gi}", 'memory: 1Gi, example.com/gpu: "1"}'))
    wait_pod(layout, "wants-gpu", "pending")  # no plugin registered: numalign holds it (opt-in)
    s = pr_stub()
    assert [p.name for p in s.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources] == []
    for name, ns in (("huge", "apps"), ("wants-gpu", "data")):
        got = s.Get(pr.GetPodResourcesRequest(pod_name=name, pod_namespace=ns), timeout=5).pod_resources
        assert (got.name, got.namespace) == (name, ns)
        (c,) = got.containers
        assert c.name == "main" and not c.cpu_ids and not c.devices and not c.memory
    with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
        alpha = alpha_grpc.PodResourcesListerStub(ch).List(alpha_pb.ListPodResourcesRequest(), timeout=5)
    assert [(p.namespace, p.name) for p in alpha.pod_resources] == [("apps", "huge"), ("data", "wants-gpu")]
    # Removing the file forgets the pod, as deleting it forgets it in the kubelet.
    (layout.manifests / "huge.yaml").unlink()
    wait_pod(layout, "wants-gpu", "pending")
    def forgotten() -> bool:
        try:
            s.Get(pr.GetPodResourcesRequest(pod_name="huge", pod_namespace="apps"), timeout=5)
        except grpc.RpcError as e:
            return "pod huge in namespace apps not found" in (e.details() or "")
        return False

    wait_for(forgotten, "the removed manifest's rejected pod forgotten")
