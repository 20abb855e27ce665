"""A loopback stand-in for the few Kubernetes API calls NFD's topology-updater makes (and nothing else):
its namespace (for the owner reference), the pods PodResources lists (it reads their QoS from the API),
and the NodeResourceTopology it gets, then creates or updates. Every request is recorded; any other
path is answered 404, so an unexpected call shows in `requests` instead of passing unnoticed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

NRT_PREFIX = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
MAX_BODY = 16 << 20  # an NRT is a few kilobytes; this bounds a confused client


class APIServer:
    def __init__(self, pods: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.pods = pods
        self.nrts: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def kubeconfig(self, path: Path) -> Path:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": self.url}}],
            "users": [{"name": "nfd", "user": {}}],
            "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "nfd"}}],
            "current-context": "stand-in",
        }
        path.write_text(json.dumps(doc), encoding="utf-8")  # JSON is YAML: client-go reads it
        return path

    def _answer(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        parts = path.split("?", 1)[0].strip("/").split("/")
        with self.lock:
            self.requests.append((method, path))
            if method == "GET" and parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
                ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": parts[3], "uid": f"uid-{parts[3]}"}}
                return 200, ns
            if method == "GET" and parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
                pod = self.pods.get((parts[3], parts[5]))
                return (200, pod) if pod is not None else not_found("pods", parts[5])
            if "/" + "/".join(parts[:4]) == NRT_PREFIX:
                if method == "GET" and len(parts) == 5:
                    nrt = self.nrts.get(parts[4])
                    return (200, nrt) if nrt is not None else not_found("noderesourcetopologies", parts[4])
                if method in ("POST", "PUT") and body is not None:
                    name = body["metadata"]["name"]
                    body["metadata"].setdefault("resourceVersion", "1")
                    self.nrts[name] = body
                    return (201 if method == "POST" else 200), body
            return not_found("path", path)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    code, doc = 413, status(413, "RequestEntityTooLarge", "body too large")
                else:
                    raw = self.rfile.read(length) if length else b""
                    body = json.loads(raw) if raw else None
                    code, doc = server._answer(self.command, self.path, body)
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # http.server's names
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def do_PUT(self) -> None:
                self._serve()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the requests are recorded in `server.requests`

        return Handler


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message, "reason": reason, "code": code,
    }  # fmt: skip


def not_found(kind: str, name: str) -> tuple[int, dict[str, Any]]:
    return 404, status(404, "NotFound", f'{kind} "{name}" not found')


@contextmanager
def running(pods: dict[tuple[str, str], dict[str, Any]]) -> Iterator[APIServer]:
    api = APIServer(pods)
    api.thread.start()
    try:
        yield api
    finally:
        api.httpd.shutdown()
        api.httpd.server_close()
