"""The kubelet's client for one registered device plugin (upstream plugin/v1beta1/client.go + endpoint.go).

`PluginEndpointClient` implements numalign.kubelet.devicemanager.endpoint.Endpoint over the plugin's unix
socket, so the device manager calls a real plugin exactly as it calls the in-process StaticEndpoint.
Every unary call has a deadline: a hung plugin costs at most that long and surfaces as PluginError.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import grpc

from numalign.adapters.grpc import convert
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.sockets import dial
from numalign.errors import EmptyAllocateError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions
from numalign.limits import quote

log = logging.getLogger("numalign.grpc.plugin_client")

DIAL_TIMEOUT_S = 10.0  # upstream dial(): context.WithTimeout(10s)
# upstream KubeletPreStartContainerRPCTimeoutInSecs; used for every unary call so a hung plugin never
# blocks admission forever (upstream leaves Allocate and GetPreferredAllocation without a deadline).
CALL_TIMEOUT_S = 30.0
OPTIONS_TIMEOUT_S = 10.0

DevicesCallback = Callable[[list[Device]], None]
EndCallback = Callable[[str], None]
MalformedCallback = Callable[[str], None]


# Go spells this one differently; every other code is the CamelCase of Python's name.
_GO_CODE_NAMES = {grpc.StatusCode.CANCELLED: "Canceled"}


def go_status_text(err: grpc.RpcError) -> str:
    """The text Go's grpc status error prints ("rpc error: code = Unknown desc = ..."), so messages that
    end up in admission failures read exactly as the kubelet's do."""
    code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (err.details() if isinstance(err, grpc.Call) else None) or ""
    go_code = _GO_CODE_NAMES.get(code) or "".join(w.capitalize() for w in code.name.split("_"))
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        details = "context deadline exceeded"  # what a Go client reports for its own deadline
    return f"rpc error: code = {go_code} desc = {details}"


def _rpc_error(resource: str, call: str, err: grpc.RpcError) -> PluginError:
    text = go_status_text(err)
    log.warning("device plugin %s: %s failed: %s", resource, call, text)
    return PluginError(text)


