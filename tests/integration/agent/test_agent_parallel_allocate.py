"""--parallel-allocate (opt-in): a device plugin hung in Allocate delays only the pods waiting on it,
in the agent and in `numalign serve` as a process.

Real gRPC plugins on unix sockets; the hung Allocate blocks on an Event, so every "meanwhile" below is
an ordering (the other pods are admitted before the Event is set), never a time window."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

import pytest
from integration.agent.conftest import DATA, GPU, Layout, gpu_pod, pod_status, wait_for, wait_pod

from numalign.agent import Agent
from numalign.cli.main import main
from numalign.deviceplugin import Device, DevicePlugin
from numalign.k8s.deviceplugin import ContainerAllocateResponse

NIC = "example.com/nic"
GPUS = [Device(f"gpu{i}", topology=(i % 2,)) for i in range(4)]
NICS = [Device(f"nic{i}", topology=(i % 2,)) for i in range(2)]


class HangFirst:
    """A plugin Allocate that blocks its first call until `release`, then answers or fails."""

    def __init__(self, fail: bool = False) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail
        self.calls: list[list[str]] = []

    def __call__(self, ids: Sequence[str]) -> ContainerAllocateResponse:
        self.calls.append(list(ids))
        if len(self.calls) == 1:
            self.entered.set()
            self.release.wait(20)
            if self.fail:
                raise RuntimeError("device reset failed")
        return ContainerAllocateResponse(envs={"GPUS": ",".join(ids)})


@pytest.fixture
def parallel(layout: Layout) -> Iterator[Agent]:
    agent = Agent(layout.options(parallel_allocate=True))
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def _plugins(layout: Layout, hang: HangFirst) -> tuple[DevicePlugin, DevicePlugin]:
    gpu = DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, socket_name="gpu.sock", allocate=hang)
    nic = DevicePlugin(NIC, NICS, socket_dir=layout.plugins, socket_name="nic.sock")
    for p in (gpu, nic):
        p.start()
        p.register()
    def reported() -> bool:
        resources = layout.status()["resources"]
        return [len((resources.get(r) or {}).get("healthy", [])) for r in (GPU, NIC)] == [4, 2]

    wait_for(reported, "both plugins' devices")
    return gpu, nic


def _gpus(layout: Layout, name: str) -> set[str]:
    entry = pod_status(layout, name)
    assert entry is not None
    return {d for c in entry["allocations"].values() for d in c["devices"].get(GPU, {})}


def cpu_pod(name: str) -> str:
    return gpu_pod(name, gpus=0, cpus=2)


def test_other_pods_are_admitted_while_one_allocate_hangs(layout: Layout, parallel: Agent) -> None:
    hang = HangFirst()
    gpu, nic = _plugins(layout, hang)
    try:
        layout.write_manifest("a.yaml", gpu_pod("a", gpus=2))
        assert hang.entered.wait(5), "the plugin's Allocate was never called"
        held = wait_pod(layout, "a", "admitting")
        assert set(held["allocations"]["main"]["devices"][GPU]) == set(hang.calls[0])
        assert held["runtime"] == {}  # no answer from the plugin yet
        # While a's Allocate is blocked: a NIC pod, a CPU-only pod, and a pod of the same plugin.
        layout.write_manifest("b.yaml", gpu_pod("b", gpus=0, extra=f', {NIC}: "1"'))
        layout.write_manifest("c.yaml", cpu_pod("c"))
        layout.write_manifest("d.yaml", gpu_pod("d", gpus=2))
        for name in ("b", "c", "d"):
            wait_pod(layout, name, "admitted")
        assert not hang.release.is_set()
        assert pod_status(layout, "a")["status"] == "admitting"  # type: ignore[index]
        # d could not be given a's devices: they were taken when a was decided.
        d_gpus = _gpus(layout, "d")
        assert len(d_gpus) == 2
        hang.release.set()
        a = wait_pod(layout, "a", "admitted")
        assert _gpus(layout, "a") == set(hang.calls[0]) and not (set(hang.calls[0]) & d_gpus)
        assert a["runtime"]["main"]["envs"] == {"GPUS": ",".join(hang.calls[0])}
        # a is in the pod record now: a restart keeps it, with the response the plugin gave.
        parallel.stop()
        again = Agent(layout.options(parallel_allocate=True))
        again.start()
        try:
            assert {p.name for p in again.node.pods.values()} == {"a", "b", "c", "d"}  # type: ignore[union-attr]
        finally:
            again.stop()
    finally:
        hang.release.set()
        gpu.stop()
        nic.stop()


def test_a_failed_allocate_rejects_its_pod_and_releases_what_it_took(layout: Layout, parallel: Agent) -> None:
    hang = HangFirst(fail=True)
    gpu, nic = _plugins(layout, hang)
    try:
        layout.write_manifest("a.yaml", gpu_pod("a", gpus=2))
        assert hang.entered.wait(5)
        layout.write_manifest("b.yaml", gpu_pod("b", gpus=1, extra=f', {NIC}: "1"'))
        b = wait_pod(layout, "b", "admitted")
        assert not hang.release.is_set()
        hang.release.set()
        a = wait_pod(layout, "a", "rejected")
        assert a["reason"] == "UnexpectedAdmissionError"
        assert a["message"].startswith("Allocate failed due to ") and "device reset failed" in a["message"]
        assert a["message"].endswith(", which is unexpected")
        after = pod_status(layout, "b")  # untouched
        assert after is not None and (after["status"], after["allocations"]) == (b["status"], b["allocations"])
        # a's two GPUs (one NUMA node's pair; b holds one of the other pair) are free again.
        assert set(hang.calls[0]) in ({"gpu0", "gpu2"}, {"gpu1", "gpu3"})
        layout.write_manifest("e.yaml", gpu_pod("e", gpus=2))
        wait_pod(layout, "e", "admitted")
        assert _gpus(layout, "e") == set(hang.calls[0])
    finally:
        hang.release.set()
        gpu.stop()
        nic.stop()


def test_a_pod_removed_while_its_allocate_hangs_is_never_admitted(layout: Layout, parallel: Agent) -> None:
    hang = HangFirst()
    gpu, nic = _plugins(layout, hang)
    try:
        path = layout.write_manifest("a.yaml", gpu_pod("a", gpus=2))
        assert hang.entered.wait(5)
        layout.write_manifest("g.yaml", gpu_pod("g", gpus=2))  # the other NUMA node's pair
        wait_pod(layout, "g", "admitted")
        path.unlink()
        wait_for(lambda: pod_status(layout, "a") is None, "a forgotten")
        # Its two GPUs went with it, before the plugin answered.
        layout.write_manifest("f.yaml", gpu_pod("f", gpus=2))
        wait_pod(layout, "f", "admitted")
        assert _gpus(layout, "f") == set(hang.calls[0])
        assert len(hang.calls) == 3  # g's and f's Allocate answered at once
        hang.release.set()
        wait_for(lambda: parallel.allocations_in_flight() == 0, "a's late answer settled")
        assert pod_status(layout, "a") is None
        assert {p.name for p in parallel.node.pods.values()} == {"f", "g"}  # type: ignore[union-attr]
    finally:
        hang.release.set()
        gpu.stop()
        nic.stop()


def test_serve_parallel_allocate_as_a_process(layout: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    cmd = [
        sys.executable, "-m", "numalign.cli.main", "serve", "--machine", "dual-socket", "--parallel-allocate",
        "--config", str(DATA / "example-kubelet-config.yaml"), "--keep-static-pod-names",
        "--device-plugin-dir", str(layout.plugins), "--pod-resources-socket", str(layout.pr_socket),
        "--manifests", str(layout.manifests), "--state-dir", str(layout.state),
    ]
    log_path = layout.root / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    hang = HangFirst()
    try:
        wait_for(lambda: (layout.plugins / "kubelet.sock").is_socket(), "agent socket", timeout=10)
        gpu, nic = _plugins(layout, hang)
        try:
            layout.write_manifest("a.yaml", gpu_pod("a", gpus=1))
            assert hang.entered.wait(8)
            layout.write_manifest("c.yaml", cpu_pod("c"))
            wait_pod(layout, "c", "admitted", timeout=8)
            capsys.readouterr()
            assert main(["pods", "--state-dir", str(layout.state)]) == 0
            rows = {line.split()[1]: line.split()[2] for line in capsys.readouterr().out.splitlines()[1:3]}
            assert rows == {"a": "admitting", "c": "admitted"}
            hang.release.set()
            wait_pod(layout, "a", "admitted", timeout=8)
        finally:
            hang.release.set()
            gpu.stop()
            nic.stop()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert "Traceback" not in log_path.read_text(encoding="utf-8")
