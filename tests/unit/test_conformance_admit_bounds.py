"""The admit area's bounds on the real code's work, numalign's side: the merge budget that brings 8-NUMA
machines in (conformance/admit_merge_budget.go) and the named k/k #140730 case with its CPU-time bound."""

from __future__ import annotations

import io
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conformance.areas import AREAS, admit

from conformance import harness, merge_budget, run
from numalign.core.hint import TopologyHint
from numalign.machine.cadvisor import machine_to_cadvisor
from numalign.machine.shorthand import parse_shorthand

MINORS = ("1.33.13", "1.34.4", "1.35.4", "1.36.3", "1.37.2")


def _eight_numa_case(policy: str) -> dict[str, Any]:
    machine = machine_to_cadvisor(parse_shorthand("2s x 4n x 2c x 2t, 4Gi/node, hugepages-2Mi=64/node"))
    limits = {"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "2Mi"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p0", "namespace": "default", "uid": "u0"},
           "spec": {"containers": [{"name": "c0", "image": "pause",
                                    "resources": {"requests": dict(limits), "limits": limits}}]}}
    config = {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "topologyManagerScope": "container",
              "evictionHard": {"memory.available": "100Mi"}, "maxPods": 110, "memoryManagerPolicy": "Static",
              "systemReserved": {"cpu": "1", "memory": "256Mi"},
              "reservedMemory": [{"numaNode": 0, "limits": {"memory": "356Mi"}}]}
    return {"machine": machine, "config": config, "devices": [], "steps": [{"op": "admit", "pod": pod}]}


def test_a_merge_beyond_the_budget_ends_the_case_with_the_permutations_upstream_would_walk() -> None:
    # CPU, memory and hugepages-2Mi each list every one of the 255 masks of 8 NUMA nodes: the real
    # 1.37.2 harness answered this case {"merge_over_budget": 16581375} (255^3; the merge itself took 6 s)
    over = admit.numalign(_eight_numa_case("best-effort"), "1.37.2")
    assert over["steps"] == [{"merge_over_budget": 255**3}]
    # the admission was counted before its merge (and the harness's answer says the same), nothing after it
    assert over["metrics"]["kubelet_topology_manager_admission_requests_total"] == {"": 1}
    assert over["metrics"]["kubelet_topology_manager_admission_duration_ms"] == {"": 0}
    # single-numa-node keeps the 8 single-node hints of each list: 512 permutations, run on both sides
    (step,) = admit.numalign(_eight_numa_case("single-numa-node"), "1.37.2")["steps"]
    assert step["admit"] is True and step["containers"]["c0"]["affinity"] == {"mask": [0], "preferred": True}


def test_the_budget_counts_upstreams_lists_over_the_cases_merges() -> None:
    counter = merge_budget._Counter("restricted")
    wide = [TopologyHint(m, False) for m in range(1, 101)]
    counter.seen({"cpu": wide}, last=False)
    counter.seen(None, last=False)  # no preference: one {nil, preferred} hint
    counter.seen({"memory": wide[:50], "hugepages-2Mi": None}, last=True)
    assert counter.spent == 5_000
    for _ in range(199):
        counter.seen({"cpu": wide}, last=False)
        counter.seen({"memory": wide[:50]}, last=True)
    assert counter.spent == merge_budget.MERGE_BUDGET
    counter.seen({"cpu": []}, last=True)  # one {nil, not preferred} hint: free, even with the budget spent
    with pytest.raises(merge_budget.OverBudgetError) as over:
        counter.seen({"cpu": wide[:2]}, last=True)
    assert over.value.permutations == 2
    single = merge_budget._Counter("single-numa-node")
    hints = [TopologyHint(1, True), TopologyHint(3, True), TopologyHint(2, False), TopologyHint(None, True)]
    assert single.length(hints) == 2  # preferred single-node and preferred nil hints only
    assert single.length([]) == 0 and single.length(None) == 1


