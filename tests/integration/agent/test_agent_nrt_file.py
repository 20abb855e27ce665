"""`serve --nrt-file`: the agent keeps its NodeResourceTopology current as devices and pods come and go."""

from __future__ import annotations

import json
from typing import Any

import pytest
from integration.agent.conftest import DATA, GPU, Layout, gpu_pod, wait_for, wait_pod

from numalign.agent import Agent
from numalign.cli.main import main
from numalign.deviceplugin import Device, DevicePlugin


def _gpu_available(layout: Layout) -> dict[str, tuple[str, str]]:
    path = layout.root / "nrt.json"
    if not path.exists():
        return {}
    obj: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert obj["kind"] == "NodeResourceTopology" and obj["metadata"]["name"] == "w1"
    return {z["name"]: (r["allocatable"], r["available"]) for z in obj["zones"] for r in z["resources"]
            if r["name"] == GPU}


def test_nrt_file_follows_devices_and_pods(layout: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    agent = Agent(layout.options(nrt_file=layout.root / "nrt.json", node_name="w1"))
    agent.start()
    plugin = DevicePlugin(GPU, [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))],
                          socket_dir=layout.plugins, watch_interval=0.1)
    plugin.start()
    try:
        wait_for(lambda: _gpu_available(layout) == {"node-0": ("1", "1"), "node-1": ("1", "1")}, "gpus in the NRT")
        layout.write_manifest("train.yaml", gpu_pod("train"))
        wait_pod(layout, "train", "admitted")
        wait_for(lambda: sorted(_gpu_available(layout).values()) == [("1", "0"), ("1", "1")], "one gpu taken")
        # `numalign nrt --pod-resources-socket` reads the same node over PodResources, as the NFD
        # topology-updater does, and publishes the same zones.
        published = json.loads((layout.root / "nrt.json").read_text(encoding="utf-8"))
        assert main(["nrt", "--pod-resources-socket", str(layout.pr_socket), "--machine", "dual-socket",
                     "--config", str(DATA / "example-kubelet-config.yaml"), "--node-name", "w1", "-o", "json"]) == 0
        read = json.loads(capsys.readouterr().out)
        assert read == published
        (layout.manifests / "train.yaml").unlink()
        wait_for(lambda: sorted(_gpu_available(layout).values()) == [("1", "1"), ("1", "1")], "gpu released")
    finally:
        plugin.stop()
        agent.stop()


def _memory_available(obj: dict[str, Any]) -> int:
    return sum(int(r["available"]) for z in obj["zones"] for r in z["resources"] if r["name"] == "memory")


def test_burstable_gpu_and_fractional_guaranteed_memory_are_taken_on_every_path(
        layout: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproduction on a live agent: `serve --nrt-file` and `nrt --pod-resources-socket`
    (NFD's own input) publish one object, the Burstable pod's GPU and the fractional pod's 8Gi taken,
    with the fingerprint of the pods List reports."""
    agent = Agent(layout.options(nrt_file=layout.root / "nrt.json", node_name="w1"))
    agent.start()
    plugin = DevicePlugin(GPU, [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,))],
                          socket_dir=layout.plugins, watch_interval=0.1)
    plugin.start()
    try:
        wait_for(lambda: _gpu_available(layout) == {"node-0": ("1", "1"), "node-1": ("1", "1")}, "gpus in the NRT")
        empty = json.loads((layout.root / "nrt.json").read_text(encoding="utf-8"))
        assert [a["name"] for a in empty["attributes"]] == ["topologyManagerPolicy", "topologyManagerScope"]
        layout.write_manifest("burst.yaml", f"""apiVersion: v1
kind: Pod
metadata: {{name: burst, namespace: ml}}
spec:
  containers:
  - name: main
    image: x
    resources:
      requests: {{cpu: "1", memory: 1Gi}}
      limits: {{cpu: "2", memory: 1Gi, {GPU}: "1"}}
""")
        layout.write_manifest("frac.yaml", """apiVersion: v1
kind: Pod
metadata: {name: frac, namespace: data}
spec:
  containers:
  - name: main
    image: x
    resources:
      limits: {cpu: 500m, memory: 8Gi}
""")
        wait_pod(layout, "burst", "admitted")
        wait_pod(layout, "frac", "admitted")
        wait_for(lambda: sorted(_gpu_available(layout).values()) == [("1", "0"), ("1", "1")], "the gpu taken")
        published = wait_for(lambda: (o := json.loads((layout.root / "nrt.json").read_text(encoding="utf-8")))
                             and _memory_available(empty) - _memory_available(o) == 8 << 30 and o, "8Gi taken")
        assert main(["nrt", "--pod-resources-socket", str(layout.pr_socket), "--machine", "dual-socket",
                     "--config", str(DATA / "example-kubelet-config.yaml"), "--node-name", "w1", "-o", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == published
        # The fingerprint of the two pods List reports (namespace/name), as podfingerprint signs it.
        from numalign.cluster.podfingerprint import fingerprint

        assert published["attributes"][2] == {"name": "nodeTopologyPodsFingerprint",
                                              "value": fingerprint([("ml", "burst"), ("data", "frac")])}
        # The fractional pod's CPUs are the shared pool's: no zone's cpu changed.
        cpus = [[r for r in z["resources"] if r["name"] == "cpu"] for z in published["zones"]]
        assert cpus == [[r for r in z["resources"] if r["name"] == "cpu"] for z in empty["zones"]]
    finally:
        plugin.stop()
        agent.stop()
