"""Consumable capacity (KEP-5075, DRAConsumableCapacity): a device that allows multiple allocations hands
out parts of its capacity; each request consumes what it asks for, rounded up by the capacity's request
policy, or the policy's default, or (nothing asked, no default) the whole capacity
(structured/internal/incubating/consumable_capacity.go)."""

from __future__ import annotations

from collections.abc import Mapping

from numalign.k8s.dra.types import CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity
from numalign.k8s.quantity import Quantity, QuantityFormat

ConsumedCapacity = dict[str, Quantity]


class CapacityNotDefinedError(Exception):
    """The request names a capacity the device does not have (the device is skipped)."""


def request_fits(
    consumed: Mapping[str, Quantity],
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocating: Mapping[str, Quantity] | None,
    step_format: bool = False,
) -> bool:
    """CmpRequestOverCapacity: whether the request still fits beside what is consumed and being allocated.
    Raises CapacityNotDefinedError when the request names a capacity the device lacks."""
    if not requests and not consumed and not allocating and all(c.request_policy is None for c in capacity.values()):
        return True  # the whole of each capacity, of which nothing is taken: the common case, answered at once
    if requests and any(name not in capacity for name in requests):
        raise CapacityNotDefinedError("some requested capacity has not been defined")
    for name, cap in capacity.items():
        wanted = calculate_consumed(None if requests is None else requests.get(name), cap, step_format)
        if violates_policy(wanted, cap.request_policy):
            return False
        total = consumed.get(name, Quantity(0)) + wanted
        if allocating and name in allocating:
            total = total + allocating[name]
        if total > cap.value:
            return False
    return True


def consumed_from_request(
    requests: Mapping[str, Quantity] | None, capacity: Mapping[str, DeviceCapacity], step_format: bool = False
) -> ConsumedCapacity:
    """GetConsumedCapacityFromRequest: what one allocation consumes of each capacity."""
    return {name: calculate_consumed(None if requests is None else requests.get(name), cap, step_format)
            for name, cap in capacity.items()}


def calculate_consumed(requested: Quantity | None, cap: DeviceCapacity, step_format: bool = False) -> Quantity:
    policy = cap.request_policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range, step_format)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def _round_up_range(requested: Quantity, valid: CapacityRequestPolicyRange, step_format: bool = False) -> Quantity:
    """roundUpRange: the request rounded up to the range's next step, in binary-SI form until 1.37, which
    keeps the step's form (a 3G request over 1G steps stays 3G, not 3000000000)."""
    assert valid.min is not None
    if requested < valid.min:
        return valid.min
    if valid.step is None:
        return requested
    step, low = valid.step.value(), valid.min.value()
    n, mod = divmod(requested.value() - low, step)
    if mod:
        n += 1
    return Quantity.from_int(low + step * n, valid.step.format if step_format else QuantityFormat.BINARY_SI)


def violates_policy(requested: Quantity, policy: CapacityRequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and requested == policy.default:
        return False
    if policy.valid_range is not None:
        rng = policy.valid_range
        if rng.max is not None and requested > rng.max:
            return True
        if rng.step is not None and rng.min is not None:
            return bool((requested.value() - rng.min.value()) % rng.step.value())
        return False
    if policy.valid_values:
        return all(requested != v for v in policy.valid_values)
    return False


def add_into(total: dict[str, Quantity], amounts: Mapping[str, Quantity]) -> None:
    for name, q in amounts.items():
        total[name] = total.get(name, Quantity(0)) + q


def subtract_from(total: dict[str, Quantity], amounts: Mapping[str, Quantity]) -> None:
    for name, q in amounts.items():
        if name in total:
            total[name] = total[name] - q
