"""The device-plugin side of the v1beta1 API: serve DevicePlugin, register with the kubelet, follow
kubelet restarts.

A kubelet restart deletes every socket in the device-plugin directory, including the plugin's own,
and recreates kubelet.sock; plugins are expected to notice and register again. `DevicePlugin` polls
kubelet.sock's identity (inode, mtime) with the standard library only, and on a change re-creates its
own socket if it vanished, then registers again (retrying on each poll until the kubelet accepts).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import grpc

from numalign.adapters.grpc import convert
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.registration import DEFAULT_DEVICE_PLUGIN_DIR, KUBELET_SOCKET, VERSION
from numalign.adapters.grpc.sockets import dial, start_unix_server
from numalign.errors import InvalidInputError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device, DevicePluginOptions
from numalign.k8s.resources import is_extended_resource_name

log = logging.getLogger("numalign.deviceplugin")

PreferredFn = Callable[[Sequence[str], Sequence[str], int], Sequence[str]]
AllocateFn = Callable[[Sequence[str]], ContainerAllocateResponse]
PreStartFn = Callable[[Sequence[str]], None]

# Register makes the kubelet dial back and call GetDevicePluginOptions (10 s dial timeout upstream).
REGISTER_TIMEOUT_S = 20.0
WATCH_INTERVAL_S = 1.0


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


class DevicePlugin:
    """One device plugin for one extended resource.

    `devices` is the initial ListAndWatch snapshot. The optional callbacks implement the matching
    RPCs; the plugin's DevicePluginOptions follow them (GetPreferredAllocation is offered only with
    `get_preferred_allocation`, PreStartContainer required only with `pre_start`). Callbacks may raise
    any exception: its text goes back to the kubelet as the RPC error.
    """

    def __init__(
        self,
        resource_name: str,
        devices: Iterable[Device],
        *,
        socket_dir: str | os.PathLike[str] = DEFAULT_DEVICE_PLUGIN_DIR,
        socket_name: str | None = None,
        kubelet_socket: str = KUBELET_SOCKET,
        get_preferred_allocation: PreferredFn | None = None,
        allocate: AllocateFn | None = None,
        pre_start: PreStartFn | None = None,
        watch_interval: float = WATCH_INTERVAL_S,
        register_timeout: float = REGISTER_TIMEOUT_S,
    ) -> None:
        if not is_extended_resource_name(resource_name):
            raise InvalidInputError(
                f"device plugin resource name {resource_name!r} is not an extended resource name; use "
                "'<domain>/<name>' with a domain outside kubernetes.io, e.g. 'example.com/gpu'"
            )
        self.resource_name = resource_name
        self.socket_dir = Path(socket_dir).absolute()
        default_name = resource_name.replace("/", "_").replace(".", "-") + ".sock"
        if socket_name is not None and (
            not socket_name or "/" in socket_name or ".." in socket_name or socket_name == kubelet_socket
        ):
            raise InvalidInputError(
                f"device plugin socket name {socket_name!r} is invalid: it must be a bare file name inside "
                f"{socket_dir} (no '/', no '..', not {kubelet_socket}); the kubelet refuses anything else"
            )
        self.socket_path = self.socket_dir / (socket_name or default_name)
        self.kubelet_socket = self.socket_dir / kubelet_socket
        self.options = DevicePluginOptions(
            pre_start_required=pre_start is not None,
            get_preferred_allocation_available=get_preferred_allocation is not None,
        )
        self._preferred = get_preferred_allocation
        self._allocate = allocate
        self._pre_start = pre_start
        self.watch_interval = watch_interval
        self.register_timeout = register_timeout
        self._cond = threading.Condition()
        self._devices: tuple[Device, ...] = ()
        self._generation = 0
        self._stopping = False
        self._server: grpc.Server | None = None
        self._watcher: threading.Thread | None = None
        self._stop_watch = threading.Event()
        self._registered_identity: tuple[int, int, int] | None = None
        self.registrations = 0  # successful Register calls, for callers that want to observe re-registration
        self.update_devices(devices)

    # -- devices -----------------------------------------------------------------------------------

    @property
    def devices(self) -> tuple[Device, ...]:
        with self._cond:
            return self._devices

    def update_devices(self, devices: Iterable[Device]) -> None:
        """Replace the device list and push it to every ListAndWatch stream."""
        devs = tuple(devices)
        # Reuse the kubelet-side validation so a plugin never sends what numalign's kubelet side drops.
        try:
            convert.devices_from_pb(self.resource_name, (convert.device_to_pb(d) for d in devs))
        except PluginError as e:
            raise InvalidInputError(f"update_devices: {e}") from None
        with self._cond:
            self._devices = devs
            self._generation += 1
            self._cond.notify_all()

    def set_health(self, device_id: str, health: str) -> None:
        """Change one device's health and push the new list."""
        with self._cond:
            devs = self._devices
        if device_id not in {d.id for d in devs}:
            raise InvalidInputError(
                f"set_health: unknown device {device_id!r}; known: {[d.id for d in devs]}"
            )
        self.update_devices(Device(d.id, health, d.topology) if d.id == device_id else d for d in devs)

    # -- lifecycle ---------------------------------------------------------------------------------

    def serve(self) -> None:
        """Serve DevicePlugin on `socket_path` (created 0600). Idempotent while serving."""
        if self._server is not None:
            return
        with self._cond:
            self._stopping = False
        self._server = start_unix_server(
            self.socket_path,
            lambda s: pb_grpc.add_DevicePluginServicer_to_server(_Servicer(self), s),
            gid=None,
            max_workers=8,
            what=f"device plugin {self.resource_name}",
            replace_live=True,  # a new plugin process takes over from one still running, as upstream's do
        )

    def register(self) -> None:
        """Call Registration.Register on kubelet.sock; raise PluginError with the kubelet's answer."""
        identity = _identity(self.kubelet_socket)
        channel = dial(self.kubelet_socket, min(self.register_timeout, 5.0), what="kubelet")
        try:
            stub = pb_grpc.RegistrationStub(channel)
            req = pb.RegisterRequest(
                version=VERSION,
                endpoint=self.socket_path.name,
                resource_name=self.resource_name,
                options=convert.options_to_pb(self.options),
            )
            stub.Register(req, timeout=self.register_timeout)
        except grpc.RpcError as e:
            details = e.details() if isinstance(e, grpc.Call) else str(e)
            raise PluginError(
                f"registration of device plugin {self.resource_name!r} with {self.kubelet_socket} failed: {details}"
            ) from None
        finally:
            channel.close()
        self._registered_identity = identity
        self.registrations += 1
        log.info("registered device plugin %s with %s", self.resource_name, self.kubelet_socket)

    def start(self) -> None:
        """serve(), register(), then watch kubelet.sock and re-register whenever it is recreated."""
        self.serve()
        self.register()
        self.watch()

    def watch(self) -> None:
        """Start the kubelet.sock watcher thread (idempotent)."""
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._stop_watch.clear()
        self._watcher = threading.Thread(
            target=self._watch_loop, name=f"numalign-plugin-watch-{self.resource_name}", daemon=True
        )
        self._watcher.start()

    def stop(self) -> None:
        """End ListAndWatch streams, stop serving, remove the socket. Idempotent."""
        self._stop_watch.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
        self._stop_server()

    def __enter__(self) -> DevicePlugin:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------------------

    def _stop_server(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        server, self._server = self._server, None
        if server is not None:
            server.stop(0.5).wait(5)
        self.socket_path.unlink(missing_ok=True)

    def _watch_loop(self) -> None:
        while not self._stop_watch.wait(self.watch_interval):
            current = _identity(self.kubelet_socket)
            if current is None or current == self._registered_identity:
                continue
            log.info("%s was recreated; registering %s again", self.kubelet_socket, self.resource_name)
            try:
                if not self.socket_path.exists():
                    # The kubelet removed our socket at its start: serve again on a fresh one.
                    self._stop_server()
                    self.serve()
                self.register()
            except Exception as e:  # retried on the next poll
                log.warning("re-registration of %s failed, will retry: %s", self.resource_name, e)

    def _list_and_watch(self, context: grpc.ServicerContext) -> Iterator[pb.ListAndWatchResponse]:
        context.add_callback(self._wake)
        sent = -1
        while True:
            with self._cond:
                while self._generation == sent and not self._stopping and context.is_active():
                    self._cond.wait(1.0)
                if self._stopping or not context.is_active():
                    return
                sent, devices = self._generation, self._devices
            yield pb.ListAndWatchResponse(devices=[convert.device_to_pb(d) for d in devices])

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _check_known(self, call: str, ids: Sequence[str]) -> None:
        known = {d.id for d in self.devices}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise PluginError(f"{call}: unknown devices {unknown} for resource {self.resource_name}")


class _Servicer(pb_grpc.DevicePluginServicer):
    def __init__(self, plugin: DevicePlugin) -> None:
        self._p = plugin

    def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        return convert.options_to_pb(self._p.options)

    def ListAndWatch(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        return self._p._list_and_watch(context)

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        resp = pb.PreferredAllocationResponse()
        for creq in request.container_requests:
            chosen: Sequence[str] = []
            if self._p._preferred is not None:
                try:
                    chosen = self._p._preferred(
                        list(creq.available_deviceIDs),
                        list(creq.must_include_deviceIDs),
                        creq.allocation_size,
                    )
                except Exception as e:
                    log.exception("GetPreferredAllocation callback failed")
                    context.abort(grpc.StatusCode.UNKNOWN, f"GetPreferredAllocation failed: {e}")
            resp.container_responses.add(deviceIDs=list(chosen))
        return resp

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        resp = pb.AllocateResponse()
        for creq in request.container_requests:
            ids = list(creq.devices_ids)
            try:
                self._p._check_known("Allocate", ids)
                out = self._p._allocate(ids) if self._p._allocate is not None else ContainerAllocateResponse()
            except Exception as e:
                log.error("Allocate of %s failed: %s", ids, e)
                context.abort(grpc.StatusCode.UNKNOWN, str(e))
            resp.container_responses.append(convert.allocate_response_to_pb(out))
        return resp

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        ids = list(request.devices_ids)
        try:
            self._p._check_known("PreStartContainer", ids)
            if self._p._pre_start is not None:
                self._p._pre_start(ids)
        except Exception as e:
            log.error("PreStartContainer of %s failed: %s", ids, e)
            context.abort(grpc.StatusCode.UNKNOWN, str(e))
        return pb.PreStartContainerResponse()
