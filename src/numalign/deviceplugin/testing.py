"""A kubelet to test device plugins against, without a cluster.

`FakeKubelet` runs numalign's kubelet-side Registration server (the same validation and error texts as
the kubelet) in a directory of your choice and records what plugins do:

    with FakeKubelet(tmp_dir) as kubelet:
        plugin = DevicePlugin("example.com/gpu", devices, socket_dir=tmp_dir)
        plugin.start()
        kubelet.wait_for(lambda: kubelet.last_devices("example.com/gpu") is not None, "devices")
        resp = kubelet.endpoint("example.com/gpu").allocate(["gpu0"])

Every wait has a timeout, so a broken plugin fails a test instead of hanging it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from numalign.adapters.grpc.plugin_client import PluginEndpointClient
from numalign.adapters.grpc.registration import RegistrationServer
from numalign.k8s.deviceplugin import Device
from numalign.kubelet.devicemanager.endpoint import Endpoint

DEFAULT_WAIT_S = 5.0
STUCK_S = 60.0


class KubeletRecorder:
    """Records what a RegistrationServer reports: pass it as the server's listener (RegistrationListener)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.requests: list[str] = []
        self.registered: list[tuple[str, Endpoint]] = []
        self.devices: list[tuple[str, list[Device]]] = []
        self.disconnected: list[str] = []
        self.refused: list[tuple[str, str]] = []
        self.malformed: list[tuple[str, str]] = []

    def on_request(self, resource: str) -> None:
        with self.lock:
            self.requests.append(resource)

    def on_register(self, resource: str, endpoint: Endpoint) -> None:
        with self.lock:
            self.registered.append((resource, endpoint))

    def on_devices(self, resource: str, devices: list[Device]) -> None:
        with self.lock:
            self.devices.append((resource, devices))

    def on_disconnect(self, resource: str) -> None:
        with self.lock:
            self.disconnected.append(resource)

    def on_refused(self, resource: str, message: str) -> None:
        with self.lock:
            self.refused.append((resource, message))

    def on_malformed(self, resource: str, message: str) -> None:
        with self.lock:
            self.malformed.append((resource, message))

    def last_devices(self, resource: str) -> list[Device] | None:
        """The latest ListAndWatch snapshot received for `resource`, or None."""
        with self.lock:
            for r, devs in reversed(self.devices):
                if r == resource:
                    return devs
        return None

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = DEFAULT_WAIT_S) -> None:
        """Poll `predicate` (under the recorder's lock) until true; AssertionError after `timeout`, a bound
        for something stuck, never a measure: at least STUCK_S (a loaded machine is slow, not wrong)."""
        deadline = time.monotonic() + max(timeout, STUCK_S)
        while True:
            with self.lock:
                if predicate():
                    return
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {max(timeout, STUCK_S):g}s waiting for {what}")
            time.sleep(0.02)


class FakeKubelet(KubeletRecorder):
    """A RegistrationServer on `directory`/kubelet.sock that records everything (see module doc)."""

    def __init__(
        self, directory: str | Path, *, dial_timeout: float = 2.0, call_timeout: float = 5.0
    ) -> None:
        super().__init__()
        self.server = RegistrationServer(
            Path(directory),
            listener=self,
            dial_timeout=dial_timeout,
            call_timeout=call_timeout,
        )

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=0.2)

    def endpoint(self, resource: str) -> PluginEndpointClient:
        """The connected plugin for `resource`; AssertionError if none is registered."""
        ep = self.server.endpoint(resource)
        if ep is None:
            raise AssertionError(f"no device plugin is registered for {resource!r}")
        return ep

    def __enter__(self) -> FakeKubelet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
