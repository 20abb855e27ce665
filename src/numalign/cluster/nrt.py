"""NodeResourceTopology (topology.node.k8s.io/v1alpha2): the object, as the API server returns it.

What goes into it (the NFD topology-updater's scan and aggregation, and the three ways numalign
feeds them) is cluster/nrt_export.py; scheduler-plugins' reading of it is cluster/nrtmatch.py.
Go map order is random in upstream's output; zones are listed by NUMA id and resources by name here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.validation import expect_list

API_VERSION: Final = "topology.node.k8s.io/v1alpha2"
# v1alpha1 objects are served by the same CRD with the same zones and topologyPolicies and no
# attributes (the CRD has no conversion webhook: the API server changes only apiVersion), so they are
# read as v1alpha2 objects whose Topology Manager settings come from the deprecated topologyPolicies.
API_VERSION_V1ALPHA1: Final = "topology.node.k8s.io/v1alpha1"
KIND: Final = "NodeResourceTopology"
ZONE_TYPE_NODE: Final = "Node"
TOPOLOGY_MANAGER_POLICY_ATTRIBUTE: Final = "topologyManagerPolicy"
TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE: Final = "topologyManagerScope"

# NFD pkg/topologypolicy DetectTopologyPolicy: the deprecated topologyPolicies value per (scope, policy).
_DEPRECATED_POLICY: Final = {
    ("pod", "single-numa-node"): "SingleNUMANodePodLevel",
    ("pod", "restricted"): "RestrictedPodLevel",
    ("pod", "best-effort"): "BestEffortPodLevel",
    ("container", "single-numa-node"): "SingleNUMANodeContainerLevel",
    ("container", "restricted"): "RestrictedContainerLevel",
    ("container", "best-effort"): "BestEffortContainerLevel",
}


def zone_name(numa_id: int) -> str:
    return f"node-{numa_id}"


def detect_topology_policy(policy: str, scope: str) -> str:
    return _DEPRECATED_POLICY.get((scope, policy), "None")


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    name: str
    capacity: int
    allocatable: int
    available: int


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    type: str
    resources: tuple[ResourceInfo, ...]
    costs: tuple[tuple[str, int], ...] = ()

    def resource(self, name: str) -> ResourceInfo | None:
        for r in self.resources:
            if r.name == name:
                return r
        return None


@dataclass(frozen=True, slots=True)
class NodeResourceTopology:
    name: str
    zones: tuple[Zone, ...]
    attributes: tuple[tuple[str, str], ...] = ()
    topology_policies: tuple[str, ...] = ()

    def attribute(self, name: str) -> str | None:
        for k, v in self.attributes:
            if k == name:
                return v
        return None

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server returns it (quantities as DecimalSI strings)."""

        def qty(v: int) -> str:
            return str(Quantity.from_int(v, QuantityFormat.DECIMAL_SI))

        obj: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": self.name}}
        if self.topology_policies:
            obj["topologyPolicies"] = list(self.topology_policies)
        obj["zones"] = [
            {
                "name": z.name,
                "type": z.type,
                **({"costs": [{"name": n, "value": v} for n, v in z.costs]} if z.costs else {}),
                "resources": [
                    {"name": r.name, "capacity": qty(r.capacity), "allocatable": qty(r.allocatable),
                     "available": qty(r.available)}
                    for r in z.resources
                ],
            }
            for z in self.zones
        ]
        if self.attributes:
            obj["attributes"] = [{"name": k, "value": v} for k, v in self.attributes]
        return obj

    @classmethod
    def from_dict(cls, obj: Any, where: str, note: Callable[[str], None] | None = None) -> NodeResourceTopology:
        """Read one object (a `kubectl get noderesourcetopologies -o json` item); `note` hears that a
        v1alpha1 object was converted."""
        if not isinstance(obj, Mapping) or obj.get("kind", KIND) != KIND:
            raise InvalidInputError(f"{where}: expected a {KIND} object, got {_kind_of(obj)}; pass the output of "
                                    "`kubectl get noderesourcetopologies -o json`")
        api = obj.get("apiVersion", API_VERSION)
        if api not in (API_VERSION, API_VERSION_V1ALPHA1):
            raise InvalidInputError(f"{where}: apiVersion {api!r}; expected {API_VERSION} or "
                                    f"{API_VERSION_V1ALPHA1}")
        if api == API_VERSION_V1ALPHA1 and note is not None:
            policies = obj.get("topologyPolicies") or []
            first = policies[0] if isinstance(policies, list) and policies else None
            known = first in _DEPRECATED_POLICY.values()
            note(f"{API_VERSION_V1ALPHA1} read as {API_VERSION} (same zones, no attributes): the Topology Manager "
                 "policy and scope come from topologyPolicies"
                 + ("" if known else f" ({first!r} is not one scheduler-plugins reads: policy none assumed)"))
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"{where}: metadata.name missing; expected the node's name")
        zones = []
        for i, z in enumerate(expect_list(obj.get("zones"), f"{where} ({name}).zones")):
            zw = f"{where} ({name}).zones[{i}]"
            if not isinstance(z, Mapping) or not isinstance(z.get("name"), str):
                raise InvalidInputError(f"{zw}: expected an object with name and type, got {z!r}")
            res = []
            for j, r in enumerate(expect_list(z.get("resources"), f"{zw}.resources")):
                rw = f"{zw}.resources[{j}]"
                if not isinstance(r, Mapping) or not isinstance(r.get("name"), str):
                    raise InvalidInputError(f"{rw}: expected {{name, capacity, allocatable, available}}, got {r!r}")
                if r.get("available") is None and r.get("allocatable") is not None:
                    # early v1alpha1 exporters (and scheduler-plugins' examples) publish no `available`:
                    # nothing is known to be in use, so all that is allocatable is available.
                    r = {**r, "available": r["allocatable"]}
                    if note is not None:
                        note("resources without `available` (an early exporter): taken as all allocatable "
                             "available (nothing in use)")
                vals = [_qty(r.get(k), f"{rw}.{k}", r["name"]) for k in ("capacity", "allocatable", "available")]
                res.append(ResourceInfo(r["name"], *vals))
            costs = tuple((str(c["name"]), int(c["value"])) for c in expect_list(z.get("costs"), f"{zw}.costs")
                          if isinstance(c, Mapping) and "name" in c and "value" in c)
            zones.append(Zone(z["name"], str(z.get("type", "")), tuple(res), costs))
        raw_attrs = expect_list(obj.get("attributes"), f"{where}.attributes")
        attrs = tuple((str(a["name"]), str(a["value"])) for a in raw_attrs
                      if isinstance(a, Mapping) and "name" in a and "value" in a)
        policies = tuple(str(p) for p in expect_list(obj.get("topologyPolicies"), f"{where}.topologyPolicies"))
        return cls(name, tuple(zones), attrs, policies)


def _kind_of(obj: Any) -> str:
    return f"kind {obj.get('kind')!r}" if isinstance(obj, Mapping) else type(obj).__name__


def _qty(v: Any, where: str, resource: str) -> int:
    if v is None:
        raise InvalidInputError(f"{where}: missing; expected a quantity")
    q = Quantity.parse(v, where)
    # cpu is counted in whole CPUs by the exporters; other resources in units (bytes, devices).
    return q.value()
