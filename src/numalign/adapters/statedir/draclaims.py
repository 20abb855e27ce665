"""The DRA claims of a state directory, bytes <-> model: the "claims" of numalign's pod record
(numalign_pods.json, version 3), and numalign_dra_claims.json, the separate file earlier versions wrote.

On a cluster the API server keeps this in each claim's status: `allocation` (the devices) and
`reservedFor` (the pods using the claim); the kubelet keeps the same in its dra_manager_state. A state
directory keeps it in the pod record, in the API's words:

    "claims": [{"namespace", "name", "uid",
                "allocation": {"devices": {"results": [{"request", "driver", "pool", "device",
                                                        "adminAccess"?, "shareID"?, "consumedCapacity"?}]}},
                "reservedFor": [{"resource": "pods", "namespace", "name", "uid"}]}]

One file, one atomic write: a pod and its claims are committed together, so no kill leaves a pod
recorded with another version's claims or a claim reserved by a pod the record does not list.

The old claims file (`{"version": 1, "claims": [...], "checksum"}`) is read when the pod record has no
claims of its own (a directory written before), reconciled with the record, and removed once the
record holds the claims.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.files import CheckpointFileError, read_checkpoint, write_atomic
from numalign.adapters.statedir.layout import DRA_CLAIMS_FILE
from numalign.k8s.dra.read import allocation_from_dict
from numalign.k8s.dra.types import DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim
from numalign.kubelet.dramanager.state import HeldClaim, PodReference, reconcile, release

__all__ = [
    "ClaimsFileError",
    "HeldClaim",
    "PodReference",
    "claims_from_list",
    "claims_path",
    "claims_to_list",
    "decode_claims",
    "encode_claims",
    "read_claims",
    "reconcile",
    "release",
    "write_claims",
]

VERSION = 1
MAX_CLAIMS = 100_000  # far above any node's pods x claims; bounds what one file can make us build


class ClaimsFileError(CheckpointFileError):
    """The claims file is not what numalign writes; the message names it, what is wrong and the fix."""


def claims_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / DRA_CLAIMS_FILE


def read_claims(state_dir: str | Path) -> list[HeldClaim]:
    """The claims of the old claims file ([] when there is none); the caller holds the lock. A file that
    cannot be read (a symlink loop, a directory, damaged bytes) is one line naming it, never absent."""
    path = claims_path(state_dir)
    data = read_checkpoint(path)  # bounded, regular files only; errors name the file
    if data is None:
        return []
    try:
        return decode_claims(data)
    except ValueError as e:
        raise ClaimsFileError(
            f"{path}: cannot read the DRA claims numalign allocated: {e}; expected the file `numalign admit "
            f"--state-dir` writes; fix: restore it, or remove it to forget every claim allocation there",
            path=path) from None


def write_claims(state_dir: str | Path, claims: Iterable[HeldClaim]) -> None:
    """Replace the file atomically (the old content stays whole if the write fails)."""
    path = claims_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, encode_claims(list(claims)))


# ---- bytes <-> model -------------------------------------------------------------------------------


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _result_dict(r: DeviceRequestAllocationResult) -> dict[str, Any]:
    out: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
    if r.admin_access is not None:
        out["adminAccess"] = r.admin_access
    if r.share_id is not None:
        out["shareID"] = r.share_id
    if r.consumed_capacity is not None:
        out["consumedCapacity"] = {k: str(v) for k, v in r.consumed_capacity.items()}
    return out


def encode_claims(claims: list[HeldClaim]) -> bytes:
    body = {"version": VERSION, "claims": claims_to_list(claims)}
    return (json.dumps({**body, "checksum": _checksum(body)}, indent=1, sort_keys=True) + "\n").encode("utf-8")


def claims_to_list(claims: Iterable[HeldClaim]) -> list[dict[str, Any]]:
    """The claims as JSON values, by key."""
    items = []
    for held in sorted(claims, key=lambda h: h.key):
        c = held.claim
        results = c.allocation.results if c.allocation is not None else ()
        items.append({
            "namespace": c.namespace, "name": c.name, "uid": c.uid,
            "allocation": {"devices": {"results": [_result_dict(r) for r in results]}},
            "reservedFor": [{"resource": "pods", "name": r.name, "namespace": r.namespace, "uid": r.uid}
                            for r in held.reserved_for],
        })
    return items


def decode_claims(data: bytes) -> list[HeldClaim]:
    """The claims in `data`; ValueError saying what is wrong (the caller names the file)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"not JSON ({str(e)[:120]})") from None
    if not isinstance(doc, dict):
        raise ValueError("the top level is not an object")
    body = {k: v for k, v in doc.items() if k != "checksum"}
    if doc.get("checksum") != _checksum(body):
        raise ValueError("checksum mismatch: the file was changed or damaged after numalign wrote it")
    if body.get("version") != VERSION:
        raise ValueError(f"version {str(body.get('version'))[:20]!r}; expected {VERSION} "
                         "(written by a newer numalign?)")
    return claims_from_list(body.get("claims"))


def claims_from_list(raw: object, where: str = "claims") -> list[HeldClaim]:
    """The claims of a JSON list; ValueError saying what is wrong and where."""
    if not isinstance(raw, list) or len(raw) > MAX_CLAIMS:
        raise ValueError(f"\"{where}\" is not a list of at most {MAX_CLAIMS} claims")
    out: list[HeldClaim] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{at} is not an object")
        namespace, name, uid = item.get("namespace"), item.get("name"), item.get("uid", "")
        if not isinstance(namespace, str) or not isinstance(name, str) or not name or not isinstance(uid, str):
            raise ValueError(f"{at}: namespace, name and uid must be strings (name not empty)")
        try:
            allocation = allocation_from_dict(item.get("allocation"))
        except ValueError as e:
            raise ValueError(f"{at}.{e}") from None
        claim = ResourceClaim(name=name, namespace=namespace, uid=uid,
                              allocation=allocation or DeviceAllocationResult(), source="")
        if claim.key in seen:
            raise ValueError(f"{at}: claim {claim.key} is listed twice")
        seen.add(claim.key)
        out.append(HeldClaim(claim, _references(item.get("reservedFor"), f"{at}.reservedFor")))
    return out


def _references(raw: object, where: str) -> tuple[PodReference, ...]:
    if not isinstance(raw, list):
        raise ValueError(f"{where} is not a list")
    out = []
    for i, ref in enumerate(raw):
        fields = (ref.get("namespace"), ref.get("name"), ref.get("uid")) if isinstance(ref, dict) else None
        if fields is None or not all(isinstance(f, str) for f in fields) or not fields[2]:
            raise ValueError(f"{where}[{i}]: expected {{resource: pods, namespace, name, uid}}")
        out.append(PodReference(str(fields[0]), str(fields[1]), str(fields[2])))
    return tuple(out)
