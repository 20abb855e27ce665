"""Inputs that made the allocator's work explode answer as upstream does, within a bounded number of
device checks (counted, so these tests assert answers and counts, never time)."""

from __future__ import annotations

from numalign.k8s.dra.types import (
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DRAObjects,
    PodResourceClaim,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
)
from numalign.k8s.pod import Pod
from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle
from numalign.kubelet.dramanager.manager import DRAManager
from numalign.scheduler.dra.allocator import AllocatedState, Allocator
from numalign.scheduler.dra.api import AllocationFailure, AllocationResult, allocate_claims
from numalign.scheduler.dra.features import features_for
from numalign.scheduler.dra.pools import NodeInfo
from numalign.scheduler.dra.scheduling import NodeDRA

DRIVER = "x.example.com"
CLASS = DeviceClass(name="x", selectors=(DeviceSelector(f'device.driver == "{DRIVER}"'),))


def _slice(devices: tuple[Device, ...]) -> ResourceSlice:
    return ResourceSlice(name="s", driver=DRIVER, pool=ResourcePool("p", 1, 1), node_name="n", devices=devices)


def _claim(name: str, count: int = 1, match: str | None = None) -> ResourceClaim:
    request = DeviceRequest(name="r", exactly=DeviceSubRequest(name="r", device_class_name="x", count=count))
    constraints = (DeviceConstraint(match_attribute=match),) if match else ()
    return ResourceClaim(name=name, namespace="default", spec=ResourceClaimSpec((request,), constraints))


def _roots(values: list[str]) -> tuple[Device, ...]:
    return tuple(Device(name=f"d{i}", attributes={f"{DRIVER}/root": DeviceAttribute("string", (v,))})
                 for i, v in enumerate(values))


def test_two_devices_matching_an_attribute_among_4096_distinct_ones_is_unschedulable_not_a_timeout() -> None:
    devices = _roots([f"root-{i}" for i in range(4096)])
    for version in ("1.35", "1.36", "1.37"):
        allocator = Allocator(features_for(version), AllocatedState(), {"x": CLASS}, [_slice(devices)], NodeInfo("n"))
        assert allocator.allocate([_claim("c", count=2, match=f"{DRIVER}/root")]) is None
        # Each first device's partner is looked up among the devices with its value, not scanned for:
        # the search checks each device about once, not 4096 x 4096 / 2 times.
        assert allocator.checks <= 2 * 4096, version


def test_the_only_matching_pair_at_the_end_of_4096_devices_is_found() -> None:
    values = [f"root-{i}" for i in range(4096)]
    values[4000] = values[4095] = "shared"
    result = allocate_claims([_claim("c", count=2, match=f"{DRIVER}/root")], [_slice(_roots(values))], [CLASS],
                             node="n")
    assert isinstance(result, AllocationResult)
    assert [d.device for d in result.devices] == ["d4000", "d4095"]


def test_a_search_that_cannot_end_in_time_stops_at_its_budget_with_upstreams_text() -> None:
    # 13 requests for one device each, pairwise distinct values, among 24 devices that have 12 values: none
    # fits, and the search tries every way to pick 12 before it knows.
    requests = tuple(DeviceRequest(name=f"r{i}", exactly=DeviceSubRequest(name=f"r{i}", device_class_name="x"))
                     for i in range(13))
    claim = ResourceClaim(name="c", namespace="default", spec=ResourceClaimSpec(
        requests, (DeviceConstraint(distinct_attribute=f"{DRIVER}/root"),)))
    devices = _roots([f"root-{i % 12}" for i in range(24)])
    result = allocate_claims([claim], [_slice(devices)], [CLASS], node="n", budget=20_000)
    assert isinstance(result, AllocationFailure) and not result.unschedulable
    assert result.message == "node n: timed out trying to allocate devices"
    assert result.line() == ("ResourceClaim default/c: numalign stopped the search after 20000 device checks (its "
                             "bound in place of the scheduler's 10 s filter timeout): node n: timed out trying to "
                             "allocate devices")
    older = allocate_claims([claim], [_slice(devices)], [CLASS], node="n", budget=20_000, version="1.35",
                            gates={"DRAConsumableCapacity": True})
    assert isinstance(older, AllocationFailure) and older.unschedulable
    assert older.message == "timed out trying to allocate devices"


def test_thousands_of_claims_on_one_node_each_get_their_own_device_and_give_it_back() -> None:
    n = 1500
    objects = DRAObjects(classes={"x": CLASS}, slices=[_slice(tuple(Device(name=f"d{i}") for i in range(n)))])
    for i in range(n + 1):
        objects.claims[f"default/c{i}"] = _claim(f"c{i}")
    # The node's DRA manager keeps what the claims hold; the scheduler's ledger is its view.
    life = ClaimLifecycle(DRAManager(), objects, lambda view: NodeDRA(view, "n"))
    pods = [Pod(name=f"p{i}", uid=f"u{i}", resource_claims=(PodResourceClaim("gpu", f"c{i}"),)) for i in range(n + 1)]
    taken = []
    for pod in pods[:n]:
        outcome = life.allocate(pod)
        assert outcome is not None and outcome.failure is None
        life.commit(outcome)
        taken.append(outcome.devices[0].device)
    assert taken == [f"d{i}" for i in range(n)]
    last = life.allocate(pods[n])
    assert last is not None and last.failure is not None and last.failure.message == "cannot allocate all claims"
    assert life.release(pods[7].uid) == ["default/c7"]
    again = life.allocate(pods[n])
    assert again is not None and [d.device for d in again.devices] == ["d7"]


def test_the_ledgers_state_adds_and_removes_claims_symmetrically() -> None:
    objects = DRAObjects(classes={"x": CLASS}, slices=[_slice(tuple(Device(name=f"d{i}") for i in range(3)))])
    result = allocate_claims([_claim("a", count=2)], objects.slices, objects.classes, node="n")
    assert isinstance(result, AllocationResult)
    state = AllocatedState([result.claims[0].allocated_claim()])
    state.add_claim(result.claims[0].allocated_claim())  # counted once
    assert sorted(state.devices) == [(DRIVER, "p", "d0"), (DRIVER, "p", "d1")]
    state.remove_claim("default/a")
    assert state.devices == {} and not state.holds((DRIVER, "p", "d0"))
