"""Why claims cannot be allocated (scheduler/dra/explain.py): after the allocator's `cannot allocate all
claims`, the request, selector, constraint or count that fails, with its figures. The allocator's answer
is the same with and without the explanation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from numalign.k8s.dra.documents import pods_and_dra_from_yaml
from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle
from numalign.kubelet.dramanager.manager import DRAManager
from numalign.scheduler.dra.api import AllocationFailure, AllocationResult
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

SLICES = "\n---\n".join((Path(__file__).resolve().parents[3] / "data" / "dra" / "four-gpus.yaml")
                   .read_text().split("\n---\n")[:2])  # gpu-0..3 (h100 on NUMA 0, 1, 1; a100 on 3), class h100


def _pod(name: str, requests: str, constraints: str = "") -> str:
    return f"""
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: {name}}}
spec:
  spec:
    devices:
      requests: {requests}
      constraints: {constraints or "[]"}
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims: [{{name: c, resourceClaimTemplateName: {name}}}]
  containers: [{{name: main, image: x, resources: {{claims: [{{name: c}}]}}}}]
"""


def _last(text: str, version: str = "1.37", explain: bool = True) -> PodClaims:
    """The last pod's outcome after the earlier pods got their claims."""
    pods, objects = pods_and_dra_from_yaml(SLICES + text, "in.yaml")
    # The node's DRA manager keeps what the earlier pods' claims hold; the scheduler's ledger is its view.
    life = ClaimLifecycle(DRAManager(), objects,
                          lambda view: NodeDRA(view, "node-a", version=version, explain_failures=explain))
    outcome = None
    for pod in pods:
        outcome = life.allocate(pod)
        assert outcome is not None
        if pod is not pods[-1]:
            assert outcome.failure is None
            life.commit(outcome)
    assert outcome is not None
    return outcome


def _why(text: str, version: str = "1.37") -> list[str]:
    outcome = _last(text, version)
    failure = outcome.failure
    assert isinstance(failure, AllocationFailure) and failure.message == "cannot allocate all claims"
    assert outcome.explanation is not None
    # The explanation decides nothing: the same answer without it.
    assert _last(text, version, explain=False).result == outcome.result
    return list(outcome.explanation.reasons)


def test_a_class_selector_that_matches_no_device_is_named_with_the_devices_it_was_tried_on() -> None:
    pods_yaml = SLICES.replace('model == "h100"', 'model == "h200"')
    pods, objects = pods_and_dra_from_yaml(pods_yaml + _pod("p", "[{name: g, exactly: {deviceClassName: h100}}]"),
                                           "in.yaml")
    outcome = NodeDRA(objects, "node-a", explain_failures=True).allocate(pods[0])
    assert outcome is not None and outcome.explanation is not None
    assert outcome.explanation.reasons == (
        "claim default/p-c, request g: class h100 selector #0 matched none of the 4 device(s) it was tried on: "
        'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h200"',)


def test_a_request_selector_that_matches_none_of_the_class_devices() -> None:
    why = _why(_pod("p", "[{name: g, exactly: {deviceClassName: h100, selectors: "
                         "[{cel: {expression: 'device.capacity[\"gpu.example.com\"].memory.compareTo("
                         "quantity(\"100Gi\")) >= 0'}}]}}]"))
    assert why == ["claim default/p-c, request g: request selector #0 matched none of the 3 device(s) it was tried "
                   "on: device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"100Gi\")) >= 0"]


def test_a_count_short_says_how_many_match() -> None:
    assert _why(_pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 4}}]")) == [
        "claim default/p-c, request g: needs 4 device(s), 3 usable: 4 on the node, class h100 selector #0 matched 3"]


def test_devices_other_claims_hold_are_counted() -> None:
    text = _pod("a", "[{name: g, exactly: {deviceClassName: h100, count: 2}}]") + _pod(
        "b", "[{name: g, exactly: {deviceClassName: h100, count: 2}}]")
    assert _why(text) == ["claim default/b-c, request g: needs 2 device(s), 1 usable: 4 on the node, class h100 "
                          "selector #0 matched 3, 2 held by other claims"]


def test_all_devices_when_one_is_held() -> None:
    text = _pod("a", "[{name: g, exactly: {deviceClassName: h100}}]") + _pod(
        "b", "[{name: g, exactly: {deviceClassName: h100, allocationMode: All}}]")
    assert _why(text) == ["claim default/b-c, request g: asks for all 3 device(s) its selectors match, 1 of them "
                          "cannot be taken: 4 on the node, class h100 selector #0 matched 3, 1 held by other claims"]


def test_match_attribute_without_a_value_enough_devices_share() -> None:
    numa = "[{requests: [g], matchAttribute: resource.kubernetes.io/numaNode}]"
    assert _why(_pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 3}}]", numa)) == [
        "claim default/p-c, matchAttribute resource.kubernetes.io/numaNode (constraint #0 over g): no value is on "
        "enough usable devices (g needs 3): 0: g 1; 1: g 2"]


def test_match_attribute_missing_on_the_devices_is_named() -> None:
    serial = "[{requests: [g], matchAttribute: gpu.example.com/serial}]"
    assert _why(_pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 2}}]", serial)) == [
        "claim default/p-c, matchAttribute gpu.example.com/serial (constraint #0 over g): missing on "
        "gpu.example.com/node-a: gpu-0, gpu-1, gpu-2; no usable device has the attribute (g needs 2)"]


