"""The structured allocator against brute force on small problems: what it allocates is valid (free,
distinct devices, constraints hold), and it finds an allocation exactly when one exists."""

from __future__ import annotations

import itertools

from hypothesis import given
from support.strategies import DRAInstance, dra_instances

from numalign.k8s.dra.types import (
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
)
from numalign.scheduler.dra.allocator import AllocatedState, Allocator
from numalign.scheduler.dra.features import features_for
from numalign.scheduler.dra.pools import NodeInfo

NUMA = "dra.example.com/numa"


def _problem(p: DRAInstance) -> tuple[list[ResourceClaim], list[ResourceSlice], dict[str, DeviceClass]]:
    devices = tuple(
        Device(f"d{i}", attributes={} if n is None else {"numa": DeviceAttribute("int", (n,))})
        for i, n in enumerate(p.numa)
    )
    slices = [ResourceSlice("s", "dra.example.com", ResourcePool("p"), node_name="n", devices=devices)]
    classes = {"c": DeviceClass("c", (DeviceSelector('device.driver == "dra.example.com"'),))}
    claims = [
        ResourceClaim(f"claim-{i}", spec=ResourceClaimSpec(
            (DeviceRequest("r", exactly=DeviceSubRequest("r", "c", count=count)),),
            (DeviceConstraint(("r",), match_attribute=NUMA),) if together else ()))
        for i, (count, together) in enumerate(zip(p.counts, p.together, strict=True))
    ]
    return claims, slices, classes


def _valid(p: DRAInstance, assignment: list[list[int]]) -> bool:
    used = [d for devices in assignment for d in devices]
    if len(used) != len(set(used)) or set(used) & p.in_use:
        return False
    for devices, count, together in zip(assignment, p.counts, p.together, strict=True):
        if len(devices) != count:
            return False
        if together and (any(p.numa[d] is None for d in devices) or len({p.numa[d] for d in devices}) > 1):
            return False
    return True


def _exists(p: DRAInstance) -> bool:
    free = [d for d in range(len(p.numa)) if d not in p.in_use]
    def place(i: int, taken: frozenset[int]) -> bool:
        if i == len(p.counts):
            return True
        for combo in itertools.combinations([d for d in free if d not in taken], p.counts[i]):
            if _valid_claim(p, i, combo) and place(i + 1, taken | set(combo)):
                return True
        return False
    return place(0, frozenset())


def _valid_claim(p: DRAInstance, i: int, devices: tuple[int, ...]) -> bool:
    if not p.together[i]:
        return True
    values = {p.numa[d] for d in devices}
    return None not in values and len(values) == 1


@given(dra_instances())
def test_the_allocator_finds_a_valid_allocation_exactly_when_one_exists(p: DRAInstance) -> None:
    claims, slices, classes = _problem(p)
    state = AllocatedState()
    state.devices.update({("dra.example.com", "p", f"d{i}"): 1 for i in p.in_use})
    result = Allocator(features_for("1.37"), state, classes, slices, NodeInfo("n")).allocate(claims)
    if result is None:
        assert not _exists(p)
        return
    assignment = [[int(r.device_id[2][1:]) for r in claim_results] for claim_results in result]
    assert _valid(p, assignment)
    # The first answer in upstream's order: each claim's devices in ascending order.
    assert all(devices == sorted(devices) for devices in assignment)
