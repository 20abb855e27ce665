"""Resource pools for one node (structured/internal/incubating/pools_incubating.go: GatherPools).

The slices that target the node (by name, selector, all nodes or per device) are grouped into pools by
(driver, pool name); only the newest generation counts; a pool whose slices are not all there is
incomplete; a pool with duplicate device names or broken counter references is invalid. From 1.36 pools
are ordered by driver then pool name, pools with binding conditions last, and slices within a pool by
name: this order is the allocator's search order. Before (and in 1.36's stable generation) upstream ranges
over a Go map: numalign keeps the sorted pool order (one of the orders the map can give) and
`order_matters` tells when another order could give another answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from numalign.k8s.dra.types import CounterSet, Device, NodeSelector, NodeSelectorRequirement, ResourceSlice
from numalign.scheduler.dra.features import Features


@dataclass(frozen=True)
class NodeInfo:
    """The node the claims are allocated for: its name and labels (node selectors match on them)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __init__(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        # Written out: the dataclass decorator's generated __init__ runs as interpreted Python even in the
        # compiled core (one a node allocated on).
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "labels", {} if labels is None else labels)


@dataclass
class Pool:
    driver: str
    pool: str
    is_incomplete: bool = False
    is_invalid: bool = False
    # 1.34: not all the pool's slices are there, but its devices are searched all the same (only a request
    # for all devices is refused); is_incomplete pools (1.35+) offer none.
    missing_slices: bool = False
    invalid_reason: str = ""
    slices: list[ResourceSlice] = field(default_factory=list)  # DeviceSlicesTargetingNode
    slices_not_targeting_node: list[ResourceSlice] = field(default_factory=list)
    counter_sets: dict[str, CounterSet] = field(default_factory=dict)

    def __init__(
        self, driver: str, pool: str, is_incomplete: bool = False, is_invalid: bool = False,
        missing_slices: bool = False, invalid_reason: str = "", slices: list[ResourceSlice] | None = None,
        slices_not_targeting_node: list[ResourceSlice] | None = None, counter_sets: dict[str, CounterSet] | None = None,
    ) -> None:
        # Written out, as NodeInfo's (one a pool built).
        self.driver = driver
        self.pool = pool
        self.is_incomplete = is_incomplete
        self.is_invalid = is_invalid
        self.missing_slices = missing_slices
        self.invalid_reason = invalid_reason
        self.slices = [] if slices is None else slices
        self.slices_not_targeting_node = [] if slices_not_targeting_node is None else slices_not_targeting_node
        self.counter_sets = {} if counter_sets is None else counter_sets

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.pool}"


