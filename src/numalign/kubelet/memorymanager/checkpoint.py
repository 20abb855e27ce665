"""`memory_manager_state`: the memory manager's state <-> the file's bytes (memorymanager/state,
v1.32-1.35). The state model is memorymanager.state's; nothing else describes this file.

Layout, as json.Marshal writes `state.MemoryManagerCheckpoint`:
    {"policyName":"Static",
     "machineState":{"0":{"numberOfAssignments":2,
                          "memoryMap":{"memory":{"total":…,"systemReserved":…,"allocatable":…,
                                                 "reserved":…,"free":…}},
                          "cells":[0]}},
     "entries":{"<podUID>":{"<container>":[{"numaAffinity":[0],"type":"memory","size":1073741824}]}},
     "checksum":N}
`entries` is omitempty. The checksum is FNV-1a-32 over the spew dump of the pointer to the struct
with Checksum zeroed (machine state values and memory tables are pointers: spew prints `<*>{…}`).
Unlike the CPU manager, the released (1.22-1.35) memory verifier has no "0 means no checksum"
escape: a 0 is compared like any other value. Only 1.36+, when it reads this layout as its legacy
"v1", accepts 0 (`accept_zero_checksum=True`). 1.36+ also adds podEntries and a data/dataChecksum
wrapper [gated/new], which this codec does not write.

Kubelet 1.37 writes that layout plus `data` ({"policyName","machineState","entries","podEntries"} as a
JSON string, the last two omitempty) and `dataChecksum` (checkpointmanager/envelope.py); it reads `data`
when set and the older layout (0 checksum accepted) when not. `version` (major, minor) picks the
kubelet; None is 1.33-1.35.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numalign.kubelet.checkpointmanager import gojson
from numalign.kubelet.checkpointmanager.checksum import go_checksum
from numalign.kubelet.checkpointmanager.envelope import open_envelope, seal, with_envelope
from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError, CorruptCheckpointError, PolicyMismatchError
from numalign.kubelet.checkpointmanager.gospew import (
    CHECKSUM,
    INT,
    STRING,
    UINT64,
    Field,
    Map,
    Ptr,
    Scalar,
    Slice,
    Struct,
)
from numalign.kubelet.memorymanager.state import Block, MemoryManagerState, MemoryTable, NUMANodeState

_RESOURCE_NAME = Scalar("v1.ResourceName", "string")
_MEMORY_TABLE = Struct(
    "state.MemoryTable",
    (
        Field("TotalMemSize", UINT64, "total"),
        Field("SystemReserved", UINT64, "systemReserved"),
        Field("Allocatable", UINT64, "allocatable"),
        Field("Reserved", UINT64, "reserved"),
        Field("Free", UINT64, "free"),
    ),
)
_NUMA_NODE_STATE = Struct(
    "state.NUMANodeState",
    (
        Field("NumberOfAssignments", INT, "numberOfAssignments"),
        Field("MemoryMap", Map(_RESOURCE_NAME, Ptr(_MEMORY_TABLE)), "memoryMap"),
        Field("Cells", Slice(INT), "cells"),
    ),
)
_BLOCK = Struct(
    "state.Block",
    (
        Field("NUMAAffinity", Slice(INT), "numaAffinity"),
        Field("Type", _RESOURCE_NAME, "type"),
        Field("Size", UINT64, "size"),
    ),
)
_CHECKPOINT = Struct(
    "state.MemoryManagerCheckpoint",
    (
        Field("PolicyName", STRING, "policyName"),
        Field("MachineState", Map(INT, Ptr(_NUMA_NODE_STATE), "state.NUMANodeMap"), "machineState"),
        Field(
            "Entries",
            Map(STRING, Map(STRING, Slice(_BLOCK)), "state.ContainerMemoryAssignments"),
            "entries",
            omitempty=True,
        ),
        Field("Checksum", CHECKSUM, "checksum"),
    ),
)
_DATA = Struct("state.MemoryManagerCheckpointData", _CHECKPOINT.fields[:3])
_ENVELOPED = with_envelope(_CHECKPOINT)
_ENVELOPE_FROM = (1, 37)
_ZERO_CHECKSUM_FROM = (1, 36)  # the older layout is the legacy v1 there, whose verifier accepts 0


@dataclass(frozen=True)
class MemoryManagerCheckpoint(MemoryManagerState):
    """The file's content: the manager's state and the checksum the file held (0 for a new one)."""

    checksum: int = 0

    def state(self) -> MemoryManagerState:
        """The content alone, as the manager's state model (equal to its snapshot of the same state)."""
        return MemoryManagerState(self.policy_name, self.machine_state, self.entries)


def _table_value(t: MemoryTable) -> dict[str, int]:
    return {
        "TotalMemSize": t.total,
        "SystemReserved": t.system_reserved,
        "Allocatable": t.allocatable,
        "Reserved": t.reserved,
        "Free": t.free,
    }


def _block_value(b: Block) -> dict[str, Any]:
    return {"NUMAAffinity": list(b.numa_affinity), "Type": b.type, "Size": b.size}


def _go_value(cp: MemoryManagerState) -> dict[str, Any]:
    # storeState writes clones: non-nil cells and block lists, non-nil maps.
    return {
        "PolicyName": cp.policy_name,
        "MachineState": {
            node: {
                "NumberOfAssignments": s.number_of_assignments,
                "MemoryMap": {r: _table_value(t) for r, t in s.memory_map.items()},
                "Cells": list(s.cells),
            }
            for node, s in cp.machine_state.items()
        },
        "Entries": {
            pod: {c: [_block_value(b) for b in blocks] for c, blocks in containers.items()}
            for pod, containers in cp.entries.items()
        },
        "Checksum": 0,
    }


