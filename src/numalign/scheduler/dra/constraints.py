"""Claim constraints (matchAttribute, distinctAttribute), as the allocator applies them device by device.

matchAttribute: every device of the named requests has the attribute, all with one value; with
DRAListTypeAttributes (KEP-5491, the experimental allocator), scalar and list values are sets and the
devices' sets must keep a non-empty intersection. Upstream narrows that intersection as devices are
added and does not widen it again when a device is removed while backtracking (only the count goes
down); numalign does the same, so it backtracks into the same answers.
distinctAttribute (with DRAConsumableCapacity): the named requests' devices have pairwise different values
(with DRAListTypeAttributes: pairwise disjoint sets). What a new device is compared with differs by release:
1.34-1.36 keep one value per request name (the request's last device's, dropped when any of its devices is
removed), so a new device is compared with each request's last device only; 1.37 keeps every device's value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from numalign.k8s.dra.types import Device, DeviceAttribute


def matches_request(names: frozenset[str], request: str, subrequest: str) -> bool:
    """Whether a constraint listing `names` applies to a device of request (and subrequest)."""
    if not names:
        return True
    if not subrequest:
        return request in names
    return request in names or f"{request}/{subrequest}" in names


def _same_value(a: DeviceAttribute, b: DeviceAttribute) -> bool:
    """The scalar comparison: the same kind and value (a list attribute compares as no value)."""
    if a.is_list or b.is_list:
        return False
    return a.kind == b.kind and a.values == b.values


@dataclass
class MatchAttributeConstraint:
    requests: frozenset[str]
    attribute: str
    list_types: bool = False
    first: DeviceAttribute | None = None
    intersection: tuple[str, frozenset[object]] | None = None
    count: int = 0

    def __init__(self, requests: frozenset[str], attribute: str, list_types: bool = False) -> None:
        # Written out: the dataclass decorator's generated __init__ runs as interpreted Python even in the
        # compiled core; one is made for every constraint of every claim allocated.
        self.requests = requests
        self.attribute = attribute
        self.list_types = list_types
        self.first = None
        self.intersection = None
        self.count = 0

    def add(self, request: str, subrequest: str, driver: str, device: Device) -> bool:
        if not matches_request(self.requests, request, subrequest):
            return True
        attr = device.attribute(driver, self.attribute)
        if attr is None:
            return False
        if self.count == 0:
            if self.list_types:
                self.intersection = (attr.kind, frozenset(attr.values))
            else:
                self.first = attr  # any kind: a list fails only when a second device is compared
            self.count = 1
            return True
        if self.list_types:
            assert self.intersection is not None
            kind, values = self.intersection
            if attr.kind != kind or not values & frozenset(attr.values):
                return False
            self.intersection = (kind, values & frozenset(attr.values))
        elif self.first is None or not _same_value(attr, self.first):
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if matches_request(self.requests, request, subrequest):
            self.count -= 1


@dataclass
class DistinctAttributeConstraint:
    requests: frozenset[str]
    attribute: str
    # DRAListTypeAttributes: values are sets, and each device's set must be disjoint from the others'.
    list_types: bool = False
    # 1.34 compares the values' pointers (`attribute.IntValue == attr.IntValue`), so only the same device's
    # attribute (a device allocated twice) is a duplicate; 1.35 compares the values.
    by_identity: bool = False
    # 1.37: every added device's attribute, in the order added (removed last first, as the search
    # backtracks). Before: only `seen`.
    every_device: bool = False
    # request name -> the attribute its (last) device brought, as 1.34-1.36 key them.
    seen: dict[str, DeviceAttribute] = field(default_factory=dict)
    added: list[DeviceAttribute] = field(default_factory=list)
    count: int = 0

    def __init__(self, requests: frozenset[str], attribute: str, list_types: bool = False, by_identity: bool = False,
                 every_device: bool = False) -> None:
        # Written out, as MatchAttributeConstraint's.
        self.requests = requests
        self.attribute = attribute
        self.list_types = list_types
        self.by_identity = by_identity
        self.every_device = every_device
        self.seen = {}
        self.added = []
        self.count = 0

    def _earlier(self) -> Iterable[DeviceAttribute]:
        return self.added if self.every_device else self.seen.values()

    def _keep(self, request: str, attr: DeviceAttribute) -> None:
        if self.every_device:
            self.added.append(attr)
        else:
            self.seen[request] = attr
        self.count += 1

    def add(self, request: str, subrequest: str, driver: str, device: Device) -> bool:
        if not matches_request(self.requests, request, subrequest):
            return True
        attr = device.attribute(driver, self.attribute)
        if attr is None:
            return False
        if self.count == 0:
            self._keep(request, attr)  # the first device needs no comparison (1.37: none to compare with)
            return True
        if self.list_types:
            values = frozenset(attr.values)
            if any(other.kind == attr.kind and values & frozenset(other.values) for other in self._earlier()):
                return False
            self._keep(request, attr)
            return True
        for other in self._earlier():
            if attr.is_list:
                return False  # "Distinct attribute type unknown" upstream
            if self.by_identity:
                if other is attr:
                    return False
                continue
            if not other.is_list and other.kind == attr.kind and other.values == attr.values:
                return False
        self._keep(request, attr)
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if matches_request(self.requests, request, subrequest):
            if self.every_device:
                self.added.pop()
            else:
                self.seen.pop(request, None)
            self.count -= 1


Constraint = MatchAttributeConstraint | DistinctAttributeConstraint
