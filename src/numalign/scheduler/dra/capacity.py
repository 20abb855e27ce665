"""Consumable capacity (KEP-5075, DRAConsumableCapacity): a device that allows multiple allocations hands
out parts of its capacity; each request consumes what it asks for, rounded up by the capacity's request
policy, or the policy's default, or (nothing asked, no default) the whole capacity
(structured/internal/incubating/consumable_capacity.go).

1.37 changed three things (CapacityRules):
- a request rounded up to a validRange step keeps the step's form ("3G"), not binary SI;
- with DRAFractionalCapacityRange (beta in 1.37, off unless the scheduler's minimum compatibility version
  is 1.37) a range whose min, max and step are whole numbers of thousandths (step at least 1m) is
  rounded and checked in thousandths: 600m over {min 500m, step 250m} consumes 750m, not 1;
- a request that cannot be represented in that arithmetic (past int64, or not whole thousandths on the
  thousandths path) and a negative consumed capacity abort the allocation (CapacityRequestError) instead
  of passing or skipping the device.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from numalign.k8s.dra.types import CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity
from numalign.k8s.quantity import Quantity, QuantityFormat

ConsumedCapacity = dict[str, Quantity]

_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)
_NANOS_PER_MILLI: Final = 10**6


class CapacityNotDefinedError(Exception):
    """The request names a capacity the device does not have (the device is skipped)."""


class CapacityRequestError(Exception):
    """1.37: a capacity request the allocator refuses outright, aborting the allocation. The text is
    upstream's after its "checking capacity for device D: " prefix, which the caller adds."""


class CapacityRules:
    """How a release rounds and checks capacity requests (see the module's docstring)."""

    __slots__ = ("fractional", "step_format", "strict")

    def __init__(self, step_format: bool = False, fractional: bool = False, strict: bool = False) -> None:
        self.step_format = step_format  # 1.37: the rounded value keeps the step's form
        self.fractional = fractional  # DRAFractionalCapacityRange: thousandths arithmetic where it fits
        self.strict = strict  # 1.37: unrepresentable requests and negative capacities abort

    def __repr__(self) -> str:
        return f"CapacityRules(step_format={self.step_format}, fractional={self.fractional}, strict={self.strict})"


BEFORE_137: Final = CapacityRules()


def request_fits(
    consumed: Mapping[str, Quantity],
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocating: Mapping[str, Quantity] | None,
    rules: CapacityRules = BEFORE_137,
) -> bool:
    """CmpRequestOverCapacity: whether the request still fits beside what is consumed and being allocated.
    Raises CapacityNotDefinedError when the request names a capacity the device lacks, and (1.37)
    CapacityRequestError when the request cannot be represented or a consumed capacity is negative."""
    if (not requests and not consumed and not allocating and all(c.request_policy is None for c in capacity.values())
            and (not rules.strict or all(c.value.nanos >= 0 for c in capacity.values()))):
        return True  # the whole of each capacity, of which nothing is taken: the common case, answered at once
    if requests and any(name not in capacity for name in requests):
        raise CapacityNotDefinedError("some requested capacity has not been defined")
    if rules.strict:
        # 1.37 resolves every capacity before any soft "does not fit", so that an abort does not depend
        # on which capacity is looked at first.
        wanted_of: ConsumedCapacity = {}
        for name, cap in capacity.items():
            try:
                wanted = calculate_consumed(None if requests is None else requests.get(name), cap, rules)
            except CapacityRequestError as e:
                raise CapacityRequestError(f'capacity "{name}": {e}') from None
            if wanted.nanos < 0:
                raise CapacityRequestError(f'capacity "{name}": capacity value is negative')
            wanted_of[name] = wanted
    for name, cap in capacity.items():
        if rules.strict:
            wanted = wanted_of[name]
        else:
            wanted = calculate_consumed(None if requests is None else requests.get(name), cap, rules)
        if violates_policy(wanted, cap.request_policy, rules):
            return False
        total = consumed.get(name, Quantity(0)) + wanted
        if allocating and name in allocating:
            total = total + allocating[name]
        if total > cap.value:
            return False
    return True


