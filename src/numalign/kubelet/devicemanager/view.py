"""What the allocation and pre-start helpers read from the device manager.

Upstream's devicesToAllocate and callPreStartContainerIfNeeded are methods of the manager; here they
live in allocation.py and prestart.py and take the manager as this Protocol, so that they never
import manager.py (which imports them) and say exactly which of its fields they touch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, MutableMapping
from typing import Protocol

from numalign.k8s.deviceplugin import Device
from numalign.kubelet.devicemanager.endpoint import EndpointInfo
from numalign.kubelet.devicemanager.pod_devices import PodDevices
from numalign.kubelet.topologymanager.provider import AffinityStore


class DeviceManagerView(Protocol):
    """The device manager's fields its allocation helpers read (and `allocated`, which they fill)."""

    # read-only properties: the manager's plain attributes (dicts, sets) satisfy them
    @property
    def affinity(self) -> AffinityStore: ...
    @property
    def endpoints(self) -> Mapping[str, EndpointInfo]: ...
    @property
    def all_devices(self) -> Mapping[str, Mapping[str, Device]]: ...
    @property
    def healthy(self) -> Mapping[str, set[str]]: ...
    @property
    def allocated(self) -> MutableMapping[str, set[str]]: ...
    @property
    def pod_devices(self) -> PodDevices: ...
    @property
    def running_containers(self) -> Collection[tuple[str, str]]: ...
    @property
    def sources_ready(self) -> Callable[[], bool]: ...
