"""Replay the DRA allocator vectors recorded from the real upstream code (../shared/oracle/dra, its
README): each case's objects read as numalign reads a user's file, allocated with `allocate_claims`, and
the answer put in the vectors' shape (`outcome`, `claims` or `message`) to compare with `upstream`."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from numalign.errors import InvalidInputError
from numalign.k8s.dra.read import dra_object_from_dict
from numalign.k8s.dra.types import DeviceClass, ResourceClaim, ResourceSlice
from numalign.scheduler.dra.api import AllocationFailure, allocate_claims
from support.shared import shared_dir

TIMEOUT_TEXT = "timed out trying to allocate devices"
RECORDED = {"1.36": "1.36.2"}


def vectors(name: str) -> Iterator[dict[str, Any]]:
    path = shared_dir() / "oracle" / "dra" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the DRA oracle vectors are missing; set NUMALIGN_SHARED=/path/to/shared")
    with gzip.open(Path(path), "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def answer(case: Mapping[str, Any], version: str | None = None) -> dict[str, Any]:
    """numalign's answer to one case, in the vectors' shape; `read-error` when numalign refuses the input.
    `version`: decide as this release (default: the case's, as recorded)."""
    try:
        slices = [_read(o, f"slices[{i}]", ResourceSlice) for i, o in enumerate(case["slices"])]
        classes = [_read(o, f"classes[{i}]", DeviceClass) for i, o in enumerate(case["classes"])]
        claims = [_read(o, f"claims[{i}]", ResourceClaim) for i, o in enumerate(case["claims"])]
        held = [_read(o, f"allocated[{i}]", ResourceClaim) for i, o in enumerate(case["allocated"])]
    except InvalidInputError as exc:
        return {"outcome": "read-error", "message": str(exc)}
    node = case["node"]
    # The vectors name the minor; they were recorded from 1.36.2 (the README), whose patch matters.
    version = version or RECORDED.get(case["version"], case["version"])
    try:
        result = allocate_claims(claims, slices, classes, node=node["name"], node_labels=node.get("labels") or {},
                                 allocated=held, version=version, gates=case.get("gate_overrides") or None)
    except InvalidInputError as exc:  # gates the scheduler of `version` refuses at start-up
        return {"outcome": "gates", "message": str(exc)}
    if isinstance(result, AllocationFailure):
        if result.message.endswith(TIMEOUT_TEXT):
            if result.stopped_by == "work":  # numalign's bound on its own work, not the scheduler's 10 s
                return {"outcome": "timeout", "message": result.message, "stoppedBy": "work"}
            return {"outcome": "timeout", "message": result.message}
        return {"outcome": "unschedulable" if result.unschedulable else "error", "message": result.message}
    out = []
    for claim in result.claims:
        entries = []
        for r in claim.allocation.results:
            entry: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
            if r.admin_access:
                entry["adminAccess"] = True
            if r.share_id:
                entry["shared"] = True
            if r.consumed_capacity:
                entry["consumedCapacity"] = {k: str(v) for k, v in r.consumed_capacity.items()}
            entries.append(dict(sorted(entry.items())))
        out.append(entries)
    return {"outcome": "ok", "claims": out}


def _read(obj: Mapping[str, Any], where: str, kind: type[Any]) -> Any:
    read = dra_object_from_dict(obj, where)
    assert isinstance(read, kind), f"{where}: expected a {kind.__name__}"
    return read


def agrees(mine: Mapping[str, Any], upstream: Mapping[str, Any]) -> bool:
    """Outcome, devices (per claim, in order) and message all the same."""
    if mine["outcome"] != upstream["outcome"]:
        return False
    if upstream["outcome"] == "ok":
        want: list[list[dict[str, Any]]] = [[dict(sorted(e.items())) for e in c] for c in upstream["claims"]]
        return want == list(mine["claims"])
    return str(mine.get("message")) == str(upstream.get("message"))
