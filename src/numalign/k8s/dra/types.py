"""The resource.k8s.io/v1 objects Dynamic Resource Allocation reads, as typed, frozen models.

Field names follow the API (k8s.io/api/resource/v1 types.go) in snake case; only what the structured
allocator, the scheduler's DynamicResources plugin and the kubelet look at is kept. Parsing and the API
server's validation live in k8s/dra/read.py; the allocator in scheduler/dra/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, cast

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


class _Model:
    """The models' common base. The module is compiled (scripts/compiled-modules): each model's __init__ is
    written out (the dataclass decorator's generated one runs as interpreted Python, setting each field
    through object.__setattr__: 3.5 us for a Device; mypyc makes the written-out stores native), and a
    model is pickled as a constructor call of its fields in order (simulate's --jobs and --dask send
    slices and claims to other processes; mypyc's compiled class would otherwise be restored field by
    field through the frozen __setattr__, which refuses)."""

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return type(self), tuple(getattr(self, f.name) for f in fields(cast(Any, self)))


AttributeKind = Literal["int", "bool", "string", "version"]
AttributeScalar = int | bool | str


@dataclass(frozen=True)
class DeviceAttribute(_Model):
    """One attribute value: a scalar (intValue, boolValue, stringValue, version) or, with
    DRAListTypeAttributes (KEP-5491), a list of one kind (intValues, ...). `values` holds the list
    form; `is_list` says which of the two the object used. Versions are kept as their text."""

    kind: AttributeKind
    values: tuple[AttributeScalar, ...]
    is_list: bool = False

    def __init__(self, kind: AttributeKind, values: tuple[AttributeScalar, ...], is_list: bool = False) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "is_list", is_list)

    @property
    def scalar(self) -> AttributeScalar | None:
        return self.values[0] if not self.is_list and self.values else None

    def __str__(self) -> str:
        if self.is_list:
            return "[" + ", ".join(str(v) for v in self.values) + "]"
        return str(self.values[0]) if self.values else ""


@dataclass(frozen=True)
class CapacityRequestPolicyRange(_Model):
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None

    def __init__(self, min: Quantity | None = None, max: Quantity | None = None, step: Quantity | None = None) -> None:
        object.__setattr__(self, "min", min)
        object.__setattr__(self, "max", max)
        object.__setattr__(self, "step", step)


@dataclass(frozen=True)
class CapacityRequestPolicy(_Model):
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRequestPolicyRange | None = None

    def __init__(
        self, default: Quantity | None = None, valid_values: tuple[Quantity, ...] = (),
        valid_range: CapacityRequestPolicyRange | None = None,
    ) -> None:
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "valid_values", valid_values)
        object.__setattr__(self, "valid_range", valid_range)


@dataclass(frozen=True)
class DeviceCapacity(_Model):
    value: Quantity
    request_policy: CapacityRequestPolicy | None = None

    def __init__(self, value: Quantity, request_policy: CapacityRequestPolicy | None = None) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "request_policy", request_policy)


@dataclass(frozen=True)
class DeviceCounterConsumption(_Model):
    counter_set: str
    counters: Mapping[str, Quantity]

    def __init__(self, counter_set: str, counters: Mapping[str, Quantity]) -> None:
        object.__setattr__(self, "counter_set", counter_set)
        object.__setattr__(self, "counters", counters)


@dataclass(frozen=True)
class CounterSet(_Model):
    name: str
    counters: Mapping[str, Quantity]

    def __init__(self, name: str, counters: Mapping[str, Quantity]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "counters", counters)


@dataclass(frozen=True)
class DeviceTaint(_Model):
    key: str
    value: str = ""
    effect: str = ""

    def __init__(self, key: str, value: str = "", effect: str = "") -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "effect", effect)


@dataclass(frozen=True)
class DeviceToleration(_Model):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def __init__(self, key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "operator", operator)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "effect", effect)

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
class NodeSelectorRequirement(_Model):
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __init__(self, key: str, operator: str, values: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "operator", operator)
        object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class NodeSelectorTerm(_Model):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def __init__(
        self, match_expressions: tuple[NodeSelectorRequirement, ...] = (),
        match_fields: tuple[NodeSelectorRequirement, ...] = (),
    ) -> None:
        object.__setattr__(self, "match_expressions", match_expressions)
        object.__setattr__(self, "match_fields", match_fields)


@dataclass(frozen=True)
class NodeSelector(_Model):
    terms: tuple[NodeSelectorTerm, ...] = ()

    def __init__(self, terms: tuple[NodeSelectorTerm, ...] = ()) -> None:
        object.__setattr__(self, "terms", terms)


@dataclass(frozen=True)
class Device(_Model):
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

    def __init__(
        self, name: str, attributes: Mapping[str, DeviceAttribute] | None = None,
        capacity: Mapping[str, DeviceCapacity] | None = None,
        consumes_counters: tuple[DeviceCounterConsumption, ...] = (), node_name: str | None = None,
        node_selector: NodeSelector | None = None, all_nodes: bool = False,
        allow_multiple_allocations: bool | None = None, taints: tuple[DeviceTaint, ...] = (),
        binds_to_node: bool = False, binding_conditions: tuple[str, ...] = (),
        binding_failure_conditions: tuple[str, ...] = (),
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "attributes", {} if attributes is None else attributes)
        object.__setattr__(self, "capacity", {} if capacity is None else capacity)
        object.__setattr__(self, "consumes_counters", consumes_counters)
        object.__setattr__(self, "node_name", node_name)
        object.__setattr__(self, "node_selector", node_selector)
        object.__setattr__(self, "all_nodes", all_nodes)
        object.__setattr__(self, "allow_multiple_allocations", allow_multiple_allocations)
        object.__setattr__(self, "taints", taints)
        object.__setattr__(self, "binds_to_node", binds_to_node)
        object.__setattr__(self, "binding_conditions", binding_conditions)
        object.__setattr__(self, "binding_failure_conditions", binding_failure_conditions)

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
class ResourcePool(_Model):
    name: str
    generation: int = 0
    resource_slice_count: int = 1

    def __init__(self, name: str, generation: int = 0, resource_slice_count: int = 1) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "generation", generation)
        object.__setattr__(self, "resource_slice_count", resource_slice_count)


@dataclass(frozen=True)
class ResourceSlice(_Model):
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

    def __init__(
        self, name: str, driver: str, pool: ResourcePool, node_name: str | None = None,
        node_selector: NodeSelector | None = None, all_nodes: bool = False, per_device_node_selection: bool = False,
        devices: tuple[Device, ...] = (), shared_counters: tuple[CounterSet, ...] = (), source: str = "",
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "driver", driver)
        object.__setattr__(self, "pool", pool)
        object.__setattr__(self, "node_name", node_name)
        object.__setattr__(self, "node_selector", node_selector)
        object.__setattr__(self, "all_nodes", all_nodes)
        object.__setattr__(self, "per_device_node_selection", per_device_node_selection)
        object.__setattr__(self, "devices", devices)
        object.__setattr__(self, "shared_counters", shared_counters)
        object.__setattr__(self, "source", source)


@dataclass(frozen=True)
class DeviceSelector(_Model):
    """A CEL selector (the only selector type of resource.k8s.io/v1)."""

    expression: str

    def __init__(self, expression: str) -> None:
        object.__setattr__(self, "expression", expression)


@dataclass(frozen=True)
class DeviceClass(_Model):
    name: str
    selectors: tuple[DeviceSelector, ...] = ()
    extended_resource_name: str | None = None
    source: str = ""

    def __init__(
        self, name: str, selectors: tuple[DeviceSelector, ...] = (), extended_resource_name: str | None = None,
        source: str = "",
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "selectors", selectors)
        object.__setattr__(self, "extended_resource_name", extended_resource_name)
        object.__setattr__(self, "source", source)


@dataclass(frozen=True)
class CapacityRequirements(_Model):
    requests: Mapping[str, Quantity] = field(default_factory=dict)

    def __init__(self, requests: Mapping[str, Quantity] | None = None) -> None:
        object.__setattr__(self, "requests", {} if requests is None else requests)


@dataclass(frozen=True)
class DeviceSubRequest(_Model):
    """One alternative of a firstAvailable list, or (as ExactDeviceRequest) a plain request."""

    name: str
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None

    def __init__(
        self, name: str, device_class_name: str, selectors: tuple[DeviceSelector, ...] = (),
        allocation_mode: AllocationMode = "ExactCount", count: int = 1, admin_access: bool | None = None,
        tolerations: tuple[DeviceToleration, ...] = (), capacity: CapacityRequirements | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "device_class_name", device_class_name)
        object.__setattr__(self, "selectors", selectors)
        object.__setattr__(self, "allocation_mode", allocation_mode)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "admin_access", admin_access)
        object.__setattr__(self, "tolerations", tolerations)
        object.__setattr__(self, "capacity", capacity)


@dataclass(frozen=True)
class DeviceRequest(_Model):
    """spec.devices.requests[]: `exactly` (held as a DeviceSubRequest named as the request) or
    `first_available` (the subrequests, tried in order)."""

    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()

    def __init__(
        self, name: str, exactly: DeviceSubRequest | None = None, first_available: tuple[DeviceSubRequest, ...] = (),
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "exactly", exactly)
        object.__setattr__(self, "first_available", first_available)


@dataclass(frozen=True)
class DeviceConstraint(_Model):
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None

    def __init__(
        self, requests: tuple[str, ...] = (), match_attribute: str | None = None,
        distinct_attribute: str | None = None,
    ) -> None:
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "match_attribute", match_attribute)
        object.__setattr__(self, "distinct_attribute", distinct_attribute)


@dataclass(frozen=True)
class DeviceRequestAllocationResult(_Model):
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None

    def __init__(
        self, request: str, driver: str, pool: str, device: str, admin_access: bool | None = None,
        share_id: str | None = None, consumed_capacity: Mapping[str, Quantity] | None = None,
    ) -> None:
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "driver", driver)
        object.__setattr__(self, "pool", pool)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "admin_access", admin_access)
        object.__setattr__(self, "share_id", share_id)
        object.__setattr__(self, "consumed_capacity", consumed_capacity)

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class DeviceAllocationResult(_Model):
    """status.allocation: the devices a claim holds (devices.results) and, as read from an input's
    status, the nodes the allocation is available on (nodeSelector; None: every node). The config is not
    modelled; an allocation numalign makes carries no node selector (the cluster view works out the nodes
    from the devices' slices, cluster/dra.py)."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    node_selector: NodeSelector | None = None

    def __init__(
        self, results: tuple[DeviceRequestAllocationResult, ...] = (), node_selector: NodeSelector | None = None,
    ) -> None:
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "node_selector", node_selector)