def memory_checkpoint_checksum(cp: MemoryManagerState) -> int:
    """The checksum the kubelet writes for this content (the `checksum` field is ignored)."""
    return go_checksum(Ptr(_CHECKPOINT), _go_value(cp))


def encode_memory_checkpoint(cp: MemoryManagerState, *, version: tuple[int, int] | None = None) -> bytes:
    """The exact bytes the kubelet of `version` writes (checksum computed, no trailing newline)."""
    value = _go_value(cp)
    value["Checksum"] = go_checksum(Ptr(_CHECKPOINT), value)
    if version is not None and version >= _ENVELOPE_FROM:
        data = {k: value[k] for k in ("PolicyName", "MachineState", "Entries")}
        return gojson.encode(_ENVELOPED, {**value, **seal(_DATA, data)}).encode("utf-8")
    return gojson.encode(_CHECKPOINT, value).encode("utf-8")


def _from_go(value: Mapping[str, Any]) -> MemoryManagerCheckpoint:
    machine: dict[int, NUMANodeState] = {}
    for node, s in (value["MachineState"] or {}).items():
        if s is None:
            raise CheckpointDecodeError(f"machineState[{node}] is null; expected a NUMA node state object")
        tables: dict[str, MemoryTable] = {}
        for resource, t in (s["MemoryMap"] or {}).items():
            if t is None:
                raise CheckpointDecodeError(
                    f"machineState[{node}].memoryMap[{resource}] is null; expected a memory table object"
                )
            tables[resource] = MemoryTable(
                t["TotalMemSize"], t["SystemReserved"], t["Allocatable"], t["Reserved"], t["Free"]
            )
        machine[node] = NUMANodeState(s["NumberOfAssignments"], tables, list(s["Cells"] or []))
    entries = {
        pod: {
            c: [Block(list(b["NUMAAffinity"] or []), b["Type"], b["Size"]) for b in (blocks or [])]
            for c, blocks in (containers or {}).items()
        }
        for pod, containers in (value["Entries"] or {}).items()
    }
    return MemoryManagerCheckpoint(value["PolicyName"], machine, entries, value["Checksum"])


def decode_memory_checkpoint(
    data: bytes,
    *,
    policy_name: str | None = None,
    accept_zero_checksum: bool = False,
    version: tuple[int, int] | None = None,
) -> MemoryManagerCheckpoint:
    """Read and verify, as GetCheckpoint + restoreState's policy check (`version` None: kubelet <= 1.35)."""
    j = _cells_from_nodes(gojson.parse_json(data))
    # NewMemoryManagerCheckpoint pre-makes Entries and MachineState (absent key: map[], not <nil>).
    initial = {"PolicyName": "", "MachineState": {}, "Entries": {}, "Checksum": 0}
    value: dict[str, Any] | None = None
    if version is not None and version >= _ENVELOPE_FROM:
        data_initial = {k: initial[k] for k in ("PolicyName", "MachineState", "Entries")}
        value = open_envelope(j, _CHECKPOINT, initial, _DATA, data_initial, "MemoryManagerCheckpoint")
    if version is not None and version >= _ZERO_CHECKSUM_FROM:
        accept_zero_checksum = True
    enveloped = value is not None  # verified by its dataChecksum already
    if value is None:
        value = gojson.decode(_CHECKPOINT, j, initial, "MemoryManagerCheckpoint")
    stored = int(value.setdefault("Checksum", 0))
    if not enveloped and (stored != 0 or not accept_zero_checksum):
        actual = go_checksum(Ptr(_CHECKPOINT), {**value, "Checksum": 0})
        if actual != stored:
            raise CorruptCheckpointError(
                f"checkpoint is corrupted: stored checksum {stored} does not match the content ({actual})",
                expected=stored,
                actual=actual,
            )
    cp = _from_go(value)
    if policy_name is not None and policy_name != cp.policy_name:
        raise PolicyMismatchError(
            f"[memorymanager] configured policy {json.dumps(policy_name, ensure_ascii=False)} differs "
            f"from state checkpoint policy {json.dumps(cp.policy_name, ensure_ascii=False)}"
        )
    return cp


def _cells_from_nodes(j: Any) -> Any:
    """A file whose node states list their group as "nodes" (the 1.22 memory manager blog post shows
    such a file) is read as if the key were "cells". Go would ignore the key; its checksum was taken
    over that older struct, so only a file without a checksum (accept_zero_checksum) gets this far."""
    if not gojson.is_object(j):
        return j
    pairs = gojson.object_pairs(j)
    for i, (key, machine) in enumerate(pairs):
        if key != "machineState" or not gojson.is_object(machine):
            continue
        nodes = []
        for nid, node in gojson.object_pairs(machine):
            keys = {k for k, _ in gojson.object_pairs(node)}
            if "nodes" in keys and "cells" not in keys:
                node_pairs = gojson.object_pairs(node)
                node = gojson.object_of(node_pairs + [("cells", v) for k, v in node_pairs if k == "nodes"])
            nodes.append((nid, node))
        pairs[i] = (key, gojson.object_of(nodes))
    return gojson.object_of(pairs)
