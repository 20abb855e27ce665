"""The device manager's view of one device plugin (upstream devicemanager endpoint.go).

The device-plugin v1beta1 messages are numalign.k8s.deviceplugin's plain dataclasses, so that the pure
device manager never imports gRPC. The gRPC adapter (numalign.adapters.grpc) implements
`Endpoint` over a unix socket; `StaticEndpoint` is an in-process plugin for tests, the simulator and
the CLI. Every Endpoint method signals failure by raising numalign.errors.PluginError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from numalign.errors import PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions


@runtime_checkable
class Endpoint(Protocol):
    """The calls the device manager makes on a registered plugin. Errors raise PluginError."""

    options: DevicePluginOptions

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocateResponse: ...

    def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]: ...

    def pre_start_container(self, device_ids: Sequence[str]) -> None: ...


PreferredFn = Callable[[Sequence[str], Sequence[str], int], list[str]]
AllocateFn = Callable[[Sequence[str]], ContainerAllocateResponse]


class StaticEndpoint:
    """An in-process plugin: a fixed device list and optional callbacks.

    By default Allocate returns an empty response, as the kubelet's own test stubs do; pass
    `allocate_fn` for envs/mounts. GetPreferredAllocation is offered only when `preferred_fn` is
    given (options.get_preferred_allocation_available follows it unless `options` is passed).
    Calls are recorded in `calls` so tests can assert what the manager asked for.
    """

    def __init__(
        self,
        resource: str,
        devices: Sequence[Device] = (),
        *,
        options: DevicePluginOptions | None = None,
        preferred_fn: PreferredFn | None = None,
        allocate_fn: AllocateFn | None = None,
    ) -> None:
        self.resource = resource
        self.devices: list[Device] = list(devices)
        self.preferred_fn = preferred_fn
        self.allocate_fn = allocate_fn
        self.options = options or DevicePluginOptions(
            get_preferred_allocation_available=preferred_fn is not None
        )
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self.pre_started: list[tuple[str, ...]] = []

    def _check_known(self, call: str, device_ids: Sequence[str]) -> None:
        known = {d.id for d in self.devices}
        unknown = sorted(set(device_ids) - known)
        if unknown:
            raise PluginError(
                f"{call} on plugin {self.resource!r}: unknown device ids {unknown}; "
                f"the plugin has {sorted(known)}"
            )

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocateResponse:
        self.calls.append(("Allocate", (tuple(device_ids),)))
        self._check_known("Allocate", device_ids)
        if self.allocate_fn is not None:
            return self.allocate_fn(device_ids)
        return ContainerAllocateResponse()

    def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        self.calls.append(("GetPreferredAllocation", (tuple(available), tuple(must_include), size)))
        if self.preferred_fn is None:
            # Upstream's stub returns an empty response when the plugin offers no preference.
            return []
        return list(self.preferred_fn(available, must_include, size))

    def pre_start_container(self, device_ids: Sequence[str]) -> None:
        self.calls.append(("PreStartContainer", (tuple(device_ids),)))
        self._check_known("PreStartContainer", device_ids)
        self.pre_started.append(tuple(device_ids))


@dataclass
class EndpointInfo:
    """endpoints[resource]: the plugin (None when restored from a checkpoint and not yet
    re-registered: upstream's stopped endpoint with nil options) and its stop time."""

    endpoint: Endpoint | None
    stop_time: float | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_time is not None