@dataclass(frozen=True)
class ResourceClaimSpec(_Model):
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()

    def __init__(
        self, requests: tuple[DeviceRequest, ...] = (), constraints: tuple[DeviceConstraint, ...] = (),
    ) -> None:
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "constraints", constraints)


@dataclass(frozen=True)
class ResourceClaim(_Model):
    name: str
    namespace: str = "default"
    uid: str = ""
    spec: ResourceClaimSpec = field(default_factory=ResourceClaimSpec)
    allocation: DeviceAllocationResult | None = None
    source: str = ""

    def __init__(
        self, name: str, namespace: str = "default", uid: str = "", spec: ResourceClaimSpec | None = None,
        allocation: DeviceAllocationResult | None = None, source: str = "",
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "spec", ResourceClaimSpec() if spec is None else spec)
        object.__setattr__(self, "allocation", allocation)
        object.__setattr__(self, "source", source)

    @property
    def key(self) -> str:
        """klog.KObj's text: namespace/name (the name alone without a namespace)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ResourceClaimTemplate(_Model):
    name: str
    namespace: str = "default"
    spec: ResourceClaimSpec = field(default_factory=ResourceClaimSpec)
    source: str = ""

    def __init__(
        self, name: str, namespace: str = "default", spec: ResourceClaimSpec | None = None, source: str = "",
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "spec", ResourceClaimSpec() if spec is None else spec)
        object.__setattr__(self, "source", source)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodResourceClaim(_Model):
    """pod.spec.resourceClaims[]: one of resourceClaimName, resourceClaimTemplateName."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None

    def __init__(
        self, name: str, resource_claim_name: str | None = None, resource_claim_template_name: str | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "resource_claim_name", resource_claim_name)
        object.__setattr__(self, "resource_claim_template_name", resource_claim_template_name)


@dataclass(frozen=True)
class ContainerClaim(_Model):
    """container.resources.claims[]: a pod claim by name, optionally one request of it."""

    name: str
    request: str = ""

    def __init__(self, name: str, request: str = "") -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "request", request)


@dataclass
class DRAObjects(_Model):
    """Every DRA object read from one set of files, in the order read."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # key: namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)  # key: namespace/name
    slices: list[ResourceSlice] = field(default_factory=list)

    def __init__(
        self, classes: dict[str, DeviceClass] | None = None, claims: dict[str, ResourceClaim] | None = None,
        templates: dict[str, ResourceClaimTemplate] | None = None, slices: list[ResourceSlice] | None = None,
    ) -> None:
        self.classes = {} if classes is None else classes
        self.claims = {} if claims is None else claims
        self.templates = {} if templates is None else templates
        self.slices = [] if slices is None else slices

    def __len__(self) -> int:
        return len(self.classes) + len(self.claims) + len(self.templates) + len(self.slices)

    def merge(self, other: DRAObjects) -> None:
        self.classes.update(other.classes)
        self.claims.update(other.claims)
        self.templates.update(other.templates)
        self.slices.extend(other.slices)