def consumed_from_request(
    requests: Mapping[str, Quantity] | None, capacity: Mapping[str, DeviceCapacity], rules: CapacityRules = BEFORE_137
) -> ConsumedCapacity:
    """GetConsumedCapacityFromRequest: what one allocation consumes of each capacity."""
    return {name: calculate_consumed(None if requests is None else requests.get(name), cap, rules)
            for name, cap in capacity.items()}


def calculate_consumed(requested: Quantity | None, cap: DeviceCapacity, rules: CapacityRules = BEFORE_137) -> Quantity:
    policy = cap.request_policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range, rules)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


_NOT_REPRESENTABLE: Final = "capacity request cannot be represented in the device's range arithmetic"


def _round_up_range(requested: Quantity, valid: CapacityRequestPolicyRange, rules: CapacityRules) -> Quantity:
    """roundUpRange: the request rounded up to the range's next step (in binary-SI form until 1.37, which
    keeps the step's form: a 3G request over 1G steps stays 3G, not 3000000000)."""
    assert valid.min is not None
    if requested < valid.min:
        return valid.min
    if valid.step is None:
        return requested
    if rules.fractional and _uses_milli(valid):
        milli = _exact_milli(requested)
        if milli is None:
            raise CapacityRequestError(f"{_NOT_REPRESENTABLE}: request {requested} is not a representable milli value")
        step, low = valid.step.milli_value(), valid.min.milli_value()
        n = _steps_up(milli - low, step)
        if n > _go_div(_wrap64(_INT64_MAX - low), step):
            raise CapacityRequestError(f"{_NOT_REPRESENTABLE}: rounding request {requested} up to the next step "
                                       "passes the milli-value range")
        rounded = low + step * n
        if rounded % 1000 == 0:  # a whole number keeps the compact form of one parsed from "2"
            return Quantity.from_int(rounded // 1000, valid.step.format)
        return Quantity.from_milli(rounded, valid.step.format)
    if rules.strict and requested.nanos > _INT64_MAX * 10**9:
        # Value() would wrap past int64: 1.37 refuses rather than rounds a wrapped number
        raise CapacityRequestError(f"{_NOT_REPRESENTABLE}: request {requested} exceeds MaxInt64")
    step, low = valid.step.value(), valid.min.value()
    n = _steps_up(requested.value() - low, step)
    if rules.strict and low >= 0 and n > (_INT64_MAX - low) // step:
        raise CapacityRequestError(f"{_NOT_REPRESENTABLE}: rounding request {requested} up to the next step "
                                   "passes MaxInt64")
    return Quantity.from_int(low + step * n, valid.step.format if rules.step_format else QuantityFormat.BINARY_SI)


def _steps_up(added: int, step: int) -> int:
    """How many steps reach `added` (>= 0), rounded up."""
    n, mod = divmod(added, step)
    return n + 1 if mod else n


def _go_div(a: int, b: int) -> int:
    """Go's int64 division, which truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _wrap64(x: int) -> int:
    """x as Go's int64 arithmetic leaves it (two's complement wrap-around)."""
    return (x + 2**63) % 2**64 - 2**63


def _exact_milli(q: Quantity) -> int | None:
    """safeMilliValue: q in thousandths when that is exact and within int64, else None."""
    milli, rest = divmod(q.nanos, _NANOS_PER_MILLI)
    if rest or not _INT64_MIN <= milli <= _INT64_MAX:
        return None
    return milli


def _uses_milli(valid: CapacityRequestPolicyRange) -> bool:
    """useMilli: every given bound of the range is a whole number of thousandths within int64 and the step
    is at least 1m (upstream's comment also asks for one fractional bound; its code does not)."""
    for i, q in enumerate((valid.min, valid.max, valid.step)):
        if q is None:
            continue
        milli = _exact_milli(q)
        if milli is None or (i == 2 and milli < 1):
            return False
    return True


def violates_policy(requested: Quantity, policy: CapacityRequestPolicy | None,
                    rules: CapacityRules = BEFORE_137) -> bool:
    if policy is None:
        return False
    if policy.default is not None and requested == policy.default:
        return False
    if policy.valid_range is not None:
        rng = policy.valid_range
        if rng.max is not None and requested > rng.max:
            return True
        if rng.step is not None and rng.min is not None:
            if rules.fractional and _uses_milli(rng):
                milli = _exact_milli(requested)
                return milli is None or bool((milli - rng.min.milli_value()) % rng.step.milli_value())
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
