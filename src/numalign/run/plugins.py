"""Device plugins registered with a `numalign serve` that shares the state directory: a run dials
their sockets itself (the agent's status file names them), reads each one's devices from its first
ListAndWatch answer and asks it for Allocate, as the kubelet would, so the command gets the
environment the plugin gives (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from numalign.adapters.grpc.plugin_client import PluginEndpointClient
from numalign.errors import PluginError
from numalign.k8s.deviceplugin import Device

# ListAndWatch answers at once with the current list; a plugin that does not is not usable by a run.
FIRST_LIST_TIMEOUT_S = 10.0


@dataclass
class ConnectedPlugin:
    client: PluginEndpointClient
    devices: list[Device]


def connect_plugins(sockets: Mapping[str, Path]) -> dict[str, ConnectedPlugin]:
    """Dial every plugin and wait for its device list; PluginError naming the first that fails."""
    out: dict[str, ConnectedPlugin] = {}
    try:
        for resource, socket in sorted(sockets.items()):
            out[resource] = _connect(resource, socket)
    except BaseException:
        close_plugins(out)
        raise
    return out


def _connect(resource: str, socket: Path) -> ConnectedPlugin:
    client = PluginEndpointClient(resource, socket)
    client.connect()
    first = threading.Event()
    seen: list[list[Device]] = []
    ended: list[str] = []

    def on_devices(devices: list[Device]) -> None:
        if not seen:
            seen.append(list(devices))
            first.set()

    def on_end(reason: str) -> None:
        ended.append(reason)
        first.set()

    client.start_list_and_watch(on_devices, on_end)
    if not first.wait(FIRST_LIST_TIMEOUT_S) or not seen:
        client.close()
        why = ended[0] if ended else f"no device list within {FIRST_LIST_TIMEOUT_S:g} s"
        raise PluginError(
            f"device plugin {resource} at {socket}: ListAndWatch: {why}; expected the plugin `numalign serve` "
            "reports connected; check the plugin, or pass --devices RESOURCE=FILE instead"
        )
    return ConnectedPlugin(client, seen[0])


def close_plugins(plugins: Mapping[str, ConnectedPlugin]) -> None:
    for p in plugins.values():
        p.client.close()
