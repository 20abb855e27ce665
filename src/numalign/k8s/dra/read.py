"""Read resource.k8s.io/v1 objects (DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice)
from decoded documents, with the API server's defaulting and the validation that shapes allocation.

An invalid object is refused as `kubectl apply` would be refused, in one line naming the file, the
document and the object: `FILE: document N: ResourceSlice.resource.k8s.io "gpus" is invalid:
spec.devices[1].name: Duplicate value: "gpu-1"`. CEL selectors are compiled here (k8s/dra/cel/),
so a selector that does not compile, or whose estimated cost is over the limit, is refused on read.
resource.k8s.io/v1beta2 and v1beta1 objects are read as the API server converts them to v1
(k8s/dra/convert.py); v1alpha3 and older are not.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.dra import names as n
from numalign.k8s.dra import types as t
from numalign.k8s.dra.convert import API_VERSIONS, V1BETA1, UnknownFieldError, to_v1
from numalign.k8s.quantity import Quantity
from numalign.limits import go_quote, quote

DRA_KINDS: Final = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
# Selectors are checked on read with every CEL feature on: the API server of a version that has them
# accepts them; the allocator of a version without them reports the compile error when it runs. The
# environment is the release's whose kubelet numalign models (--kubelet-version; `checked_as`), by
# default the newest.
_API_SERVER_MINOR: ContextVar[int | None] = ContextVar("numalign_dra_api_server_minor", default=None)


@contextlib.contextmanager
def checked_as(minor: int) -> Iterator[None]:
    """Selectors read inside are checked as the API server of release 1.`minor` checks a new object."""
    token = _API_SERVER_MINOR.set(minor)
    try:
        yield
    finally:
        _API_SERVER_MINOR.reset(token)
DRAObject = t.DeviceClass | t.ResourceClaim | t.ResourceClaimTemplate | t.ResourceSlice


class _FieldError(Exception):
    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")


# Go's int64, the type of every integer field of these objects.
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_INDEX = re.compile(r"\[[^\]]*\]")


class _DecodeError(Exception):
    """An integer beyond int64: the API server's JSON decoder refuses the object before any validation
    (encoding/json's UnmarshalTypeError, its field named by the Go struct holding it and the path of
    field names from the object's root, without list indices or map keys)."""

    def __init__(self, value: int, path: str, go_struct: str) -> None:
        super().__init__(value)
        self.value, self.fields, self.go_struct = value, _INDEX.sub("", path), go_struct

    def message(self, api_version: object) -> str:
        fields, go_struct = self.fields, self.go_struct
        if api_version == V1BETA1:  # decoded in the version as written: v1beta1's own shape and struct names
            fields = fields.replace(".exactly.", ".").replace("devices.attributes", "devices.basic.attributes")
            go_struct = "DeviceRequest" if go_struct == "ExactDeviceRequest" else go_struct
        # The number as written (kubectl's YAML-to-JSON step may print a YAML one in another form).
        return (f"json: cannot unmarshal number {self.value} into Go struct field {go_struct}.{fields} of type "
                f"int64 (write an integer from {_INT64_MIN} to {_INT64_MAX})")


def dra_object_from_dict(obj: Mapping[str, Any], where: str) -> DRAObject:
    """One DRA object (its `kind` one of DRA_KINDS), defaulted and validated."""
    kind = str(obj.get("kind"))
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version not in API_VERSIONS:
        raise InvalidInputError(
            f"{where}: {kind}: apiVersion {quote(api_version)} is not read; expected {', '.join(API_VERSIONS[:-1])} "
            f"or {API_VERSIONS[-1]} (fetch it with `kubectl get ... -o yaml` from a 1.32+ cluster)"
        )
    try:
        written, obj = obj, to_v1(obj)
        if kind == "ResourceSlice":
            _known_fields(obj, _SLICE_FIELDS, "")
            spec_obj = obj.get("spec")
            if isinstance(spec_obj, Mapping):
                _known_fields(spec_obj, _SLICE_SPEC_FIELDS, "spec")
        elif kind in _STRICT:  # on the object as written: strict decoding names the version's own paths
            _strict(written, (_STRICT_V1BETA1 if api_version == V1BETA1 else _STRICT)[kind], "")
    except UnknownFieldError as exc:
        raise _unknown_field(where, kind, api_version, exc) from None
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = metadata.get("name")
    namespace = metadata.get("namespace") or "default"
    try:
        if not isinstance(name, str) or not name:
            raise _FieldError("metadata.name", "Required value: name or generateName is required")
        if not isinstance(namespace, str):
            raise _FieldError("metadata.namespace", f"Invalid value: {quote(namespace)}: must be a string")
        _name(name, "metadata.name", n.dns_subdomain_problem)
        if kind not in ("DeviceClass", "ResourceSlice"):
            _name(namespace, "metadata.namespace", n.dns_label_problem)
        spec = _mapping(obj.get("spec"), "spec")
        source = f"{where}: {kind} {name}" if kind in ("DeviceClass", "ResourceSlice") else (
            f"{where}: {kind} {namespace}/{name}")
        if kind == "DeviceClass":
            return t.DeviceClass(name=name, selectors=_selectors(spec.get("selectors"), "spec.selectors"),
                                 extended_resource_name=_opt_str(spec.get("extendedResourceName"),
                                                                 "spec.extendedResourceName"),
                                 source=source)
        if kind == "ResourceSlice":
            return _slice(name, spec, source)
        claim_spec = _claim_spec(spec)
        if kind == "ResourceClaimTemplate":
            inner = _mapping(spec.get("spec"), "spec.spec")
            return t.ResourceClaimTemplate(name=name, namespace=namespace, spec=_claim_spec(inner, "spec.spec"),
                                           source=source)
        uid = metadata.get("uid")
        status = _mapping(obj.get("status"), "status")
        return t.ResourceClaim(name=name, namespace=namespace, uid=uid if isinstance(uid, str) else "",
                               spec=claim_spec, allocation=_allocation(status.get("allocation")), source=source)
    except UnknownFieldError as exc:
        raise _unknown_field(where, kind, api_version, exc) from None
    except _FieldError as exc:
        label = f'{kind}.resource.k8s.io {go_quote(name) if isinstance(name, str) else "<unnamed>"}'
        raise InvalidInputError(f"{where}: {label} is invalid: {exc}") from None
    except _DecodeError as exc:
        version = str(api_version or "v1").rpartition("/")[2]
        raise InvalidInputError(f'{where}: {kind} in version "{version}" cannot be handled as a {kind}: '
                                f"{exc.message(api_version)}") from None


def _unknown_field(where: str, kind: str, api_version: object, exc: UnknownFieldError) -> InvalidInputError:
    version = str(api_version or "v1").rpartition("/")[2]
    return InvalidInputError(
        f'{where}: {kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
        f'unknown field "{exc.path}" ({exc.fix})')


# ---- ResourceSlice -----------------------------------------------------------------------------------


# The fields resource.k8s.io/v1's ResourceSlice has (k8s.io/api resource/v1 types.go, the union of
# 1.34-1.37: a field a newer release added is known, as numalign reads as the newest release does). Any
# other is an unknown field to strict decoding, which `kubectl apply` asks for by default
# (--validate=strict): the API server refuses the object instead of dropping the field.
_SLICE_FIELDS: Final = frozenset(("apiVersion", "kind", "metadata", "spec"))
_SLICE_SPEC_FIELDS: Final = frozenset((
    "driver", "pool", "nodeName", "nodeSelector", "allNodes", "devices", "perDeviceNodeSelection",
    "sharedCounters", "partitionTypeAttribute", "skipNodeOperations"))
_POOL_FIELDS: Final = frozenset(("name", "generation", "resourceSliceCount"))
_DEVICE_FIELDS: Final = frozenset((
    "name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints",
    "bindsToNode", "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations",
    "nodeAllocatableResourceMappings", "nodeAllocatableResources"))
_CAPACITY_FIELDS: Final = frozenset(("value", "requestPolicy"))
_TAINT_FIELDS: Final = frozenset(("key", "value", "effect", "timeAdded"))
_COUNTER_SET_FIELDS: Final = frozenset(("name", "counters"))
_CONSUMPTION_FIELDS: Final = frozenset(("counterSet", "counters"))


# DeviceClass, ResourceClaim and ResourceClaimTemplate as strict decoding knows them: per object, its
# fields and, for those holding objects (or lists of them), what those hold. The union of 1.34-1.37's
# k8s.io/api resource/v1, v1beta2 and v1beta1 types.go: the same fields in each version but for v1beta1's
# flat request (strict decoding runs on the object as written, in its version's shape). Not descended:
# `metadata` (ObjectMeta), `status` (a `kubectl get -o yaml` dump's: legal on an input, read for
# status.allocation only), opaque `parameters` and capacity `requests` (maps of data).
_Schema = tuple[frozenset[str], Mapping[str, "_Schema"]]


def _schema(fields: str, **children: _Schema) -> _Schema:
    return frozenset(fields.split()), children


_SELECTOR: Final = _schema("cel", cel=_schema("expression"))
_OPAQUE: Final = _schema("driver parameters")
_TOLERATION: Final = _schema("key operator value effect tolerationSeconds")
_CAPACITY_REQUEST: Final = _schema("requests")
_EXACT_FIELDS: Final = ("deviceClassName selectors allocationMode count adminAccess tolerations capacity "
                        "derivedAttributes")
_SUB_REQUEST: Final = _schema(f"name {_EXACT_FIELDS.replace('adminAccess ', '')}", selectors=_SELECTOR,
                              tolerations=_TOLERATION, capacity=_CAPACITY_REQUEST)


def _kinds(request: _Schema) -> Mapping[str, _Schema]:
    claim_spec = _schema("devices", devices=_schema(
        "requests constraints config", requests=request,
        constraints=_schema("requests matchAttribute distinctAttribute"),
        config=_schema("requests opaque", opaque=_OPAQUE)))
    return {
        "DeviceClass": _schema("apiVersion kind metadata spec", spec=_schema(
            "selectors config extendedResourceName", selectors=_SELECTOR,
            config=_schema("opaque", opaque=_OPAQUE))),
        "ResourceClaim": _schema("apiVersion kind metadata spec status", spec=claim_spec),
        "ResourceClaimTemplate": _schema("apiVersion kind metadata spec",
                                         spec=_schema("metadata spec", spec=claim_spec)),
    }


# v1 and v1beta2: a request's fields under `exactly`; v1beta1: on the request itself
_STRICT: Final = _kinds(_schema("name exactly firstAvailable", firstAvailable=_SUB_REQUEST, exactly=_schema(
    _EXACT_FIELDS, selectors=_SELECTOR, tolerations=_TOLERATION, capacity=_CAPACITY_REQUEST)))
_STRICT_V1BETA1: Final = _kinds(_schema(f"name firstAvailable {_EXACT_FIELDS}", firstAvailable=_SUB_REQUEST,
                                        selectors=_SELECTOR, tolerations=_TOLERATION, capacity=_CAPACITY_REQUEST))


def _strict(obj: Mapping[str, Any], schema: _Schema, path: str) -> None:
    """UnknownFieldError for the first field strict decoding does not know, depth first in the order written."""
    known, children = schema
    _known_fields(obj, known, path)
    for key, child in children.items():
        value = obj.get(key)
        if value is None:  # (most are absent: no path made for them)
            continue
        where = f"{path}.{key}" if path else key
        if type(value) is dict or isinstance(value, Mapping):
            _strict(value, child, where)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if type(item) is dict or isinstance(item, Mapping):
                    _strict(item, child, f"{where}[{i}]")


def _known_fields(obj: Mapping[str, Any], known: frozenset[str], path: str) -> None:
    """UnknownFieldError for the first key of `obj` not in `known`, named as strict decoding names it."""
    if obj.keys() <= known:
        return
    field = next(str(key) for key in obj if key not in known)
    raise UnknownFieldError(f"{path}.{field}" if path else field,
                            f"remove it or correct its spelling; expected one of {', '.join(sorted(known))}")


# A device taint's effects the API server accepts (validation.go validDeviceTaintEffects): `None`
# came with 1.35; 1.34 knows only the two the kubelet's node taints have.
_TAINT_EFFECTS_134: Final = ("NoExecute", "NoSchedule")
_TAINT_EFFECTS: Final = ("NoExecute", "NoSchedule", "None")


def _taint_effect(raw: object, path: str) -> str:
    if raw is None or raw == "":
        raise _FieldError(path, "Required value")
    minor = _API_SERVER_MINOR.get()
    supported = _TAINT_EFFECTS_134 if minor is not None and minor <= 34 else _TAINT_EFFECTS
    if raw not in supported:
        raise _FieldError(path, f"Unsupported value: {go_quote(str(raw))}: supported values: "
                                f"{', '.join(go_quote(e) for e in supported)} (set one of them; None came with 1.35)")
    return str(raw)


def _slice(name: str, spec: Mapping[str, Any], source: str) -> t.ResourceSlice:
    driver = _name(_req_str(spec.get("driver"), "spec.driver"), "spec.driver", n.driver_problem)
    pool_obj = _mapping(spec.get("pool"), "spec.pool")
    _known_fields(pool_obj, _POOL_FIELDS, "spec.pool")
    pool = t.ResourcePool(
        name=_name(_req_str(pool_obj.get("name"), "spec.pool.name"), "spec.pool.name", n.pool_problem),
        generation=_int(pool_obj.get("generation", 0), "spec.pool.generation", "ResourcePool", minimum=0),
        resource_slice_count=_int(pool_obj.get("resourceSliceCount"), "spec.pool.resourceSliceCount", "ResourcePool",
                                  minimum=1),
    )
    node_name = _opt_str(spec.get("nodeName"), "spec.nodeName")
    if node_name:
        _name(node_name, "spec.nodeName", n.dns_subdomain_problem)
    node_selector = _node_selector(spec.get("nodeSelector"), "spec.nodeSelector")
    all_nodes = _bool(spec.get("allNodes"), "spec.allNodes")
    per_device = _bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
    if sum((bool(node_name), node_selector is not None, all_nodes, per_device)) != 1:
        raise _FieldError("spec", "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                               "`perDeviceNodeSelection` is required")
    raw_devices = _list(spec.get("devices"), "spec.devices", t.RESOURCE_SLICE_MAX_DEVICES)
    devices: list[t.Device] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_devices):
        device = _device(raw, f"spec.devices[{i}]", per_device)
        if device.name in seen:
            raise _FieldError(f"spec.devices[{i}].name", f"Duplicate value: {go_quote(device.name)}")
        seen.add(device.name)
        devices.append(device)
    counter_sets = []
    raw_sets = _list(spec.get("sharedCounters"), "spec.sharedCounters", t.RESOURCE_SLICE_MAX_COUNTER_SETS)
    for i, raw in enumerate(raw_sets):
        cs = _mapping(raw, f"spec.sharedCounters[{i}]")
        _known_fields(cs, _COUNTER_SET_FIELDS, f"spec.sharedCounters[{i}]")
        counter_sets.append(t.CounterSet(
            name=_req_str(cs.get("name"), f"spec.sharedCounters[{i}].name"),
            counters=_counters(cs.get("counters"), f"spec.sharedCounters[{i}].counters")))
    return t.ResourceSlice(name=name, driver=driver, pool=pool, node_name=node_name, node_selector=node_selector,
                           all_nodes=all_nodes, per_device_node_selection=per_device, devices=tuple(devices),
                           shared_counters=tuple(counter_sets), source=source)


def _device(raw: object, path: str, per_device: bool) -> t.Device:
    # Optional fields are looked at only when present: a slice's many devices are read on every run, and
    # building each field's path for an error that is not there cost more than reading the device.
    obj = _mapping(raw, path)
    _known_fields(obj, _DEVICE_FIELDS, path)
    attributes: dict[str, t.DeviceAttribute] = {}
    raw_attributes = obj.get("attributes")
    if raw_attributes is not None:
        where = f"{path}.attributes"
        for key, value in _mapping(raw_attributes, where).items():
            _qualified_name(key, where)
            attributes[key] = _scalar_attribute(value) or _attribute(value, f"{where}[{key}]")
    capacity: dict[str, t.DeviceCapacity] = {}
    raw_capacity = obj.get("capacity")
    if raw_capacity is not None:
        for key, value in _mapping(raw_capacity, f"{path}.capacity").items():
            _qualified_name(key, f"{path}.capacity")
            capacity[key] = _capacity(value, f"{path}.capacity[{key}]")
    total = len(attributes) + len(capacity)
    if total > t.RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
        raise _FieldError(path, f"Too many: {total}: must have at most "
                             f"{t.RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE} attributes and capacities")
    consumes = []
    raw_consumes = obj.get("consumesCounters")
    for i, raw_c in enumerate(() if raw_consumes is None else _list(
            raw_consumes, f"{path}.consumesCounters", t.RESOURCE_SLICE_MAX_DEVICE_COUNTERS_PER_DEVICE)):
        c = _mapping(raw_c, f"{path}.consumesCounters[{i}]")
        _known_fields(c, _CONSUMPTION_FIELDS, f"{path}.consumesCounters[{i}]")
        consumes.append(t.DeviceCounterConsumption(
            counter_set=_req_str(c.get("counterSet"), f"{path}.consumesCounters[{i}].counterSet"),
            counters=_counters(c.get("counters"), f"{path}.consumesCounters[{i}].counters")))
    taints = []
    raw_taints = obj.get("taints")
    for i, raw_t in enumerate(() if raw_taints is None else _list(raw_taints, f"{path}.taints",
                                                                  t.DEVICE_TAINTS_MAX_LENGTH)):
        tt = _mapping(raw_t, f"{path}.taints[{i}]")
        _known_fields(tt, _TAINT_FIELDS, f"{path}.taints[{i}]")
        taints.append(t.DeviceTaint(key=_req_str(tt.get("key"), f"{path}.taints[{i}].key"),
                                    value=_opt_str(tt.get("value"), f"{path}.taints[{i}].value") or "",
                                    effect=_taint_effect(tt.get("effect"), f"{path}.taints[{i}].effect")))
    raw_node_name = obj.get("nodeName")
    node_name = None if raw_node_name is None else _opt_str(raw_node_name, f"{path}.nodeName")
    raw_selector = obj.get("nodeSelector")
    node_selector = None if raw_selector is None else _node_selector(raw_selector, f"{path}.nodeSelector")
    raw_all = obj.get("allNodes")
    all_nodes = False if raw_all is None else _bool(raw_all, f"{path}.allNodes")
    if per_device and sum((bool(node_name), node_selector is not None, all_nodes)) != 1:
        raise _FieldError(path, "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes` is required "
                             "when `perDeviceNodeSelection` is set")
    multiple = obj.get("allowMultipleAllocations")
    binds = obj.get("bindsToNode")
    conditions = obj.get("bindingConditions")
    failures = obj.get("bindingFailureConditions")
    name = obj.get("name")
    if type(name) is not str or not name:
        name = _req_str(name, f"{path}.name")
    return t.Device(  # positional: a slice's many devices are read on every run
        _name(name, f"{path}.name", n.dns_label_problem), attributes, capacity, tuple(consumes), node_name,
        node_selector, all_nodes,
        None if multiple is None else _bool(multiple, f"{path}.allowMultipleAllocations"), tuple(taints),
        False if binds is None else _bool(binds, f"{path}.bindsToNode"),
        () if conditions is None else tuple(_str_list(conditions, f"{path}.bindingConditions")),
        () if failures is None else tuple(_str_list(failures, f"{path}.bindingFailureConditions")),
    )


# resource.k8s.io/v1 JSON names: the scalar and (DRAListTypeAttributes) the list field of each kind.
_ATTRIBUTE_FIELDS: Final = (("int", "int", "ints"), ("bool", "bool", "bools"), ("string", "string", "strings"),
                            ("version", "version", "versions"))


# The common form of an attribute, one scalar of its kind, read without the general checks below.
_SCALAR_TYPES: Final[Mapping[str, type]] = {"int": int, "bool": bool, "string": str, "version": str}


def _scalar_attribute(raw: object) -> t.DeviceAttribute | None:
    """The common form of an attribute, one valid scalar of its kind; None for any other (read by
    `_attribute`, which says what is wrong with it)."""
    if type(raw) is dict and len(raw) == 1:
        ((kind, value),) = raw.items()
        if kind != "version" and _SCALAR_TYPES.get(kind) is type(value) and (
                len(value) <= t.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH if type(value) is str
                else type(value) is not int or _INT64_MIN <= value <= _INT64_MAX):
            return t.DeviceAttribute(kind, (value,), False)  # type: ignore[arg-type]
    return None


def _attribute(raw: object, path: str) -> t.DeviceAttribute:
    found_scalar = _scalar_attribute(raw)
    if found_scalar is not None:
        return found_scalar
    obj = _mapping(raw, path)
    found: list[t.DeviceAttribute] = []
    for kind, scalar_key, list_key in _ATTRIBUTE_FIELDS:
        value = obj.get(scalar_key)
        if value is not None:
            scalar = _scalar(kind, value, path, scalar_key)
            if kind == "version":
                _semver(scalar, f"{path}.{scalar_key}")
            found.append(t.DeviceAttribute(kind, (scalar,)))  # type: ignore[arg-type]
        values = obj.get(list_key)
        if values is not None:
            items = _list(values, path, t.RESOURCE_SLICE_MAX_ATTRIBUTE_VALUES_PER_DEVICE)
            if not items:
                raise _FieldError(path, "Required value: a list value must not be empty")
            scalars = tuple(_scalar(kind, v, path, list_key) for v in items)
            if kind == "version":
                for i, v in enumerate(scalars):
                    _semver(v, f"{path}.{list_key}[{i}]")
            found.append(t.DeviceAttribute(kind, scalars, True))  # type: ignore[arg-type]
    if len(found) != 1:
        raise _FieldError(path, "Invalid value: exactly one value must be specified")
    return found[0]


# A semantic version as semver.org 2.0.0 spells one (the API server's semverRe for `version` attributes):
# MAJOR.MINOR.PATCH without leading zeros, then -PRERELEASE and +BUILD of dot-separated ASCII parts.
_NUMBER: Final = "(?:0|[1-9][0-9]*)"
_PRERELEASE_PART: Final = f"(?:{_NUMBER}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER: Final = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-{_PRERELEASE_PART}(?:\.{_PRERELEASE_PART})*)?"
                            r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")


def _semver(value: object, path: str) -> None:
    """A `version` attribute the API server refuses (a selector comparing it would fail at run time)."""
    if not isinstance(value, str) or not _SEMVER.fullmatch(value):
        raise _FieldError(path, f"Invalid value: {go_quote(str(value))}: must be a string compatible with "
                                "semver.org spec 2.0.0")


def _qualified_name(name: str, path: str) -> None:
    """An attribute's or a capacity's name the API server refuses; the error names the map entry."""
    problem = n.qualified_name_problem(name) if isinstance(name, str) else "Invalid value: expected a string"
    if problem is not None:
        raise _FieldError(f"{path}[{name if len(str(name)) <= 64 else str(name)[:64] + '...'}]", problem)


def _scalar(kind: str, value: object, path: str, field: str) -> t.AttributeScalar:
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise _DecodeError(value, f"{path}.{field}", "DeviceAttribute")
        return value
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind in ("string", "version") and isinstance(value, str):
        if len(value) > t.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
            raise _FieldError(path, f"Too long: may not be more than {t.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH} bytes")
        return value
    raise _FieldError(path, f"Invalid value: {quote(value)}: expected a {kind}")


def _capacity(raw: object, path: str) -> t.DeviceCapacity:
    obj = _mapping(raw, path)
    _known_fields(obj, _CAPACITY_FIELDS, path)
    policy_obj = obj.get("requestPolicy")
    policy = None
    if policy_obj is not None:
        p = _mapping(policy_obj, f"{path}.requestPolicy")
        rng = p.get("validRange")
        valid_range = None
        if rng is not None:
            r = _mapping(rng, f"{path}.requestPolicy.validRange")
            valid_range = t.CapacityRequestPolicyRange(
                min=_opt_quantity(r.get("min"), f"{path}.requestPolicy.validRange.min"),
                max=_opt_quantity(r.get("max"), f"{path}.requestPolicy.validRange.max"),
                step=_opt_quantity(r.get("step"), f"{path}.requestPolicy.validRange.step"))
        policy = t.CapacityRequestPolicy(
            default=_opt_quantity(p.get("default"), f"{path}.requestPolicy.default"),
            valid_values=tuple(_quantity(v, f"{path}.requestPolicy.validValues")
                               for v in _list(p.get("validValues"), f"{path}.requestPolicy.validValues", 10)),
            valid_range=valid_range)
    return t.DeviceCapacity(value=_quantity(obj.get("value"), f"{path}.value"), request_policy=policy)


def _counters(raw: object, path: str) -> dict[str, Quantity]:
    obj = _mapping(raw, path)
    if len(obj) > t.RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET:
        limit = t.RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET
        raise _FieldError(path, f"Too many: {len(obj)}: must have at most {limit} items")
    return {str(k): _quantity(_mapping(v, f"{path}[{k}]").get("value"), f"{path}[{k}].value") for k, v in obj.items()}


def _node_selector(raw: object, path: str) -> t.NodeSelector | None:
    """A core NodeSelector (a slice's, an allocation's), validated as the API server's ValidateNodeSelector
    does and decoded strictly: a selector it would refuse matches nothing here, so reading one silently
    would count no node (or every node) instead of naming the mistake."""
    if raw is None:
        return None
    obj = _mapping(raw, path)
    _known_fields(obj, _NODE_SELECTOR_FIELDS, path)
    raw_terms = obj.get("nodeSelectorTerms")
    if not raw_terms:
        raise _FieldError(f"{path}.nodeSelectorTerms",
                          "Required value: must have at least one node selector term")
    terms = []
    for i, term in enumerate(_list(raw_terms, f"{path}.nodeSelectorTerms", 100)):
        term_path = f"{path}.nodeSelectorTerms[{i}]"
        tm = _mapping(term, term_path)
        _known_fields(tm, _NODE_SELECTOR_TERM_FIELDS, term_path)
        groups = []
        for key in ("matchExpressions", "matchFields"):
            reqs = []
            for j, req in enumerate(_list(tm.get(key), f"{term_path}.{key}", 100)):
                req_path = f"{term_path}.{key}[{j}]"
                r = _mapping(req, req_path)
                _known_fields(r, _NODE_SELECTOR_REQUIREMENT_FIELDS, req_path)
                requirement = t.NodeSelectorRequirement(
                    key=_req_str(r.get("key"), f"{req_path}.key"),
                    operator=_req_str(r.get("operator"), f"{req_path}.operator"),
                    values=tuple(_str_list(r.get("values"), f"{req_path}.values")))
                (_field_requirement if key == "matchFields" else _label_requirement)(requirement, req_path)
                reqs.append(requirement)
            groups.append(tuple(reqs))
        terms.append(t.NodeSelectorTerm(match_expressions=groups[0], match_fields=groups[1]))
    return t.NodeSelector(terms=tuple(terms))


_NODE_SELECTOR_FIELDS: Final = frozenset(("nodeSelectorTerms",))
_NODE_SELECTOR_TERM_FIELDS: Final = frozenset(("matchExpressions", "matchFields"))
_NODE_SELECTOR_REQUIREMENT_FIELDS: Final = frozenset(("key", "operator", "values"))
_LABEL_OPERATORS: Final = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def _label_requirement(req: t.NodeSelectorRequirement, path: str) -> None:
    """ValidateNodeSelectorRequirement: the operator and the values it takes."""
    if req.operator in ("In", "NotIn"):
        if not req.values:
            raise _FieldError(f"{path}.values", "Required value: must be specified when `operator` is 'In' or "
                                                "'NotIn' (list the label values to match)")
    elif req.operator in ("Exists", "DoesNotExist"):
        if req.values:
            raise _FieldError(f"{path}.values", "Forbidden: may not be specified when `operator` is 'Exists' or "
                                                "'DoesNotExist' (remove the values)")
    elif req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            raise _FieldError(f"{path}.values", "Required value: must be specified single value when `operator` "
                                                "is 'Lt' or 'Gt'")
        if not req.values[0].lstrip("-").isdigit():
            raise _FieldError(f"{path}.values[0]", f"Invalid value: {go_quote(req.values[0])}: must be an integer")
    else:
        raise _FieldError(f"{path}.operator", f"Unsupported value: {go_quote(req.operator)}: supported values: "
                                              f"{', '.join(go_quote(o) for o in _LABEL_OPERATORS)}")


def _field_requirement(req: t.NodeSelectorRequirement, path: str) -> None:
    """ValidateNodeFieldSelectorRequirement: metadata.name only, In or NotIn one name."""
    if req.key != "metadata.name":
        raise _FieldError(f"{path}.key", f"Unsupported value: {go_quote(req.key)}: supported values: "
                                         '"metadata.name" (select other nodes by label under matchExpressions)')
    if req.operator not in ("In", "NotIn"):
        raise _FieldError(f"{path}.operator", f'Unsupported value: {go_quote(req.operator)}: supported values: "In", '
                                              '"NotIn"')
    if len(req.values) != 1:
        raise _FieldError(f"{path}.values", "Required value: must be only one value when `operator` is 'In' or "
                                            "'NotIn' for node field selector (one term per node name)")


# ---- DeviceClass selectors and claim specs ------------------------------------------------------------


def _selectors(raw: object, path: str) -> tuple[t.DeviceSelector, ...]:
    out = []
    for i, item in enumerate(_list(raw, path, t.DEVICE_SELECTORS_MAX_SIZE)):
        sel = _mapping(item, f"{path}[{i}]")
        expr_path = f"{path}[{i}].cel.expression"
        expression = _req_str(_mapping(sel.get("cel"), f"{path}[{i}].cel").get("expression"), expr_path)
        if len(expression.encode()) > t.CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            raise _FieldError(expr_path, f"Too long: may not be more than {t.CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes")
        # Imported here: the CEL engine loads cel-cpp and protobuf, which reading pods without DRA
        # objects (every plain `numalign admit`) must not pay for.
        from numalign.k8s.dra.cel.selector import CELFeatures, compile_selector, cost_error
        from numalign.k8s.version import DEFAULT

        minor = _API_SERVER_MINOR.get()
        read_features = CELFeatures(consumable_capacity=True, list_type_attributes=True,
                                    minor=min(max(DEFAULT.minor if minor is None else minor, 33), 37))
        compiled = compile_selector(expression, read_features, new_object=True)
        if compiled.error is not None:
            raise _FieldError(expr_path, f"Invalid value: {go_quote(expression)}: {compiled.error_line}")
        too_costly = cost_error(compiled)
        if too_costly is not None:
            raise _FieldError(expr_path, f"Forbidden: {too_costly}")
        out.append(t.DeviceSelector(expression))
    return tuple(out)


def _claim_spec(spec: Mapping[str, Any], base: str = "spec") -> t.ResourceClaimSpec:
    devices = _mapping(spec.get("devices"), f"{base}.devices")
    path = f"{base}.devices.requests"
    requests: list[t.DeviceRequest] = []
    names: set[str] = set()
    for i, raw in enumerate(_list(devices.get("requests"), path, t.DEVICE_REQUESTS_MAX_SIZE)):
        request = _request(raw, f"{path}[{i}]")
        if request.name in names:
            raise _FieldError(f"{path}[{i}].name", f"Duplicate value: {go_quote(request.name)}")
        names.add(request.name)
        requests.append(request)
    refs = set(names) | {f"{r.name}/{s.name}" for r in requests for s in r.first_available}
    constraints = []
    cpath = f"{base}.devices.constraints"
    for i, raw in enumerate(_list(devices.get("constraints"), cpath, t.DEVICE_CONSTRAINTS_MAX_SIZE)):
        c = _mapping(raw, f"{cpath}[{i}]")
        reqs = _str_list(c.get("requests"), f"{cpath}[{i}].requests")
        for j, name in enumerate(reqs):
            if name not in refs:
                raise _FieldError(f"{cpath}[{i}].requests[{j}]", f"Invalid value: {go_quote(name)}: must be the name "
                               "of a request in the claim or the name of a request and a subrequest separated by '/'")
        match = _opt_str(c.get("matchAttribute"), f"{cpath}[{i}].matchAttribute")
        distinct = _opt_str(c.get("distinctAttribute"), f"{cpath}[{i}].distinctAttribute")
        if (match is None) == (distinct is None):
            raise _FieldError(f"{cpath}[{i}]", "Invalid value: exactly one of `matchAttribute` or `distinctAttribute` "
                                            "is required")
        attr = match if match is not None else distinct
        attr_path = f"{cpath}[{i}].{'matchAttribute' if match is not None else 'distinctAttribute'}"
        domain, sep, ident = (attr or "").partition("/")
        if not sep or not domain or not ident:
            raise _FieldError(attr_path, f"Invalid value: {go_quote(attr or '')}: a fully qualified name must be a "
                                      "domain and a name separated by a slash")
        constraints.append(t.DeviceConstraint(requests=tuple(reqs), match_attribute=match, distinct_attribute=distinct))
    return t.ResourceClaimSpec(requests=tuple(requests), constraints=tuple(constraints))


def _request(raw: object, path: str) -> t.DeviceRequest:
    obj = _mapping(raw, path)
    name = _name(_req_str(obj.get("name"), f"{path}.name"), f"{path}.name", n.dns_label_problem)
    exactly, first = obj.get("exactly"), obj.get("firstAvailable")
    if (exactly is None) == (first is None):
        raise _FieldError(path, "Invalid value: exactly one of `exactly` or `firstAvailable` is required")
    if exactly is not None:
        return t.DeviceRequest(name=name, exactly=_subrequest(exactly, f"{path}.exactly", name, exact=True))
    items = _list(first, f"{path}.firstAvailable", t.FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE)
    if not items:
        raise _FieldError(f"{path}.firstAvailable", "Required value")
    subs: list[t.DeviceSubRequest] = []
    for i, item in enumerate(items):
        sub_path = f"{path}.firstAvailable[{i}]"
        sub_name = _name(_req_str(_mapping(item, sub_path).get("name"), f"{sub_path}.name"), f"{sub_path}.name",
                         n.dns_label_problem)
        if any(s.name == sub_name for s in subs):
            raise _FieldError(f"{path}.firstAvailable[{i}].name", f"Duplicate value: {go_quote(sub_name)}")
        subs.append(_subrequest(item, f"{path}.firstAvailable[{i}]", sub_name, exact=False))
    return t.DeviceRequest(name=name, first_available=tuple(subs))


def _subrequest(raw: object, path: str, name: str, *, exact: bool) -> t.DeviceSubRequest:
    obj = _mapping(raw, path)
    mode: t.AllocationMode
    raw_mode = obj.get("allocationMode") or t.ALLOCATION_MODE_EXACT_COUNT
    if raw_mode == "All":
        mode = "All"
    elif raw_mode == "ExactCount":
        mode = "ExactCount"
    else:
        raise _FieldError(f"{path}.allocationMode", f'Unsupported value: {go_quote(str(raw_mode))}: '
                                 'supported values: "All", "ExactCount"')
    count_raw = obj.get("count")
    if mode == t.ALLOCATION_MODE_ALL:
        if count_raw not in (None, 0):
            raise _FieldError(f"{path}.count", f"Invalid value: {count_raw}: must not be specified when allocationMode "
                                            "is 'All'")
        count = 0
    else:
        count = 1 if count_raw is None else _int(count_raw, f"{path}.count",
                                                  "ExactDeviceRequest" if exact else "DeviceSubRequest")
        if count <= 0:
            raise _FieldError(f"{path}.count", f"Invalid value: {count}: must be greater than zero")
    admin = obj.get("adminAccess")
    if admin is not None and not exact:
        raise _FieldError(f"{path}.adminAccess", "Forbidden: admin access is only allowed in `exactly`")
    tolerations = []
    for i, raw_t in enumerate(_list(obj.get("tolerations"), f"{path}.tolerations", t.DEVICE_TOLERATIONS_MAX_LENGTH)):
        tt = _mapping(raw_t, f"{path}.tolerations[{i}]")
        tolerations.append(t.DeviceToleration(
            key=_opt_str(tt.get("key"), f"{path}.tolerations[{i}].key") or "",
            operator=_opt_str(tt.get("operator"), f"{path}.tolerations[{i}].operator") or "Equal",
            value=_opt_str(tt.get("value"), f"{path}.tolerations[{i}].value") or "",
            effect=_opt_str(tt.get("effect"), f"{path}.tolerations[{i}].effect") or ""))
    capacity = None
    if obj.get("capacity") is not None:
        cap = _mapping(obj.get("capacity"), f"{path}.capacity")
        capacity = t.CapacityRequirements(requests={
            str(k): _quantity(v, f"{path}.capacity.requests[{k}]")
            for k, v in _mapping(cap.get("requests"), f"{path}.capacity.requests").items()})
    return t.DeviceSubRequest(
        name=name, device_class_name=_name(_req_str(obj.get("deviceClassName"), f"{path}.deviceClassName"),
                                           f"{path}.deviceClassName", n.dns_subdomain_problem),
        selectors=_selectors(obj.get("selectors"), f"{path}.selectors"), allocation_mode=mode, count=count,
        admin_access=None if admin is None else _bool(admin, f"{path}.adminAccess"),
        tolerations=tuple(tolerations), capacity=capacity)


def allocation_from_dict(raw: object) -> t.DeviceAllocationResult | None:
    """A claim's status.allocation read on its own (a state directory keeps it apart from the claim);
    ValueError naming the field when it is malformed."""
    try:
        return _allocation(raw)
    except _FieldError as e:
        raise ValueError(str(e)) from None
    except UnknownFieldError as e:
        raise ValueError(f"{e.path}: unknown field ({e.fix})") from None


def _allocation(raw: object) -> t.DeviceAllocationResult | None:
    if raw is None:
        return None
    path = "status.allocation.devices.results"
    devices = _mapping(_mapping(raw, "status.allocation").get("devices"), "status.allocation.devices")
    results = []
    for i, item in enumerate(_list(devices.get("results"), path, t.ALLOCATION_RESULTS_MAX_SIZE)):
        r = _mapping(item, f"{path}[{i}]")
        admin = r.get("adminAccess")
        consumed = r.get("consumedCapacity")
        results.append(t.DeviceRequestAllocationResult(
            request=_req_str(r.get("request"), f"{path}[{i}].request"),
            driver=_req_str(r.get("driver"), f"{path}[{i}].driver"),
            pool=_req_str(r.get("pool"), f"{path}[{i}].pool"),
            device=_req_str(r.get("device"), f"{path}[{i}].device"),
            admin_access=None if admin is None else _bool(admin, f"{path}[{i}].adminAccess"),
            share_id=_opt_str(r.get("shareID"), f"{path}[{i}].shareID"),
            consumed_capacity=None if consumed is None else {
                str(k): _quantity(v, f"{path}[{i}].consumedCapacity[{k}]")
                for k, v in _mapping(consumed, f"{path}[{i}].consumedCapacity").items()}))
    selector = _mapping(raw, "status.allocation").get("nodeSelector")
    return t.DeviceAllocationResult(results=tuple(results),
                                    node_selector=_node_selector(selector, "status.allocation.nodeSelector"))


# ---- field readers (API server wording) ----------------------------------------------------------------


def _mapping(obj: object, path: str) -> Mapping[str, Any]:
    if type(obj) is dict:  # the common case, without the ABC check
        return obj
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise _FieldError(path, f"Invalid value: {quote(obj)}: expected an object")
    return obj


def _list(obj: object, path: str, limit: int) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise _FieldError(path, f"Invalid value: {quote(obj)}: expected a list")
    if len(obj) > limit:
        raise _FieldError(path, f"Too many: {len(obj)}: must have at most {limit} items")
    return obj


def _req_str(obj: object, path: str) -> str:
    if obj is None or obj == "":
        raise _FieldError(path, "Required value")
    if not isinstance(obj, str):
        raise _FieldError(path, f"Invalid value: {quote(obj)}: expected a string")
    return obj


def _name(value: str, path: str, problem: Callable[[str], str | None]) -> str:
    """`value` when the API server accepts it as this kind of name; its error otherwise."""
    found = problem(value)
    if found is not None:
        raise _FieldError(path, f"Invalid value: {go_quote(value)}: {found}")
    return value


def _opt_str(obj: object, path: str) -> str | None:
    return None if obj is None or obj == "" else _req_str(obj, path)


def _str_list(obj: object, path: str) -> list[str]:
    return [_req_str(v, f"{path}[{i}]") for i, v in enumerate(_list(obj, path, 1000))]


def _bool(obj: object, path: str) -> bool:
    if obj is None:
        return False
    if not isinstance(obj, bool):
        raise _FieldError(path, f"Invalid value: {quote(obj)}: expected true or false")
    return obj


def _int(obj: object, path: str, go_struct: str, *, minimum: int | None = None) -> int:
    if obj is None:
        raise _FieldError(path, "Required value")
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise _FieldError(path, f"Invalid value: {quote(obj)}: expected an integer")
    if not _INT64_MIN <= obj <= _INT64_MAX:
        raise _DecodeError(obj, path, go_struct)
    if minimum is not None and obj < minimum:
        raise _FieldError(path, f"Invalid value: {obj}: must be greater than or equal to {minimum}")
    return obj


def _quantity(obj: object, path: str) -> Quantity:
    if obj is None:
        raise _FieldError(path, "Required value")
    try:
        return Quantity.parse(obj, where=path)
    except InvalidInputError as exc:
        raise _FieldError(path, f"Invalid value: {quote(obj)}: {str(exc).removeprefix(path + ': ')}") from None


def _opt_quantity(obj: object, path: str) -> Quantity | None:
    return None if obj is None else _quantity(obj, path)
