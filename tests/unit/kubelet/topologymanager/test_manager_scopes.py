"""TopologyManager + scopes with scripted providers: the kubelet's admission flow and bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from numalign import metrics as m
from numalign.answer.present.admit import record_text
from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.numa import NUMAInfo
from numalign.errors import AllocationError, ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager.manager import TopologyManager


@dataclass
class ScriptedProvider:
    name: str
    per_container: dict[str, ProviderHints] = field(default_factory=dict)
    pod_hints: ProviderHints = None
    fail_on: dict[str, AllocationError] = field(default_factory=dict)
    allocated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self.per_container.get(container.name)

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return self.pod_hints

    def allocate(self, pod: Pod, container: Container) -> None:
        if container.name in self.fail_on:
            raise self.fail_on[container.name]
        self.allocated.append(container.name)

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        self.removed.append(container_name)


def H(nodes: list[int] | None, preferred: bool) -> TopologyHint:
    return TopologyHint.of(nodes, preferred)


POD = Pod(
    name="p",
    uid="uid-1",
    init_containers=(Container("init", is_init=True),),
    containers=(Container("a"), Container("b")),
)
NUMA2 = NUMAInfo.create([0, 1], {0: [10, 11], 1: [11, 10]})


def test_container_scope_merges_each_container_and_stores_hints_before_allocate() -> None:
    cpu = ScriptedProvider(
        "cpu",
        {"a": {"cpu": [H([0], True), H([1], True), H([0, 1], False)]}, "b": {"cpu": [H([1], True)]}},
    )
    gpu = ScriptedProvider("devices", {"a": {"gpu": [H([1], True), H([0, 1], False)]}})
    tm = TopologyManager(NUMA2, "restricted", "container")
    tm.add_hint_provider(cpu)
    tm.add_hint_provider(gpu)
    rec = tm.admit(POD)
    assert rec.result.admit
    assert tm.get_affinity("uid-1", "a") == H([1], True)
    assert tm.get_affinity("uid-1", "b") == H([1], True)
    assert tm.get_affinity("uid-1", "init") == H([0, 1], True)  # nobody cared: default mask, preferred
    assert cpu.allocated == ["init", "a", "b"] and gpu.allocated == ["init", "a", "b"]
    assert [d.container for d in rec.decisions] == ["init", "a", "b"]
    assert tm.metrics.value(m.TM_ADMISSION_REQUESTS) == 1
    assert tm.metrics.value(m.TM_ADMISSION_ERRORS) == 0


def test_restricted_rejects_with_the_kubelet_reason_and_explains_which_resource() -> None:
    cpu = ScriptedProvider("cpu", {"a": {"cpu": [H([0], True), H([0, 1], False)]}})
    gpu = ScriptedProvider("devices", {"a": {"nvidia.com/gpu": [H([1], True), H([0, 1], False)]}})
    tm = TopologyManager(NUMA2, "restricted", "container")
    tm.add_hint_provider(cpu)
    tm.add_hint_provider(gpu)
    rec = tm.admit(POD)
    assert not rec.result.admit
    assert rec.result.reason == "TopologyAffinityError"
    assert rec.result.message == "Resources cannot be allocated with Topology locality"
    bad = rec.decisions[-1]
    assert bad.container == "a" and bad.merged == H([0], False)  # B = 1: one node wins over two
    text = " ".join(bad.explanation)
    assert "cpu/cpu prefers {0}" in text and "devices/nvidia.com/gpu prefers {1}" in text
    assert cpu.allocated == ["init"]  # earlier containers are not rolled back, as upstream
    assert tm.metrics.value(m.TM_ADMISSION_ERRORS) == 1
    assert tm.metrics.value(m.ADMISSION_REJECTIONS, reason="TopologyAffinityError") == 1
    assert "REJECTED: TopologyAffinityError" in record_text(rec)
    assert rec.to_dict()["result"]["reason"] == "TopologyAffinityError"


def test_best_effort_admits_the_same_pod() -> None:
    cpu = ScriptedProvider("cpu", {"a": {"cpu": [H([0], True), H([0, 1], False)]}})
    gpu = ScriptedProvider("devices", {"a": {"gpu": [H([1], True), H([0, 1], False)]}})
    tm = TopologyManager(NUMA2, "best-effort", "container")
    tm.add_hint_provider(cpu)
    tm.add_hint_provider(gpu)
    assert tm.admit(POD).result.admit
    assert tm.get_affinity("uid-1", "a") == H([0], False)  # best non-preferred: count == B = 1


def test_allocation_errors_map_to_the_kubelet_reasons() -> None:
    smt = AllocationError("SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2",
                          reason="SMTAlignmentError")
    cpu = ScriptedProvider("cpu", fail_on={"a": smt})
    tm = TopologyManager(NUMA2, "single-numa-node", "container")
    tm.add_hint_provider(cpu)
    rec = tm.admit(POD)
    assert (rec.result.reason, rec.result.message) == ("SMTAlignmentError", str(smt))
    other = ScriptedProvider("memory", fail_on={"init": AllocationError("[memorymanager] boom")})
    tm2 = TopologyManager(NUMA2, "best-effort", "container")
    tm2.add_hint_provider(other)
    rec2 = tm2.admit(POD)
    assert rec2.result.reason == "UnexpectedAdmissionError"
    assert rec2.result.message == "Allocate failed due to [memorymanager] boom, which is unexpected"


def test_pod_scope_merges_once_and_gives_every_container_the_same_hint() -> None:
    cpu = ScriptedProvider("cpu", pod_hints={"cpu": [H([1], True), H([0, 1], False)]})
    tm = TopologyManager(NUMA2, "single-numa-node", "pod")
    tm.add_hint_provider(cpu)
    rec = tm.admit(POD)
    assert rec.result.admit and len(rec.decisions) == 1 and rec.decisions[0].container == ""
    assert {tm.get_affinity("uid-1", c).mask for c in ("init", "a", "b")} == {0b10}
    assert tm.metrics.value(m.ALIGNED_COUNT, scope="pod", boundary="numa_node") == 1


def test_single_numa_node_failure_counts_alignment_failure() -> None:
    cpu = ScriptedProvider("cpu", pod_hints={"cpu": [H([0, 1], True)]})
    tm = TopologyManager(NUMA2, "single-numa-node", "pod")
    tm.add_hint_provider(cpu)
    assert not tm.admit(POD).result.admit
    assert tm.metrics.value(m.ALIGNED_FAILURE, scope="pod", boundary="numa_node") == 1


def test_policy_none_only_allocates_and_stores_no_hints() -> None:
    cpu = ScriptedProvider("cpu", {"a": {"cpu": []}})
    tm = TopologyManager(NUMA2, "none", "container", options={"bogus": "x"})  # none never parses options
    tm.add_hint_provider(cpu)
    assert tm.admit(POD).result.admit
    assert cpu.allocated == ["init", "a", "b"]
    assert tm.get_affinity("uid-1", "a") == TopologyHint(None, False)
    assert tm.metrics.value(m.TM_ADMISSION_REQUESTS) == 1


def test_remove_container_keeps_hints_of_restarted_containers() -> None:
    tm = TopologyManager(NUMA2, "best-effort", "container")
    tm.add_hint_provider(ScriptedProvider("cpu", {"a": {"cpu": [H([0], True)]}}))
    tm.admit(POD)
    tm.add_container(POD, POD.containers[0], "id-1")
    tm.add_container(POD, POD.containers[0], "id-2")  # restarted under a new ID
    tm.remove_container("id-1")
    assert tm.get_affinity("uid-1", "a") == H([0], True)
    tm.remove_container("id-2")
    assert tm.get_affinity("uid-1", "a") == TopologyHint(None, False)
    tm.remove_container("unknown")  # no error, nothing done


def test_remove_pod_releases_every_provider() -> None:
    cpu = ScriptedProvider("cpu")
    tm = TopologyManager(NUMA2, "best-effort", "pod")
    tm.add_hint_provider(cpu)
    tm.admit(POD)
    tm.remove_pod(POD)
    assert cpu.removed == ["init", "a", "b"]
    assert tm.get_affinity("uid-1", "a") == TopologyHint(None, False)


def test_new_manager_errors_in_kubelet_order() -> None:
    nine = NUMAInfo.create(list(range(9)))
    with pytest.raises(ConfigError, match="unsupported on machines with more than 8 NUMA Nodes"):
        TopologyManager(nine, "best-effort")
    TopologyManager(nine, "best-effort", options={"max-allowable-numa-nodes": "9"})
    TopologyManager(nine, "none")  # none: no NUMA-count check
    with pytest.raises(ConfigError, match='unknown Topology Manager Policy option: "nope"'):
        TopologyManager(nine, "bogus", options={"nope": "1"})  # options before the NUMA count
    with pytest.raises(ConfigError, match="unsupported on machines"):
        TopologyManager(nine, "bogus")  # NUMA count before the policy name
    with pytest.raises(ConfigError, match='unknown policy: "bogus"'):
        TopologyManager(NUMA2, "bogus", "nope")  # policy name before the scope
    with pytest.raises(ConfigError, match='unknown scope: "nope"'):
        TopologyManager(NUMA2, "restricted", "nope")
    with pytest.raises(ConfigError, match="error getting NUMA distances from cadvisor"):
        TopologyManager(NUMAInfo.create([0, 1]), "restricted", options={"prefer-closest-numa-nodes": "true"})


def test_metrics_text_uses_kubelet_names() -> None:
    tm = TopologyManager(NUMA2, "single-numa-node", "container")
    tm.admit(POD)
    from numalign.agent.exposition import render_text

    text = render_text(tm.metrics).decode()
    assert "kubelet_topology_manager_admission_requests_total 1.0" in text
    assert 'kubelet_container_aligned_compute_resources_count{boundary="numa_node",scope="container"} 3.0' in text
    assert "kubelet_topology_manager_admission_duration_ms_bucket" in text
    # Counters keep the kubelet's type even where the name lacks _total (client_golang's exposition).
    assert "# TYPE kubelet_container_aligned_compute_resources_count counter\n" in text
    assert "# TYPE kubelet_topology_manager_admission_requests_total counter\n" in text
    assert "untyped" not in text
