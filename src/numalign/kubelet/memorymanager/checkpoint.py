"""Plain data of the kubelet's memory_manager_state (v1.35 and earlier) <-> the policy's state.

Only the payload mapping lives here (JSON field names of upstream state.go); reading and writing the
file, and the checksum, belong to the state codec. Shape:
  {"policyName": "Static",
   "machineState": {"0": {"numberOfAssignments": n, "memoryMap": {"memory": {"total", "systemReserved",
                    "allocatable", "reserved", "free"}, ...}, "cells": [ids]}},
   "entries": {podUID: {containerName: [{"numaAffinity": [ids], "type": r, "size": bytes}]}}}
`entries` is omitted when empty (Go `omitempty`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import CheckpointError
from numalign.kubelet.memorymanager.state import (
    Block,
    ContainerMemoryAssignments,
    MemoryTable,
    NUMANodeMap,
    NUMANodeState,
)

_TABLE_KEYS = (
    ("total", "total"),
    ("system_reserved", "systemReserved"),
    ("allocatable", "allocatable"),
    ("reserved", "reserved"),
    ("free", "free"),
)


def snapshot_from_state(
    policy_name: str, machine_state: Mapping[int, NUMANodeState], assignments: ContainerMemoryAssignments
) -> dict[str, Any]:
    ms: dict[str, Any] = {}
    for nid in sorted(machine_state):
        node = machine_state[nid]
        ms[str(nid)] = {
            "numberOfAssignments": node.number_of_assignments,
            "memoryMap": {
                r: {json_key: getattr(node.memory_map[r], attr) for attr, json_key in _TABLE_KEYS}
                for r in sorted(node.memory_map)
            },
            "cells": list(node.cells),
        }
    out: dict[str, Any] = {"policyName": policy_name, "machineState": ms}
    if assignments:
        out["entries"] = {
            pod: {
                ctn: [{"numaAffinity": list(b.numa_affinity), "type": b.type, "size": b.size} for b in blocks]
                for ctn, blocks in containers.items()
            }
            for pod, containers in assignments.items()
        }
    return out


def _fail(where: str, what: str) -> CheckpointError:
    return CheckpointError(
        f"memory_manager_state {where}: {what}; the file is corrupt or not from a kubelet memory manager "
        "(drain the node and delete memory_manager_state)"
    )


def _uint(v: Any, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise _fail(where, f"expected a non-negative integer, got {v!r}")
    return v


def _ids(v: Any, where: str) -> list[int]:
    if v is None:  # a Go nil slice marshals as null
        return []
    if not isinstance(v, list):
        raise _fail(where, f"expected a list of NUMA ids, got {v!r}")
    return [_uint(x, f"{where}[{i}]") for i, x in enumerate(v)]


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise _fail(where, f"expected an object, got {type(v).__name__}")
    return v


def state_from_snapshot(data: Mapping[str, Any]) -> tuple[str, NUMANodeMap, ContainerMemoryAssignments]:
    """Parse the payload; returns (policyName, machine state, assignments). CheckpointError if malformed."""
    data = _obj(data, "payload")
    policy = data.get("policyName")
    if not isinstance(policy, str):
        raise _fail("policyName", f"expected a string, got {policy!r}")
    ms: NUMANodeMap = {}
    for key, node in _obj(data.get("machineState"), "machineState").items():
        where = f"machineState[{key!r}]"
        try:
            nid = int(key)
        except ValueError:
            raise _fail(where, "NUMA id must be a decimal integer") from None
        node = _obj(node, where)
        noa = node.get("numberOfAssignments", 0)
        if not isinstance(noa, int) or isinstance(noa, bool):
            raise _fail(f"{where}.numberOfAssignments", f"expected an integer, got {noa!r}")
        tables: dict[str, MemoryTable] = {}
        for r, t in _obj(node.get("memoryMap"), f"{where}.memoryMap").items():
            t = _obj(t, f"{where}.memoryMap.{r}")
            tables[str(r)] = MemoryTable(
                *(_uint(t.get(json_key, 0), f"{where}.memoryMap.{r}.{json_key}") for _, json_key in _TABLE_KEYS)
            )
        # Older kubelets (the 1.22 memory manager blog post shows such a file) wrote the list as "nodes".
        cells_key = "cells" if "cells" in node or "nodes" not in node else "nodes"
        ms[nid] = NUMANodeState(noa, tables, _ids(node.get(cells_key), f"{where}.{cells_key}"))
    assignments: ContainerMemoryAssignments = {}
    for pod, containers in _obj(data.get("entries"), "entries").items():
        per_pod = assignments.setdefault(str(pod), {})
        for ctn, blocks in _obj(containers, f"entries[{pod!r}]").items():
            where = f"entries[{pod!r}][{ctn!r}]"
            if blocks is None:
                blocks = []
            if not isinstance(blocks, list):
                raise _fail(where, f"expected a list of blocks, got {blocks!r}")
            parsed: list[Block] = []
            for i, b in enumerate(blocks):
                b = _obj(b, f"{where}[{i}]")
                if not isinstance(b.get("type"), str):
                    raise _fail(f"{where}[{i}].type", f"expected a resource name, got {b.get('type')!r}")
                parsed.append(
                    Block(_ids(b.get("numaAffinity"), f"{where}[{i}].numaAffinity"), b["type"],
                          _uint(b.get("size", 0), f"{where}[{i}].size"))
                )
            per_pod[str(ctn)] = parsed
    return policy, ms, assignments
