"""resource.k8s.io/v1beta1 and v1beta2 objects in the v1 shape, as the API server converts them.

The API server stores one internal form and serves every version from it; a v1beta1 or v1beta2 object a
user applies is defaulted in its own version, then converted (pkg/apis/resource/v1beta1/conversion.go,
defaults.go). Reading converts the decoded document to v1's JSON shape first, so one reader
(k8s/dra/read.py) validates every version and its errors name v1's (the internal form's) field paths,
as the API server's validation does.

- v1beta2 has v1's fields (its conversion is generated field for field): nothing moves.
- v1beta1 differs in two places:
  - a device's attributes, capacity, counters, node selection, taints and binding fields sit under
    `basic`; v1 has them on the device itself;
  - a request's `deviceClassName`, `selectors`, `allocationMode`, `count`, `adminAccess`, `tolerations`
    and `capacity` sit on the request; v1 puts them under `exactly`. v1beta1 defaults them first
    (`ExactCount`, count 1) when `deviceClassName` is set, and any of them set makes an `exactly`;
    `firstAvailable` is the same in both.
- A field of the other shape (`attributes` beside `basic` in v1beta1, `exactly` in v1beta1, `basic` or
  `deviceClassName` on a request in v1) is an unknown field to the version's strict decoding, which
  `kubectl apply` asks for by default: refused as the API server refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

V1: Final = "resource.k8s.io/v1"
V1BETA2: Final = "resource.k8s.io/v1beta2"
V1BETA1: Final = "resource.k8s.io/v1beta1"
API_VERSIONS: Final = (V1, V1BETA2, V1BETA1)

# v1beta1's request fields that v1 keeps under `exactly` (conversion.go hasAnyMainRequestFieldsSet)
_MAIN_REQUEST_FIELDS: Final = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess",
                               "tolerations", "capacity")
# v1beta1's BasicDevice: every field moves up onto the device in v1
_BASIC_FIELDS: Final = ("attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes",
                        "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions",
                        "allowMultipleAllocations", "nodeAllocatableResourceMappings", "nodeAllocatableResources")


class UnknownFieldError(Exception):
    """A field the version's strict decoding does not know: `path` as the API server names it, and
    the fix (the field belongs to the other shape)."""

    def __init__(self, path: str, fix: str) -> None:
        super().__init__(path)
        self.path = path
        self.fix = fix


_TO_V1BETA1: Final = "resource.k8s.io/v1beta1's shape: set apiVersion resource.k8s.io/v1beta1, or "
_TO_V1: Final = "resource.k8s.io/v1's shape: set apiVersion resource.k8s.io/v1, or "


def to_v1(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` (a decoded DRA object of a read apiVersion) in v1's shape; UnknownFieldError for a field of the
    other shape. Only the parts that differ are copied; malformed parts are left for the reader to
    refuse with its field path."""
    version = obj.get("apiVersion")
    kind = obj.get("kind")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return obj
    if version in (V1, V1BETA2, None):
        _check_v1(kind, spec)
        return obj
    if version != V1BETA1:
        return obj
    if kind == "ResourceSlice":
        devices = spec.get("devices")
        if isinstance(devices, list):
            spec = {**spec, "devices": [_device(d, f"spec.devices[{i}]") for i, d in enumerate(devices)]}
    elif kind == "ResourceClaim":
        spec = _claim_spec(spec, "spec")
    elif kind == "ResourceClaimTemplate":
        inner = spec.get("spec")
        if isinstance(inner, Mapping):
            spec = {**spec, "spec": _claim_spec(inner, "spec.spec")}
    return {**obj, "apiVersion": V1, "spec": spec}


def _check_v1(kind: object, spec: Mapping[str, Any]) -> None:
    """v1beta1's shape in a v1/v1beta2 object: the unknown field strict decoding reports first."""
    if kind == "ResourceSlice":
        for i, device in enumerate(_items(spec.get("devices"))):
            if "basic" in device:
                raise UnknownFieldError(f"spec.devices[{i}].basic",
                                        _TO_V1BETA1 + "move its fields up onto the device")
    elif kind in ("ResourceClaim", "ResourceClaimTemplate"):
        base, inner = ("spec", spec) if kind == "ResourceClaim" else ("spec.spec", spec.get("spec"))
        devices = inner.get("devices") if isinstance(inner, Mapping) else None
        requests = devices.get("requests") if isinstance(devices, Mapping) else None
        for i, request in enumerate(_items(requests)):
            for key in _MAIN_REQUEST_FIELDS:
                if key in request:
                    raise UnknownFieldError(f"{base}.devices.requests[{i}].{key}",
                                            _TO_V1BETA1 + "put it under `exactly`")


def _device(raw: object, path: str) -> object:
    if not isinstance(raw, Mapping):
        return raw
    for key in raw:
        if key in _BASIC_FIELDS:
            raise UnknownFieldError(f"{path}.{key}", _TO_V1 + "put it under `basic`")
    basic = raw.get("basic")
    out = {key: value for key, value in raw.items() if key != "basic"}
    if isinstance(basic, Mapping):
        for key in basic:
            if key not in _BASIC_FIELDS:  # named under `basic`, where the user wrote it
                raise UnknownFieldError(f"{path}.basic.{key}", "remove it or correct its spelling; expected one "
                                        f"of {', '.join(sorted(_BASIC_FIELDS))}")
        out.update(basic)
    elif basic is not None:
        out["basic"] = basic  # not an object: the reader refuses it by its path
    return out


def _claim_spec(spec: Mapping[str, Any], base: str) -> Mapping[str, Any]:
    devices = spec.get("devices")
    if not isinstance(devices, Mapping) or not isinstance(devices.get("requests"), list):
        return spec
    requests = [_request(r, f"{base}.devices.requests[{i}]") for i, r in enumerate(devices["requests"])]
    return {**spec, "devices": {**devices, "requests": requests}}


def _request(raw: object, path: str) -> object:
    if not isinstance(raw, Mapping):
        return raw
    if "exactly" in raw:
        raise UnknownFieldError(f"{path}.exactly", _TO_V1 + "move its fields up onto the request")
    main = {key: raw[key] for key in _MAIN_REQUEST_FIELDS if key in raw}
    # SetDefaults_DeviceRequest: only a request naming its class is defaulted (a firstAvailable one
    # must leave these fields empty); Go's zero values ("" and 0) count as unset.
    if main.get("deviceClassName"):
        if not main.get("allocationMode"):
            main["allocationMode"] = "ExactCount"
        if main["allocationMode"] == "ExactCount" and not main.get("count"):
            main["count"] = 1
    out = {key: value for key, value in raw.items() if key not in _MAIN_REQUEST_FIELDS}
    if any(_is_set(key, value) for key, value in main.items()):
        out["exactly"] = {key: value for key, value in main.items() if _is_set(key, value)}
    return out


def _is_set(key: str, value: object) -> bool:
    """Set as Go sees the decoded field: a string or count at its zero value is not, while an empty
    list (`selectors: []`) is a non-nil slice and so is set."""
    if value is None:
        return False
    if key in ("deviceClassName", "allocationMode"):
        return value != ""  # not a string: set, and the reader refuses it
    if key == "count":
        return isinstance(value, bool) or value != 0  # not a number: set, and the reader refuses it
    return True


def _items(raw: object) -> list[Mapping[str, Any]]:
    return [item for item in raw if isinstance(item, Mapping)] if isinstance(raw, list) else []
