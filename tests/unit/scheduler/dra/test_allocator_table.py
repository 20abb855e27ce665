"""The structured allocator against upstream's shared allocator test table, translated case by case into
tests/data/dra/allocator_cases.yaml (the `upstream` key names the case of
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.dra_cases import NODE_LABELS, claims, classes, features, slices

from numalign.k8s.quantity import Quantity
from numalign.scheduler.dra.allocator import AllocatedState, Allocator, AllocatorError, NodeFailureError
from numalign.scheduler.dra.pools import NodeInfo

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "data" / "dra" / "allocator_cases.yaml").read_text()
)


def _state(case: dict[str, Any]) -> AllocatedState:
    state = AllocatedState()
    for text in case.get("allocated", ()):
        state.devices[tuple(text.split("/"))] = 1
    for text, _share in case.get("allocatedShared", ()):
        device_id = tuple(text.split("/"))
        state.shares[device_id] = state.shares.get(device_id, 0) + 1
    for text, amounts in (case.get("allocatedCapacity") or {}).items():
        state.capacity[tuple(text.split("/"))] = {k: Quantity.parse(v) for k, v in amounts.items()}
    return state


def _entry(r: Any) -> str:
    text = f"{r.request_name} {'/'.join(r.device_id)}"
    if r.admin_access:
        text += " admin"
    if r.share_id:
        text += " shared"
    if r.consumed_capacity is not None:
        text += " consumed " + ",".join(f"{k}={v}" for k, v in sorted(r.consumed_capacity.items()))
    return text


def _run(case: dict[str, Any], minor: int = 37, allocators: frozenset[str] = frozenset({"incubating", "experimental"})
         ) -> Allocator:
    """Allocate the case's claims and check the outcome; the allocator is returned for its step count.
    The step counts are the incubating generation's, as upstream's table runs it (EnableAllocators)."""
    node = case.get("node", "node-1")
    chosen = dataclasses.replace(features(case.get("features")), minor=minor, allocators=allocators)
    allocator = Allocator(chosen, _state(case),
                          classes(case.get("classes")), slices(case.get("slices")),
                          NodeInfo(node, NODE_LABELS.get(node, {})))
    try:
        result = allocator.allocate(claims(case.get("claims")))
    except (AllocatorError, NodeFailureError) as exc:
        assert "error" in case, f"unexpected error: {exc}"
        assert case["error"] in str(exc)
        return allocator
    assert "error" not in case, f"expected an error containing {case['error']!r}, got {result}"
    expect = case.get("expect", "none")
    if expect == "none":
        assert result is None or result == []
    else:
        assert result is not None
        got = [sorted(_entry(r) for r in claim_results) for claim_results in result]
        assert got == [sorted(entries) for entries in expect]
    return allocator


@pytest.mark.parametrize("case", CASES, ids=[c["upstream"] for c in CASES])
def test_upstream_allocator_case(case: dict[str, Any]) -> None:
    allocator = _run(case)
    if "invocations" in case:
        assert allocator.steps == case["invocations"]


@pytest.mark.parametrize("case", [c for c in CASES if "invocationsPermutations" in c], ids=lambda c: c["upstream"])
def test_upstream_step_counts_before_combinations(case: dict[str, Any]) -> None:
    """Upstream's stable generation still searches permutations (as every generation did until 1.36): the
    same answer after more steps; numalign does the same for 1.34 and 1.35 and for stable."""
    assert _run(case, minor=35).steps == case["invocationsPermutations"]
    assert _run(case, allocators=frozenset({"stable"})).steps == case["invocationsPermutations"]
