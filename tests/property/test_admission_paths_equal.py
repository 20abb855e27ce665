"""Node.admit's plain-call path and the steps path of decide/commit give the same admissions (review-3 L4).

Each scope's admission is written twice over the same parts (topologymanager/scopes.py: admit with
_allocate_now, admit_steps with _allocate): `Node.admit` takes the first, `decide`/`commit` (the agent,
`numalign run`) the second. Here both run the admit conformance area's random cases (its machines of 1 to
8 NUMA nodes, and the wide profile's of up to 64; every policy, scope and CPU manager option; pods of every
QoS class with init containers, hugepages and devices; plugins that refuse Allocate or answer it empty) on
two nodes built alike, step by step: every answer, decision record, allocation, plugin call, what the
managers hold (their state and checkpoint files) and every metric must be equal. Seeds are fixed.

It has teeth: either path's Allocate walking the providers in reverse (_allocate_now alone, or _allocate
alone) fails five of the six tests (checked by hand when it was written)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from conformance.areas import admit

from numalign.core.decision import DecisionRecord
from numalign.errors import AllocationError, NumalignError
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.node import Node
from numalign.kubelet.plan import Plan
from numalign.kubelet.topologymanager import merge_memo

CASES = 80  # per kubelet minor: 400 cases of the default profile
WIDE_CASES = 12  # per kubelet minor of the wide profile (machines of 12-64 NUMA nodes among them)


def _by_steps(node: Node, pod: Pod) -> DecisionRecord:
    """decide, then each paused plan's plugin call made and committed, as the agent does (one at a time)."""
    plan: DecisionRecord | Plan | None = node.decide(pod)
    while isinstance(plan, Plan) and not plan.settled:
        responses, error = plan.make_calls()
        plan = node.commit(plan, responses, error)
    assert plan is not None, "a plan was dropped with nobody else admitting on the node"
    return plan.record if isinstance(plan, Plan) else plan


def _calls(node: Node) -> dict[str, list[Any]]:
    return {r: list(info.endpoint.calls) for r, info in sorted(node.devices.endpoints.items())
            if isinstance(info.endpoint, StaticEndpoint)}


def _seen(node: Node, rec: DecisionRecord) -> dict[str, Any]:
    """What one admission left, on one node: its record, and the node's pods, managers, plugins and metrics."""
    return {"record": rec.to_dict(), "pods": sorted(node.pods), "held": admit.held(node),
            "containers": admit.containers_answer(node, node.pods[rec.pod_uid]) if rec.result.admit else None,
            "calls": _calls(node), "metrics": admit.metrics_answer(node)}


def _play(case: dict[str, Any], version: str) -> int:
    """Both paths over one case's steps, compared step by step; the steps played (0: a kubelet that would not
    start with the case's configuration, as the area answers it)."""
    try:
        plain, stepped = admit._node(case, version), admit._node(case, version)
    except NumalignError:
        return 0
    done = 0
    for s in case["steps"]:
        if s["op"] == "delete":
            if s["uid"] in plain.pods:
                plain.remove(s["uid"])
            if s["uid"] in stepped.pods:
                stepped.remove(s["uid"])
        else:
            # The process keeps what it computed (merges, hint lists, takes, keyed by what they read): the
            # path that goes first computes, the second may find it kept. So the paths take turns going
            # first, and no merge is kept from one path's admission to the other's.
            paths: list[tuple[Node, Callable[[Node, Pod], DecisionRecord]]] = [(plain, Node.admit),
                                                                              (stepped, _by_steps)]
            answers: dict[str, Any] = {}
            for node, how in paths if done % 2 == 0 else paths[::-1]:
                merge_memo.clear()
                pod = pod_from_dict(s["pod"], "case pod")
                try:
                    answers[how.__name__] = _seen(node, how(node, pod))
                except AllocationError as e:  # the kubelet hangs here (k/k #140730): both must say so
                    answers[how.__name__] = {"raised": (e.reason, str(e)), "held": admit.held(node)}
            first, second = answers.values()
            assert first == second, f"step {done} of the case: the two paths differ"
            if "raised" in first:
                break
        assert admit.held(plain) == admit.held(stepped) and sorted(plain.pods) == sorted(stepped.pods)
        done += 1
    return done


@pytest.mark.parametrize("version", admit.MINORS)
def test_both_paths_answer_alike_on_random_cases(version: str) -> None:
    rng = random.Random(f"admission-paths-{version}")
    played = [_play(admit.generate(rng, version), version) for _ in range(CASES)]
    played += [_play(admit.generate_wide(rng, version), version) for _ in range(WIDE_CASES)]
    assert sum(1 for n in played if n) >= (CASES + WIDE_CASES) // 2  # most kubelets start (some refuse)


def test_the_cases_reach_what_only_the_steps_path_does_differently() -> None:
    """The cases are worth comparing: some admissions pause at plugin calls (decide hands back a plan), and
    some of those calls fail, so both paths' handling of a call and of its failure are compared."""
    paused = failed = 0
    rng = random.Random("admission-paths-1.37")
    for _ in range(CASES):
        case = admit.generate(rng, "1.37")
        try:
            node = admit._node(case, "1.37")
        except NumalignError:
            continue
        for s in case["steps"]:
            if s["op"] == "delete":
                if s["uid"] in node.pods:
                    node.remove(s["uid"])
                continue
            plan: DecisionRecord | Plan | None
            try:
                plan = node.decide(pod_from_dict(s["pod"], "case pod"))
            except AllocationError:
                break
            while isinstance(plan, Plan) and not plan.settled:
                paused += 1
                responses, error = plan.make_calls()
                failed += error is not None
                plan = node.commit(plan, responses, error)
    assert paused >= 10 and failed >= 3, (paused, failed)
