"""What the device manager persists: its pods' device entries and the resources registered with it.

Upstream's checkpoint.Data: one PodDevicesEntry per (pod, container, resource) with the device ids
per NUMA node (-1: the device has no topology) and the plugin's Allocate answer as protobuf bytes
(allocresp turns them into a ContainerAllocateResponse and back), plus the healthy device ids of each
registered resource. devicemanager.checkpoint reads and writes it as kubelet_internal_checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PodDevicesEntry:
    pod_uid: str
    container_name: str
    resource_name: str
    device_ids: Mapping[int, Sequence[str]]  # NUMA node id (-1: no topology) -> device IDs
    alloc_resp: bytes = b""  # protobuf-serialized ContainerAllocateResponse


@dataclass(frozen=True)
class DeviceManagerState:
    pod_device_entries: Sequence[PodDevicesEntry] = ()
    registered_devices: Mapping[str, Sequence[str]] = field(default_factory=dict)
