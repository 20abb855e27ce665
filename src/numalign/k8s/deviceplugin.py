"""The device-plugin API's messages (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) that numalign uses,
as plain frozen dataclasses: the kubelet's device manager, the gRPC adapter, the device plugin SDK and
`numalign run` all speak them, and none of them needs gRPC to do so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DevicePluginOptions:
    """v1beta1.DevicePluginOptions."""

    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False


@dataclass(frozen=True, slots=True)
class Device:
    """v1beta1.Device.

    `topology` None means the plugin sent no TopologyInfo; () means a TopologyInfo with no NUMA
    nodes. Upstream treats the two differently (a nil TopologyInfo makes the device "no topology"
    when hints are generated; an empty node list does not), so they are kept apart here.
    """

    id: str
    health: str = HEALTHY
    topology: tuple[int, ...] | None = None

    @property
    def healthy(self) -> bool:
        return self.health == HEALTHY


@dataclass(frozen=True, slots=True)
class Mount:
    """v1beta1.Mount."""

    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """v1beta1.DeviceSpec."""

    container_path: str
    host_path: str
    permissions: str = ""


@dataclass(frozen=True, slots=True)
class ContainerAllocateResponse:
    """v1beta1.ContainerAllocateResponse (what Allocate returns for one container)."""

    envs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cdi_devices: tuple[str, ...] = ()
