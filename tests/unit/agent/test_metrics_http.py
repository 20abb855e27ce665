"""serve's /metrics listener is bounded: connections served at once, time per connection, and a client that
goes away is not an error of numalign's (no traceback on stderr)."""

from __future__ import annotations

import socket
import struct
import threading
import urllib.request

import pytest

from numalign.agent.metrics_http import MetricsServer


def _started(**kw: float) -> MetricsServer:
    server = MetricsServer("127.0.0.1:0", lambda: b"numalign_up 1\n", **kw)  # type: ignore[arg-type]
    server.start()
    return server


def _get(server: MetricsServer) -> bytes:
    with urllib.request.urlopen(server.url, timeout=30) as answer:
        return bytes(answer.read())


def test_connections_past_the_limit_are_closed_and_the_served_ones_still_answer() -> None:
    server = _started(max_connections=2)
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
    try:
        for s in idle:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")  # a request that never ends: each holds a slot
        extra = socket.create_connection(("127.0.0.1", server.port))
        extra.settimeout(30)
        extra.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert extra.recv(100) == b""  # closed at once, no answer
        extra.close()
        idle.pop().close()  # a slot comes free
        for _ in range(100):  # the freed slot is taken again once its thread has ended
            try:
                if _get(server) == b"numalign_up 1\n":
                    break
            except OSError:
                continue
        else:
            pytest.fail("no answer after a slot came free")
    finally:
        for s in idle:
            s.close()
        server.stop()


def test_an_idle_connection_is_dropped_after_the_timeout() -> None:
    server = _started(timeout=0.2)
    try:
        s = socket.create_connection(("127.0.0.1", server.port))
        s.settimeout(30)
        s.sendall(b"GET /metrics HTTP/1.1\r\n")  # and nothing more
        assert s.recv(100) == b""  # the server gave up on it (before: held its thread for good)
        s.close()
    finally:
        server.stop()


def test_a_client_that_resets_leaves_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    server = _started()
    httpd = server._httpd
    assert httpd is not None
    done = threading.Event()
    handle_error = httpd.handle_error

    def noted(request: object, client_address: object) -> None:
        handle_error(request, client_address)
        done.set()

    httpd.handle_error = noted  # type: ignore[method-assign]
    try:
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"GET /metr")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST: the server's read fails with ConnectionResetError
        assert done.wait(30)
        assert _get(server) == b"numalign_up 1\n"
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err
