"""`numalign pods --report` and its terminal picture, from the status of a real agent (in-process, real
manifest directory and state files): the pods drawn on the machine the agent recorded."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import Browser
from support.pages import boxes, numalign

from numalign.agent import Agent, AgentOptions
from numalign.agent.status import read_status
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.machine.examples import example

DATA = Path(__file__).resolve().parents[3] / "src" / "numalign" / "data"
POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: team}}
spec:
  containers:
  - name: main
    image: busybox
    resources:
      limits: {{cpu: "{cpu}", memory: 1Gi}}
"""


@pytest.fixture
def state() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="nrep-", dir="/tmp"))  # unix socket paths stay short
    config = config_from_yaml((DATA / "example-kubelet-config.yaml").read_text(encoding="utf-8"), "cfg")
    manifests = root / "manifests"
    manifests.mkdir()
    (manifests / "small.yaml").write_text(POD.format(name="small", cpu=4), encoding="utf-8")
    (manifests / "wide.yaml").write_text(POD.format(name="wide", cpu=40), encoding="utf-8")  # > one NUMA node
    agent = Agent(AgentOptions(
        machine=example("dual-socket"), config=config, device_plugin_dir=root / "dp",
        pod_resources_socket=root / "pr" / "kubelet.sock", manifests=manifests, state_dir=root / "state",
        poll_interval=0.05, capacity_interval=0.1, dial_timeout=0.5, call_timeout=3.0, mirror_pod_names=False))
    agent.start()
    try:
        _wait_settled(root / "state")
    finally:
        agent.stop()
    try:
        yield root / "state"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _wait_settled(state: Path, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        doc = read_status(state) or {"pods": {}}
        if {p["status"] for p in doc["pods"].values()} == {"admitted", "rejected"}:
            return doc
        assert time.monotonic() < deadline, f"pods not settled: {json.dumps(doc, indent=1)}"
        time.sleep(0.03)


def test_pods_report_draws_the_agent_machine(state: Path, tmp_path: Path, browser: Browser, shots: Path) -> None:
    page = tmp_path / "pods.html"
    out = numalign("pods", "--state-dir", str(state), "--report", str(page))
    assert ["team", "small", "admitted"] in [line.split()[:3] for line in out.stdout.splitlines()]
    assert "NUMA nodes of dual-socket" in out.stdout and "\x1b[" not in out.stdout  # plain: not a terminal
    browser.open(page)
    assert browser.errors() == []
    assert boxes(browser, "svg#machine")[0]["w"] > 100
    browser.screenshot(shots / "report-pods.png")
    legend = browser.evaluate("document.querySelector('#legend').innerText")
    assert "team/small main" in legend
    owned = browser.evaluate("[...document.querySelectorAll('g.cpu.owned')].map(g => +g.dataset.cpu)")
    assert len(owned) == 4
    decisions = browser.evaluate("document.querySelector('#decisions').innerText")
    assert "team/wide" in decisions and "TopologyAffinityError" in decisions and "why:" in decisions
    assert browser.evaluate("document.querySelectorAll('g.cpu.reserved').length") >= 1
