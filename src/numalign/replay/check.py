"""The edge of replay: a scenario line's fields checked before any handler sees them.

The handlers (merge, CPU, device and memory providers) trust their input as the kubelet's code trusts
cadvisor's: NUMA node ids that fit a bitmask, distance rows as long as the node ids they are indexed
by, CPU ids of a real machine. A recorded vector always satisfies that; a hand-edited or damaged line
may not, and this module says which field is wrong, in one line, so `numalign replay` reports that line
and goes on with the next.

What is checked, by kind (field names as in ../shared/oracle/*-README.md):
- every number in the scenario: an integer (no float, NaN or infinity) within Go's int64 range;
- NUMA node ids (numa_nodes, masks, device numa lists, affinity_numa, memory cells and machine_state
  keys, distance keys): integers 0..MAX_NUMA_NODE_ID; numa_nodes unique;
- merge: distances null or an object node id -> row of integers at least max(node id) + 1 long;
  options null or an object of strings; providers a list of null or objects resource -> null or hints;
- cpu_hints/cpu_take: CPU ids 0..MAX_CPU_ID, requests 0..MAX_CPU_ID + 1;
- device_hints and memory kinds: at most MAX_PROVIDER_NUMA_NODES nodes (their hints enumerate every
  subset of the nodes, 2^N of them, as upstream's do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.limits import MAX_CPU_ID, MAX_NUMA_NODE_ID, quote

_INT64: Final = 1 << 63
# Provider hints enumerate all 2^N NUMA masks (upstream's bitmask.IterateBitMasks); the vectors use 8.
MAX_PROVIDER_NUMA_NODES: Final = 16
# Keys whose values are NUMA node ids, or lists of them, wherever they appear in a scenario.
_NODE_ID_KEYS: Final = frozenset({"numa_nodes", "mask", "bits", "affinity_numa", "cells", "numa"})


def check_scenario(scenario: Mapping[str, Any], kind: str) -> None:
    """Raise InvalidInputError naming the first field of `scenario` a handler could not trust."""
    _check_numbers(scenario, "scenario")
    if kind in ("merge", "realistic", "adversarial"):
        _check_merge(scenario)
    elif kind in ("cpu_hints", "cpu_take"):
        _check_cpu(scenario)
    elif kind == "device_hints":
        nodes = _node_list(scenario.get("numa_nodes"), "numa_nodes")
        _at_most(len(nodes), "numa_nodes")
        if not isinstance(scenario.get("devices"), list):
            raise _bad("devices", scenario.get("devices"), "a list of {id, numa} objects")
    elif kind in ("memory_hints", "memory_allocate"):
        _check_memory(scenario)


def _bad(field: str, value: Any, expected: str) -> InvalidInputError:
    return InvalidInputError(f"field {field}: got {quote(value)}; expected {expected}")


def _check_numbers(value: Any, where: str) -> None:
    """Every number an integer in int64 range; node-id fields within the node id range."""
    stack: list[tuple[Any, str, bool]] = [(value, where, False)]
    while stack:
        v, w, node_ids = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, float):
            expected = "an integer" if math.isfinite(v) else "a finite integer"
            raise _bad(w, v, expected)
        if isinstance(v, int):
            if node_ids and not 0 <= v <= MAX_NUMA_NODE_ID:
                raise _bad(w, v, f"a NUMA node id from 0 to {MAX_NUMA_NODE_ID}")
            if not -_INT64 <= v < _INT64:
                raise _bad(w, v, "an integer within Go's int64 range")
            continue
        if isinstance(v, Mapping):
            for k, item in v.items():
                stack.append((item, f"{w}.{k}", node_ids or k in _NODE_ID_KEYS))
        elif isinstance(v, list):
            for i, item in enumerate(v):
                stack.append((item, f"{w}[{i}]", node_ids))


def _node_id(value: Any, field: str) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 4:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NUMA_NODE_ID:
        raise _bad(field, value, f"a NUMA node id from 0 to {MAX_NUMA_NODE_ID}")
    return value


def _node_list(value: Any, field: str) -> list[int]:
    if not isinstance(value, list):
        raise _bad(field, value, "a list of NUMA node ids")
    ids = [_node_id(v, f"{field}[{i}]") for i, v in enumerate(value)]
    if len(set(ids)) != len(ids):
        raise _bad(field, value, "unique NUMA node ids")
    return ids


def _at_most(count: int, field: str) -> None:
    if count > MAX_PROVIDER_NUMA_NODES:
        raise InvalidInputError(
            f"field {field}: {count} NUMA nodes; expected at most {MAX_PROVIDER_NUMA_NODES} (a provider's hints "
            "enumerate every subset of the nodes)"
        )


def _mapping(value: Any, field: str, expected: str, *, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(field, value, expected)
    return value


def _check_merge(scenario: Mapping[str, Any]) -> None:
    nodes = _node_list(scenario.get("numa_nodes"), "numa_nodes")
    width = max(nodes, default=-1) + 1
    distances = _mapping(scenario.get("distances"), "distances", "null or an object node id -> distance row")
    for key, row in distances.items():
        _node_id(key, f"distances.{key}")
        if not isinstance(row, list) or len(row) < width or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in row
        ):
            raise _bad(f"distances.{key}", row, f"a list of at least {width} non-negative integer distances "
                       "(one per node id)")
    options = _mapping(scenario.get("options"), "options", "null or an object option -> value")
    for name, value in options.items():
        if not isinstance(value, str | int | bool):
            raise _bad(f"options.{name}", value, "a string such as \"true\"")
    if not isinstance(scenario.get("policy", "best-effort"), str):
        raise _bad("policy", scenario.get("policy"), "a policy name such as \"restricted\"")
    providers = scenario.get("providers")
    if not isinstance(providers, list):
        raise _bad("providers", providers, "a list of provider hint maps")
    for i, provider in enumerate(providers):
        hints_by_resource = _mapping(provider, f"providers[{i}]", "null or an object resource -> hints")
        for resource, hints in hints_by_resource.items():
            if hints is not None and not isinstance(hints, list):
                raise _bad(f"providers[{i}].{resource}", hints, "null or a list of hints")


def _check_cpu(scenario: Mapping[str, Any]) -> None:
    machine = _mapping(scenario.get("machine"), "machine", "an object with a cpus list", optional=False)
    cpus = machine.get("cpus")
    if not isinstance(cpus, list):
        raise _bad("machine.cpus", cpus, "a list of CPUs")
    for i, cpu in enumerate(cpus):
        c = _mapping(cpu, f"machine.cpus[{i}]", "an object with id, socket, numa, core, uncore", optional=False)
        _cpu_id(c.get("id"), f"machine.cpus[{i}].id")
        if "numa" in c:
            _node_id(c["numa"], f"machine.cpus[{i}].numa")
        for key in ("socket", "core", "uncore"):
            v = c.get(key, 0)
            if isinstance(v, int) and not isinstance(v, bool) and not -1 <= v <= MAX_CPU_ID:
                raise _bad(f"machine.cpus[{i}].{key}", v, f"an id from -1 to {MAX_CPU_ID}")
    for field in ("available", "reusable"):
        value = scenario.get(field, [])
        if not isinstance(value, list):
            raise _bad(field, value, "a list of CPU ids")
        for i, v in enumerate(value):
            _cpu_id(v, f"{field}[{i}]")
    request = scenario.get("request")
    if isinstance(request, int) and not isinstance(request, bool) and not 0 <= request <= MAX_CPU_ID + 1:
        raise _bad("request", request, f"a CPU count from 0 to {MAX_CPU_ID + 1}")


def _cpu_id(value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CPU_ID:
        raise _bad(field, value, f"a CPU id from 0 to {MAX_CPU_ID}")


def _check_memory(scenario: Mapping[str, Any]) -> None:
    state = scenario.get("machine_state")
    if state is not None:
        nodes = _mapping(state, "machine_state", "an object NUMA node id -> memory table")
        _at_most(len(nodes), "machine_state")
        for key, table in nodes.items():
            _node_id(key, f"machine_state.{key}")
            t = _mapping(table, f"machine_state.{key}", "an object with cells and memory tables", optional=False)
            if "cells" in t:
                _node_list(t["cells"], f"machine_state.{key}.cells")
    reusable = scenario.get("reusable") or []
    if not isinstance(reusable, list):
        raise _bad("reusable", reusable, "a list of {mask, resource, size}")
    for i, item in enumerate(reusable):
        if isinstance(item, Mapping) and "mask" in item:
            _node_list(item["mask"], f"reusable[{i}].mask")
