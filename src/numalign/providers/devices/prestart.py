"""callPreStartContainerIfNeeded (upstream devicemanager manager.go), run before a container starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from numalign.errors import PluginError
from numalign.providers.devices.pod_devices import sorted_ids

if TYPE_CHECKING:
    from numalign.providers.devices.manager import DeviceManager


def call_pre_start_if_needed(m: DeviceManager, pod_uid: str, container_name: str, resource: str) -> None:
    """PreStartContainer with the container's devices, if the plugin's options require it.

    Raises PluginError with upstream's messages. A restored, not yet re-registered endpoint has no
    options (Go nil) and is skipped; a stopped one fails as upstream's endpoint does.
    """
    info = m.endpoints.get(resource)
    if info is None:
        raise PluginError(f"endpoint not found in cache for a registered resource: {resource}")
    if info.endpoint is None or not info.endpoint.options.pre_start_required:
        return
    devices = m.pod_devices.container_devices(pod_uid, container_name, resource)
    if devices is None:
        raise PluginError(
            f"no devices found allocated in local cache for pod {pod_uid}, "
            f"container {container_name}, resource {resource}"
        )
    try:
        if info.stopped:
            # Upstream prints the endpoint struct with %v; we name the resource.
            raise PluginError(f"endpoint {resource} has been stopped")
        info.endpoint.pre_start_container(sorted_ids(devices))
    except PluginError as e:
        raise PluginError(f"device plugin PreStartContainer rpc failed with err: {e}") from e
