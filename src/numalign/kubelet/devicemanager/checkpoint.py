"""Plain-data form of the device manager checkpoint (kubelet_internal_checkpoint's `Data`).

    {"PodDeviceEntries": [{"PodUID": str, "ContainerName": str, "ResourceName": str,
                           "DeviceIDs": {"<numa id>": [ids]}, "AllocResp": ContainerAllocateResponse}],
     "RegisteredDevices": {"<resource>": [healthy ids]}}

This module only converts and validates; the file itself (JSON, base64 protobuf AllocResp,
checksum, atomic write) belongs to the state layer. DeviceIDs keys are strings, as Go's JSON encoding
of map[int64][]string writes them; ints are accepted too. The pre-1.20 form, a flat DeviceIDs list,
is read as NUMA node 0, as upstream's checkpointv1 conversion does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numalign.errors import CheckpointError
from numalign.kubelet.devicemanager.endpoint import ContainerAllocateResponse
from numalign.kubelet.devicemanager.pod_devices import DevicesPerNUMA, PodDevices, sorted_ids


@dataclass(frozen=True)
class PodDevicesEntry:
    pod_uid: str
    container_name: str
    resource_name: str
    device_ids: DevicesPerNUMA
    # None: the state layer could not decode AllocResp; upstream logs and skips such an entry.
    alloc_resp: ContainerAllocateResponse | None


def encode(pod_devices: PodDevices, healthy: Mapping[str, set[str]]) -> dict[str, Any]:
    """Upstream writeCheckpoint's Data, sorted (Go writes map order); entries without an
    AllocateResponse are left out, as toCheckpointData does."""
    entries: list[dict[str, Any]] = []
    for pod_uid, container, resource, info in pod_devices.entries():
        if info.alloc_resp is None:
            continue
        entries.append(
            {
                "PodUID": pod_uid,
                "ContainerName": container,
                "ResourceName": resource,
                "DeviceIDs": {str(n): list(info.device_ids[n]) for n in sorted(info.device_ids)},
                "AllocResp": info.alloc_resp,
            }
        )
    return {
        "PodDeviceEntries": entries,
        "RegisteredDevices": {r: sorted_ids(healthy[r]) for r in sorted(healthy)},
    }


def _fail(where: str, expected: str, got: object) -> CheckpointError:
    return CheckpointError(
        f"device manager checkpoint: {where}: expected {expected}, got {got!r}; "
        "the checkpoint is corrupt: remove it to start without device allocations"
    )


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _fail(f"{where}.{key}", "a string", value)
    return value


def _ids(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, "a list of device ids", value)
    return list(value)


def _device_ids(value: Any, where: str) -> DevicesPerNUMA:
    if isinstance(value, list):
        return {0: _ids(value, where)}
    if not isinstance(value, Mapping):
        raise _fail(where, "an object {numa id: [device ids]}", value)
    out: DevicesPerNUMA = {}
    for key, ids in value.items():
        try:
            node = int(key)
        except (TypeError, ValueError):
            raise _fail(f"{where} key", "a NUMA id (integer)", key) from None
        out[node] = _ids(ids, f"{where}[{key}]")
    return out


def decode(data: Any) -> tuple[list[PodDevicesEntry], dict[str, list[str]]]:
    """Validate the plain-data checkpoint; raises CheckpointError naming the bad field."""
    if not isinstance(data, Mapping):
        raise _fail("Data", "an object", data)
    raw_entries = data.get("PodDeviceEntries")
    raw_entries = [] if raw_entries is None else raw_entries  # Go: a nil slice
    if not isinstance(raw_entries, list):
        raise _fail("PodDeviceEntries", "a list", raw_entries)
    entries: list[PodDevicesEntry] = []
    for i, obj in enumerate(raw_entries):
        where = f"PodDeviceEntries[{i}]"
        if not isinstance(obj, Mapping):
            raise _fail(where, "an object", obj)
        resp = obj.get("AllocResp")
        if resp is not None and not isinstance(resp, ContainerAllocateResponse):
            raise _fail(f"{where}.AllocResp", "a decoded ContainerAllocateResponse or null", resp)
        entries.append(
            PodDevicesEntry(
                _str(obj, "PodUID", where),
                _str(obj, "ContainerName", where),
                _str(obj, "ResourceName", where),
                _device_ids(obj.get("DeviceIDs"), f"{where}.DeviceIDs"),
                resp,
            )
        )
    raw_registered = data.get("RegisteredDevices")
    raw_registered = {} if raw_registered is None else raw_registered
    if not isinstance(raw_registered, Mapping):
        raise _fail("RegisteredDevices", "an object {resource: [device ids]}", raw_registered)
    registered = {
        str(r): _ids(ids if ids is not None else [], f"RegisteredDevices[{r}]")
        for r, ids in raw_registered.items()
    }
    return entries, registered
