"""`kubelet_internal_checkpoint`: the device manager's state <-> the file's bytes (devicemanager/checkpoint).

Layout (Go field names, no JSON tags), as json.Marshal writes `checkpoint.Data`:
    {"Data":{"PodDeviceEntries":[{"PodUID":…,"ContainerName":…,"ResourceName":…,
                                  "DeviceIDs":{"<numa id>":["dev",…]},"AllocResp":"<base64>"}],
             "RegisteredDevices":{"<resource>":["dev",…]}},
     "Checksum":N}
NUMA id -1 means "no topology". AllocResp is a protobuf-serialized ContainerAllocateResponse, kept
as raw bytes here (devicemanager.allocresp encodes/decodes it). The checksum covers only the inner
`Data` value (type checkpoint.checkpointData, not a pointer) and a 0 is NOT accepted. Newer
kubelets add an omitempty "BootID" outside Data, outside the checksum; it is kept when present.

Legacy format (kubelet <= 1.19): DeviceIDs is a flat list. Its checksum renames
checkpointDataV1/PodDevicesEntryV1 to the current names, and its devices are read as NUMA node 0.
Kubelets from about 1.20 to the mid 1.2x read it as a fallback (getCheckpointV1); later ones (the
generic-sets era, so 1.32-1.35 included) only read the current format and log a decode error for
a legacy file. `legacy_fallback=False` reproduces that; the result's `version` says which was read.

An empty entry list is written as `null`, as the kubelet does (its toCheckpointData starts from a
nil slice); registered resources without healthy devices are written as `[]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalign.kubelet.checkpointmanager import gojson
from numalign.kubelet.checkpointmanager.checksum import go_checksum
from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError, CorruptCheckpointError
from numalign.kubelet.checkpointmanager.gospew import BYTES, CHECKSUM, INT64, STRING, Field, GoType, Map, Slice, Struct
from numalign.kubelet.devicemanager.state import DeviceManagerState, PodDevicesEntry

NO_TOPOLOGY_NUMA_ID = -1


def _entry_type(device_ids: GoType) -> Struct:
    return Struct(
        "checkpoint.PodDevicesEntry",
        (
            Field("PodUID", STRING),
            Field("ContainerName", STRING),
            Field("ResourceName", STRING),
            Field("DeviceIDs", device_ids),
            Field("AllocResp", BYTES),
        ),
    )


def _data_type(device_ids: GoType) -> Struct:
    return Struct(
        "checkpoint.checkpointData",
        (
            Field("PodDeviceEntries", Slice(_entry_type(device_ids))),
            Field("RegisteredDevices", Map(STRING, Slice(STRING))),
        ),
    )


def _file_type(data: Struct) -> Struct:
    return Struct(
        "checkpoint.Data",
        (Field("Data", data), Field("Checksum", CHECKSUM), Field("BootID", STRING, omitempty=True)),
    )


_DATA = _data_type(Map(INT64, Slice(STRING), "checkpoint.DevicesPerNUMA"))
_DATA_V1 = _data_type(Slice(STRING))  # the V1 verifier hashes with the V1 type names replaced
_FILE = _file_type(_DATA)
_FILE_V1 = _file_type(_DATA_V1)


@dataclass(frozen=True)
class DeviceCheckpoint(DeviceManagerState):
    """The file's content: the manager's state, the checksum the file held and the BootID it carried."""

    checksum: int = 0
    boot_id: str = ""
    version: int = field(default=2, compare=False)  # 1: read from the flat DeviceIDs format

    def state(self) -> DeviceManagerState:
        """The content alone, as the manager's state model (equal to its snapshot of the same state)."""
        return DeviceManagerState(tuple(self.pod_device_entries), self.registered_devices)


def _data_value(cp: DeviceManagerState) -> dict[str, Any]:
    entries = [
        {
            "PodUID": e.pod_uid,
            "ContainerName": e.container_name,
            "ResourceName": e.resource_name,
            "DeviceIDs": {numa: list(ids) for numa, ids in e.device_ids.items()},
            "AllocResp": bytes(e.alloc_resp),
        }
        for e in cp.pod_device_entries
    ]
    return {
        "PodDeviceEntries": entries or None,
        "RegisteredDevices": {r: list(ids) for r, ids in cp.registered_devices.items()},
    }


def device_checkpoint_checksum(cp: DeviceManagerState) -> int:
    """checksum.New(cp.Data) for this content (the `checksum` field is ignored)."""
    return go_checksum(_DATA, _data_value(cp))


def encode_device_checkpoint(cp: DeviceManagerState) -> bytes:
    """The exact bytes the kubelet writes (entries in the given order; no trailing newline). A
    DeviceCheckpoint read from a file keeps its BootID."""
    data = _data_value(cp)
    boot_id = cp.boot_id if isinstance(cp, DeviceCheckpoint) else ""
    value = {"Data": data, "Checksum": go_checksum(_DATA, data), "BootID": boot_id}
    return gojson.encode(_FILE, value).encode("utf-8")


def _initial() -> dict[str, Any]:
    # getCheckpoint starts from make([]PodDevicesEntry, 0) and make(map[string][]string): an absent
    # key hashes as [] / map[], while an explicit null hashes as <nil>.
    return {"Data": {"PodDeviceEntries": [], "RegisteredDevices": {}}, "Checksum": 0, "BootID": ""}


def _load(file_type: Struct, data_type: Struct, j: Any, label: str) -> dict[str, Any]:
    value: dict[str, Any] = gojson.decode(file_type, j, _initial(), label)
    stored = int(value["Checksum"])
    actual = go_checksum(data_type, value["Data"])
    if actual != stored:
        raise CorruptCheckpointError(
            f"checkpoint is corrupted: stored checksum {stored} does not match the content ({actual}"
            f"{' when read as the pre-1.20 format' if data_type is _DATA_V1 else ''})",
            expected=stored,
            actual=actual,
        )
    return value


def _entries(raw: Sequence[Mapping[str, Any]] | None, flat: bool) -> list[PodDevicesEntry]:
    out = []
    for e in raw or []:
        ids = e["DeviceIDs"]
        # GetDataInLatestFormat: no NUMA affinity was recorded, so every device goes to node 0.
        per_numa = {0: list(ids or [])} if flat else {n: list(v or []) for n, v in (ids or {}).items()}
        out.append(
            PodDevicesEntry(e["PodUID"], e["ContainerName"], e["ResourceName"], per_numa, e["AllocResp"] or b"")
        )
    return out


def decode_device_checkpoint(data: bytes, *, legacy_fallback: bool = True) -> DeviceCheckpoint:
    """Read and verify; fall back to the pre-1.20 flat DeviceIDs format when the current one fails."""
    j = gojson.parse_json(data)
    try:
        value = _load(_FILE, _DATA, j, "checkpoint.Data")
        flat = False
    except CheckpointDecodeError as current_error:
        if not legacy_fallback:
            raise
        try:
            value = _load(_FILE_V1, _DATA_V1, j, "checkpoint.DataV1")
        except CheckpointDecodeError as v1_error:
            raise CheckpointDecodeError(
                f"not a device manager checkpoint ({current_error}; as the pre-1.20 format: {v1_error})"
            ) from v1_error
        flat = True
    inner = value["Data"]
    registered = {r: list(ids or []) for r, ids in (inner["RegisteredDevices"] or {}).items()}
    return DeviceCheckpoint(
        _entries(inner["PodDeviceEntries"], flat),
        registered,
        value["Checksum"],
        value["BootID"],
        version=1 if flat else 2,
    )
