"""Every rejection reason numalign can give has a `why` and at least one "would fit if" change, each
verified by admitting again on a copy of the node; the node itself is left untouched."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from support.configs import static_node_config
from support.machines import gpu_node

from numalign.answer.admit import NodeAnswers
from numalign.answer.present.text import text_lines
from numalign.answer.whatif import Answer, would_fit_if
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_flags import apply_flags
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.kubelet.admission.eviction import NodeCondition
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.node import Node


def pod(name: str, limits: dict[str, str] | None = None, requests: dict[str, str] | None = None,
        pod_resources: dict[str, Any] | None = None) -> Pod:
    res: dict[str, Any] = {}
    if limits:
        res["limits"] = limits
    if requests:
        res["requests"] = requests
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": res}]}
    if pod_resources:
        spec["resources"] = pod_resources
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name}, "spec": spec},
                         name)


def g(cpu: str, memory: str = "1Gi", gpus: str = "") -> dict[str, str]:
    return {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}


SMT = [("cpu-manager-policy-options", "full-pcpus-only=true")]
Scenario = tuple[Callable[[], Node], list[Pod], str, str]

SCENARIOS: dict[str, Scenario] = {
    "OutOfcpu": (lambda: Node(gpu_node(), KubeletConfig()),
                 [pod("x", requests={"cpu": "200"}), pod("y", requests={"cpu": "30"})], "OutOfcpu", "cpu: 24"),
    "OutOfmemory": (lambda: Node(gpu_node(), KubeletConfig()),
                    [pod("x", requests={"memory": "900Gi"}), pod("y", requests={"memory": "100Gi"})],
                    "OutOfmemory", "pod default/x was evicted"),
    "OutOfpods": (lambda: Node(gpu_node(), apply_flags(KubeletConfig(), [("max-pods", "1")])),
                  [pod("a"), pod("b")], "OutOfpods", "maxPods 2"),
    "OutOfhugepages": (lambda: Node(gpu_node(), KubeletConfig()),
                       [pod("h", limits={"hugepages-1Gi": "65Gi", "memory": "1Gi", "cpu": "1"})],
                       "OutOfhugepages-1Gi", "hugepages-1Gi: 64Gi"),
    "Evicted-memory": (lambda: Node(gpu_node(), KubeletConfig(), node_conditions=[NodeCondition.MEMORY_PRESSURE]),
                       [pod("be")], "Evicted", "cpu: 100m"),
    "Evicted-disk": (lambda: Node(gpu_node(), KubeletConfig(), node_conditions=[NodeCondition.DISK_PRESSURE]),
                     [pod("be")], "Evicted", "no longer had DiskPressure"),
    "TopologyAffinityError": (lambda: Node(gpu_node(), static_node_config()),
                              [pod("big", g("60"))], "TopologyAffinityError", "topologyManagerPolicy best-effort"),
    "TopologyAffinityError-evict": (lambda: Node(gpu_node(), static_node_config()),
                                    [pod(f"t{i}", g("2", gpus="2")) for i in range(4)]
                                    + [pod("last", g("2", gpus="1"))],
                                    "TopologyAffinityError", "pod default/t0 was evicted"),
    "SMTAlignmentError-odd": (lambda: Node(gpu_node(), apply_flags(static_node_config(), SMT)),
                              [pod("odd", g("3"))], "SMTAlignmentError", "cpu: 4 (whole cores"),
    # Reserved CPUs 0, 2 and 4 leave their siblings alone on their cores: 5 CPUs free, one whole core.
    "SMTAlignmentError-cores": (lambda: Node(gpu_node(),
                                             apply_flags(static_node_config(policy="none", reserved="0,2,4"), SMT)),
                                [pod(f"w{i}", g("54")) for i in range(4)] + [pod("last", g("4"))],
                                "SMTAlignmentError", "cpu: 2"),
    "UnexpectedAdmissionError-memory": (lambda: Node(gpu_node(), static_node_config(policy="best-effort")),
                                        [pod("m1", g("2", "700Gi")), pod("m2", g("2", "300Gi"))],
                                        "UnexpectedAdmissionError", "memory: 240Gi"),
    "UnexpectedAdmissionError-devices": (lambda: Node(gpu_node(), static_node_config(policy="best-effort")),
                                         [pod("g1", g("2", gpus="6")), pod("g2", g("2", gpus="4"))],
                                         "UnexpectedAdmissionError", "pod default/g1 was evicted"),
    "PodLevelResourcesNotSupported": (
        lambda: Node(gpu_node(), apply_flags(KubeletConfig(), [("feature-gates", "PodLevelResources=false")])),
        [pod("p", pod_resources={"requests": {"cpu": "1"}})], "PodLevelResourcesNotSupported", "PodLevelResources"),
}


def _reject_last(make: Callable[[], Node], pods: list[Pod]) -> tuple[Node, Pod, Any]:
    node = make()
    for p in pods[:-1]:
        assert node.admit(p).result.admit, p.key
    rec = node.admit(pods[-1])
    return node, pods[-1], rec


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_rejection_has_a_why_and_a_verified_change(name: str) -> None:
    make, pods, reason, expected = SCENARIOS[name]
    node, last, rec = _reject_last(make, pods)
    assert rec.result.reason == reason
    before = (dict(node.pods), getattr(node.cpu, "get_available_cpus", lambda: None)(), dict(node.devices.allocated))
    answer = would_fit_if(node, last, rec)
    assert answer.why and all(answer.why)
    assert answer.would_fit_if, answer
    assert any(expected in s.change for s in answer.would_fit_if), [s.change for s in answer.would_fit_if]
    assert answer.tried <= 8
    # The node is untouched: same pods, same free CPUs and devices, and it still rejects the pod.
    assert (dict(node.pods), getattr(node.cpu, "get_available_cpus", lambda: None)(),
            dict(node.devices.allocated)) == before
    assert not node.admit(last).result.admit


def test_a_suggested_eviction_really_admits() -> None:
    node, last, rec = _reject_last(*SCENARIOS["UnexpectedAdmissionError-devices"][:2])
    answer = would_fit_if(node, last, rec)
    assert any(s.kind == "evict" for s in answer.would_fit_if)
    node.remove("g1")
    assert node.admit(last).result.admit


def test_why_texts_for_the_three_paths_that_had_none() -> None:
    texts = {}
    for name in ("SMTAlignmentError-odd", "UnexpectedAdmissionError-memory", "UnexpectedAdmissionError-devices"):
        node, last, rec = _reject_last(*SCENARIOS[name][:2])
        texts[name] = would_fit_if(node, last, rec).why[0]
    assert texts["SMTAlignmentError-odd"] == (
        "full-pcpus-only: container c asks for 3 CPUs, not a multiple of the 2 hardware threads per core, so it "
        "cannot have whole cores to itself; 2 or 4 CPUs would be")
    assert texts["UnexpectedAdmissionError-memory"].startswith(
        "memory manager: container c asks for memory 300Gi; the merged hint {0}P does not have that much free")
    assert texts["UnexpectedAdmissionError-devices"].startswith(
        "device manager: container c asks for 4 nvidia.com/gpu and 2 of the node's 8 healthy nvidia.com/gpu are free")


def test_out_of_cpu_why_names_requests_and_allocatable() -> None:
    node, last, rec = _reject_last(*SCENARIOS["OutOfcpu"][:2])
    answer = would_fit_if(node, last, rec)
    assert answer.why == ("cpu: the pod requests 30; the 1 pod admitted here request 200 of the node's 224 "
                          "allocatable (224 CPUs less reservedSystemCPUs, or kubeReserved + systemReserved cpu); "
                          "6 more would have to be free",)
    free = {(f.numa_node, f.resource): f for f in answer.free}
    assert free[(None, "cpu")].free == 24000
    assert [h.pod for h in free[(None, "cpu")].held_by] == ["default/x"]


def test_free_capacity_names_holders_per_numa_node() -> None:
    node, last, rec = _reject_last(*SCENARIOS["TopologyAffinityError-evict"][:2])
    answer = would_fit_if(node, last, rec)
    gpus = {f.numa_node: f for f in answer.free if f.resource == "nvidia.com/gpu"}
    assert [gpus[n].free for n in range(4)] == [0, 0, 0, 0]
    assert [h.pod for h in gpus[0].held_by] == ["default/t0"]


def test_answers_are_shared_by_identical_rejections_and_text_renders() -> None:
    node = Node(gpu_node(), apply_flags(KubeletConfig(), [("max-pods", "1")]))
    answers = NodeAnswers(node)
    node.admit(pod("a"))
    outs = []
    for name in ("b", "c"):
        p = pod(name)
        outs.append(answers.after(p, node.admit(p)))
    assert isinstance(outs[0], Answer) and isinstance(outs[1], Answer)
    assert outs[1].pod == "default/c" and outs[1].would_fit_if == outs[0].would_fit_if
    lines = text_lines(outs[1], False)
    assert lines[0] == "  why: pods: 1 pods run here and the node's pods limit (maxPods) is 1"
    assert any(line.startswith("    - maxPods 2 (--max-pods 2): admitted") for line in lines)


def test_topology_manager_variant_copy_keeps_allocations() -> None:
    node = Node(gpu_node(), static_node_config())
    node.admit(pod("a", g("8")))
    twin = node.restarted(dataclasses.replace(node.config, topology_manager_policy="best-effort",
                                              topology_manager_scope="pod"))
    assert (twin.tm.policy_name, twin.tm.scope_name) == ("best-effort", "pod")
    assert isinstance(twin.cpu, StaticPolicy) and isinstance(node.cpu, StaticPolicy)
    assert twin.cpu.get_available_cpus() == node.cpu.get_available_cpus()
    assert twin.admit(pod("b", g("100"))).result.admit
    assert "b" not in node.pods and twin.store is None
