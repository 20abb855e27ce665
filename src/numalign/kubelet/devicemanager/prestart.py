"""callPreStartContainerIfNeeded (upstream devicemanager manager.go), run before a container starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from numalign.errors import PluginError
from numalign.kubelet.devicemanager.pod_devices import sorted_ids

if TYPE_CHECKING:
    from numalign.kubelet.devicemanager.endpoint import Endpoint
    from numalign.kubelet.devicemanager.view import DeviceManagerView


def pre_start_call(
    m: DeviceManagerView, pod_uid: str, container_name: str, resource: str
) -> tuple[Endpoint, list[str]] | None:
    """The PreStartContainer call callPreStartContainerIfNeeded would make, without making it: the
    endpoint and the sorted device ids, or None when the plugin does not require it.

    Upstream reads the endpoint and devices under the manager's lock and makes the RPC after
    releasing it; callers that must not hold their own lock across a plugin call use this.
    Raises PluginError with upstream's messages. A restored, not yet re-registered endpoint has no
    options (Go nil) and is skipped; a stopped one fails as upstream's endpoint does.
    """
    info = m.endpoints.get(resource)
    if info is None:
        raise PluginError(f"endpoint not found in cache for a registered resource: {resource}")
    if info.endpoint is None or not info.endpoint.options.pre_start_required:
        return None
    devices = m.pod_devices.container_devices(pod_uid, container_name, resource)
    if devices is None:
        raise PluginError(
            f"no devices found allocated in local cache for pod {pod_uid}, "
            f"container {container_name}, resource {resource}"
        )
    if info.stopped:
        # Upstream prints the endpoint struct with %v; we name the resource.
        raise PluginError(f"device plugin PreStartContainer rpc failed with err: endpoint {resource} has been stopped")
    return info.endpoint, sorted_ids(devices)


def run_pre_start(endpoint: Endpoint, device_ids: list[str]) -> None:
    """The PreStartContainer RPC, its error worded as upstream's."""
    try:
        endpoint.pre_start_container(device_ids)
    except PluginError as e:
        raise PluginError(f"device plugin PreStartContainer rpc failed with err: {e}") from e


def call_pre_start_if_needed(m: DeviceManagerView, pod_uid: str, container_name: str, resource: str) -> None:
    """PreStartContainer with the container's devices, if the plugin's options require it."""
    call = pre_start_call(m, pod_uid, container_name, resource)
    if call is not None:
        run_pre_start(*call)
