"""numalign_dra_claims.json: the ResourceClaims `admit --state-dir` allocated on this node, so a later
`admit`, `pods` or `remove` on the same directory knows which DRA devices are held and by whom.

On a cluster the API server keeps this in each claim's status: `allocation` (the devices) and
`reservedFor` (the pods using the claim); the scheduler reads it before it allocates again, and the
resource claim controller deallocates a claim once no pod reserves it. A state directory stands in for
the API server here, in the same words:

    {"version": 1,
     "claims": [{"namespace", "name", "uid",
                 "allocation": {"devices": {"results": [{"request", "driver", "pool", "device",
                                                         "adminAccess"?, "shareID"?, "consumedCapacity"?}]}},
                 "reservedFor": [{"resource": "pods", "name", "uid"}]}],
     "checksum": "sha256:..."}

Consistency with the pod record (numalign_pods.json, the commit point): an admission writes this file
first and the pod record after it, a removal the pod record first; every write is atomic. So a kill can
leave only a reservation by a pod the record does not list, and `reconcile` drops those on every read
(a claim no listed pod reserves is deallocated, as the controller would). A pod is never left holding
devices this file forgot.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.files import CheckpointFileError, read_checkpoint, write_atomic
from numalign.adapters.statedir.layout import DRA_CLAIMS_FILE
from numalign.k8s.dra.read import allocation_from_dict
from numalign.k8s.dra.types import DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim

VERSION = 1
MAX_CLAIMS = 100_000  # far above any node's pods x claims; bounds what one file can make us build


@dataclass(frozen=True)
class PodReference:
    """status.reservedFor[]: a ResourceClaimConsumerReference to a pod."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class HeldClaim:
    """A claim allocated on this node, with the pods that reserve it."""

    claim: ResourceClaim  # namespace, name, uid and allocation (the spec is not kept)
    reserved_for: tuple[PodReference, ...]

    @property
    def key(self) -> str:
        return self.claim.key


class ClaimsFileError(CheckpointFileError):
    """The claims file is not what numalign writes; the message names it, what is wrong and the fix."""


def claims_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / DRA_CLAIMS_FILE


def read_claims(state_dir: str | Path) -> list[HeldClaim]:
    """The claims the directory holds ([] when it has no claims file); the caller holds its lock."""
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


def reconcile(claims: Iterable[HeldClaim], pods: Collection[str]) -> list[HeldClaim]:
    """Only reservations by pods in `pods` (uids the pod record lists) stay; a claim none of them
    reserves is deallocated, so it is dropped."""
    out = []
    for held in claims:
        kept = tuple(r for r in held.reserved_for if r.uid in pods)
        if kept:
            out.append(held if kept == held.reserved_for else replace(held, reserved_for=kept))
    return out


def release(claims: Iterable[HeldClaim], uids: Collection[str]) -> list[HeldClaim]:
    """The pods `uids` are gone: their reservations end; a claim nobody reserves any more is deallocated."""
    out = []
    for held in claims:
        kept = tuple(r for r in held.reserved_for if r.uid not in uids)
        if kept:
            out.append(replace(held, reserved_for=kept))
    return out


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
    body = {"version": VERSION, "claims": items}
    return (json.dumps({**body, "checksum": _checksum(body)}, indent=1, sort_keys=True) + "\n").encode("utf-8")


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
    raw = body.get("claims")
    if not isinstance(raw, list) or len(raw) > MAX_CLAIMS:
        raise ValueError(f"\"claims\" is not a list of at most {MAX_CLAIMS} claims")
    out: list[HeldClaim] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"claims[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} is not an object")
        namespace, name, uid = item.get("namespace"), item.get("name"), item.get("uid", "")
        if not isinstance(namespace, str) or not isinstance(name, str) or not name or not isinstance(uid, str):
            raise ValueError(f"{where}: namespace, name and uid must be strings (name not empty)")
        try:
            allocation = allocation_from_dict(item.get("allocation"))
        except ValueError as e:
            raise ValueError(f"{where}.{e}") from None
        claim = ResourceClaim(name=name, namespace=namespace, uid=uid,
                              allocation=allocation or DeviceAllocationResult(), source=DRA_CLAIMS_FILE)
        if claim.key in seen:
            raise ValueError(f"{where}: claim {claim.key} is listed twice")
        seen.add(claim.key)
        out.append(HeldClaim(claim, _references(item.get("reservedFor"), f"{where}.reservedFor")))
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