def node_matches(node: NodeInfo, node_name: str | None, all_nodes: bool, selector: NodeSelector | None) -> bool:
    """NodeMatches."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return any(_term_matches(node, term.match_expressions, term.match_fields) for term in selector.terms)
    return False


def _term_matches(
    node: NodeInfo, expressions: Sequence[NodeSelectorRequirement], fields: Sequence[NodeSelectorRequirement]
) -> bool:
    if not expressions and not fields:
        return False  # an empty term matches nothing (nodeaffinity)
    for req in expressions:
        if not _requirement_matches(req, node.labels):
            return False
    return all(_requirement_matches(req, {"metadata.name": node.name}) for req in fields)


def _requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def gather_pools(
    slices: Sequence[ResourceSlice], node: NodeInfo, features: Features, all_slices: Sequence[ResourceSlice]
) -> list[Pool]:
    """GatherPools over the slices that may apply to `node` (its own and those without a node name)."""
    grouped: dict[tuple[str, str], list[ResourceSlice]] = {}
    everywhere = features.generation.counter_slices_for_every_node
    counters_need_gate = features.generation.counter_slices_need_partitionable
    for s in slices:
        if not features.partitionable_devices and (
                s.per_device_node_selection or (s.shared_counters and counters_need_gate)):
            continue
        if s.shared_counters and everywhere:
            relevant = True
        elif s.node_name or s.all_nodes or s.node_selector is not None:
            relevant = node_matches(node, s.node_name, s.all_nodes, s.node_selector)
        elif s.per_device_node_selection:
            relevant = any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
        else:
            continue
        if relevant:
            _add_slice(grouped, s)
    result: list[Pool] = []
    with_binding: list[Pool] = []
    for (driver, name), pool_slices in grouped.items():
        generation = pool_slices[0].pool.generation
        if not features.generation.counts_pool_on_every_node:
            pool = _build_pool(driver, name, pool_slices, features, [])
            pool.missing_slices = len(pool_slices) != pool_slices[0].pool.resource_slice_count
        elif len(pool_slices) == pool_slices[0].pool.resource_slice_count:
            pool = _build_pool(driver, name, pool_slices, features, [])
        else:
            obsolete, all_for_pool = _slices_in_pool(all_slices, driver, name, generation)
            if obsolete:
                continue
            if len(all_for_pool) != pool_slices[0].pool.resource_slice_count:
                result.append(Pool(driver, name, is_incomplete=True))
                continue
            pool = _build_pool(driver, name, pool_slices, features, all_for_pool)
        (with_binding if _has_binding_conditions(pool) else result).append(pool)
    result.sort(key=lambda p: (p.driver, p.pool))
    with_binding.sort(key=lambda p: (p.driver, p.pool))
    return result + with_binding


def _add_slice(grouped: dict[tuple[str, str], list[ResourceSlice]], s: ResourceSlice) -> None:
    key = (s.driver, s.pool.name)
    current = grouped.get(key)
    if current is None or s.pool.generation > current[0].pool.generation:
        grouped[key] = [s]
    elif s.pool.generation == current[0].pool.generation:
        current.append(s)


def _slices_in_pool(
    all_slices: Sequence[ResourceSlice], driver: str, name: str, generation: int
) -> tuple[bool, list[ResourceSlice]]:
    """checkSlicesInPool: (obsolete, the pool's slices of this generation across all nodes)."""
    found = []
    for s in all_slices:
        if s.driver != driver or s.pool.name != name:
            continue
        if s.pool.generation > generation:
            return True, []
        if s.pool.generation == generation:
            found.append(s)
    return False, found


# The last pools built, each kept with the slice objects it was built from (so their ids stay theirs): a
# node's slices outlive its claims, and checking a pool of 1,500 devices for duplicate names once per claim
# made the n-th claim cost the pool again. Few are kept (a node's pools): holding more kept each one-off
# Allocate's objects alive long enough to reach the collector's oldest generation.
_BUILT: dict[tuple[object, ...], tuple[tuple[ResourceSlice, ...], Pool]] = {}
_BUILT_MAX: Final = 4
# What the allocator derives from a built pool's devices alone (its candidates, positions), by the pool's
# id and kept beside it rather than in it: candidates refer to their pool, and a cycle would leave every
# pool of a one-off Allocate to the cyclic collector.
_DERIVED: dict[int, tuple[Pool, dict[str, Any]]] = {}


def derived(pool: Pool) -> dict[str, Any]:
    """The allocator's data derived from `pool` alone, shared by every Allocate that gets the same pool."""
    found = _DERIVED.get(id(pool))
    if found is not None and found[0] is pool:
        return found[1]
    return {}  # a pool not built from slices (incomplete): nothing to keep


def _build_pool(
    driver: str, name: str, slices: list[ResourceSlice], features: Features, all_for_pool: list[ResourceSlice]
) -> Pool:
    held = (*slices, *all_for_pool)
    generation = features.generation
    key = (driver, name, features.partitionable_devices, generation.sorts_pools, generation.counts_pool_on_every_node,
           generation.counters_per_slice, len(slices), tuple(map(id, held)))
    found = _BUILT.get(key)
    if found is not None and all(a is b for a, b in zip(found[0], held, strict=True)):
        return found[1]
    pool = _pool_of(driver, name, slices, features, all_for_pool)
    if len(_BUILT) >= _BUILT_MAX:
        _BUILT.clear()
        _DERIVED.clear()
    _BUILT[key] = (held, pool)
    _DERIVED[id(pool)] = (pool, {})
    return pool


def _pool_of(
    driver: str, name: str, slices: list[ResourceSlice], features: Features, all_for_pool: list[ResourceSlice]
) -> Pool:
    if features.generation.sorts_pools:
        slices = sorted(slices, key=lambda s: s.name)
    device_slices: list[ResourceSlice] = []
    counter_slices: list[ResourceSlice] = []
    not_targeting: list[ResourceSlice] = []
    # (where counters are kept per slice, a slice's counter sets are read from the slice a device is in)
    separate = features.partitionable_devices and not features.generation.counters_per_slice
    for s in slices:
        (counter_slices if separate and s.shared_counters else device_slices).append(s)
    if len(slices) < len(all_for_pool):
        targeting = {s.name for s in slices}
        for s in all_for_pool:
            if s.name in targeting:
                continue
            (counter_slices if separate and s.shared_counters else not_targeting).append(s)
    invalid = _duplicate_device(device_slices)
    if invalid:
        return Pool(driver, name, is_invalid=True, invalid_reason=invalid)
    if not separate:
        return Pool(driver, name, slices=device_slices)
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                return Pool(driver, name, is_invalid=True, invalid_reason=f"duplicate counter set name {cs.name}")
            counter_sets[cs.name] = cs
    invalid = _bad_counter_reference(counter_sets, device_slices) or _bad_counter_reference(counter_sets, not_targeting)
    if invalid:
        return Pool(driver, name, is_invalid=True, invalid_reason=invalid)
    return Pool(driver, name, slices=device_slices, slices_not_targeting_node=not_targeting, counter_sets=counter_sets)


def _duplicate_device(slices: list[ResourceSlice]) -> str:
    seen: set[str] = set()
    for s in slices:
        for d in s.devices:
            if d.name in seen:
                return f"duplicate device name {d.name}"
            seen.add(d.name)
    return ""


def _bad_counter_reference(counter_sets: Mapping[str, CounterSet], slices: list[ResourceSlice]) -> str:
    for s in slices:
        for d in s.devices:
            for consumption in d.consumes_counters:
                counter_set = counter_sets.get(consumption.counter_set)
                if counter_set is None:
                    return f"counter set {consumption.counter_set} not found"
                for counter in consumption.counters:
                    if counter not in counter_set.counters:
                        return f"counter {counter} not found in counter set {counter_set.name}"
    return ""


def _has_binding_conditions(pool: Pool) -> bool:
    kept = derived(pool)
    found: bool | None = kept.get("binding")
    if found is None:
        found = kept["binding"] = any(d.binding_conditions for s in pool.slices for d in s.devices)
    return found


def all_devices(pool: Pool) -> list[tuple[ResourceSlice, Device]]:
    return [(s, d) for s in pool.slices for d in s.devices]
