"""`numalign serve` as a real process: starts, serves a plugin and a PodResources client, stops
cleanly on SIGTERM; then `numalign pods` reads what it left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from integration.agent.conftest import DATA, GPU, Layout, gpu_pod, wait_for, wait_pod

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.cli.main import main
from numalign.deviceplugin import Device, DevicePlugin


def test_serve_process_stops_cleanly_on_sigterm_and_pods_lists_the_result(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    log_path = layout.root / "serve.log"
    cmd = [
        sys.executable, "-m", "numalign.cli.main", "serve", "--machine", "dual-socket",
        "--config", str(DATA / "example-kubelet-config.yaml"),
        "--device-plugin-dir", str(layout.plugins), "--pod-resources-socket", str(layout.pr_socket),
        "--manifests", str(layout.manifests), "--state-dir", str(layout.state), "--endpoint-grace-period", "5",
        "--hostname-override", "Worker-1",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    plugin = DevicePlugin(GPU, [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))],
                          socket_dir=layout.plugins)
    try:
        kubelet_sock = layout.plugins / "kubelet.sock"
        wait_for(lambda: kubelet_sock.is_socket() and layout.pr_socket.is_socket(), "agent sockets", timeout=10)
        assert kubelet_sock.stat().st_mode & 0o777 == 0o600
        plugin.start()
        # As on a kubelet, a pod that arrives before the plugin reported its devices gets none: wait.
        wait_for(lambda: len((layout.status().get("resources", {}).get(GPU) or {}).get("healthy", [])) == 2,
                 "gpus reported", timeout=8)
        layout.write_manifest("train.yaml", gpu_pod("train"))
        # Static pods carry the kubelet's name, <name>-<node name lower-cased>, in PodResources too.
        entry = wait_pod(layout, "train-worker-1", "admitted", timeout=8)
        dev = next(iter(entry["allocations"]["main"]["devices"][GPU]))
        with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
            (pod,) = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=5).pod_resources
        assert [d.device_ids[0] for d in pod.containers[0].devices] == [dev]
        assert (pod.namespace, pod.name) == ("ml", "train-worker-1")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        plugin.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    text = log_path.read_text(encoding="utf-8")
    assert "shutting down" in text and "numalign agent stopped" in text and "Traceback" not in text
    assert not (layout.plugins / "kubelet.sock").exists() and not layout.pr_socket.exists()
    assert (layout.state / "cpu_manager_state").exists()

    capsys.readouterr()
    assert main(["pods", "--state-dir", str(layout.state), "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (listed,) = doc["pods"].values()
    assert listed["name"] == "train-worker-1" and listed["status"] == "admitted"
    assert listed["allocations"]["main"]["devices"][GPU] == entry["allocations"]["main"]["devices"][GPU]
    assert main(["pods", "--state-dir", str(layout.state)]) == 0
    out = capsys.readouterr().out
    header, row = (line.split() for line in out.splitlines()[:2])
    assert header == ["NAMESPACE", "NAME", "STATUS", "CPUS", "MEMORY", "DEVICES"]
    assert row[:3] == ["ml", "train-worker-1", "admitted"] and row[5] == f"{GPU}=1"
    assert row[4].startswith("4Gi@")  # pinned memory as a quantity, @ its NUMA node
    assert main(["pods", "--state-dir", str(layout.state), "-o", "wide"]) == 0
    wide = capsys.readouterr().out
    assert wide.split()[:10] == [*header, "CONTAINERS", "HUGEPAGES", "DEVICE-IDS", "FILE"]
    assert f"{GPU} {dev}" in wide and "memory 4Gi on NUMA " in wide  # per container, as `admit` prints it
    # The plugin was stopped with the agent: its devices were healthy then; the agent is gone now.
    assert f"resource {GPU}: " in out and "plugin" in out
    assert (layout.state / "numalign_status.json").stat().st_mode & 0o777 == 0o600


def test_pods_without_a_status_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pods", "--state-dir", str(tmp_path)]) == 2  # invalid input: no agent's state there
    err = capsys.readouterr().err
    assert "no state there (neither numalign_status.json" in err and "--state-dir" in err