def test_distinct_attribute_with_too_few_values() -> None:
    numa = "[{requests: [g], distinctAttribute: resource.kubernetes.io/numaNode}]"
    assert _why(_pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 3}}]", numa)) == [
        "claim default/p-c, distinctAttribute resource.kubernetes.io/numaNode (constraint #0 over g): 2 different "
        "value(s) on the usable devices, 3 needed"]


def test_a_first_available_request_is_short_only_when_every_subrequest_is() -> None:
    subs = ("[{name: g, firstAvailable: [{name: four, deviceClassName: h100, count: 4}, "
            "{name: two, deviceClassName: h100, count: 2}]}]")
    numa = "[{requests: [g], matchAttribute: gpu.example.com/serial}]"
    why = _why(_pod("p", subs, numa))
    assert why == ["claim default/p-c, matchAttribute gpu.example.com/serial (constraint #0 over g): missing on "
                   "gpu.example.com/node-a: gpu-0, gpu-1, gpu-2; no usable device has the attribute (g needs 2)"]
    both = _why(_pod("p", subs.replace("count: 2", "count: 5")))
    assert both == [
        "claim default/p-c, request g/four: needs 4 device(s), 3 usable: 4 on the node, class h100 selector #0 "
        "matched 3",
        "claim default/p-c, request g/two: needs 5 device(s), 3 usable: 4 on the node, class h100 selector #0 "
        "matched 3"]


def test_requests_that_fit_alone_but_not_together() -> None:
    two = "[{name: a, exactly: {deviceClassName: h100, count: 2}}, {name: b, exactly: {deviceClassName: h100, " \
          "count: 2}}]"
    assert _why(_pod("p", two)) == [
        "each request has enough usable devices and each constraint a shared value on its own, but together the "
        "requests need 4 device(s) of 3 usable ones"]


def test_tainted_devices_are_counted() -> None:
    tainted = SLICES.replace("  - name: gpu-0\n", "  - name: gpu-0\n    taints: [{key: broken, effect: NoSchedule}]\n")
    pods, objects = pods_and_dra_from_yaml(
        tainted + _pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 3}}]"), "in.yaml")
    outcome = NodeDRA(objects, "node-a", explain_failures=True).allocate(pods[0])
    assert outcome is not None and outcome.explanation is not None
    assert outcome.explanation.reasons == (
        "claim default/p-c, request g: needs 3 device(s), 2 usable: 4 on the node, class h100 selector #0 matched 3, "
        "1 tainted",)


def test_details_and_json_carry_every_finding() -> None:
    numa = "[{requests: [g], matchAttribute: resource.kubernetes.io/numaNode}]"
    outcome = _last(_pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 3}}]", numa))
    why = outcome.explanation
    assert why is not None
    assert why.lines(details=True)[1:] == [
        "claim default/p-c, request g (class h100): needs 3: 4 on the node, class h100 selector #0 matched 3, "
        "3 usable"]
    doc = why.to_dict()
    assert doc["requests"][0] | {"steps": None} == {
        "claim": "default/p-c", "request": "g", "deviceClass": "h100", "allocationMode": "ExactCount", "need": 3,
        "devicesOnNode": 4, "steps": None, "selected": 3, "usable": 3, "heldByOtherClaims": 0, "tainted": 0,
        "withoutCapacity": 0, "notSelectable": 0, "satisfied": True}
    assert doc["constraints"] == [{
        "claim": "default/p-c", "constraint": 0, "kind": "matchAttribute",
        "attribute": "resource.kubernetes.io/numaNode", "requests": ["g"], "satisfied": False, "missingOn": [],
        "values": [{"value": "0", "devices": {"g": 1}}, {"value": "1", "devices": {"g": 2}}], "needs": {"g": 3}}]


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36"])
def test_every_version_explains(version: str) -> None:
    assert _why(_pod("p", "[{name: g, exactly: {deviceClassName: h100, count: 4}}]"), version) == [
        "claim default/p-c, request g: needs 4 device(s), 3 usable: 4 on the node, class h100 selector #0 matched 3"]


def test_an_allocation_is_not_explained() -> None:
    outcome = _last(_pod("p", "[{name: g, exactly: {deviceClassName: h100}}]"))
    assert isinstance(outcome.result, AllocationResult) and outcome.explanation is None
    assert dataclasses.replace(outcome).explanation is None


def test_a_node_whose_only_pool_is_left_out_is_not_said_to_publish_no_slice() -> None:
    """The node's slice is there, but its pool counts two slices and one arrived: the pool is incomplete and
    the allocator (1.35+) takes none of its devices. The reason says so, not "no ResourceSlice"."""
    slices = SLICES.replace("resourceSliceCount: 1", "resourceSliceCount: 2")
    pods, objects = pods_and_dra_from_yaml(slices + _pod("p", "[{name: g, exactly: {deviceClassName: h100}}]"),
                                           "in.yaml")
    outcome = NodeDRA(objects, "node-a", explain_failures=True).allocate(pods[0])
    assert outcome is not None and outcome.explanation is not None
    assert outcome.explanation.reasons == (
        "claim default/p-c, request g: no device on the node to try (every pool with devices for this node is "
        "left out, below)",
        "pool(s) left out as the allocator leaves them out: gpu.example.com/node-a (incomplete)")
