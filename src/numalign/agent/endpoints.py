"""What the agent puts between a real plugin and the device manager (the device manager itself times
each Allocate call for kubelet_device_plugin_alloc_duration_seconds, as the kubelet's does).

- `check_topology` handles a plugin that advertises a device on a NUMA node the machine lacks: the
  kubelet would trust it and produce hints no policy can satisfy; we keep the device but mark it
  unhealthy (so capacity shows it and it is never allocated) and report it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from numalign.k8s.deviceplugin import UNHEALTHY, Device


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
