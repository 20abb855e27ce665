"""GET /metrics over HTTP (http.server in a daemon thread). Off unless --metrics-address is given:
it is the agent's only TCP listener.

Bounded as every input is (docs/bounded-input.md): at most MAX_CONNECTIONS connections are served at once
(one more is closed at once: a scraper retries), each waits at most CONNECTION_TIMEOUT seconds for its
request and for a write, and a client that goes away mid-request is its own business (a debug line, never
a traceback on serve's stderr). Before, every idle connection held a thread for good (8,000 of them: 4,400
threads, 200 MB) and each reset printed socketserver's traceback."""

from __future__ import annotations

import errno
import logging
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from numalign.errors import InvalidInputError

log = logging.getLogger("numalign.agent.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A Prometheus server scrapes with one connection; a few more (curl, a second scraper) are plenty.
MAX_CONNECTIONS = 16
# Seconds a connection may take to send its request or to take the answer (a scrape takes milliseconds).
CONNECTION_TIMEOUT = 30.0


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


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer with a bound on the connections served at once and one-line errors."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], limit: int) -> None:
        super().__init__(address, handler)
        self.limit = limit
        self.slots = threading.BoundedSemaphore(limit)
        self.refused = 0  # connections closed at once because `limit` were being served

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            log.debug("metrics: %s connections open already; closing one from %s", self.limit, client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started: its slot is free again
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that reset or left mid-answer, or timed out: not numalign's error.
        exc = sys.exc_info()[1]
        log.debug("metrics: connection from %s ended: %s", client_address, exc.__class__.__name__ if exc else "?")


class MetricsServer:
    def __init__(self, address: str, render: Callable[[], bytes], *, max_connections: int = MAX_CONNECTIONS,
                 timeout: float = CONNECTION_TIMEOUT) -> None:
        self.host, self.port = parse_address(address)
        self._render = render
        self._limit = max_connections
        self._timeout = timeout
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> None:
        render = self._render

        class Handler(BaseHTTPRequestHandler):
            timeout = self._timeout  # StreamRequestHandler sets it on the socket: reads and writes

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
            self._httpd = _Server((self.host, self.port), Handler, self._limit)
        except OSError as e:
            raise InvalidInputError(_bind_error(self.host, self.port, e)) from None
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
