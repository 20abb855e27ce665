"""The search skips work it can prove useless (a device a request can never take, a part of the search that
failed before from the same state) but counts every device check a device-by-device search makes: the
budget that stands for the scheduler's 10 s filter timeout runs out at the same check, so the answers do
not depend on how fast numalign searches. These tests assert answers and counts, never time."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.types import (
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
)
from numalign.scheduler.dra.allocator import (
    DEFAULT_SEARCH_BUDGET,
    DEFAULT_WORK_BOUND,
    AllocatedState,
    Allocator,
)
from numalign.scheduler.dra.api import AllocationFailure, allocate_claims
from numalign.scheduler.dra.features import features_for
from numalign.scheduler.dra.pools import NodeInfo

N = 8
CLASSES = {name: DeviceClass(name=name, selectors=(DeviceSelector(f'device.driver == "{name}.example.com"'),))
           for name in ("a", "b")}
SLICES = [ResourceSlice(name="s", driver="a.example.com", pool=ResourcePool("p", 1, 1), node_name="n",
                        devices=tuple(Device(name=f"d{i}", attributes={"index": DeviceAttribute("int", (i,))})
                                      for i in range(N)))]


def _claim(name: str, cls: str, count: int, selector: str = "") -> ResourceClaim:
    selectors = (DeviceSelector(selector),) if selector else ()
    request = DeviceRequest(name="r", exactly=DeviceSubRequest(name="r", device_class_name=cls, count=count,
                                                                selectors=selectors))
    return ResourceClaim(name=name, namespace="default", spec=ResourceClaimSpec((request,)))


# Claim "pair" takes 2 of the N devices of driver a; claim "none" wants a device of driver b, which no
# slice has, so every pair is tried and each time the N devices are checked for "none".
CLAIMS = [_claim("pair", "a", 2), _claim("none", "b", 1)]
# 1.36 and later search combinations: the pair's second device comes after its first.
COMBINATIONS = N + N * (N - 1) // 2 * (1 + N)
# 1.35 searches permutations: every second device is checked again from the start (its first counted too).
PERMUTATIONS = N * (1 + 1 + (N - 1) * (1 + N))


@pytest.mark.parametrize(("version", "checks"), [("1.37", COMBINATIONS), ("1.36.3", COMBINATIONS),
                                                 ("1.35", PERMUTATIONS)])
def test_a_later_claim_that_always_fails_costs_its_checks_each_time(version: str, checks: int) -> None:
    allocator = Allocator(features_for(version), AllocatedState(), CLASSES, SLICES, NodeInfo("n"))
    assert allocator.allocate(CLAIMS) is None
    assert allocator.checks == checks


@pytest.mark.parametrize(("version", "checks"), [("1.37", COMBINATIONS), ("1.35", PERMUTATIONS)])
def test_the_budget_runs_out_at_the_same_check_as_a_device_by_device_search(version: str, checks: int) -> None:
    enough = allocate_claims(CLAIMS, SLICES, CLASSES, node="n", version=version, budget=checks)
    assert isinstance(enough, AllocationFailure) and enough.message == "cannot allocate all claims"
    short = allocate_claims(CLAIMS, SLICES, CLASSES, node="n", version=version, budget=checks - 1)
    assert isinstance(short, AllocationFailure)
    assert short.message.endswith("timed out trying to allocate devices")


@pytest.mark.parametrize("version", ["1.37", "1.35"])
def test_a_failure_is_reused_only_where_the_devices_it_could_take_are_held_as_they_were(version: str) -> None:
    # "first" wants d0 only: it fails while the pair holds d0 (the same state each time: reused), and gets
    # d0 once the pair moves on to d1 and d2.
    claims = [_claim("pair", "a", 2), _claim("first", "a", 1, 'device.attributes["a.example.com"].index == 0')]
    allocator = Allocator(features_for(version), AllocatedState(), CLASSES, SLICES, NodeInfo("n"))
    results = allocator.allocate(claims)
    assert results is not None
    assert [[r.device_id[2] for r in claim] for claim in results] == [["d1", "d2"], ["d0"]]


# The two bounds (docs/dra.md, the budget): device checks counted as upstream's scan makes them stand for
# the scheduler's 10 s filter timeout; numalign's own work (devices its scans look at, its steps, the
# failed states it recognises) bounds its time. Checks passed over or taken from a remembered failure
# count against the first and not the second.
WIDE = [ResourceSlice(name="s", driver="a.example.com", pool=ResourcePool("p", 1, 1), node_name="n",
                      devices=tuple(Device(name=f"d{i}") for i in range(200)))]


def test_a_search_past_a_million_checks_but_little_work_gets_the_schedulers_answer() -> None:
    # Every pair of 200 devices is tried, and each time "none" would check the 200 devices again: 4 million
    # checks, which the real allocator goes through in about 2 s; numalign remembers the failure.
    allocator = Allocator(features_for("1.37"), AllocatedState(), CLASSES, WIDE, NodeInfo("n"))
    assert allocator.allocate(CLAIMS) is None
    assert allocator.checks == 200 + 200 * 199 // 2 * (1 + 200) > 1_000_000 > 10 * allocator.work
    result = allocate_claims(CLAIMS, WIDE, CLASSES, node="n", version="1.37")
    assert isinstance(result, AllocationFailure) and result.message == "cannot allocate all claims"
    assert result.stopped_by == ""


def test_the_default_budget_stands_for_the_schedulers_10_s_and_the_work_bound_is_below_it() -> None:
    assert DEFAULT_SEARCH_BUDGET == 20_000_000  # ~2 million checks a second, measured (docs/dra.md)
    assert DEFAULT_WORK_BOUND < DEFAULT_SEARCH_BUDGET


@pytest.mark.parametrize("version", ["1.37", "1.35"])
def test_the_work_bound_stops_the_search_at_the_same_unit_and_says_so(version: str) -> None:
    allocator = Allocator(features_for(version), AllocatedState(), CLASSES, SLICES, NodeInfo("n"))
    assert allocator.allocate(CLAIMS) is None
    work = allocator.work
    assert 0 < work < allocator.checks
    enough = allocate_claims(CLAIMS, SLICES, CLASSES, node="n", version=version, work_bound=work)
    assert isinstance(enough, AllocationFailure) and enough.message == "cannot allocate all claims"
    short = allocate_claims(CLAIMS, SLICES, CLASSES, node="n", version=version, work_bound=work - 1)
    assert isinstance(short, AllocationFailure) and short.stopped_by == "work"
    assert short.message.endswith("timed out trying to allocate devices")
    assert short.detail.startswith(f"numalign stopped the search at its bound on its own work ({work - 1} units")
    # the checks budget, when it is the one that runs out, is named as such
    checks = allocate_claims(CLAIMS, SLICES, CLASSES, node="n", version=version, budget=allocator.checks - 1)
    assert isinstance(checks, AllocationFailure) and checks.stopped_by == "checks"
    assert checks.detail.startswith(f"numalign stopped the search after {allocator.checks - 1} device checks")


# A selector whose every evaluation costs thousands of CEL units (a nested comprehension, as costly per
# device as the API server lets a selector be, at a smaller size) reading an attribute each device has
# its own value of, so no two devices share an evaluation.
_HEAVY = ("[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].all(a, "
          "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].all(b, "
          'a + b != device.attributes["a.example.com"].index + 1000))')  # never equal: all 400 pairs


def _one_of_each(selector: str) -> list[ResourceClaim]:
    request = DeviceRequest(name="r", exactly=DeviceSubRequest(
        name="r", device_class_name="a", allocation_mode="All", selectors=(DeviceSelector(selector),)))
    return [ResourceClaim(name="all", namespace="default", spec=ResourceClaimSpec((request,)))]


def test_a_selectors_cel_cost_is_work_so_costly_selectors_stay_inside_the_work_bound() -> None:
    from numalign.k8s.dra import cel
    from numalign.scheduler.dra.allocator import CEL_COST_PER_WORK

    features = features_for("1.37")
    compiled = cel.compile_selector(_HEAVY, features.cel)
    costs = [cel.matches_costed(compiled, {"driver": "a.example.com", "attributes": {"a.example.com": {
        "index": i}}, "capacity": {}, "allowMultipleAllocations": False})[1] for i in range(N)]
    assert min(costs) > 400 * CEL_COST_PER_WORK  # 400 iterations, each a few cost units
    heavy = Allocator(features, AllocatedState(), CLASSES, SLICES, NodeInfo("n"))
    cheap = Allocator(features, AllocatedState(), CLASSES, SLICES, NodeInfo("n"))
    assert heavy.allocate(_one_of_each(_HEAVY)) is not None
    assert cheap.allocate(_one_of_each("true")) is not None
    # same search, same devices: the difference is the heavy selector's cost, charged per evaluation
    assert heavy.work - cheap.work >= sum(costs) // CEL_COST_PER_WORK - N
    # a bound the device count alone stays inside stops the costly selector, and says it was the work bound
    bound = (heavy.work + cheap.work) // 2
    assert cheap.work < bound < heavy.work
    stopped = allocate_claims(_one_of_each(_HEAVY), SLICES, CLASSES, node="n", version="1.37", work_bound=bound)
    assert isinstance(stopped, AllocationFailure) and stopped.stopped_by == "work"
    assert stopped.message.endswith("timed out trying to allocate devices")
    fine = allocate_claims(_one_of_each("true"), SLICES, CLASSES, node="n", version="1.37", work_bound=bound)
    assert not isinstance(fine, AllocationFailure)


def test_explaining_stops_at_its_cel_cost_bound_and_says_so() -> None:
    from numalign.scheduler.dra.explain import EXPLAIN_CEL_COST, explain

    # the pair asks for two devices the selector refuses: every device is evaluated
    claims = [_claim("pair", "a", 2, _HEAVY + " && false")]
    features = features_for("1.37")
    full = explain(claims, SLICES, CLASSES, NodeInfo("n"), AllocatedState(), features)
    assert "request selector #0 matched none of the 8 device(s)" in full.reasons[0]
    short = explain(claims, SLICES, CLASSES, NodeInfo("n"), AllocatedState(), features, cel_cost_limit=1000)
    assert short.reasons == ("numalign stopped explaining after 1000 units of CEL cost (the selectors cost too "
                             "much to evaluate on every device; its bound, as on allocating, keeps an answer "
                             "inside about 10 s)",)
    assert EXPLAIN_CEL_COST >= 10 * DEFAULT_WORK_BOUND
