"""What the agent puts between a real plugin and the device manager.

- `TimedEndpoint` times Allocate for kubelet_device_plugin_alloc_duration_seconds, as the kubelet's
  endpoint wrapper does, and otherwise passes every call through.
- `check_topology` handles a plugin that advertises a device on a NUMA node the machine lacks: the
  kubelet would trust it and produce hints no policy can satisfy; we keep the device but mark it
  unhealthy (so capacity shows it and it is never allocated) and report it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from numalign import metrics as m
from numalign.k8s.deviceplugin import UNHEALTHY, ContainerAllocateResponse, Device, DevicePluginOptions
from numalign.kubelet.devicemanager.endpoint import Endpoint


class TimedEndpoint:
    """An Endpoint that records Allocate's duration under the resource's name."""

    def __init__(self, resource: str, inner: Endpoint, metrics: m.Metrics) -> None:
        self.resource = resource
        self.inner = inner
        self._metrics = metrics
        # The plugin's options are fetched when it connects, before the agent wraps it.
        self.options: DevicePluginOptions = inner.options

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocateResponse:
        start = time.monotonic()
        try:
            return self.inner.allocate(device_ids)
        finally:
            self._metrics.observe(m.DP_ALLOC_DURATION, time.monotonic() - start, resource_name=self.resource)

    def get_preferred_allocation(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        return self.inner.get_preferred_allocation(available, must_include, size)

    def pre_start_container(self, device_ids: Sequence[str]) -> None:
        self.inner.pre_start_container(device_ids)


def check_topology(
    devices: Sequence[Device], numa_ids: Collection[int], report: Callable[[Device, list[int]], None]
) -> list[Device]:
    """Devices with NUMA nodes outside `numa_ids` come back unhealthy; `report(device, bad_nodes)` is
    called for each."""
    out: list[Device] = []
    for dev in devices:
        bad = sorted(n for n in (dev.topology or ()) if n not in numa_ids)
        if bad:
            report(dev, bad)
            dev = Device(dev.id, UNHEALTHY, dev.topology)
        out.append(dev)
    return out
