"""The admit area's device plugins that refuse Allocate (conformance/area_admit.go's allocateEach): what
numalign is told and how a refusal met in Go map order compares (an admission stopped at a failing call
merges nothing after it on either side, so the merge budget needs no exception for it)."""

from __future__ import annotations

from typing import Any

from conformance.areas import admit

from numalign.errors import PluginError

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
