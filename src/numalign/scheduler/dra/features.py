"""The feature gates that shape DRA allocation, their defaults in each Kubernetes version, and which of
upstream's three allocator generations (stable, incubating, experimental; behaviours.py) those gates select.

The defaults are kube-scheduler's (pkg/features/kube_features.go, versioned specs); the gate names are
upstream's. numalign.kubelet.versions holds the kubelet's own gates (those that change what the resource
managers decide) and parses versions; the scheduler-side DRA gates are kept here, in one place.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from numalign.errors import InvalidInputError
from numalign.k8s.version import DEFAULT, NEWEST_PATCH, KubeletVersion
from numalign.scheduler.dra.behaviours import Generation, Release, release
from numalign.scheduler.dra.capacity import CapacityRules

if TYPE_CHECKING:
    from numalign.k8s.dra.cel import CELFeatures

SUPPORTED_VERSIONS: Final = tuple(f"{a}.{b}" for a, b in NEWEST_PATCH)
DEFAULT_VERSION: Final = f"{DEFAULT.major}.{DEFAULT.minor}"

# gate -> ((first minor with this default, default), ...), oldest first.
_GATES: Final[Mapping[str, tuple[tuple[int, bool], ...]]] = {
    "DynamicResourceAllocation": ((26, False), (34, True)),
    "DRAAdminAccess": ((32, False), (34, True)),
    "DRAPrioritizedList": ((33, False), (34, True)),
    "DRAPartitionableDevices": ((33, False), (36, True)),
    "DRADeviceTaints": ((33, False), (36, True)),
    "DRAResourceClaimDeviceStatus": ((32, False), (33, True)),
    "DRADeviceBindingConditions": ((34, False), (36, True)),
    "DRAConsumableCapacity": ((34, False), (36, True)),
    "DRAListTypeAttributes": ((36, False),),
    # Beta in 1.37 with two specs: off, and on only for a minimum compatibility version of 1.37, which a
    # 1.37 scheduler does not have by default (it keeps compatibility with 1.36): off, as the real
    # DefaultFeatureGate of 1.37.2 answers.
    "DRAFractionalCapacityRange": ((37, False),),
}
DRA_GATES: Final = tuple(_GATES)
# minor_of's and features_for's answers kept at most (by version text: each Allocate asks, nearly always
# with the same one; an input that is refused is never kept)
_KEPT_MAX: Final = 64
_MINORS: dict[str, int] = {}
# gate -> the gates it needs on (kube_features.go's dependencies, checked at start-up from 1.37). Only those
# the generated cases can break are listed; DynamicResourceAllocation is on and locked from 1.35.
_DEPENDS_ON: Final[Mapping[str, tuple[str, ...]]] = {"DRAFractionalCapacityRange": ("DRAConsumableCapacity",)}
# gate -> the first minor where it is GA and locked to its default (LockToDefault): kube-scheduler refuses to
# start with the gate set otherwise (featuregate's "cannot set feature gate G to false, feature is locked").
_LOCKED_SINCE: Final[Mapping[str, int]] = {
    "DynamicResourceAllocation": 35, "DRAAdminAccess": 36, "DRAPrioritizedList": 37,
    "DRAResourceClaimDeviceStatus": 37,
}


def minor_of(version: str | KubeletVersion) -> int:
    """"1.36", "1.36.2" or a KubeletVersion -> 36 (parsed and range-checked as every version is)."""
    if isinstance(version, KubeletVersion):
        return version.minor
    minor = _MINORS.get(version)
    if minor is None:
        minor = KubeletVersion.parse(version, "version").minor
        if len(_MINORS) >= _KEPT_MAX:
            _MINORS.clear()
        _MINORS[version] = minor
    return minor


def gate_defaults(version: str | KubeletVersion) -> dict[str, bool]:
    """Every DRA gate's default in `version` (a gate the version does not know yet is False)."""
    minor = minor_of(version)
    out = {}
    for gate, steps in _GATES.items():
        value = False
        for since, default in steps:
            if minor >= since:
                value = default
        out[gate] = value
    return out


