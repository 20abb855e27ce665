"""Build allocator inputs from the compact case format of tests/data/dra/allocator_cases.yaml.

A case names the upstream case it translates (allocatortesting/allocator_testing.go); its objects are
written tersely: a class is `name: driver` (its selector `device.driver == "driver"`) or `name:
[expressions]`; a slice's `node` is a node name, `all`, `per-device` or `{label: [values]}`; a device is
its name or a mapping; a request is `{name, class, count | all, selectors, admin, tolerations,
capacity, first: [subrequests]}`. `expect` lists, per claim, "request driver/pool/device [admin]"
entries (compared as sets, as upstream's ConsistOf does); `expect: none` means no allocation;
`error` is a substring of the allocator's error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.k8s.dra.types import (
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    CapacityRequirements,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
)
from numalign.k8s.quantity import Quantity
from numalign.scheduler.dra.features import Features

NODE_LABELS = {"node-1": {"region": "region-1", "planet": "earth"}, "node-2": {"region": "region-2", "planet": "earth"}}


def features(names: list[str] | None) -> Features:
    on = set(names or [])
    known = {"AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints", "DeviceBindingAndStatus",
             "ConsumableCapacity", "ListTypeAttributes"}
    assert on <= known, on - known
    return Features(
        admin_access="AdminAccess" in on, prioritized_list="PrioritizedList" in on,
        partitionable_devices="PartitionableDevices" in on, device_taints="DeviceTaints" in on,
        device_binding_and_status="DeviceBindingAndStatus" in on, consumable_capacity="ConsumableCapacity" in on,
        list_type_attributes="ListTypeAttributes" in on, minor=37)


def classes(raw: Mapping[str, Any] | None) -> dict[str, DeviceClass]:
    out = {}
    for name, spec in (raw or {}).items():
        exprs = [f'device.driver == "{spec}"'] if isinstance(spec, str) else list(spec)
        out[name] = DeviceClass(name=name, selectors=tuple(DeviceSelector(e) for e in exprs))
    return out


def _q(value: Any) -> Quantity:
    return Quantity.parse(value)


def _selector(raw: Mapping[str, Any]) -> NodeSelector:
    if "fields" in raw:
        reqs = tuple(NodeSelectorRequirement("metadata.name", "In", tuple(v)) for v in raw["fields"].values())
        return NodeSelector((NodeSelectorTerm(match_fields=reqs),))
    reqs = tuple(NodeSelectorRequirement(k, "In", tuple(v)) for k, v in raw.items())
    return NodeSelector((NodeSelectorTerm(match_expressions=reqs),))


def _attribute(raw: Mapping[str, Any]) -> DeviceAttribute:
    ((key, value),) = raw.items()
    kind = {"int": "int", "bool": "bool", "string": "string", "version": "version",
            "ints": "int", "bools": "bool", "strings": "string", "versions": "version"}[key]
    if key.endswith("s"):
        return DeviceAttribute(kind, tuple(value), True)  # type: ignore[arg-type]
    return DeviceAttribute(kind, (value,))  # type: ignore[arg-type]


def _capacity(raw: Any) -> DeviceCapacity:
    if not isinstance(raw, Mapping):
        return DeviceCapacity(_q(raw))
    policy = None
    if "default" in raw or "range" in raw or "values" in raw:
        rng = raw.get("range")
        policy = CapacityRequestPolicy(
            default=_q(raw["default"]) if "default" in raw else None,
            valid_values=tuple(_q(v) for v in raw.get("values", ())),
            valid_range=CapacityRequestPolicyRange(
                min=_q(rng["min"]) if "min" in rng else None, max=_q(rng["max"]) if "max" in rng else None,
                step=_q(rng["step"]) if "step" in rng else None) if rng else None)
    return DeviceCapacity(_q(raw["value"]), policy)


def device(raw: Any) -> Device:
    if isinstance(raw, str):
        return Device(raw)
    node = raw.get("node")
    capacity = raw.get("capacity") or {}
    if capacity == "fromCounters" or "fromCounters" in capacity:
        # upstream's helper: a capacity for every counter the device consumes (then the others listed)
        extra = {} if capacity == "fromCounters" else {k: v for k, v in capacity.items() if k != "fromCounters"}
        capacity = {name: value for c in raw.get("counters", ()) for name, value in c["counters"].items()}
        capacity.update(extra)
    return Device(
        name=raw["name"],
        attributes={k: _attribute(v) for k, v in (raw.get("attributes") or {}).items()},
        capacity={k: _capacity(v) for k, v in capacity.items()},
        consumes_counters=tuple(DeviceCounterConsumption(c["set"], {k: _q(v) for k, v in c["counters"].items()})
                                for c in raw.get("counters", ())),
        node_name=node if isinstance(node, str) and node != "all" else None,
        all_nodes=node == "all",
        node_selector=_selector(node) if isinstance(node, Mapping) else None,
        allow_multiple_allocations=raw.get("multi"),
        taints=tuple(DeviceTaint(t["key"], t.get("value", ""), t["effect"]) for t in raw.get("taints", ())),
        binding_conditions=tuple(raw.get("binding", ())),
        binds_to_node=bool(raw.get("bindsToNode")),
        binding_failure_conditions=tuple(raw.get("bindingFailure", ())),
    )


def slices(raw: list[Mapping[str, Any]] | None) -> list[ResourceSlice]:
    out = []
    for s in raw or []:
        pool = s["pool"]
        if isinstance(pool, str):
            pool = {"name": pool}
        node = s.get("node", "node-1")
        out.append(ResourceSlice(
            name=s["name"], driver=s["driver"],
            pool=ResourcePool(pool["name"], pool.get("generation", 1), pool.get("count", 1)),
            node_name=node if isinstance(node, str) and node not in ("all", "per-device") else None,
            all_nodes=node == "all", per_device_node_selection=node == "per-device",
            node_selector=_selector(node) if isinstance(node, Mapping) else None,
            devices=tuple(device(d) for d in s.get("devices", ())),
            shared_counters=tuple(CounterSet(c["name"], {k: _q(v) for k, v in c["counters"].items()})
                                  for c in s.get("counterSets", ())),
        ))
    return out


def _sub(raw: Mapping[str, Any], name: str) -> DeviceSubRequest:
    capacity = raw.get("capacity")
    return DeviceSubRequest(
        name=name, device_class_name=raw.get("class", ""),
        selectors=tuple(DeviceSelector(e) for e in raw.get("selectors", ())),
        allocation_mode=raw.get("mode") or ("All" if raw.get("all") else "ExactCount"),
        count=0 if raw.get("all") else raw.get("count", 1),
        admin_access=raw.get("admin"),
        tolerations=tuple(DeviceToleration(t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""),
                                           t.get("effect", "")) for t in raw.get("tolerations", ())),
        capacity=CapacityRequirements({k: _q(v) for k, v in capacity.items()}) if capacity is not None else None,
    )


def claims(raw: list[Mapping[str, Any]] | None) -> list[ResourceClaim]:
    out = []
    for c in raw or []:
        requests = []
        for r in c.get("requests", ()):
            if "first" in r:
                requests.append(DeviceRequest(r["name"], first_available=tuple(_sub(s, s["name"]) for s in r["first"])))
            else:
                requests.append(DeviceRequest(r["name"], exactly=_sub(r, r["name"])))
        constraints = tuple(
            DeviceConstraint(tuple(k.get("requests", ())), k.get("match"), k.get("distinct"))
            for k in c.get("constraints", ()))
        out.append(ResourceClaim(name=c["name"], namespace="", spec=ResourceClaimSpec(tuple(requests), constraints)))
    return out
