"""Unix-socket plumbing shared by every gRPC server and client numalign runs.

Only unix sockets: numalign never opens a TCP listener for these APIs. Sockets are created 0600, or
0660 owned by a group when one is given, so that only the agent's user (and that group) can talk to
the kubelet-side services.
"""

from __future__ import annotations

import grp
import logging
import os
import socket
import stat
import urllib.parse
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from numalign.errors import InvalidInputError, PluginError

log = logging.getLogger("numalign.grpc")

# Linux sun_path is 108 bytes including the terminating NUL.
MAX_UNIX_PATH = 107

# Client channel options: unix sockets only, never through an HTTP proxy from the environment, and the
# authority the kubelet uses when dialing plugins. The first reconnect comes after 0.1 s instead of
# gRPC's 1 s, so a plugin whose socket appears just after it registered is reached promptly.
CHANNEL_OPTIONS: list[tuple[str, str | int]] = [
    ("grpc.default_authority", "localhost"),
    ("grpc.enable_http_proxy", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Each channel gets its own connection. gRPC Python otherwise shares subchannels process-wide by
    # target, so after a plugin is replaced on the same socket path (the old process still running),
    # the new channel would reuse the old process's connection; the kubelet dials afresh each time.
    ("grpc.use_local_subchannel_pool", 1),
]


def unix_target(path: Path) -> str:
    """The gRPC target for a socket file. gRPC parses targets as URIs: '%' would be decoded and '?'
    or '#' would start a query or fragment, so the path is percent-encoded; a Go plugin's socket
    named "a#b.sock" or "50%.sock" is then still the file it created."""
    absolute = path if path.is_absolute() else path.resolve()
    return "unix://" + urllib.parse.quote(str(absolute), safe="/")


def check_dialable(path: Path, what: str) -> None:
    """gRPC's unix resolver splits a target at ',' (a list of addresses), even percent-encoded, so
    such a path cannot be dialed; say so rather than time out."""
    if "," in str(path):
        raise PluginError(
            f"failed to dial {what}: socket path {str(path)!r} contains ','; gRPC cannot dial such a unix "
            "socket path; rename the socket (or its directory) without ','"
        )


def check_socket_path(path: Path, what: str) -> None:
    if len(os.fsencode(str(path))) > MAX_UNIX_PATH:
        raise InvalidInputError(
            f"{what} socket path {str(path)!r} is {len(str(path))} bytes long; unix socket paths are limited "
            f"to {MAX_UNIX_PATH} bytes; choose a shorter directory"
        )


def resolve_group(group: str | int | None) -> int | None:
    """A group name or gid -> gid; None stays None (sockets then are 0600)."""
    if group is None:
        return None
    if isinstance(group, int):
        return group
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise InvalidInputError(
            f"socket group {group!r} does not exist on this host; pass an existing group name or gid"
        ) from None


def secure_socket(path: Path, gid: int | None) -> None:
    """Restrict a freshly bound socket: 0600, or 0660 and group `gid`."""
    if gid is None:
        path.chmod(0o600)
    else:
        os.chown(path, -1, gid)
        path.chmod(0o660)


def socket_in_use(path: Path, timeout: float = 1.0) -> bool:
    """True when a process accepts connections on the unix socket at `path` (a live server, not a
    leftover file: connecting to a leftover is refused)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError:
        return False
    finally:
        s.close()
    return True


def refuse_live_socket(path: Path, what: str) -> None:
    """Stop before taking over a socket another server is still serving: removing it would silently
    cut that server (another `numalign serve`, or the kubelet itself) off from its clients."""
    if socket_in_use(path):
        raise InvalidInputError(
            f"{what} socket {str(path)!r} is in use: another process (the kubelet, another numalign serve "
            "or plugin) is serving on it; stop that process first, or choose another path"
        )


def remove_stale_socket(path: Path, what: str = "server", *, replace_live: bool = False) -> None:
    """Remove `path` if it is a leftover unix socket; refuse to clobber a live one (unless
    `replace_live`) or anything that is not a socket."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISSOCK(st.st_mode):
        if not replace_live:
            refuse_live_socket(path, what)
        path.unlink()
        return
    raise InvalidInputError(
        f"cannot create socket {str(path)!r}: a non-socket file is in the way; move it away or choose "
        "another path"
    )


def start_unix_server(
    path: Path,
    register: Callable[[grpc.Server], None],
    *,
    gid: int | None,
    max_workers: int,
    what: str,
    replace_live: bool = False,
) -> grpc.Server:
    """Bind a gRPC server to a unix socket at `path`, start it and restrict the socket's mode.

    `register` adds the servicers to the server (e.g. a lambda calling add_XServicer_to_server).
    `replace_live`: take the path over even from a running server (a device plugin replacing its
    predecessor does, as upstream plugins remove their socket unconditionally).
    """
    check_socket_path(path, what)
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    remove_stale_socket(path, what, replace_live=replace_live)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"numalign-{what}"),
        options=[("grpc.so_reuseport", 0)],
    )
    register(server)
    # Bind under a restrictive umask so the socket never exists with looser permissions, not even
    # between bind and the chmod below (umask is process-wide, but only tightens, and only briefly).
    old_umask = os.umask(0o177 if gid is None else 0o117)
    try:
        server.add_insecure_port(unix_target(path))
    except RuntimeError as e:
        raise PluginError(f"cannot listen on {what} socket {str(path)!r}: {e}") from e
    finally:
        os.umask(old_umask)
    server.start()
    secure_socket(path, gid)
    log.info("serving %s on unix://%s", what, path)
    return server


def dial(path: Path, timeout: float, what: str = "device plugin", *, wait_for_socket: bool = False) -> grpc.Channel:
    """Open a channel to a unix socket and wait (at most `timeout` s) until it is connected.

    Mirrors the kubelet's blocking dial (grpc.WithBlock, 10 s): with `wait_for_socket` a socket that
    does not exist yet, or does not answer yet, is retried until the deadline, as the kubelet does
    for a plugin that is still starting. Without it, a missing socket fails at once (the plugin SDK
    uses that for kubelet.sock). The timeout text starts with upstream's "failed to dial device
    plugin: context deadline exceeded", so log scrapers written for the kubelet keep working.
    """
    check_dialable(path, what)
    if not wait_for_socket and not path.exists():
        raise PluginError(f"failed to dial {what}: socket {str(path)!r} does not exist")
    channel = grpc.insecure_channel(unix_target(path), options=CHANNEL_OPTIONS)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        channel.close()
        state = "does not exist" if not path.exists() else "is not served by a gRPC server"
        hint = "; a device plugin must serve its socket before it calls Register" if what == "device plugin" else ""
        raise PluginError(
            f"failed to dial {what}: context deadline exceeded (socket {str(path)!r} {state} after "
            f"{timeout:g}s{hint})"
        ) from None
    return channel