def test_eight_numa_machines_are_generated_at_every_minor() -> None:
    for version in MINORS:
        rng = random.Random(f"1/admit/{version.rsplit('.', 1)[0]}")
        numas = [len(admit.generate(rng, version)["machine"]["topology"]) for _ in range(100)]
        assert 8 in numas and max(numas) == 8


@pytest.mark.parametrize("version", MINORS)
def test_the_named_140730_case_is_answered_hangs_in_the_documented_words(version: str) -> None:
    name, case, bound = admit.named_cases(version)[0]
    assert (name, bound) == ("k8s-140730", "2s")
    assert admit.numalign(case, version) == {"hang": True}


# The kubelet's refusal of a plugin's Allocate answer without container responses, as each release's
# harness answered the named case: "no containers return in allocation response " and Go's %v of the
# empty AllocateResponse (gogo's generated String at 1.33, protoc-gen-go's empty text from 1.34).
EMPTY_ALLOCATE = {
    "1.33.13": "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}",
    "1.34.4": "", "1.35.4": "", "1.36.3": "", "1.37.2": "",
}


@pytest.mark.parametrize("version", MINORS)
def test_the_named_empty_allocate_case_is_refused_in_the_releases_words_and_keeps_the_device(version: str) -> None:
    name, case, _ = admit.named_cases(version)[1]
    assert name == "empty-allocate"
    first, second, third = admit.numalign(case, version)["steps"]
    assert (first["admit"], first["reason"]) == (False, "UnexpectedAdmissionError")
    assert first["message"] == (f"Allocate failed due to no containers return in allocation response "
                                f"{EMPTY_ALLOCATE[version]}, which is unexpected")
    assert first["pluginCalls"]["example.com/gpu"][-1] == {"call": "Allocate", "devices": ["gpu0"]}
    # gpu0 stays taken (allocateContainerResources returns without rolling allocatedDevices back)
    assert second["admit"] and second["containers"]["c0"]["devices"] == {"example.com/gpu": ["gpu1"]}
    assert (third["admit"], third["reason"]) == (False, "TopologyAffinityError")


def test_a_hang_in_other_words_is_a_difference() -> None:
    text = "the kubelet 1.36.3 hangs here (k/k #140730, fixed in 1.38): ..."
    assert admit._hangs(text, "1.36.3") == {"hang": True}
    assert admit._hangs(text, "1.37.2") == {"hang": True, "message": text}


