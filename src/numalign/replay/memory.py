"""Replay of the memory manager vectors (kinds `memory_hints` and `memory_allocate`).

Scenario and result shapes are documented in the oracle's MEMORY-README.md. Each scenario is one
container of a Guaranteed pod; `reusable` is the memory this pod's init containers left for reuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.core.bitmask import mask_of, mask_string
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, InvalidInputError
from numalign.kubelet.memorymanager.allocate import allocate_blocks
from numalign.kubelet.memorymanager.hints import MemoryHints, calculate_hints, regenerate_hints
from numalign.kubelet.memorymanager.state import (
    blocks_from_json,
    blocks_to_json,
    machine_state_from_json,
    machine_state_to_json,
)


def _requested(scenario: Mapping[str, Any]) -> dict[str, int]:
    req = scenario.get("request")
    if not isinstance(req, Mapping):
        raise InvalidInputError(f"request: expected an object resource -> bytes, got {req!r}")
    out: dict[str, int] = {}
    for r, v in req.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InvalidInputError(f"request.{r}: expected a non-negative integer (bytes), got {v!r}")
        out[str(r)] = v
    return out


def _reusable(scenario: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    raw = scenario.get("reusable") or []
    if not isinstance(raw, list):
        raise InvalidInputError(f"reusable: expected a list of {{mask, resource, size}}, got {raw!r}")
    out: dict[str, dict[str, int]] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not {"mask", "resource", "size"} <= set(item):
            raise InvalidInputError(f"reusable[{i}]: expected {{mask, resource, size}}, got {item!r}")
        key = mask_string(mask_of(item["mask"]))
        out.setdefault(key, {})[str(item["resource"])] = int(item["size"])
    return out


def _hints_json(hints: MemoryHints | None) -> dict[str, Any] | None:
    if hints is None:
        return None
    return {r: [h.to_dict() for h in hs] for r, hs in hints.items()}


def replay_memory_hints(scenario: dict[str, Any]) -> dict[str, Any]:
    """Container-scope GetTopologyHints: regenerate from existing blocks if any were recorded
    (even `[]`), else calculate from the machine state."""
    requested = _requested(scenario)
    if "existing_blocks" in scenario and scenario["existing_blocks"] is not None:
        blocks = blocks_from_json(scenario["existing_blocks"], "existing_blocks")
        return {"hints": _hints_json(regenerate_hints(blocks, requested))}
    machine_state = machine_state_from_json(scenario.get("machine_state"))
    return {"hints": _hints_json(calculate_hints(machine_state, requested, _reusable(scenario)))}


def replay_memory_allocate(scenario: dict[str, Any]) -> dict[str, Any]:
    """Allocate with the Topology Manager's stored affinity `hint`; the blocks sorted by type and the
    whole machine state afterwards, or upstream's error text."""
    requested = _requested(scenario)
    machine_state = machine_state_from_json(scenario.get("machine_state"))
    hint = TopologyHint.from_dict(scenario.get("hint"), "hint")
    try:
        blocks = allocate_blocks(machine_state, requested, hint, _reusable(scenario))
    except AllocationError as e:
        return {"error": str(e)}
    return {"blocks": blocks_to_json(blocks), "machine_state": machine_state_to_json(machine_state)}