@dataclass(frozen=True)
class Features:
    """structured.Features: what the allocator may do (internal/types.go)."""

    admin_access: bool = False
    prioritized_list: bool = False
    partitionable_devices: bool = False
    device_taints: bool = False
    device_binding_and_status: bool = False
    consumable_capacity: bool = False
    list_type_attributes: bool = False
    fractional_capacity_range: bool = False
    # Which release's allocator and scheduler (behaviours.py names what changed between releases).
    minor: int = 37
    patch: int | None = None  # None: the newest modelled patch of `minor`
    # DRAResourceClaimDeviceStatus was an allocator feature of its own in 1.34 only.
    device_status_34: bool = False
    # Only these generations may be picked (upstream's EnableAllocators); empty: all of them.
    allocators: frozenset[str] = frozenset()

    @functools.cached_property
    def cel(self) -> CELFeatures:
        from numalign.k8s.dra.cel import CELFeatures  # the engine loads only where selectors run

        return CELFeatures(consumable_capacity=self.consumable_capacity,
                           list_type_attributes=self.list_type_attributes)

    @functools.cached_property
    def cel_compile(self) -> CELFeatures:
        """`cel` at this release: what the allocator compiles selectors with."""
        return replace(self.cel, minor=self.minor)

    # Asked for all through a search: worked out once (the fields are frozen).
    @functools.cached_property
    def release(self) -> Release:
        return release(self.minor, self.patch)

    @functools.cached_property
    def generation(self) -> Generation:
        """The generation upstream's NewAllocator picks for these features (k/k PR #133967: in 1.34
        DRAResourceClaimDeviceStatus, on by default, was supported by experimental only)."""
        return self.release.generation(self.enabled(), self.allocators)

    @functools.cached_property
    def capacity_rules(self) -> CapacityRules:
        """How this release's allocator rounds and checks capacity requests (capacity.py)."""
        g = self.generation
        return CapacityRules(step_format=g.rounds_in_step_format, fractional=self.fractional_capacity_range,
                             strict=g.capacity_errors_abort)

    @property
    def implementation(self) -> str:
        return self.generation.name

    @property
    def list_types_in_constraints(self) -> bool:
        """DRAListTypeAttributes as the allocator's constraints see it (1.36 passes it to CEL only)."""
        return self.list_type_attributes and self.release.list_types_in_constraints

    def enabled(self) -> frozenset[str]:
        """The structured.Features the scheduler passes to NewAllocator."""
        names = {
            "AdminAccess": self.admin_access, "PrioritizedList": self.prioritized_list,
            "PartitionableDevices": self.partitionable_devices, "DeviceTaints": self.device_taints,
            "DeviceBindingAndStatus": self.device_binding_and_status, "ConsumableCapacity": self.consumable_capacity,
            "ListTypeAttributes": self.list_types_in_constraints, "DeviceStatus": self.device_status_34,
            "FractionalCapacityRange": self.fractional_capacity_range,
        }
        return frozenset(name for name, on in names.items() if on)


# features_for's answers by version text and gates: every Allocate asks, nearly always with the same
# version and gates, and a Features is frozen (its generation, rules and CEL features worked out once,
# then shared). Few are kept; an input that is refused is never kept.
_FEATURES: dict[tuple[str, tuple[tuple[str, bool], ...]], Features] = {}


def features_for(version: str | KubeletVersion = DEFAULT_VERSION, gates: Mapping[str, bool] | None = None) -> Features:
    """The allocator features the scheduler of `version` passes (AllocatorFeatures), from the gates'
    defaults with `gates` overriding them."""
    key = None
    if isinstance(version, str) and (not gates or all(type(v) is bool for v in gates.values())):
        key = (version, tuple(sorted(gates.items())) if gates else ())
        found = _FEATURES.get(key)
        if found is not None:
            return found
    features = _features_for(version, gates)
    if key is not None:
        if len(_FEATURES) >= _KEPT_MAX:
            _FEATURES.clear()
        _FEATURES[key] = features
    return features


def _features_for(version: str | KubeletVersion, gates: Mapping[str, bool] | None) -> Features:
    values = gate_defaults(version)
    parsed = version if isinstance(version, KubeletVersion) else KubeletVersion.parse(version, "version")
    minor = parsed.minor
    for name, value in (gates or {}).items():
        if name not in values:
            raise InvalidInputError(
                f"feature gate {name!r} is not a DRA gate numalign follows; expected one of {', '.join(DRA_GATES)}"
            )
        first = _GATES[name][0][0]
        if minor < first:  # kube-scheduler refuses to start with a gate its release does not register
            raise InvalidInputError(f"feature gate {name!r} is not known to kube-scheduler 1.{minor} (it arrives "
                                    f"in 1.{first}); remove it, or decide as 1.{first} or later")
        locked = _LOCKED_SINCE.get(name)
        if locked is not None and minor >= locked and value != values[name]:
            default = str(values[name]).lower()
            raise InvalidInputError(f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                                    f"{default} (GA since 1.{locked}); remove the override, or decide as "
                                    f"1.{locked - 1} or earlier")
        values[name] = value
    for name, needs in _DEPENDS_ON.items():
        off = [n for n in needs if not values[n]]
        if minor >= _GATES[name][0][0] and values[name] and off:
            # the scheduler refuses these gates at start-up (featuregate's dependency check, 1.37+)
            raise InvalidInputError(
                f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]; "
                f"turn {name} off or {' and '.join(off)} on"
            )
    return Features(
        admin_access=values["DRAAdminAccess"],
        prioritized_list=values["DRAPrioritizedList"],
        partitionable_devices=values["DRAPartitionableDevices"],
        device_taints=values["DRADeviceTaints"],
        device_binding_and_status=values["DRADeviceBindingConditions"] and values["DRAResourceClaimDeviceStatus"],
        consumable_capacity=values["DRAConsumableCapacity"],
        list_type_attributes=values["DRAListTypeAttributes"],
        fractional_capacity_range=values["DRAFractionalCapacityRange"],
        minor=minor,
        patch=parsed.patch,
        device_status_34=release(minor).device_status_is_feature and values["DRAResourceClaimDeviceStatus"],
    )


def dra_enabled(version: str | KubeletVersion = DEFAULT_VERSION, gates: Mapping[str, bool] | None = None) -> bool:
    """DynamicResourceAllocation: beta and off by default in 1.33, GA from 1.34."""
    if gates and "DynamicResourceAllocation" in gates:
        return gates["DynamicResourceAllocation"]
    return gate_defaults(version)["DynamicResourceAllocation"]