def test_named_cases_are_asked_with_their_cpu_bound_and_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, Any]] = []

    def stream(target: str, requests: Iterator[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for r in requests:
            asked.append(r)
            yield r, {"id": r["id"], "answer": {"hang": True} if "hang_after_cpu" in r else r["case"]}

    area = SimpleNamespace(
        NAME="fake", MINORS=("1.37",), generate=lambda rng, v: {"n": rng.randint(0, 9)}, size=lambda c: 1,
        numalign=lambda c, v: {"hang": True} if c.get("named") else c,
        named_cases=lambda v: [("k8s-140730", {"named": True}, "2s"), ("other", {"named": False}, "1s")])
    monkeypatch.setitem(AREAS, "fake", area)
    monkeypatch.setattr(harness, "stream", stream)
    (tally,) = run.run_version("1.37", ["fake"], 3, 1, [])
    assert [r.get("hang_after_cpu") for r in asked] == [None, None, None, "2s", "1s"]
    assert [r["id"] for r in asked[3:]] == ["fake-k8s-140730", "fake-other"]
    assert tally.cases == 5 and tally.named == {"k8s-140730": True, "other": False}
    out = io.StringIO()
    assert run.report([tally], out) == 1
    assert "(named: k8s-140730 equal, other DIFFERENT)" in out.getvalue()


def test_the_kubelet_metrics_a_case_counted_are_compared() -> None:
    """The harness answers the counters the real managers added during the case (admit_metrics.go):
    a different count or a series only one side has is a difference."""
    counted = {"kubelet_cpu_manager_pinning_requests_total": {"": 1},
               "kubelet_container_aligned_compute_resources_count": {"boundary=uncore_cache,scope=container": 0}}
    ours = {"steps": [], "metrics": counted}
    assert admit.equivalent(ours, {"steps": [], "metrics": dict(counted)})
    assert not admit.equivalent(ours, {"steps": [], "metrics": {**counted,
                                                                "kubelet_cpu_manager_pinning_requests_total": {"": 2}}})
    assert not admit.equivalent(ours, {"steps": [], "metrics": {
        **counted, "kubelet_container_aligned_compute_resources_count": {}}})
    assert not admit.equivalent(ours, {"steps": []})


def test_a_case_whose_merges_cannot_spend_the_budget_is_not_counted_and_answers_the_same() -> None:
    sys_path = str(Path(__file__).parents[2] / "benchmarks")
    sys.path.insert(0, sys_path)
    try:
        import admissions_go  # the timed dual-socket mix: 4 NUMA nodes, cpu, memory, a GPU and a NIC
    finally:
        sys.path.remove(sys_path)
    numa, _, build, _ = next(m for m in admissions_go.MACHINES if m[1] == "dual-socket")
    mix = admissions_go.case_for(numa, build(), 3)
    # 33 merges (30 pods, one with an init container), 4 resource names, 5 hints a list at most: 33 * 5^4
    assert merge_budget._within_budget(mix["steps"], numa, "single-numa-node")
    counted: list[int] = []
    install = merge_budget.install

    def counting_always(tm: Any, policy: str, steps: Any = None) -> None:
        install(tm, policy)  # without the steps: every merge counted, as before the bound
        seen = tm.scope.answers_seen

        def spy(pod: Any, container: Any, answers: Any) -> None:
            counted.append(1)
            seen(pod, container, answers)

        tm.scope.answers_seen = spy

    skipped = admit.numalign(mix, "1.37.2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(merge_budget, "install", counting_always)
        assert admit.numalign(mix, "1.37.2") == skipped
    assert len(counted) == 33  # every container's merge (the init container's too)
    # Beyond it: the 8-NUMA best-effort case (255^3 permutations upstream) is counted, and ends as it must
    case = _eight_numa_case("best-effort")
    assert not merge_budget._within_budget(case["steps"], 8, "best-effort")
    assert merge_budget._within_budget(case["steps"], 8, "single-numa-node")  # 9^3 * 1 merge
    # A step not read as a pod is counted as any other (its pod is refused as the reader refuses it)
    assert not merge_budget._within_budget([{"op": "admit", "pod": {"spec": {"containers": "c"}}}], 2, "none")


# The harness's answer (1.37.2 with startErrors around the memory manager's NewManager): every text its
# Go map order gave over its tries.
_HUGEPAGES_TEXTS = [f'the total amount "{q}" of type "{t}" is not equal to the value "0" determined by Node '
                    'Allocatable feature' for q, t in (("1Gi", "hugepages-1Gi"), ("4Mi", "hugepages-2Mi"))]


@pytest.mark.parametrize("version", MINORS)
def test_the_named_reserved_hugepages_case_names_one_of_the_types_upstream_may_name(version: str) -> None:
    name, case, _ = admit.named_cases(version)[2]
    assert name == "reserved-hugepages-map-order"
    ours = admit.numalign(case, version)
    assert ours["start_error"].startswith(_HUGEPAGES_TEXTS[0] + "; fix: ")  # the first type in sorted order
    theirs = {"start_error": _HUGEPAGES_TEXTS[0], "start_error_map_order": _HUGEPAGES_TEXTS}
    assert admit.equivalent(ours, theirs)
    # the harness before answered the text of its first try only: hugepages-2Mi's is another answer
    assert not admit.equivalent(ours, {"start_error": _HUGEPAGES_TEXTS[1]})