class PluginEndpointClient:
    """One connection to a device plugin's DevicePlugin service.

    Lifecycle: `connect()` dials (blocking, `dial_timeout`) and reads GetDevicePluginOptions into
    `options`; `start_list_and_watch()` follows the ListAndWatch stream in a daemon thread;
    `close()` cancels everything. The three Endpoint methods are thread-safe.
    """

    def __init__(
        self,
        resource: str,
        socket_path: Path,
        *,
        dial_timeout: float = DIAL_TIMEOUT_S,
        call_timeout: float = CALL_TIMEOUT_S,
    ) -> None:
        self.resource = resource
        self.socket_path = socket_path
        self.dial_timeout = dial_timeout
        self.call_timeout = call_timeout
        self.options = DevicePluginOptions()
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.DevicePluginStub | None = None
        self._stream: grpc.RpcContext | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PluginEndpointClient({self.resource!r}, {str(self.socket_path)!r})"

    # -- lifecycle ---------------------------------------------------------------------------------

    def connect(self, time_limit: float | None = None) -> None:
        """Dial the plugin and fetch its options. Raises PluginError (and leaves nothing open).

        The dial waits for a socket that does not exist or answer yet, up to `dial_timeout`, as the
        kubelet's blocking dial does. `time_limit` is what is left of the plugin's Register call: the
        kubelet dials and asks for the options under that RPC's context, so neither outlives it.
        """
        start = time.monotonic()

        def within(limit: float) -> float:
            if time_limit is None:
                return limit
            return max(0.0, min(limit, time_limit - (time.monotonic() - start)))

        channel = dial(self.socket_path, within(self.dial_timeout), wait_for_socket=True)
        stub = pb_grpc.DevicePluginStub(channel)
        try:
            opts = stub.GetDevicePluginOptions(pb.Empty(), timeout=within(min(self.call_timeout, OPTIONS_TIMEOUT_S)))
        except grpc.RpcError as e:
            channel.close()
            # upstream ManagerImpl.PluginConnected's wording
            raise PluginError(f"failed to get device plugin options: {go_status_text(e)}") from None
        with self._lock:
            self._channel, self._stub = channel, stub
        self.options = convert.options_from_pb(opts)

    def start_list_and_watch(
        self,
        on_devices: DevicesCallback,
        on_end: EndCallback,
        on_malformed: MalformedCallback | None = None,
    ) -> None:
        """Follow ListAndWatch in a daemon thread.

        Each snapshot goes to `on_devices`, read as the kubelet reads it (`kubelet_devices`); what
        is odd in it is logged and reported to `on_malformed`, once per problem. When the stream
        ends for any reason other than `close()`, `on_end(reason)` is called once; after `close()`
        it is not called.
        """
        stub = self._require_stub()
        self._thread = threading.Thread(
            target=self._run,
            args=(stub, on_devices, on_end, on_malformed),
            name=f"numalign-listandwatch-{self.resource}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Cancel the stream and close the channel; idempotent, never raises."""
        self._closed.set()
        with self._lock:
            stream, channel = self._stream, self._channel
            self._stream = self._channel = None
        if stream is not None:
            stream.cancel()  # type: ignore[no-untyped-call]
        if channel is not None:
            channel.close()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- Endpoint protocol -------------------------------------------------------------------------

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocateResponse:
        req = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=convert.ids(device_ids))]
        )
        try:
            resp = self._require_stub().Allocate(req, timeout=self.call_timeout)
        except grpc.RpcError as e:
            raise _rpc_error(self.resource, "Allocate", e) from None
        if not resp.container_responses:
            # the device manager says so in the kubelet's words, and keeps the devices taken as it does
            raise EmptyAllocateError(f"plugin {self.resource} answered Allocate with no container response")
        return convert.allocate_response_from_pb(resp.container_responses[0])

    def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        req = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=convert.ids(available),
                    must_include_deviceIDs=convert.ids(must_include),
                    allocation_size=size,
                )
            ]
        )
        try:
            resp = self._require_stub().GetPreferredAllocation(req, timeout=self.call_timeout)
        except grpc.RpcError as e:
            raise _rpc_error(self.resource, "GetPreferredAllocation", e) from None
        if not resp.container_responses:
            return []
        return list(resp.container_responses[0].deviceIDs)

    def pre_start_container(self, device_ids: Sequence[str]) -> None:
        req = pb.PreStartContainerRequest(devices_ids=convert.ids(device_ids))
        try:
            self._require_stub().PreStartContainer(req, timeout=self.call_timeout)
        except grpc.RpcError as e:
            raise _rpc_error(self.resource, "PreStartContainer", e) from None

    # -- internals ---------------------------------------------------------------------------------

    def _require_stub(self) -> pb_grpc.DevicePluginStub:
        with self._lock:
            stub = self._stub if self._channel is not None else None
        if stub is None:
            raise PluginError(f"endpoint {self.resource} has been stopped")  # upstream errEndpointStopped
        return stub

    def _run(
        self,
        stub: pb_grpc.DevicePluginStub,
        on_devices: DevicesCallback,
        on_end: EndCallback,
        on_malformed: MalformedCallback | None,
    ) -> None:
        reason = "ListAndWatch stream closed by the plugin"
        try:
            stream = stub.ListAndWatch(pb.Empty())
            with self._lock:
                if self._closed.is_set():
                    stream.cancel()  # type: ignore[no-untyped-call]
                    return
                self._stream = stream
            for resp in stream:
                devices, problems = kubelet_devices(self.resource, resp.devices)
                for problem in problems:
                    log.warning("%s", problem)
                    if on_malformed is not None:
                        _safe(on_malformed, problem)
                log.debug("state pushed for device plugin %s: %d devices", self.resource, len(devices))
                _safe(on_devices, devices)
        except grpc.RpcError as e:
            reason = f"ListAndWatch ended unexpectedly: {go_status_text(e)}"
        except Exception as e:  # never let a plugin kill the agent's thread silently
            log.exception("ListAndWatch reader for %s failed", self.resource)
            reason = f"ListAndWatch reader failed: {e}"
        if self._closed.is_set():
            return
        log.warning("device plugin %s disconnected: %s", self.resource, reason)
        self.close()
        _safe(on_end, reason)


def kubelet_devices(resource: str, msgs: Iterable[pb.Device]) -> tuple[list[Device], list[str]]:
    """One ListAndWatch snapshot as the kubelet takes it (genericDeviceUpdateCallback), plus the
    problems found in it.

    The kubelet validates nothing here: it keys devices by ID in a map, so a repeated ID counts once
    and its last entry wins (kept here at its first position); an empty ID is a device like any other;
    a negative NUMA id (sysfs' -1 passed through) simply never matches a NUMA node. Refusing the whole
    snapshot instead would hide every other device of a plugin the kubelet serves fine, so each of
    these is reported and the snapshot is used.
    """
    where = f"ListAndWatch from the device plugin for {quote(resource)}"
    by_id: dict[str, Device] = {}
    problems: list[str] = []
    for msg in msgs:
        dev = convert.device_from_pb(msg)
        if dev.id in by_id:
            problems.append(
                f"{where}: device ID {quote(dev.id)} is listed twice; the last entry is used, as in the kubelet"
            )
        elif not dev.id:
            problems.append(f"{where}: a device has an empty ID; it is kept, as the kubelet does")
        if dev.topology is not None and any(n < 0 for n in dev.topology):
            problems.append(
                f"{where}: device {quote(dev.id)} has NUMA node ids {list(dev.topology)}; a negative id matches no "
                "NUMA node (a plugin should omit the topology of a device without NUMA affinity)"
            )
        by_id[dev.id] = dev
    return list(by_id.values()), problems


def _safe(fn: Callable[..., object], *args: object) -> None:
    """Run a callback; its exceptions are logged, never propagated into gRPC threads."""
    try:
        fn(*args)
    except Exception:
        log.exception("callback %r failed", fn)
