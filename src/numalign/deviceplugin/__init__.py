"""numalign.deviceplugin: write a Kubernetes device plugin (API v1beta1) in a few lines.

    from numalign.deviceplugin import Device, DevicePlugin

    plugin = DevicePlugin("example.com/gpu", [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))],
                          socket_dir="/var/lib/kubelet/device-plugins")
    plugin.start()            # serve DevicePlugin on its own socket, register, re-register on kubelet restarts
    plugin.update_devices([...])   # push a new ListAndWatch snapshot to the kubelet
    plugin.stop()

The plugin works against a real kubelet and against `numalign serve` alike.
"""

from __future__ import annotations

from numalign.deviceplugin.plugin import DevicePlugin
from numalign.k8s.deviceplugin import (
    HEALTHY,
    UNHEALTHY,
    ContainerAllocateResponse,
    Device,
    DevicePluginOptions,
    DeviceSpec,
    Mount,
)

__all__ = [
    "HEALTHY",
    "UNHEALTHY",
    "ContainerAllocateResponse",
    "Device",
    "DevicePlugin",
    "DevicePluginOptions",
    "DeviceSpec",
    "Mount",
]
