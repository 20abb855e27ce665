"""numalign_pods.json: the pods numalign admitted on a node, the one source of truth for which pods
exist (the kubelet's files say what each holds). Bytes <-> model, no I/O.

The file is checksummed as the kubelet's checkpoints are (here a SHA-256 over the canonical JSON of
everything but the checksum), so one flipped bit is refused instead of orphaning a pod. Each entry keeps:

* `manifest`: a minimal Pod manifest that reads back into the same Pod;
* `allocation`: per container what the kubelet files must hold for it (exclusive CPUs, memory blocks,
  device ids), checked against those files on every open; read and written as a typed
  RecordedAllocation by adapters/statedir/allocation.py;
* `process`: written by `numalign run` (pid, start time, command), carried through untouched.

`claims` (version 3, adapters/statedir/draclaims.py) lists the DRA claims the pods reserve, with their
devices: in the record, so one atomic write commits a pod and its claims together. A version 2 record
(no claims; they were in numalign_dra_claims.json) is still read; the next write is version 3, which
an earlier numalign refuses rather than forget the claims.

`generation` grows by one with every write, so a process sharing the directory knows it must reload.
A file of the first format (`{"pods": [{"uid", "manifest"}]}`, no checksum) is still read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numalign.adapters.statedir.allocation import allocation_from_json, allocation_to_json
from numalign.adapters.statedir.draclaims import claims_from_list, claims_to_list
from numalign.errors import CheckpointError
from numalign.kubelet.dramanager.state import HeldClaim
from numalign.kubelet.state import AllocationRecord

POD_RECORD_VERSION = 3
POD_RECORD_VERSION_WITHOUT_CLAIMS = 2


@dataclass(frozen=True)
class PodEntry:
    uid: str
    manifest: Mapping[str, Any]
    allocation: AllocationRecord | None = None
    process: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uid": self.uid, "manifest": self.manifest}
        if self.allocation is not None:
            out["allocation"] = allocation_to_json(self.allocation)
        if self.process is not None:
            out["process"] = self.process
        return out


@dataclass(frozen=True)
class PodRecord:
    generation: int = 0
    pods: tuple[PodEntry, ...] = ()
    claims: tuple[HeldClaim, ...] | None = None  # None: a record of version 2 or before (claims kept apart)

    def uids(self) -> list[str]:
        return [p.uid for p in self.pods]


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def encode_pod_record(record: PodRecord) -> bytes:
    body = {"generation": record.generation, "pods": [p.to_dict() for p in record.pods],
            "claims": claims_to_list(record.claims or ()), "version": POD_RECORD_VERSION}
    return (json.dumps({**body, "checksum": _checksum(body)}, indent=1, sort_keys=True) + "\n").encode("utf-8")


class PodRecordError(CheckpointError):
    """The pod record is not what numalign writes; the message says where and what."""


def decode_pod_record(data: bytes) -> PodRecord:
    """The record in `data`, or PodRecordError naming what is wrong (the caller adds the path)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise PodRecordError(f"not JSON ({str(e)[:120]})") from None
    if not isinstance(doc, dict):
        raise PodRecordError(f"the top level is a JSON {_kind(doc)}; expected an object with \"pods\"")
    if set(doc) == {"pods"}:
        return PodRecord(0, _entries(doc["pods"], legacy=True))
    got = doc.get("checksum")
    body = {k: v for k, v in doc.items() if k != "checksum"}
    if not isinstance(got, str):
        raise PodRecordError(f"\"checksum\" is {_kind(got)}; expected the string numalign wrote")
    if _checksum(body) != got:
        raise PodRecordError("checksum mismatch: the file was changed or damaged after numalign wrote it")
    version = body.get("version")
    if version not in (POD_RECORD_VERSION, POD_RECORD_VERSION_WITHOUT_CLAIMS) or isinstance(version, bool):
        raise PodRecordError(f"version {str(version)[:20]!r}; expected {POD_RECORD_VERSION} or "
                             f"{POD_RECORD_VERSION_WITHOUT_CLAIMS} (written by a newer numalign?)")
    generation = body.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise PodRecordError(f"\"generation\" is {_kind(generation)}; expected a non-negative integer")
    claims: tuple[HeldClaim, ...] | None = None
    if version == POD_RECORD_VERSION:
        try:
            claims = tuple(claims_from_list(body.get("claims")))
        except ValueError as e:
            raise PodRecordError(str(e)) from None
    return PodRecord(generation, _entries(body.get("pods"), legacy=False), claims)


def _entries(pods: Any, *, legacy: bool) -> tuple[PodEntry, ...]:
    if not isinstance(pods, list):
        raise PodRecordError(f"\"pods\" is {_kind(pods)}; expected a list")
    out: list[PodEntry] = []
    seen: set[str] = set()
    for i, obj in enumerate(pods):
        where = f"pods[{i}]"
        if not isinstance(obj, dict):
            raise PodRecordError(f"{where} is {_kind(obj)}; expected an object with uid and manifest")
        uid, manifest = obj.get("uid"), obj.get("manifest")
        if not isinstance(uid, str) or not uid:
            raise PodRecordError(f"{where}.uid is {_kind(uid)}; expected the pod's uid (a string)")
        if uid in seen:
            raise PodRecordError(f"{where}.uid {uid[:80]!r} is listed twice; expected each pod once")
        seen.add(uid)
        if not isinstance(manifest, dict):
            raise PodRecordError(f"{where}.manifest is {_kind(manifest)}; expected a Pod manifest (an object)")
        raw = None if legacy else obj.get("allocation")
        if raw is not None and not isinstance(raw, dict):
            raise PodRecordError(f"{where}.allocation is {_kind(raw)}; expected an object per container")
        allocation = None if raw is None else allocation_from_json(raw, f"{where}.allocation")
        process = obj.get("process")
        if process is not None:
            _check_process(process, f"{where}.process")
        out.append(PodEntry(uid, manifest, allocation, process))
    return tuple(out)


def _check_process(process: Any, where: str) -> None:
    if not isinstance(process, dict):
        raise PodRecordError(f"{where} is {_kind(process)}; expected {{pid, start_time, command}}")
    for key in ("pid", "start_time"):
        value = process.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise PodRecordError(f"{where}.{key} is {_kind(value)}; expected an integer")
    command = process.get("command")
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        raise PodRecordError(f"{where}.command is {_kind(command)}; expected a list of strings")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "missing or null"}
    return names.get(type(value), type(value).__name__)
