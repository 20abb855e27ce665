"""numalign.kubelet.devicemanager: the kubelet device manager (hints, allocation, plugin endpoints).

The public names are re-exported here; the modules say which upstream file each one follows.
"""

from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions, DeviceSpec, Mount
from numalign.kubelet.devicemanager.endpoint import Endpoint, StaticEndpoint
from numalign.kubelet.devicemanager.manager import ENDPOINT_STOP_GRACE_PERIOD, DeviceCapacity, DeviceManager
from numalign.kubelet.devicemanager.pod_devices import RunContainerOptions

__all__ = [
    "ENDPOINT_STOP_GRACE_PERIOD",
    "ContainerAllocateResponse",
    "Device",
    "DeviceCapacity",
    "DeviceManager",
    "DevicePluginOptions",
    "DeviceSpec",
    "Endpoint",
    "Mount",
    "RunContainerOptions",
    "StaticEndpoint",
]
