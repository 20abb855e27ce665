"""A pod whose Topology Manager merge stops at numalign's work bound is that pod's answer (review-3 M2): it
is rejected with reason TopologyMergeWorkBound and the bound's line, the node's other pods are decided as
ever, the node holds nothing of it, and the same lists (the same pod shape on the same node state) are
refused from memory instead of spending the bound again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.merge_bound import BIG, SHORT_BOUND, kubelet_yaml

from numalign import metrics as m
from numalign.core.decision import MERGE_WORK_BOUND
from numalign.core.implicit import merge as implicit_merge
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.kubelet.topologymanager import merge_memo
from numalign.machine.examples import example


@pytest.fixture(autouse=True)
def _short_bound(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(implicit_merge, "MERGE_WORK_BOUND", SHORT_BOUND)
    merge_memo.clear()
    yield
    merge_memo.clear()


def _node(scope: str = "container") -> Node:
    return Node(example("numa-64"), config_from_yaml(kubelet_yaml(scope=scope)))


def _pod(name: str, cpu: str, memory: str) -> Pod:
    limits = {"cpu": Quantity.parse(cpu), "memory": Quantity.parse(memory)}
    return Pod(name=name, uid=name, containers=(Container("app", requests=dict(limits), limits=limits),))


def _held(node: Node) -> dict[str, object]:
    return {uid: {c.name: node.allocation(uid, c.name) for c in pod.containers} for uid, pod in node.pods.items()}


@pytest.mark.parametrize("scope", ["container", "pod"])
def test_the_pod_over_the_bound_is_rejected_alone_and_the_others_are_admitted(scope: str) -> None:
    node = _node(scope)
    assert node.admit(_pod("small-a", "4", "8Gi")).result.admit
    before = _held(node)
    rec = node.admit(_pod("big", *BIG))
    assert not rec.result.admit
    assert rec.result.reason == MERGE_WORK_BOUND
    assert rec.result.message.startswith(
        "Topology Manager merge over 64 NUMA nodes: no preferred placement, and ranking the intersections of 2 "
        f"constraining hint lists (cpu, memory) stopped at numalign's work bound ({SHORT_BOUND:,} steps;")
    assert rec.result.message.endswith(
        "fix: topologyManagerPolicy single-numa-node (or none), or a pod whose requests fit fewer NUMA nodes")
    (d,) = rec.decisions
    assert (d.merged, d.admit, d.explanation) == (None, False, (rec.result.message,))
    assert "big" not in node.pods and _held(node) == before  # nothing of it is held
    assert node.metrics.value(m.ADMISSION_REJECTIONS, reason="Other") == 1
    assert node.admit(_pod("small-b", "2", "4Gi")).result.admit
    assert sorted(node.pods) == ["small-a", "small-b"]


def test_the_same_shape_on_the_same_state_is_refused_from_memory_and_a_new_state_is_merged_again() -> None:
    node = _node()
    first = node.admit(_pod("big-1", *BIG))
    assert first.result.reason == MERGE_WORK_BOUND
    (key,) = merge_memo.refusals
    # Mark the kept line: an answer carrying the mark was given from memory, not by merging again.
    merge_memo.refusals[key] = "remembered: " + first.result.message
    again = node.admit(_pod("big-2", *BIG))  # another pod of the same shape, the node unchanged
    assert (again.result.reason, again.result.message) == (MERGE_WORK_BOUND, "remembered: " + first.result.message)
    assert again.decisions[0].to_dict()["providers"] == first.decisions[0].to_dict()["providers"]  # the hints given
    # Another pod of the same shape on another node in the same state: the same lists, the same refusal.
    assert _node().admit(_pod("big-3", *BIG)).result.message.startswith("remembered: ")
    # Once the node's state changed, the lists are others: merged afresh (and kept beside the first).
    assert node.admit(_pod("small", "2", "4Gi")).result.admit
    fresh = node.admit(_pod("big-4", *BIG))
    assert (fresh.result.reason, fresh.result.message) == (MERGE_WORK_BOUND, first.result.message)
    assert len(merge_memo.refusals) == 2


def test_the_decide_and_commit_path_answers_as_admit() -> None:
    plain, stepped = _node(), _node()
    plan = stepped.decide(_pod("big", *BIG))  # (merged there first; admit then answers from memory)
    want = plain.admit(_pod("big", *BIG))
    assert plan.settled and plan.record is not None
    assert plan.record.result == want.result
    assert [d.to_dict() for d in plan.record.decisions] == [d.to_dict() for d in want.decisions]
    assert stepped.probe(_pod("big", *BIG)).result == want.result


def test_the_refusals_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(merge_memo, "MAX_REFUSALS", 2)
    node = _node()
    for i, cpus in enumerate(("40", "42", "44")):  # three shapes over the bound: three refusals kept in turn
        assert node.admit(_pod(f"big-{i}", cpus, "530Gi")).result.reason == MERGE_WORK_BOUND
    assert len(merge_memo.refusals) == 1  # the table was full at the third: emptied, then that one kept
