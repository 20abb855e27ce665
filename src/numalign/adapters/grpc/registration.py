"""The kubelet's device-plugin Registration service (upstream devicemanager/plugin/v1beta1 server.go,
handler.go), served on <dir>/kubelet.sock.

`RegistrationServer` validates each RegisterRequest as the kubelet does (same error texts), dials the
plugin, reads its options, follows its ListAndWatch stream and reports everything to one
`RegistrationListener`, so the node agent can feed the device manager without this module knowing
about it:

    server = RegistrationServer(dir, listener=agent_side)
    server.start()      # cleans stale sockets, serves kubelet.sock (0600)
    ...
    server.stop()

As upstream, Register answers only after the plugin was dialed (blocking, up to 10 s, waiting for a
socket that is not there or not served yet) and its GetDevicePluginOptions answered, both bounded
by the Register call's own deadline; a plugin must therefore serve its socket before it registers.
The endpoint is joined onto the directory as Go's filepath.Join does ("sub/p.sock", "/p.sock" and
"a..b.sock" all name sockets inside it).

Differences from upstream, on purpose: an endpoint that resolves outside the directory, to the
directory itself, to kubelet.sock or to the checkpoint is refused at once (upstream dials it and
fails later, or dials itself); a re-registration closes the previous client instead of leaving it
running (upstream's old client, when it ends, disconnects the *new* one: a known race); a
registration that fails to connect leaves an already registered plugin for the same resource in
place (upstream forgets it). A ListAndWatch update is taken as the kubelet takes it (repeated IDs
count once, empty IDs and negative NUMA ids pass); such oddities are also reported (on_malformed).
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Protocol

import grpc

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as pb
from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.plugin_client import CALL_TIMEOUT_S, DIAL_TIMEOUT_S, PluginEndpointClient
from numalign.adapters.grpc.sockets import MAX_UNIX_PATH, refuse_live_socket, resolve_group, start_unix_server
from numalign.adapters.statedir.layout import DEVICE_MANAGER_CHECKPOINT_FILE
from numalign.errors import PluginError
from numalign.k8s.deviceplugin import Device
from numalign.k8s.resources import is_extended_resource_name
from numalign.kubelet.devicemanager.endpoint import Endpoint
from numalign.limits import clip, go_quote
from numalign.paths import DEFAULT_DEVICE_PLUGIN_DIR as DEFAULT_DEVICE_PLUGIN_DIR  # re-export

log = logging.getLogger("numalign.grpc.registration")

VERSION = "v1beta1"
SUPPORTED_VERSIONS: tuple[str, ...] = ("v1beta1",)
KUBELET_SOCKET = "kubelet.sock"
# Register blocks while the plugin is dialed (up to the 10 s dial timeout). The kubelet serves each
# call on its own goroutine, so a few plugins that register before serving never delay the others;
# threads here are started only as calls arrive, so a generous cap costs nothing when idle.
REGISTER_WORKERS = 64



class RegistrationListener(Protocol):
    """What a RegistrationServer reports, from gRPC or stream threads (exceptions are logged)."""

    def on_request(self, resource: str) -> None:
        """Every Register RPC, before validation (kubelet_device_plugin_registration_total)."""

    def on_register(self, resource: str, endpoint: Endpoint) -> None:
        """A plugin connected; `endpoint` implements Endpoint. Raising PluginError refuses the
        registration with that message."""

    def on_devices(self, resource: str, devices: list[Device]) -> None:
        """A ListAndWatch snapshot (replaces the previous one)."""

    def on_disconnect(self, resource: str) -> None:
        """The current plugin for `resource` went away (its stream ended)."""

    def on_refused(self, resource: str, message: str) -> None:
        """A RegisterRequest was refused."""

    def on_malformed(self, resource: str, message: str) -> None:
        """A ListAndWatch update had an odd entry (used as the kubelet does)."""


def cleanup_plugin_directory(directory: Path, keep: Collection[str] = (DEVICE_MANAGER_CHECKPOINT_FILE,)) -> list[Path]:
    """Remove every unix socket in `directory` except the names in `keep` (upstream
    CleanupPluginDirectory). Regular files and directories stay. Returns what was removed.

    This is what makes plugins re-register after a restart: they watch kubelet.sock, and their own
    sockets disappearing tells them the kubelet is gone.
    """
    removed: list[Path] = []
    for entry in sorted(directory.iterdir()):
        if entry.name in keep:
            continue
        try:
            mode = entry.stat().st_mode  # follows symlinks, as upstream's os.Stat does
        except OSError as e:
            log.error("failed to stat %s during plugin directory cleanup: %s", entry, e)
            continue
        if not stat.S_ISSOCK(mode):
            continue
        try:
            entry.unlink()
            removed.append(entry)
        except OSError as e:
            log.error("failed to remove stale socket %s: %s", entry, e)
    if removed:
        log.info("removed %d stale socket(s) from %s", len(removed), directory)
    return removed


class RegistrationRefusedError(PluginError):
    """A RegisterRequest was refused; the message is what the plugin receives."""


class _Servicer(pb_grpc.RegistrationServicer):
    def __init__(self, owner: RegistrationServer) -> None:
        self._owner = owner

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        try:
            # The kubelet connects under the Register call's context: its deadline bounds the dial and
            # GetDevicePluginOptions, and a call the plugin gave up on registers nothing.
            self._owner.register(
                request.version,
                request.resource_name,
                request.endpoint,
                time_limit=context.time_remaining(),
                is_active=context.is_active,
            )
        except PluginError as e:
            # Go returns a plain error from the handler: gRPC code Unknown with the error text.
            context.abort(grpc.StatusCode.UNKNOWN, clip(str(e)))
        return pb.Empty()


class RegistrationServer:
    """Serves v1beta1.Registration on `directory`/kubelet.sock and manages one client per resource,
    reporting to `listener` (RegistrationListener) when one is given."""

    def __init__(
        self,
        directory: Path = DEFAULT_DEVICE_PLUGIN_DIR,
        *,
        listener: RegistrationListener | None = None,
        socket_group: str | int | None = None,
        socket_name: str = KUBELET_SOCKET,
        keep_files: Collection[str] = (DEVICE_MANAGER_CHECKPOINT_FILE,),
        dial_timeout: float = DIAL_TIMEOUT_S,
        call_timeout: float = CALL_TIMEOUT_S,
        max_workers: int = REGISTER_WORKERS,
    ) -> None:
        self.directory = Path(directory).absolute()
        self.socket_path = self.directory / socket_name
        self._listener = listener
        self._gid = resolve_group(socket_group)
        self._keep = frozenset(keep_files)
        self.dial_timeout = dial_timeout
        self.call_timeout = call_timeout
        self._max_workers = max_workers
        self._clients: dict[str, PluginEndpointClient] = {}
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the directory (0750), remove stale sockets, serve kubelet.sock."""
        if self._server is not None:
            return
        self.directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        # Before the cleanup removes it with the plugins' sockets: never take over a live kubelet.sock.
        refuse_live_socket(self.socket_path, "device-plugin registration")
        cleanup_plugin_directory(self.directory, self._keep)
        self._server = start_unix_server(
            self.socket_path,
            lambda s: pb_grpc.add_RegistrationServicer_to_server(_Servicer(self), s),
            gid=self._gid,
            max_workers=self._max_workers,
            what="device-plugin registration",
        )

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving and close every plugin client (no on_disconnect callbacks). Idempotent."""
        server, self._server = self._server, None
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for c in clients:
            c.close()
        if server is not None:
            server.stop(grace).wait(grace + 5)
            try:
                if stat.S_ISSOCK(self.socket_path.lstat().st_mode):
                    self.socket_path.unlink()
            except FileNotFoundError:
                pass
            log.info("stopped device-plugin registration server on %s", self.socket_path)

    def __enter__(self) -> RegistrationServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- queries -----------------------------------------------------------------------------------

    def endpoint(self, resource: str) -> PluginEndpointClient | None:
        with self._lock:
            return self._clients.get(resource)

    def resources(self) -> list[str]:
        with self._lock:
            return sorted(self._clients)

    # -- registration ------------------------------------------------------------------------------

    def validate(self, version: str, resource: str, endpoint: str) -> Path:
        """Raise RegistrationRefusedError with the kubelet's error text if the request is not acceptable;
        return the plugin's socket path. Names are quoted by limits.go_quote, of a bounded prefix: a 10 kB
        name echoed whole would push the error past gRPC's metadata limit, and the plugin would see
        RESOURCE_EXHAUSTED instead."""
        if version not in SUPPORTED_VERSIONS:
            # upstream errUnsupportedVersion, "%q" of the SupportedVersions array
            raise RegistrationRefusedError(
                f"requested API version {go_quote(version)} is not supported by kubelet. Supported version "
                f"is [{' '.join(go_quote(v) for v in SUPPORTED_VERSIONS)}]"
            )
        if not is_extended_resource_name(resource):
            raise RegistrationRefusedError(f"the ResourceName {go_quote(resource)} is invalid")
        return self.resolve_endpoint(resource, endpoint)

    def resolve_endpoint(self, resource: str, endpoint: str) -> Path:
        """<directory>/<endpoint> as Go's filepath.Join builds it (cleaned; a leading '/' does not make
        it absolute), refused when it is not a socket path inside the directory."""
        directory = posixpath.normpath(str(self.directory))  # a --device-plugin-dir may hold "..", too
        target = posixpath.normpath(directory + "/" + endpoint)

        def refuse(why: str) -> RegistrationRefusedError:
            return RegistrationRefusedError(
                f"the endpoint {go_quote(endpoint)} of device plugin {go_quote(resource)} is invalid: {why}"
            )

        if not endpoint or "\x00" in endpoint:
            raise refuse(
                f"it is {'empty' if not endpoint else 'a name with a NUL byte'}; send the file name of the plugin's "
                f"socket in {directory}"
            )
        if not target.startswith(directory.rstrip("/") + "/"):
            raise refuse(
                f"it resolves to {target}, not to a socket inside {directory}; send the file name of the "
                "plugin's socket in that directory"
            )
        path = Path(target)
        if path.parent == Path(directory) and (path.name == self.socket_path.name or path.name in self._keep):
            raise refuse(f"{path.name} is the kubelet's own file, not a plugin socket; use another file name")
        if len(os.fsencode(target)) > MAX_UNIX_PATH:
            raise refuse(f"the socket path would exceed {MAX_UNIX_PATH} bytes; use a shorter file name")
        return path

    def register(
        self,
        version: str,
        resource: str,
        endpoint: str,
        *,
        time_limit: float | None = None,
        is_active: Callable[[], bool] | None = None,
    ) -> PluginEndpointClient:
        """Handle one registration: validate, dial, fetch options, start ListAndWatch.

        `time_limit` (seconds left of the Register call) bounds the dial and the options call;
        `is_active` tells whether the plugin is still waiting for the answer. Raises PluginError
        (RegistrationRefusedError for a bad request) with the text the plugin gets.
        """
        log.info("got registration request from device plugin with resource %s", go_quote(resource))
        self._notify(lambda x: x.on_request(resource))
        try:
            socket_path = self.validate(version, resource, endpoint)
        except RegistrationRefusedError as e:
            log.error("bad registration request from device plugin with resource %s: %s", go_quote(resource), e)
            refused = str(e)
            self._notify(lambda x: x.on_refused(resource, refused))
            raise
        client = PluginEndpointClient(
            resource,
            socket_path,
            dial_timeout=self.dial_timeout,
            call_timeout=self.call_timeout,
        )
        try:
            client.connect(time_limit)
            if is_active is not None and not is_active():
                # upstream's context is gone by now too, so its dial or options call fails
                raise PluginError("context canceled: the plugin abandoned its Register call")
            if self._listener is not None:
                self._listener.on_register(resource, client)
        except Exception as e:
            client.close()
            log.error("error connecting to device plugin client for %s: %s", resource, e)
            failed = str(e)
            self._notify(lambda x: x.on_refused(resource, failed))
            if isinstance(e, PluginError):
                raise
            raise PluginError(f"device plugin {go_quote(resource)} could not be registered: {e}") from e
        with self._lock:
            old = self._clients.get(resource)
            self._clients[resource] = client
        if old is not None:
            log.info(
                "device plugin %s re-registered on %s; closing the previous endpoint %s",
                resource,
                endpoint,
                old.socket_path.name,
            )
            old.close()
        client.start_list_and_watch(
            on_devices=lambda devs: self._devices(client, devs),
            on_end=lambda reason: self._ended(client, reason),
            on_malformed=lambda msg: self._notify(lambda x: x.on_malformed(resource, msg)),
        )
        log.info("connected to device plugin %s on %s (options: %s)", resource, endpoint, client.options)
        return client

    # -- stream events -----------------------------------------------------------------------------

    def _is_current(self, client: PluginEndpointClient) -> bool:
        with self._lock:
            return self._clients.get(client.resource) is client

    def _devices(self, client: PluginEndpointClient, devices: list[Device]) -> None:
        # A replaced client's last messages must not overwrite the new plugin's inventory.
        if self._is_current(client) and self._listener is not None:
            self._listener.on_devices(client.resource, devices)

    def _ended(self, client: PluginEndpointClient, reason: str) -> None:
        with self._lock:
            current = self._clients.get(client.resource) is client
            if current:
                del self._clients[client.resource]
        if current:
            # The client said it at warning level already (plugin_client: the same words), just before
            # calling this; a second warning printed every disconnect twice.
            log.debug("device plugin %s disconnected: %s", client.resource, reason)
            self._notify(lambda x: x.on_disconnect(client.resource))

    def _notify(self, report: Callable[[RegistrationListener], None]) -> None:
        """Report to the listener; its failure is logged, never the server's."""
        if self._listener is None:
            return
        try:
            report(self._listener)
        except Exception:
            log.exception("the registration listener failed")
