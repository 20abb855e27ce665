"""The admit area's device plugins that refuse Allocate (conformance/area_admit.go's allocateEach): what
numalign is told and how a refusal met in Go map order compares (an admission stopped at a failing call
merges nothing after it on either side, so the merge budget needs no exception for it)."""

from __future__ import annotations

from typing import Any

import pytest
from conformance.areas import admit

from numalign.errors import EmptyAllocateError, PluginError

REFUSED = ("Allocate failed due to rpc error: code = Unknown desc = device nic3,nic10 failed to reset, "
           "which is unexpected")
SHORT = ("Allocate failed due to requested number of devices unavailable for example.com/gpu. Requested: 3, "
         "Available: 2, which is unexpected")


def test_a_plugin_refuses_a_request_naming_its_failing_devices_in_natural_order() -> None:
    allocate = admit.allocate_answer(frozenset({"nic10", "nic3"}))
    assert dict(allocate(["nic1"]).envs) == {"CONFORMANCE": "1"}
    try:
        allocate(["nic10", "nic1", "nic3"])
    except PluginError as e:
        assert f"Allocate failed due to {e}, which is unexpected" == REFUSED
    else:
        raise AssertionError("the request includes failing devices")


def test_a_refusal_and_a_shortage_of_another_resource_of_the_container_are_one_map_order() -> None:
    ours = {"admit": False, "reason": "UnexpectedAdmissionError", "message": SHORT}
    theirs = {**ours, "message": REFUSED}
    assert admit.equivalent({"steps": [ours]}, {"steps": [theirs]})
    same_resource = {**ours, "message": SHORT.replace("gpu", "nic")}
    assert not admit.equivalent({"steps": [same_resource]}, {"steps": [theirs]})
    other_held = {**theirs, "held": {"cpus": {"default": "0-3", "entries": {}}}}
    assert not admit.equivalent({"steps": [ours]}, {"steps": [other_held]})


def test_the_kubelets_lagging_device_checkpoint_entries_are_set_apart() -> None:
    held: dict[str, Any] = {"cpus": {}, "memory": {}, "devices": {"entries": [], "registered": {}}}
    theirs = {"admit": True, "held": {**held, "devices": {**held["devices"], "lagging": ["uid-p0"]}}}
    assert admit.equivalent({"steps": [{"admit": True, "held": held}]}, {"steps": [theirs]})


def test_the_failing_containers_calls_to_another_plugin_are_one_map_order() -> None:
    """Upstream may ask the gpu plugin before it meets the nic refusal (Go map order); numalign, in sorted
    order, meets the refusal first. The refusing plugin's own calls, or more than one container's, differ."""
    nic = [{"call": "GetPreferredAllocation", "available": ["nic10", "nic3"], "mustInclude": [], "size": 2},
           {"call": "Allocate", "devices": ["nic10", "nic3"]}]
    gpu = [{"call": "Allocate", "devices": ["gpu0"]}]
    ours = {"admit": False, "reason": "UnexpectedAdmissionError", "message": REFUSED, "pluginCalls": {"nic": nic}}
    theirs = {**ours, "pluginCalls": {"nic": nic, "gpu": gpu}}
    assert admit.equivalent({"steps": [ours]}, {"steps": [theirs]})
    other = {**theirs, "pluginCalls": {"nic": nic[:1], "gpu": gpu}}
    assert not admit.equivalent({"steps": [ours]}, {"steps": [other]})
    admitted = {"admit": True, "reason": "", "message": "", "pluginCalls": {"nic": nic}}
    more = {**admitted, "pluginCalls": {"nic": nic, "gpu": gpu}}
    assert not admit.equivalent({"steps": [admitted]}, {"steps": [more]})


def test_a_plugin_answering_with_no_container_response() -> None:
    allocate = admit.allocate_answer(frozenset({"nic3"}), frozenset({"nic1"}))
    with pytest.raises(EmptyAllocateError):
        allocate(["nic1", "nic2"])
    with pytest.raises(PluginError, match="nic3 failed to reset"):  # a refusal comes first, as in the stub
        allocate(["nic1", "nic3"])


def test_after_a_map_order_step_each_sides_allocate_count_is_the_calls_its_plugins_saw() -> None:
    """Each side counts the Allocate calls its own plugins received (the duration histogram's count per
    resource); every other metric must be equal."""
    nic = [{"call": "Allocate", "devices": ["nic10", "nic3"]}]
    gpu = [{"call": "Allocate", "devices": ["gpu0"]}]
    step = {"admit": False, "reason": "UnexpectedAdmissionError", "message": REFUSED}
    durations = "kubelet_device_plugin_alloc_duration_seconds"

    def answer(calls: dict[str, Any], counted: dict[str, int], reason: str = "UnexpectedAdmissionError") -> Any:
        return {"steps": [{**step, "pluginCalls": calls}],
                "metrics": {"kubelet_admission_rejections_total": {f"reason={reason}": 1}, durations: counted}}

    theirs = answer({"nic": nic, "gpu": gpu}, {"resource_name=nic": 1, "resource_name=gpu": 1})
    assert admit.equivalent(answer({"nic": nic}, {"resource_name=nic": 1}), theirs)
    assert not admit.equivalent(answer({"nic": nic}, {}), theirs)  # a call not counted
    assert not admit.equivalent(answer({"nic": nic}, {"resource_name=nic": 1}, "Other"), theirs)
