"""`cpu_manager_state` codec: bytes <-> CPUManagerCheckpoint (kubelet cpumanager/state, v1.32-1.35).

Current format (v2), as json.Marshal writes `state.CPUManagerCheckpoint`:
    {"policyName":"static","defaultCpuSet":"0,2-7","entries":{"<podUID>":{"<container>":"1"}},"checksum":N}
`entries` is omitempty. The checksum is FNV-1a-32 over the spew dump of the *pointer* to the struct
with Checksum zeroed; 0 means "no checksum" (accepted for files from the old file backend).

Legacy v1 (before 1.18): `entries` maps runtime containerID -> cpuset. The kubelet first tries v2;
on any failure (a type error because entries are flat, or a checksum mismatch) it tries v1, whose
checksum is computed with the type name rewritten to CPUManagerCheckpoint, then migrates the
entries through the container map (containerID -> podUID, containerName).

Kubelet 1.37 (v4) writes the v2 fields plus `data`, the content as a JSON string
({"policyName","defaultCpuSet","entries","podEntries","baselines"}, each omitempty but the first two),
and `dataChecksum` (checkpointmanager/envelope.py); it reads `data` when set and falls back to the v2
loader (there is no v1 any more) when not. 1.36 tries v2 then v1 and reports the v1 attempt's error.
`version` (major, minor) picks the kubelet's layout; None is the 1.33-1.35 one.

CPU sets stay strings here; the CPU provider parses them (and reports unparsable ones).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numalign.errors import CheckpointError
from numalign.kubelet.checkpointmanager import gojson
from numalign.kubelet.checkpointmanager.checksum import go_checksum
from numalign.kubelet.checkpointmanager.envelope import open_envelope, seal, with_envelope
from numalign.kubelet.checkpointmanager.errors import (
    CheckpointDecodeError,
    CorruptCheckpointError,
    MigrationError,
    PolicyMismatchError,
)
from numalign.kubelet.checkpointmanager.gospew import CHECKSUM, STRING, Field, Map, Ptr, Struct

_V2 = Struct(
    "state.CPUManagerCheckpoint",
    (
        Field("PolicyName", STRING, "policyName"),
        Field("DefaultCPUSet", STRING, "defaultCpuSet"),
        Field("Entries", Map(STRING, Map(STRING, STRING)), "entries", omitempty=True),
        Field("Checksum", CHECKSUM, "checksum"),
    ),
)
# KEP-5554 preview (inplace-resize-exclusive-cpus): the baseline CPUs of resized containers, shaped as
# merged k/k PR #140314 checkpoints them (`ContainerCPUs{Baseline}` per pod and container). numalign keeps
# the v2 envelope and its checksum over the v2 fields, so kubelets 1.33-1.37 still verify the file (Go
# ignores the unknown key); the field is written only when a baseline exists (omitempty).
_CONTAINER_CPUS = Struct("state.ContainerCPUs", (Field("Baseline", STRING, "baseline"),))
_BASELINES = Map(STRING, Map(STRING, _CONTAINER_CPUS))
_V2_WITH_BASELINES = Struct(_V2.name, (*_V2.fields[:3], Field("Baselines", _BASELINES, "baselines", omitempty=True),
                                       _V2.fields[3]))
_V4_DATA = Struct(
    "state.CPUManagerCheckpointData",
    (*_V2.fields[:3], Field("Baselines", _BASELINES, "baselines", omitempty=True)),
)
_V4 = with_envelope(_V2)
_ENVELOPE_FROM = (1, 37)
_V1_ERROR_WINS = (1, 36)
_BASELINES_ONLY = Struct("state.CPUManagerCheckpoint", (Field("Baselines", _BASELINES, "baselines"),))
# The v1 verifier hashes `CPUManagerCheckpointV1` renamed to `CPUManagerCheckpoint`; only the
# Entries type differs from v2 in the hashed text.
_V1 = Struct(
    "state.CPUManagerCheckpoint",
    (
        Field("PolicyName", STRING, "policyName"),
        Field("DefaultCPUSet", STRING, "defaultCpuSet"),
        Field("Entries", Map(STRING, STRING), "entries", omitempty=True),
        Field("Checksum", CHECKSUM, "checksum"),
    ),
)


@dataclass(frozen=True)
class CPUManagerCheckpoint:
    """The v2 content. `checksum` is what the file held (0 for a migrated v1 file or a new one)."""

    policy_name: str
    default_cpu_set: str
    entries: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    checksum: int = 0
    version: int = field(default=2, compare=False)  # format the bytes were in: 1, 2 or 4 (1.37)
    # podUID -> container -> baseline cpuset (KEP-5554 preview); empty: the field is not written
    baselines: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def _go_value(cp: CPUManagerCheckpoint) -> dict[str, Any]:
    # storeState always builds a non-nil Entries map with a non-nil inner map per pod.
    return {
        "PolicyName": cp.policy_name,
        "DefaultCPUSet": cp.default_cpu_set,
        "Entries": {pod: dict(containers) for pod, containers in cp.entries.items()},
        "Checksum": 0,
    }


def cpu_checkpoint_checksum(cp: CPUManagerCheckpoint) -> int:
    """The checksum the kubelet writes for this content (the `checksum` field is ignored)."""
    return go_checksum(Ptr(_V2), _go_value(cp))


def _baselines_value(cp: CPUManagerCheckpoint) -> dict[str, dict[str, dict[str, str]]]:
    return {pod: {name: {"Baseline": cpus} for name, cpus in ctrs.items()} for pod, ctrs in cp.baselines.items()}


def encode_cpu_checkpoint(cp: CPUManagerCheckpoint, *, version: tuple[int, int] | None = None) -> bytes:
    """The exact bytes the kubelet of `version` writes (checksum computed, no trailing newline):
    v4 from 1.37, v2 before."""
    value = _go_value(cp)
    value["Checksum"] = go_checksum(Ptr(_V2), value)
    if version is not None and version >= _ENVELOPE_FROM:
        data = {"PolicyName": cp.policy_name, "DefaultCPUSet": cp.default_cpu_set, "Entries": value["Entries"],
                "Baselines": _baselines_value(cp)}
        return gojson.encode(_V4, {**value, **seal(_V4_DATA, data)}).encode("utf-8")
    if not cp.baselines:
        return gojson.encode(_V2, value).encode("utf-8")
    value["Baselines"] = _baselines_value(cp)
    return gojson.encode(_V2_WITH_BASELINES, value).encode("utf-8")


def _load_baselines(j: Any) -> dict[str, dict[str, str]]:
    value = gojson.decode(_BASELINES_ONLY, j, {"Baselines": {}}, "CPUManagerCheckpoint")
    return {pod: {name: str(c["Baseline"]) for name, c in (ctrs or {}).items()}
            for pod, ctrs in (value["Baselines"] or {}).items()}


def _verify(t: Struct, value: dict[str, Any], label: str) -> None:
    stored = int(value["Checksum"])
    if stored == 0:
        return  # "accept empty checksum for compatibility with old file backend"
    actual = go_checksum(Ptr(t), {**value, "Checksum": 0})
    if actual != stored:
        raise CorruptCheckpointError(
            f"checkpoint is corrupted: stored checksum {stored} does not match the content "
            f"({actual} when read as {label})",
            expected=stored,
            actual=actual,
        )


def _initial() -> dict[str, Any]:
    # newCPUManagerCheckpointV1/V2 pre-make Entries, so an absent "entries" hashes as map[], not <nil>.
    return {"PolicyName": "", "DefaultCPUSet": "", "Entries": {}, "Checksum": 0}


def _load_v2(j: Any) -> dict[str, Any]:
    value: dict[str, Any] = gojson.decode(_V2, j, _initial(), "CPUManagerCheckpointV2")
    _verify(_V2, value, "v2")
    return value


def _load_v1(j: Any) -> dict[str, Any]:
    value: dict[str, Any] = gojson.decode(_V1, j, _initial(), "CPUManagerCheckpointV1")
    _verify(_V1, value, "v1")
    return value


def _migrate(v1: dict[str, Any], containers: Mapping[str, tuple[str, str]]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for container_id in sorted(v1["Entries"] or {}):
        ref = containers.get(container_id)
        if ref is None:
            raise MigrationError(
                "failed to migrate checkpoint from v1 to v2: "
                f"containerID '{container_id}' not found in initial containers list "
                f"(known: {sorted(containers) or 'none'}); the v1 file names runtime container IDs, "
                "so pass the running containers (containerID -> podUID, container name)"
            )
        pod_uid, name = ref
        out.setdefault(pod_uid, {})[name] = v1["Entries"][container_id]
    return out


def decode_cpu_checkpoint(
    data: bytes,
    *,
    policy_name: str | None = None,
    initial_containers: Mapping[str, tuple[str, str]] | None = None,
    version: tuple[int, int] | None = None,
) -> CPUManagerCheckpoint:
    """Read, verify and (for v1) migrate, as the kubelet of `version` restores its state, then the
    policy check (None: as 1.33-1.35).

    `policy_name` given: a different stored policy raises PolicyMismatchError with the kubelet's
    message. `initial_containers` maps runtime containerID -> (podUID, containerName) for v1.
    """
    j = gojson.parse_json(data)
    if version is not None and version >= _ENVELOPE_FROM:
        cp = _decode_v4(j)
        if policy_name is not None and policy_name != cp.policy_name:
            raise PolicyMismatchError(
                f"configured policy {_goq(policy_name)} differs from state checkpoint policy {_goq(cp.policy_name)}"
            )
        return cp
    try:
        v2 = _load_v2(j)
        # A null pod entry is a nil inner map in Go: it hashed as <nil>, it restores as no containers.
        entries = {pod: dict(ctrs or {}) for pod, ctrs in (v2["Entries"] or {}).items()}
        cp = CPUManagerCheckpoint(v2["PolicyName"], v2["DefaultCPUSet"], entries, v2["Checksum"],
                                  baselines=_load_baselines(j))
    except (CheckpointDecodeError, CorruptCheckpointError) as v2_error:
        try:
            v1 = _load_v1(j)
        except CheckpointError as v1_error:
            if version is not None and version >= _V1_ERROR_WINS:
                raise v1_error from v2_error  # 1.36 returns the last attempt's error
            raise _pick_error(v2_error, v1_error) from v1_error
        entries = _migrate(v1, initial_containers or {})
        cp = CPUManagerCheckpoint(v1["PolicyName"], v1["DefaultCPUSet"], entries, 0, version=1)
    if policy_name is not None and policy_name != cp.policy_name:
        raise PolicyMismatchError(
            f"configured policy {_goq(policy_name)} differs from state checkpoint policy {_goq(cp.policy_name)}"
        )
    return cp


def _decode_v4(j: Any) -> CPUManagerCheckpoint:
    """1.37: the envelope's data when set; otherwise the v2 loader (a v1 file is refused)."""
    initial = {**_initial(), "Baselines": {}}
    value = open_envelope(j, _V2, _initial(), _V4_DATA, initial, "CPUManagerCheckpoint")
    if value is None:
        value = _load_v2(j)
        value["Baselines"] = {}
        checksum = int(value["Checksum"])
    else:
        checksum = 0
    entries = {pod: dict(ctrs or {}) for pod, ctrs in (value["Entries"] or {}).items()}
    baselines = {pod: {name: str(c["Baseline"]) for name, c in (ctrs or {}).items()}
                 for pod, ctrs in (value["Baselines"] or {}).items()}
    return CPUManagerCheckpoint(value["PolicyName"], value["DefaultCPUSet"], entries, checksum, version=4,
                                baselines=baselines)


def _pick_error(v2_error: CheckpointError, v1_error: CheckpointError) -> CheckpointError:
    # A v2-shaped file with a wrong checksum is best described by the v2 mismatch; a v1-shaped one
    # by the v1 mismatch; a file that is neither gets both decode errors.
    if isinstance(v2_error, CorruptCheckpointError):
        return v2_error
    if isinstance(v1_error, CorruptCheckpointError):
        return v1_error
    return CheckpointDecodeError(f"not a v2 checkpoint ({v2_error}) nor a v1 one ({v1_error})")


def _goq(s: str) -> str:
    # fmt's %q for the printable strings policies are made of.
    return json.dumps(s, ensure_ascii=False)
