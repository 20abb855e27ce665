"""The third-party peers of interop/ (built once per source digest) and a real `numalign serve` process
for them to talk to, in a short private directory (unix socket paths must stay under 108 bytes)."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GO_DIR = ROOT / "interop"
BUILD = GO_DIR / ".build"
DATA = ROOT / "src" / "numalign" / "data"
NODE = "node-a"


def source_digest() -> str:
    """A digest of the peers' sources and module files (checkouts and rebases change mtimes only)."""
    h = hashlib.sha256()
    files = [*GO_DIR.glob("*/*.go"), *GO_DIR.glob("go.*"), *GO_DIR.glob("nfd/go.*"), GO_DIR / "build"]
    for p in sorted(files):
        h.update(str(p.relative_to(GO_DIR)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def binary(peer: str) -> Path:
    """The built peer; built first when missing or built from other sources."""
    digest = source_digest()
    stamp = BUILD / f"{peer}.digest"
    if not (BUILD / peer).exists() or not stamp.exists() or stamp.read_text() != digest:
        subprocess.run([str(GO_DIR / "build"), peer], check=True)
        stamp.write_text(digest)
    return BUILD / peer


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll until `predicate()` is truthy and return its value; AssertionError after `timeout` (a bound
    for a stuck peer, not a measure: every wait here is for a file or a content, never for a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


class Serve:
    """`numalign serve` as a process on the built-in dual-socket machine, restartable on the same dirs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.plugins = root / "dp"
        self.pr_socket = root / "pr" / "kubelet.sock"
        self.manifests = root / "manifests"
        self.state = root / "state"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def kubelet_socket(self) -> Path:
        return self.plugins / "kubelet.sock"

    def start(self) -> None:
        self.starts += 1
        cmd = [
            sys.executable, "-m", "numalign.cli.main", "serve", "--machine", "dual-socket",
            "--config", str(DATA / "example-kubelet-config.yaml"),
            "--device-plugin-dir", str(self.plugins), "--pod-resources-socket", str(self.pr_socket),
            "--manifests", str(self.manifests), "--state-dir", str(self.state),
            "--hostname-override", NODE,
        ]  # fmt: skip
        with (self.root / f"serve-{self.starts}.log").open("wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.kubelet_socket.is_socket() and self.pr_socket.is_socket(), "serve's sockets")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"serve did not stop on SIGTERM; log: {self.log()}") from None
        self.proc = None
        assert code == 0, self.log()

    def log(self) -> str:
        return (self.root / f"serve-{self.starts}.log").read_text(encoding="utf-8", errors="replace")

    def status(self) -> dict[str, Any]:
        path = self.state / "numalign_status.json"
        try:
            doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return doc

    def write_manifest(self, name: str, text: str) -> None:
        tmp = self.manifests / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(self.manifests / name)  # atomic: serve never reads half a file

    def pods(self) -> dict[str, Any]:
        """`numalign pods --state-dir ... -o json`, as a user would run it."""
        out = subprocess.run(
            [sys.executable, "-m", "numalign.cli.main", "pods", "--state-dir", str(self.state), "-o", "json"],
            check=True, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc

    def wait_pod(self, name: str, status: str = "admitted") -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            return next(
                (p for p in self.status().get("pods", {}).values() if p["name"] == name and p["status"] == status),
                None,
            )

        try:
            found: dict[str, Any] = wait_for(check, f"pod {name} {status}")
        except AssertionError:
            raise AssertionError(f"pod {name} not {status}; status: {self.status()}; log: {self.log()}") from None
        return found


def private_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="nip-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def pod(name: str, namespace: str, limits: str) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  containers:
  - name: main
    image: x
    resources:
      limits: {{{limits}}}
"""


class Stub:
    """The kubelet's own device-plugin stub (interop/dpstub) as a process, with its event lines."""

    def __init__(self, serve: Serve, devices: str, name: str = "stub") -> None:
        self.serve = serve
        self.events_path = serve.root / f"{name}.events"
        self.log_path = serve.root / f"{name}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(binary("dpstub")), "-plugin-dir", str(serve.plugins), "-devices", devices,
                 "-events", str(self.events_path), "-endpoint", f"{name}.sock"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        try:
            lines = self.events_path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        got = [json.loads(line) for line in lines]  # each line is written whole, then synced
        return [e for e in got if kind is None or e["event"] == kind]

    def wait_event(self, kind: str, count: int = 1) -> list[dict[str, Any]]:
        try:
            found: list[dict[str, Any]] = wait_for(
                lambda: len(self.events(kind)) >= count and self.events(kind), f"{count} {kind} event(s)"
            )
        except AssertionError:
            raise AssertionError(f"no {kind} event; stub log: {self.log()}; serve log: {self.serve.log()}") from None
        return found

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
