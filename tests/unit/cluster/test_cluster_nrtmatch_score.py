"""NodeResourceTopologyMatch's Score, ported from scheduler-plugins pkg/noderesourcetopology/score_test.go
(TestNodeResourceScorePlugin, TestNodeResourceScorePluginLeastNUMA, TestNodeResourcePartialDataScorePlugin)."""

from __future__ import annotations

import pytest

from numalign.cluster.nrt import NodeResourceTopology, ResourceInfo, Zone
from numalign.cluster.nrtmatch import score_node
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity

CPU, MEM, GPU = "cpu", "memory", "gpu"


def _q(v: str) -> int:
    return Quantity.parse(v).value()


def _zone(name: str, res: list[tuple[str, str]], costs: list[int] | None = None) -> Zone:
    return Zone(name, "Node", tuple(ResourceInfo(r, _q(v), _q(v), _q(v)) for r, v in res),
                tuple((f"node-{i}", c) for i, c in enumerate(costs or [])))


def default_numa_nodes(policy: str) -> dict[str, NodeResourceTopology]:
    def two(cpu: str, mem: str) -> tuple[Zone, ...]:
        return (_zone("node-0", [(CPU, cpu), (MEM, mem)]), _zone("node-1", [(CPU, cpu), (MEM, mem)]))

    return {n: NodeResourceTopology(n, zones, (), (policy,)) for n, zones in
            (("Node1", two("4", "500Mi")), ("Node2", two("2", "50Mi")), ("Node3", two("6", "60Mi")))}


COSTS = [[10, 12, 20, 20], [12, 10, 20, 20], [20, 20, 10, 12], [20, 20, 12, 10]]


def four_numa_nodes() -> dict[str, NodeResourceTopology]:
    def node(name: str, gpus: list[str]) -> NodeResourceTopology:
        return NodeResourceTopology(name, tuple(
            _zone(f"node-{i}", [(CPU, "2"), (MEM, "50Mi"), (GPU, g)], COSTS[i]) for i, g in enumerate(gpus)),
            (), ("BestEffortContainerLevel",))

    return {"Node1": node("Node1", ["1", "1", "0", "0"]), "Node2": node("Node2", ["1", "0", "1", "0"])}


def _pod(*containers: dict[str, str]) -> Pod:
    """makePodByResourceLists: one container per list, requests = limits."""
    res = [{k: Quantity.parse(v) for k, v in c.items()} for c in containers]
    return Pod("p", containers=tuple(Container(f"c{i}", r, r) for i, r in enumerate(res)))


def _max_node(scores: dict[str, int]) -> tuple[str, int]:
    best = max(scores.values())
    return next((n, s) for n, s in sorted(scores.items()) if s == best)


POD1 = _pod({CPU: "2", MEM: str(20 * 1024 * 1024)})


@pytest.mark.parametrize(("strategy", "node", "score"), [
    ("MostAllocated", "Node2", 70),
    ("BalancedAllocation", "Node3", 100),
    ("LeastAllocated", "Node1", 73),
])
def test_node_resource_score_plugin(strategy: str, node: str, score: int) -> None:
    nrts = default_numa_nodes("SingleNUMANodeContainerLevel")
    scores = {n: score_node(POD1, nrt, strategy) for n, nrt in nrts.items()}
    assert _max_node(scores) == (node, score)


@pytest.mark.parametrize(("strategy", "score"), [("MostAllocated", 27), ("LeastAllocated", 73),
                                                  ("BalancedAllocation", 89)])
def test_partial_data_node_without_nrt_scores_zero(strategy: str, score: int) -> None:
    nrts = default_numa_nodes("SingleNUMANodeContainerLevel")
    scores = {n: score_node(POD1, nrt if n == "Node1" else None, strategy) for n, nrt in nrts.items()}
    assert scores == {"Node1": score, "Node2": 0, "Node3": 0}


C = "BestEffortContainerLevel"
P = "BestEffortPodLevel"


@pytest.mark.parametrize(("policy", "containers", "wanted"), [
    (C, [{CPU: "2", MEM: "50Mi"}], {"Node1": 94, "Node2": 94, "Node3": 94}),
    (C, [{CPU: "4", MEM: "50Mi"}], {"Node1": 94, "Node2": 82, "Node3": 94}),
    (C, [{CPU: "6", MEM: "50Mi"}], {"Node1": 82, "Node2": 0, "Node3": 94}),
    (C, [{CPU: "2", MEM: "50Mi"}, {CPU: "2", MEM: "50Mi"}], {"Node1": 94, "Node2": 94, "Node3": 94}),
    (C, [{CPU: "1", MEM: "50Mi"}, {CPU: "3", MEM: "50Mi"}], {"Node1": 94, "Node2": 82, "Node3": 94}),
    (C, [{CPU: "5", MEM: "50Mi"}, {CPU: "3", MEM: "50Mi"}], {"Node1": 82, "Node2": 0, "Node3": 94}),
    (C, [{"non-numa-resource": "1"}, {"non-numa-resource": "2"}], {"Node1": 100, "Node2": 100, "Node3": 100}),
    (P, [{CPU: "2", MEM: "50Mi"}, {CPU: "2", MEM: "50Mi"}], {"Node1": 94, "Node2": 82, "Node3": 82}),
    (P, [{CPU: "1", MEM: "50Mi"}, {CPU: "3", MEM: "50Mi"}], {"Node1": 94, "Node2": 82, "Node3": 82}),
    (P, [{CPU: "5", MEM: "50Mi"}, {CPU: "3", MEM: "50Mi"}], {"Node1": 82, "Node2": 0, "Node3": 82}),
    (P, [{"non-numa-resource": "1"}], {"Node1": 100, "Node2": 100, "Node3": 100}),
])
def test_least_numa_default_nodes(policy: str, containers: list[dict[str, str]], wanted: dict[str, int]) -> None:
    pod = _pod(*containers)
    assert {n: score_node(pod, nrt, "LeastNUMANodes") for n, nrt in default_numa_nodes(policy).items()} == wanted


@pytest.mark.parametrize(("containers", "wanted"), [
    ([{CPU: "2", MEM: "50Mi", GPU: "1"}], {"Node1": 94, "Node2": 94}),
    ([{CPU: "2", MEM: "50Mi", GPU: "2"}], {"Node1": 82, "Node2": 76}),
    ([{CPU: "2", MEM: "50Mi", GPU: "2"}, {CPU: "2", MEM: "50Mi"}], {"Node1": 82, "Node2": 76}),
])
def test_least_numa_four_numa_nodes_with_distances(containers: list[dict[str, str]], wanted: dict[str, int]) -> None:
    pod = _pod(*containers)
    assert {n: score_node(pod, nrt, "LeastNUMANodes") for n, nrt in four_numa_nodes().items()} == wanted


def test_non_guaranteed_pods_score_max() -> None:
    burstable = Pod("b", containers=(Container("c", {CPU: Quantity.parse("1")}, {CPU: Quantity.parse("2")}),))
    for nrt in default_numa_nodes("SingleNUMANodeContainerLevel").values():
        assert score_node(burstable, nrt, "LeastAllocated") == 100
