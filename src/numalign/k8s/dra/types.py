"""The resource.k8s.io/v1 objects Dynamic Resource Allocation reads, as typed, frozen models.

Field names follow the API (k8s.io/api/resource/v1 types.go) in snake case; only what the structured
allocator, the scheduler's DynamicResources plugin and the kubelet look at is kept. Parsing and the API
server's validation live in k8s/dra/read.py; the allocator in scheduler/dra/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from numalign.k8s.quantity import Quantity

# API limits (resource/v1 types.go); the reader refuses anything past them, as the API server does.
RESOURCE_SLICE_MAX_DEVICES: Final = 128
RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE: Final = 32
RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE: Final = 48
RESOURCE_SLICE_MAX_COUNTER_SETS: Final = 8
RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET: Final = 32
RESOURCE_SLICE_MAX_DEVICE_COUNTERS_PER_DEVICE: Final = 2
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH: Final = 64
DEVICE_REQUESTS_MAX_SIZE: Final = 32
DEVICE_CONSTRAINTS_MAX_SIZE: Final = 32
DEVICE_SELECTORS_MAX_SIZE: Final = 32
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE: Final = 8
ALLOCATION_RESULTS_MAX_SIZE: Final = 32
CEL_SELECTOR_EXPRESSION_MAX_LENGTH: Final = 10 * 1024
CEL_SELECTOR_EXPRESSION_MAX_COST: Final = 1_000_000
DEVICE_TOLERATIONS_MAX_LENGTH: Final = 16
DEVICE_TAINTS_MAX_LENGTH: Final = 16

ALLOCATION_MODE_EXACT_COUNT: Final = "ExactCount"
ALLOCATION_MODE_ALL: Final = "All"
AllocationMode = Literal["ExactCount", "All"]

# The standard attributes (KEP-4381, KEP-6072) numalign reads for alignment.
ATTRIBUTE_NUMA_NODE: Final = "resource.kubernetes.io/numaNode"
ATTRIBUTE_PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
ATTRIBUTE_PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"

_T = TypeVar("_T")


def built(cls: type[_T], **every_field: Any) -> _T:
    """A frozen model from every one of its fields, without the generated __init__, which sets each field
    through object.__setattr__ (3.5 us for a Device): a slice's devices are read on every run. The
    caller passes every field (tests/unit/k8s/test_k8s_dra_read.py holds the reader to that). A class
    compiled by mypyc (scripts/setup's compiled build) has no instance __dict__ (object.__new__ refuses
    it) and a native __init__ that is fast: that is called."""
    try:
        obj = object.__new__(cls)
    except TypeError:
        return cls(**every_field)
    obj.__dict__.update(every_field)
    return obj


AttributeKind = Literal["int", "bool", "string", "version"]
AttributeScalar = int | bool | str


@dataclass(frozen=True)
class DeviceAttribute:
    """One attribute value: a scalar (intValue, boolValue, stringValue, version) or, with
    DRAListTypeAttributes (KEP-5491), a list of one kind (intValues, ...). `values` holds the list
    form; `is_list` says which of the two the object used. Versions are kept as their text."""

    kind: AttributeKind
    values: tuple[AttributeScalar, ...]
    is_list: bool = False

    @property
    def scalar(self) -> AttributeScalar | None:
        return self.values[0] if not self.is_list and self.values else None

    def __str__(self) -> str:
        if self.is_list:
            return "[" + ", ".join(str(v) for v in self.values) + "]"
        return str(self.values[0]) if self.values else ""


@dataclass(frozen=True)
class CapacityRequestPolicyRange:
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


@dataclass(frozen=True)
class CapacityRequestPolicy:
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRequestPolicyRange | None = None


@dataclass(frozen=True)
class DeviceCapacity:
    value: Quantity
    request_policy: CapacityRequestPolicy | None = None


@dataclass(frozen=True)
class DeviceCounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """resourceclaim.ToleratesTaint."""
        if self.key and self.key != taint.key:
            return False
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value


@dataclass(frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True)
class Device:
    name: str
    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    # Per-device node selection (perDeviceNodeSelection slices only).
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    allow_multiple_allocations: bool | None = None
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    def attribute(self, driver: str, name: str) -> DeviceAttribute | None:
        """lookupAttribute: a fully qualified name, or the driver's own domain without its prefix."""
        found = self.attributes.get(name)
        if found is not None:
            return found
        domain, sep, short = name.partition("/")
        if not sep or domain != driver:
            return None
        return self.attributes.get(short)


@dataclass(frozen=True)
class ResourcePool:
    name: str
    generation: int = 0
    resource_slice_count: int = 1


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class DeviceSelector:
    """A CEL selector (the only selector type of resource.k8s.io/v1)."""

    expression: str


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[DeviceSelector, ...] = ()
    extended_resource_name: str | None = None
    source: str = ""


@dataclass(frozen=True)
class CapacityRequirements:
    requests: Mapping[str, Quantity] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceSubRequest:
    """One alternative of a firstAvailable list, or (as ExactDeviceRequest) a plain request."""

    name: str
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None


@dataclass(frozen=True)
class DeviceRequest:
    """spec.devices.requests[]: `exactly` (held as a DeviceSubRequest named as the request) or
    `first_available` (the subrequests, tried in order)."""

    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True)
class DeviceRequestAllocationResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class DeviceAllocationResult:
    """status.allocation: the devices a claim holds (devices.results) and, as read from an input's
    status, the nodes the allocation is available on (nodeSelector; None: every node). The config is not
    modelled; an allocation numalign makes carries no node selector (the cluster view works out the nodes
    from the devices' slices, cluster/dra.py)."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    node_selector: NodeSelector | None = None


@dataclass(frozen=True)
class ResourceClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()


@dataclass(frozen=True)
class ResourceClaim:
    name: str
    namespace: str = "default"
    uid: str = ""
    spec: ResourceClaimSpec = field(default_factory=ResourceClaimSpec)
    allocation: DeviceAllocationResult | None = None
    source: str = ""

    @property
    def key(self) -> str:
        """klog.KObj's text: namespace/name (the name alone without a namespace)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ResourceClaimTemplate:
    name: str
    namespace: str = "default"
    spec: ResourceClaimSpec = field(default_factory=ResourceClaimSpec)
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodResourceClaim:
    """pod.spec.resourceClaims[]: one of resourceClaimName, resourceClaimTemplateName."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True)
class ContainerClaim:
    """container.resources.claims[]: a pod claim by name, optionally one request of it."""

    name: str
    request: str = ""


@dataclass
class DRAObjects:
    """Every DRA object read from one set of files, in the order read."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # key: namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)  # key: namespace/name
    slices: list[ResourceSlice] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.classes) + len(self.claims) + len(self.templates) + len(self.slices)

    def merge(self, other: DRAObjects) -> None:
        self.classes.update(other.classes)
        self.claims.update(other.claims)
        self.templates.update(other.templates)
        self.slices.extend(other.slices)
