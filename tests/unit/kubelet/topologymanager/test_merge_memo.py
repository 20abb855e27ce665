"""The merges kept by what was merged (merge_memo): a merge answered from the memo is the merge made
afresh, for every shape of answer the merge and the explanation tell apart."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.core.numa import NUMAInfo
from numalign.core.policies import PolicyOptions, make_policy
from numalign.core.policies.base import MergeResult
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager import merge_memo
from numalign.kubelet.topologymanager.manager import TopologyManager

NUMA4 = NUMAInfo.create([0, 1, 2, 3], {0: [10, 12, 20, 22], 1: [12, 10, 22, 20], 2: [20, 22, 10, 12],
                                       3: [22, 20, 12, 10]})


def H(nodes: list[int] | None, preferred: bool) -> TopologyHint:
    return TopologyHint.of(nodes, preferred)


# Answers the merge and its explanation tell apart: no map, an empty map, a resource with no preference,
# a resource that cannot be satisfied, preferred and non-preferred lists, the same hints in other orders.
ANSWERS: list[ProviderHints] = [
    None,
    {},
    {"cpu": None},
    {"cpu": []},
    {"cpu": [H([0], True), H([1], True), H([0, 1], False)]},
    {"cpu": [H([1], True), H([0], True), H([0, 1], False)]},
    {"cpu": [H([0, 1], True), H([0, 1, 2, 3], False)]},
    {"gpu": [H([2], True)], "cpu": [H([2, 3], False)]},
    {"cpu": [H([2, 3], False)], "gpu": [H([2], True)]},
]


class Fixed:
    def __init__(self, name: str) -> None:
        self.name = name
        self.answer: ProviderHints = None

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self.answer

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return self.answer

    def allocate(self, pod: Pod, container: Container) -> None:
        pass

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        pass


def _manager(policy: str, options: dict[str, str] | None = None) -> tuple[TopologyManager, list[Fixed]]:
    tm = TopologyManager(NUMA4, policy, "container", options)
    providers = [Fixed("devices"), Fixed("cpu"), Fixed("memory")]
    for p in providers:
        tm.add_hint_provider(p)
    return tm, providers


@pytest.mark.parametrize("policy,options", [
    ("single-numa-node", None), ("restricted", None), ("best-effort", None),
    ("best-effort", {"prefer-closest-numa-nodes": "true"}), ("none", None),
])
def test_a_merge_from_the_memo_is_the_merge_made_afresh(policy: str, options: dict[str, str] | None) -> None:
    tm, providers = _manager(policy, options)
    for combo in itertools.product(ANSWERS, repeat=2):
        providers[0].answer, providers[1].answer = combo
        merge_memo.clear()
        fresh = tm.scope._merge("c", [p.answer for p in providers])
        # The merge is kept once; its explanation is then marked, so an answer carrying the mark came
        # from the memo and not from another merge. (Observed through the memo itself, not by replacing
        # the policy's merge: a compiled policy's methods cannot be replaced.)
        ((key, kept),) = merge_memo._memo.items()
        marked = ("from the memo",)
        merge_memo._memo[key] = (kept[0], kept[1], marked, kept[3])
        again = tm.scope._merge("c2", [p.answer for p in providers])
        assert again.explanation == marked, "merged again: the memo did not answer"
        assert kept[2] == fresh.explanation
        assert again == dataclasses.replace(fresh, container="c2", explanation=marked)


def test_policies_of_other_options_or_nodes_do_not_share_merges() -> None:
    a = merge_memo.policy_key(make_policy("best-effort", NUMA4))
    b = merge_memo.policy_key(make_policy("best-effort", NUMA4, PolicyOptions(prefer_closest_numa=True)))
    c = merge_memo.policy_key(make_policy("best-effort", NUMAInfo.create([0, 1])))
    d = merge_memo.policy_key(make_policy("restricted", NUMA4))
    assert len({a, b, c, d}) == 4
    assert a == merge_memo.policy_key(make_policy("best-effort", NUMAInfo.create([0, 1, 2, 3])))


def test_a_policy_that_reads_more_than_the_answers_is_never_kept() -> None:
    class Scored:
        name = make_policy("best-effort", NUMA4).name

        def merge(self, hints: object) -> MergeResult:
            return MergeResult(TopologyHint(1, True), True)

    assert merge_memo.policy_key(Scored()) is None
    tm, _ = _manager("best-effort")
    tm.scope.policy = Scored()
    merge_memo.clear()
    tm.scope._merge("c", [None, None, None])
    assert not merge_memo._memo


def test_implicit_answers_are_not_kept() -> None:
    from numalign.core.implicit.hints import ImplicitHints

    implicit = ImplicitHints.__new__(ImplicitHints)
    assert merge_memo.answers_key([{"cpu": implicit}]) is None
    assert merge_memo.answers_key([None, {}, {"cpu": None}, {"cpu": []}]) == (None, (), (("cpu", None),),
                                                                              (("cpu", ()),))


def test_a_shared_hint_is_the_hint_made_afresh() -> None:
    from numalign.core.hint import hint_of

    for mask in (None, 0, 1, 0b1010, 1 << 63):
        for preferred in (True, False):
            shared = hint_of(mask, preferred)
            assert shared == TopologyHint(mask, preferred) and hint_of(mask, preferred) is shared


def test_long_answers_are_merged_afresh() -> None:
    """A key holds every hint: answers longer than MAX_HINTS (8 NUMA nodes listed explicitly) are not kept."""
    many = [TopologyHint(m, False) for m in range(1, merge_memo.MAX_HINTS + 2)]
    assert merge_memo.answers_key([{"cpu": many}]) is None
    assert merge_memo.answers_key([{"cpu": many[:-1]}]) is not None
