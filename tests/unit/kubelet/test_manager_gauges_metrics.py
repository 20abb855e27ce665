"""The CPU manager's gauges, the device plugin metrics and the admission rejections' labels as the kubelet
publishes them, every release 1.33-1.37 (the conformance admit area compares them with the real managers'):

- the static policy's Start sets kubelet_cpu_manager_shared_pool_size_millicores and
  ..._exclusive_cpu_allocation_count from its state; each allocation then moves them by the CPUs it gave and
  each release by the CPUs it freed (updateMetricsOnAllocate/Release), so CPUs an app container reuses from
  an init container are counted twice and stay counted after the pod goes; ..._allocation_per_numa is set for
  the NUMA nodes holding exclusive CPUs at each update, a node emptied keeping the count it last had;
- the device manager counts a plugin's registration and times each Allocate call per resource;
- kubelet.go labels a rejection by its reason only when its release lists the reason;
- with the gate PodLevelResourceManagers (1.36 on) the resource_manager_* families count the node-level
  exclusive allocations, their errors and the containers given them (1.36 without the kubelet_ prefix);
- from 1.37, while PodLevelResources is on, kubelet.go counts each admitted pod by how its resources are set
  and its QoS class."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from numalign import metrics as m
from numalign.errors import PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse
from numalign.k8s.deviceplugin import Device as PluginDevice
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.node import Node
from numalign.machine.examples import example

MACHINE = example("dual-socket")  # 4 NUMA nodes, 128 CPUs
CONFIG = """
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: {cpu}
reservedSystemCPUs: "0,64"
topologyManagerPolicy: {tm}
systemReserved: {{memory: 1Gi}}
evictionHard: {{memory.available: 100Mi}}
"""


def node(cpu: str = "static", tm: str = "none") -> Node:
    return Node(MACHINE, config_from_yaml(CONFIG.format(cpu=cpu, tm=tm)), static_devices=False)


def res(cpus: int, **extra: int) -> dict[str, Quantity]:
    return {"cpu": Quantity.from_int(cpus), "memory": Quantity.parse("1Gi"),
            **{k: Quantity.from_int(v) for k, v in extra.items()}}


def pod(name: str, cpus: int, init_cpus: int = 0, **extra: int) -> Pod:
    inits = (Container("init", requests=res(init_cpus), limits=res(init_cpus), is_init=True),) if init_cpus else ()
    return Pod(name=name, uid=f"uid-{name}", init_containers=inits,
               containers=(Container("app", requests=res(cpus, **extra), limits=res(cpus, **extra)),))


def gauges(n: Node) -> tuple[float, float, dict[str, float]]:
    n.cm.sync_metrics()
    per_numa = next(f.values for f in n.metrics.families() if f.name == m.CPU_PER_NUMA)
    return (n.metrics.value(m.CPU_SHARED_POOL), n.metrics.value(m.CPU_EXCLUSIVE),
            {dict(k)["numa_node"]: v for k, v in per_numa.items()})


def test_the_static_policy_starts_its_gauges_from_the_state_and_none_keeps_them_at_zero() -> None:
    assert gauges(node()) == (126_000.0, 0.0, {})  # 128 CPUs, 2 reserved
    assert gauges(node("none")) == (0.0, 0.0, {})


def test_allocations_and_releases_move_the_gauges_and_an_emptied_node_keeps_its_last_count() -> None:
    n = node()
    assert n.admit(pod("a", 4)).result.admit
    held = n.cpu.get_cpu_set("uid-a", "app")
    assert held is not None
    numa = str(n.cpu.topology.info(min(held)).numa_node)  # type: ignore[union-attr]
    assert gauges(n) == (122_000.0, 4.0, {numa: 4.0})
    assert n.admit(pod("b", 2)).result.admit
    assert n.cpu.get_cpu_set("uid-b", "app") is not None
    assert gauges(n) == (120_000.0, 6.0, {numa: 6.0})  # b packed beside a
    n.remove("uid-a")
    assert gauges(n) == (124_000.0, 2.0, {numa: 2.0})
    n.remove("uid-b")
    # the node holds none now: its series stays, at the count it had when it last held some
    assert gauges(n) == (126_000.0, 0.0, {numa: 2.0})


def test_cpus_reused_from_an_init_container_are_counted_twice_and_stay_counted() -> None:
    n = node()
    assert n.admit(pod("p", 2, init_cpus=2)).result.admit
    assert n.cpu.get_cpu_set("uid-p", "app") == n.cpu.get_cpu_set("uid-p", "init")  # the app reused them
    shared, exclusive, per_numa = gauges(n)
    assert (shared, exclusive, sum(per_numa.values())) == (122_000.0, 4.0, 2.0)  # per NUMA: each CPU once
    n.remove("uid-p")
    shared, exclusive, _ = gauges(n)
    assert (shared, exclusive) == (124_000.0, 2.0)  # only the init container's release frees them


def test_a_probe_leaves_the_gauges_as_they_were() -> None:
    n = node()
    before = gauges(n)
    assert n.probe(pod("p", 2, init_cpus=2)).result.admit
    assert gauges(n) == before and n.cpu.allocation_per_numa == {}  # type: ignore[attr-defined]


GPU = "example.com/gpu"


def with_gpus(n: Node, failing: frozenset[str] = frozenset()) -> None:
    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        if failing.intersection(ids):
            raise PluginError("rpc error: code = Unknown desc = device failed to reset")
        return ContainerAllocateResponse()

    n.devices.add_static_plugin(GPU, [PluginDevice(f"gpu{i}", "Healthy", (i % 4,)) for i in range(4)],
                                allocate_fn=allocate)


def dp_series(n: Node, name: str) -> dict[str, float]:
    n.cm.sync_metrics()
    fam = next(f for f in n.metrics.families() if f.name == name)
    if fam.kind == "histogram":
        return {dict(k)["resource_name"]: v[-1] for k, v in fam.hist.items()}
    return {dict(k)["resource_name"]: v for k, v in fam.values.items()}


def test_a_registration_and_each_allocate_call_are_counted_per_resource_a_probe_makes_none() -> None:
    n = node()
    with_gpus(n, failing=frozenset({"gpu1"}))
    assert dp_series(n, m.DP_REGISTRATION) == {GPU: 1.0}
    assert dp_series(n, m.DP_ALLOC_DURATION) == {}
    assert n.probe(pod("p", 1, **{GPU: 1})).result.admit
    assert dp_series(n, m.DP_ALLOC_DURATION) == {}
    assert n.admit(pod("a", 1, **{GPU: 1})).result.admit  # gpu0
    assert not n.admit(pod("b", 1, **{GPU: 1})).result.admit  # gpu1: the plugin refuses, the call still timed
    assert dp_series(n, m.DP_ALLOC_DURATION) == {GPU: 2.0}
    assert dp_series(n, m.DP_REGISTRATION) == {GPU: 1.0}  # published once, not again at each sync


@pytest.mark.parametrize(("release", "label"), [((1, 33), "Other"), ((1, 34), "PodLevelResourcesNotSupported"),
                                                 ((1, 37), "PodLevelResourcesNotSupported")])
def test_rejection_labels_are_the_releases_own(release: tuple[int, int], label: str) -> None:
    assert m.rejection_label("PodLevelResourcesNotSupported", release) == label
    assert m.rejection_label("PodFeatureUnsupported", release) == ("PodFeatureUnsupported" if release >= (1, 35)
                                                                   else "Other")
    assert m.rejection_label("SMTAlignmentError", release) == "Other"  # no release lists it
    assert m.rejection_label("OutOfexample.com/gpu", release) == "OutOfExtendedResources"
    assert m.rejection_label("TopologyAffinityError", release) == "TopologyAffinityError"


def test_an_smt_alignment_rejection_counts_as_other() -> None:
    n = Node(MACHINE, config_from_yaml(CONFIG.format(cpu="static", tm="none") +
                                       'cpuManagerPolicyOptions: {"full-pcpus-only": "true"}\n'))
    rec = n.admit(pod("odd", 3))
    assert rec.result.reason == "SMTAlignmentError"
    assert n.metrics.value(m.ADMISSION_REJECTIONS, reason="Other") == 1
    assert n.metrics.value(m.ADMISSION_REJECTIONS, reason="SMTAlignmentError") == 0


RM_CONFIG = CONFIG.format(cpu="static", tm="none") + """memoryManagerPolicy: Static
reservedMemory: [{numaNode: 0, limits: {memory: 1124Mi}}]
featureGates: {PodLevelResourceManagers: true}
"""


def rm_series(n: Node) -> dict[str, dict[str, float]]:
    n.cm.sync_metrics()
    return {f.name: {",".join(f"{k}={v}" for k, v in key): v for key, v in f.values.items()}
            for f in n.metrics.families() if "resource_manager" in f.name and f.values}


@pytest.mark.parametrize(("version", "allocations", "errors", "assignments"), [
    ("1.36", m.RM_ALLOCATIONS_136, m.RM_ALLOCATION_ERRORS_136, m.RM_ASSIGNMENTS_136),
    ("1.37", m.RM_ALLOCATIONS, m.RM_ALLOCATION_ERRORS, m.RM_ASSIGNMENTS),
])
def test_with_pod_level_resource_managers_the_node_level_allocations_are_counted(
        version: str, allocations: str, errors: str, assignments: str) -> None:
    n = Node(MACHINE, config_from_yaml(RM_CONFIG), kubelet_version=KubeletVersion.parse(version))
    assert rm_series(n) == {}  # no series before the first count
    assert n.probe(pod("p", 2)).result.admit and rm_series(n) == {}
    assert n.admit(pod("a", 2)).result.admit  # cpu and memory: one container each, one memory block
    # More CPUs than are free: the CPU manager's Allocate fails (the Topology Manager's handler allocates
    # before the predicate looks at the node's allocatable), an allocation error.
    assert not n.admit(pod("big", 200)).result.admit
    assert rm_series(n) == {
        allocations: {"resource_name=cpu,source=node": 1.0, "resource_name=memory,source=node": 1.0},
        errors: {"resource_name=cpu,source=node": 1.0},
        assignments: {"assignment_type=node_exclusive,resource_name=cpu": 1.0,
                      "assignment_type=node_exclusive,resource_name=memory": 1.0},
    }
    # without the gate (its default) or before 1.36 the kubelet registers none of these families
    for v, gates in (("1.37", ""), ("1.35", "")):
        plain = Node(MACHINE, config_from_yaml(RM_CONFIG.replace("featureGates: {PodLevelResourceManagers: true}\n",
                                                                  gates)), kubelet_version=KubeletVersion.parse(v))
        assert plain.admit(pod("a", 2)).result.admit and rm_series(plain) == {}


def pod_level_series(n: Node) -> dict[str, float]:
    return {",".join(f"{k}={v}" for k, v in key): v for f in n.metrics.families()
            if f.name == m.POD_LEVEL_ADMISSIONS for key, v in f.values.items()}


def test_from_1_37_each_admitted_pod_is_counted_by_how_its_resources_are_set() -> None:
    def spec_level(name: str, cpus: int, containers: tuple[Container, ...]) -> Pod:
        return Pod(name=name, uid=f"uid-{name}", containers=containers, pod_requests=res(cpus), pod_limits=res(cpus))

    n = Node(MACHINE, config_from_yaml(CONFIG.format(cpu="static", tm="none")),
             kubelet_version=KubeletVersion.parse("1.37"))
    assert pod_level_series(n) == {}
    assert n.probe(pod("probed", 2)).result.admit and pod_level_series(n) == {}  # a probe admits nobody
    assert n.admit(pod("g1", 2)).result.admit and n.admit(pod("g2", 1)).result.admit
    assert n.admit(Pod(name="be", uid="uid-be", containers=(Container("app"),))).result.admit
    # a GPU alone is a container-level resource of a BestEffort pod
    gpu_only = Container("app", requests={"example.com/gpu": Quantity.from_int(1)},
                         limits={"example.com/gpu": Quantity.from_int(1)})
    n.devices.add_static_plugin("example.com/gpu", [PluginDevice("gpu0", "Healthy", (0,))])
    assert n.admit(Pod(name="gpu", uid="uid-gpu", containers=(gpu_only,))).result.admit
    assert n.admit(spec_level("pl", 2, (Container("app"),))).result.admit
    assert n.admit(spec_level("both", 2, (Container("app", requests=res(1), limits=res(1)),))).result.admit
    assert not n.admit(pod("big", 500)).result.admit  # a rejected pod is not counted
    assert pod_level_series(n) == {
        "config_mode=container_level,qos_class=guaranteed": 2.0,
        "config_mode=,qos_class=besteffort": 1.0,
        "config_mode=container_level,qos_class=besteffort": 1.0,
        "config_mode=pod_level,qos_class=guaranteed": 1.0,
        "config_mode=pod_and_container_level,qos_class=guaranteed": 1.0,
    }
    # before 1.37, or with the gate off, the kubelet has no such family
    for v, gates in (("1.36", ""), ("1.37", "featureGates: {PodLevelResources: false}\n")):
        plain = Node(MACHINE, config_from_yaml(CONFIG.format(cpu="static", tm="none") + gates),
                     kubelet_version=KubeletVersion.parse(v))
        assert plain.admit(pod("a", 2)).result.admit and pod_level_series(plain) == {}
