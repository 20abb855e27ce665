"""GET /metrics over HTTP (http.server in a daemon thread). Off unless --metrics-address is given:
it is the agent's only TCP listener."""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from numalign.errors import InvalidInputError

log = logging.getLogger("numalign.agent.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_address(address: str) -> tuple[str, int]:
    """"HOST:PORT" or "[v6]:PORT" -> (host, port); port 0 picks a free port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidInputError(
            f"--metrics-address {address!r}: expected HOST:PORT, e.g. 127.0.0.1:10255 or [::1]:10255"
        )
    return host.strip("[]") or "0.0.0.0", int(port)


def _bind_error(host: str, port: int, e: OSError) -> str:
    """Why the listener could not bind, with the fix for that reason (not always "choose a free port")."""
    where = f"--metrics-address {host}:{port}"
    reason = e.strerror or str(e)
    if isinstance(e, socket.gaierror):
        return f"{where}: cannot resolve {host!r} ({reason}); expected an IP address or a resolvable name of this host"
    if e.errno == errno.EADDRINUSE:
        return f"{where}: cannot listen: {reason}; choose a free port (or stop what listens there)"
    if e.errno == errno.EADDRNOTAVAIL:
        return (
            f"{where}: the address {host} is not on this host (bind failed: {reason}); use one of this host's "
            "addresses, e.g. 127.0.0.1, or 0.0.0.0 for all"
        )
    if e.errno == errno.EACCES and port < 1024:
        return f"{where}: cannot listen: {reason}; ports below 1024 need privileges: choose a port >= 1024"
    return f"{where}: cannot listen: {reason}; check the address and port"


class MetricsServer:
    def __init__(self, address: str, render: Callable[[], bytes]) -> None:
        self.host, self.port = parse_address(address)
        self._render = render
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> None:
        render = self._render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                try:
                    body = render()
                except Exception:
                    log.exception("rendering metrics failed")
                    self.send_error(500, "rendering metrics failed")
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("metrics %s: " + format, self.address_string(), *args)

        try:
            self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as e:
            raise InvalidInputError(_bind_error(self.host, self.port, e)) from None
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="numalign-metrics", daemon=True)
        self._thread.start()
        log.info("serving metrics on %s", self.url)

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
