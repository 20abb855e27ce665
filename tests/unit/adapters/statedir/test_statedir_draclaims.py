"""The claims of a state directory (the pod record's, and the old numalign_dra_claims.json): bytes <->
model, reconciliation against the pod record, and its errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numalign.adapters.statedir.draclaims import (
    ClaimsFileError,
    HeldClaim,
    PodReference,
    decode_claims,
    encode_claims,
    read_claims,
    reconcile,
    release,
    write_claims,
)
from numalign.adapters.statedir.files import CheckpointFileError
from numalign.adapters.statedir.layout import DRA_CLAIMS_FILE
from numalign.k8s.dra.types import DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim
from numalign.k8s.quantity import Quantity


def held(name: str, device: str, *uids: str) -> HeldClaim:
    result = DeviceRequestAllocationResult("gpu", "gpu.example.com", "node", device, admin_access=True,
                                           share_id="s-1", consumed_capacity={"memory": Quantity.parse("10Gi")})
    claim = ResourceClaim(name, "ml", f"uid-{name}", allocation=DeviceAllocationResult((result,)))
    return HeldClaim(claim, tuple(PodReference("ml", f"pod-{u}", u) for u in uids))


def test_round_trip_keeps_every_allocation_field_and_reservation() -> None:
    claims = [held("b", "gpu-1", "p2"), held("a", "gpu-0", "p1", "p3")]
    back = decode_claims(encode_claims(claims))
    assert back == sorted(claims, key=lambda h: h.key)


def test_reconcile_and_release_deallocate_a_claim_nobody_reserves() -> None:
    claims = [held("a", "gpu-0", "p1", "p2"), held("b", "gpu-1", "gone")]
    assert [(h.key, [r.uid for r in h.reserved_for]) for h in reconcile(claims, {"p1", "p2"})] == [
        ("ml/a", ["p1", "p2"])]
    assert [(h.key, [r.uid for r in h.reserved_for]) for h in release(claims, {"p1"})] == [
        ("ml/a", ["p2"]), ("ml/b", ["gone"])]
    assert release(claims, {"p1", "p2", "gone"}) == []


@pytest.mark.parametrize(("change", "problem"), [
    (lambda b: b.replace(b'"gpu-0"', b'"gpu-9"'), "checksum mismatch"),
    (lambda b: b"[]", "the top level is not an object"),
    (lambda b: b"\xff", "not JSON"),
])
def test_a_damaged_file_is_one_line_naming_it(tmp_path: Path, change: object, problem: str) -> None:
    write_claims(tmp_path, [held("a", "gpu-0", "p1")])
    path = tmp_path / DRA_CLAIMS_FILE
    assert callable(change)
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(ClaimsFileError) as e:
        read_claims(tmp_path)
    assert str(e.value).startswith(f"{path}: cannot read the DRA claims numalign allocated: {problem}")
    assert "\n" not in str(e.value) and "fix:" in str(e.value)


def test_no_file_is_no_claim_and_a_fifo_is_refused_unread(tmp_path: Path) -> None:
    assert read_claims(tmp_path) == []
    os.mkfifo(tmp_path / DRA_CLAIMS_FILE)
    with pytest.raises(CheckpointFileError) as e:
        read_claims(tmp_path)
    assert f"{tmp_path / DRA_CLAIMS_FILE}: " in str(e.value) and "FIFO" in str(e.value)


def test_the_pod_record_keeps_the_claims_and_reads_a_record_from_before_them() -> None:
    import hashlib
    import json

    from numalign.adapters.statedir.podrecord import PodEntry, PodRecord, decode_pod_record, encode_pod_record
    from numalign.errors import CheckpointError

    record = PodRecord(4, (PodEntry("p1", {"metadata": {"name": "pod-p1"}}),), (held("a", "gpu-0", "p1"),))
    data = encode_pod_record(record)
    assert json.loads(data)["version"] == 3
    assert decode_pod_record(data) == record
    # version 2, written before claims joined the record: no claims of its own (None, not "none held")
    body = {"generation": 1, "pods": [], "version": 2}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    old = json.dumps({**body, "checksum": "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()})
    assert decode_pod_record(old.encode()).claims is None
    # a claim without its reservations is refused in one line naming it
    doc = json.loads(data)
    del doc["claims"][0]["reservedFor"]
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    doc["checksum"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    with pytest.raises(CheckpointError, match=r"claims\[0\]\.reservedFor is not a list"):
        decode_pod_record(json.dumps(doc).encode())
