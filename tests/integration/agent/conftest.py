"""Fixtures for the node-agent integration tests: a short private directory (unix socket paths must
stay under 108 bytes), agent options on the built-in dual-socket machine with a NUMA-aligned kubelet
configuration, and polling helpers with timeouts."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.agent import Agent, AgentOptions
from numalign.agent.status import read_status
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.machine.examples import example

DATA = Path(__file__).resolve().parents[3] / "src" / "numalign" / "data"
GPU = "example.com/gpu"


@dataclass
class Layout:
    root: Path

    @property
    def plugins(self) -> Path:
        return self.root / "dp"

    @property
    def pr_socket(self) -> Path:
        return self.root / "pr" / "kubelet.sock"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def options(self, **overrides: Any) -> AgentOptions:
        config = config_from_yaml((DATA / "example-kubelet-config.yaml").read_text(encoding="utf-8"), "cfg")
        config.validate()
        kw: dict[str, Any] = {
            "machine": example("dual-socket"),
            "config": config,
            "device_plugin_dir": self.plugins,
            "pod_resources_socket": self.pr_socket,
            "manifests": self.manifests,
            "state_dir": self.state,
            "poll_interval": 0.05,
            "capacity_interval": 0.1,
            "dial_timeout": 0.5,  # local unix sockets answer in milliseconds
            "call_timeout": 3.0,
            # These tests address pods by their manifest names; test_agent_kubelet_defaults.py covers
            # the kubelet's `<name>-<node name>` default.
            "mirror_pod_names": False,
        }
        kw.update(overrides)
        return AgentOptions(**kw)

    def status(self) -> dict[str, Any]:
        return read_status(self.state) or {"pods": {}, "manifests": {}, "resources": {}, "faults": {}}

    def write_manifest(self, name: str, text: str) -> Path:
        self.manifests.mkdir(parents=True, exist_ok=True)
        path = self.manifests / name
        tmp = self.manifests / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # atomic, so the watcher never reads half a file
        return path


@pytest.fixture
def layout() -> Iterator[Layout]:
    d = Path(tempfile.mkdtemp(prefix="nag-", dir="/tmp"))
    try:
        yield Layout(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def agent(layout: Layout) -> Iterator[Agent]:
    a = Agent(layout.options())
    a.start()
    try:
        yield a
    finally:
        a.stop()


STUCK_S = 60.0


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    """Poll until `predicate()` is truthy and return its value; AssertionError after `timeout`, which is
    a bound for something stuck, never a measure: at least STUCK_S, as shared CI machines run at load 25
    and a healthy agent's answer then takes seconds."""
    deadline = time.monotonic() + max(timeout, STUCK_S)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {max(timeout, STUCK_S):g}s waiting for {what}")
        time.sleep(0.03)


def pod_status(layout: Layout, name: str) -> dict[str, Any] | None:
    return next((p for p in layout.status()["pods"].values() if p["name"] == name), None)


def wait_pod(layout: Layout, name: str, status: str, timeout: float = 5.0) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        p = pod_status(layout, name)
        return p if p is not None and p["status"] == status else None

    try:
        result: dict[str, Any] = wait_for(check, f"pod {name} {status}", timeout)
    except AssertionError:
        raise AssertionError(f"pod {name} not {status}; status file: {json.dumps(layout.status(), indent=1)}") from None
    return result


@pytest.fixture
def pr_stub(layout: Layout) -> Iterator[Callable[[], pr_grpc.PodResourcesListerStub]]:
    channels: list[grpc.Channel] = []

    def make() -> pr_grpc.PodResourcesListerStub:
        ch = grpc.insecure_channel(f"unix://{layout.pr_socket}")
        channels.append(ch)
        return pr_grpc.PodResourcesListerStub(ch)

    yield make
    for ch in channels:
        ch.close()


def gpu_pod(name: str, gpus: int = 1, cpus: int = 4, extra: str = "") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml}}
spec:
  containers:
  - name: main
    image: x
    resources:
      limits: {{cpu: "{cpus}", memory: 4Gi, {GPU}: "{gpus}"{extra}}}
"""
