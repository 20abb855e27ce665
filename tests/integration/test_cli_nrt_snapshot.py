"""`numalign nrt --node SNAPSHOT`: the nodeTopologyPodsFingerprint of a snapshot signs the pods its
PodResources capture lists, as NFD's topology-updater signs List on that node. The CLI runs as a
subprocess; the capture comes from a real PodResources gRPC server on a unix socket."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sysfs_tree import write_sysfs

from numalign.cluster.podfingerprint import fingerprint

EXE = [sys.executable, "-m", "numalign.cli.main"]
GPU = "nvidia.com/gpu"
# k8stopologyawareschedwg/podfingerprint testdata/compat-tiny-3pods-1ns.{txt,sign}: the pods and the
# signature NFD publishes for them.
TINY = [("production", "jaeger-dpgjk"), ("production", "nginx-rt684"), ("production", "envoy-g9m22")]
TINY_SIGNATURE = "pfp0v001607b76a0e9d3aeb4"
POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  containers:
  - name: main
    image: trainer
    resources:
      limits: {{cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}}
"""


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False, input=stdin)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))  # unix socket paths stay under 108 bytes
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _snapshot(short_dir: Path, *, keep_record: bool) -> Path:
    """A node whose state holds one pod (admitted by numalign as default/held), snapshotted while its
    PodResources lists the three pods of the golden vector: jaeger holds that pod's GPU, the other two
    hold nothing (NFD does not watch them, but signs them)."""
    from numalign.adapters.grpc.podresources import (
        AllocatableDevice,
        AllocatableResources,
        AssignedDevices,
        ContainerResources,
        PodResources,
        PodResourcesServer,
        SnapshotPodResourcesSource,
    )

    root = write_sysfs(short_dir / "root", cores=4, gpus={"0000:17:00.0": 0, "0000:57:00.0": 1})
    gpus = short_dir / "gpus.yaml"
    gpus.write_text("- {id: GPU-a, numa: 0}\n- {id: GPU-b, numa: 1}\n")
    state = short_dir / "kubelet"
    config = short_dir / "config.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                      "topologyManagerPolicy: single-numa-node\ncpuManagerPolicy: none\n")
    machine = ["--machine", str(root), "--devices", f"{GPU}={gpus}", "--config", str(config)]
    held = run("admit", "-", *machine, "--state-dir", str(state), stdin=POD.format(name="held", namespace="default"))
    assert held.returncode == 0 and "1/1 pods admitted" in held.stdout, held.stderr + held.stdout
    (pod,) = json.loads(run("pods", "--state-dir", str(state), *machine, "-o", "json").stdout)["pods"].values()
    (held_gpu,) = pod["allocations"]["main"]["devices"][GPU]
    if not keep_record:
        (state / "numalign_pods.json").unlink()  # as a kubelet leaves it: its checkpoints only
    listed = [PodResources(name, namespace, (ContainerResources("main", devices=(
        AssignedDevices(GPU, (held_gpu,), 0 if held_gpu == "GPU-a" else 1),) if name == "jaeger-dpgjk" else ()),))
        for namespace, name in TINY]
    allocatable = AllocatableResources(devices=(AllocatableDevice(GPU, "GPU-a", (0,)),
                                                AllocatableDevice(GPU, "GPU-b", (1,))))
    sock = short_dir / "pr.sock"
    snap = short_dir / "node.tgz"
    with PodResourcesServer(SnapshotPodResourcesSource(tuple(listed), allocatable), sock):
        made = run("snapshot", str(snap), "--sysfs-root", str(root), "--state-dir", str(state), "--config",
                   str(config), "--pod-resources-socket", str(sock))
    assert made.returncode == 0 and "PodResources allocatable resources and pods" in made.stdout, made.stderr
    return snap


def _attributes(out: str) -> dict[str, str]:
    return {a["name"]: a["value"] for a in json.loads(out)["attributes"]}


def _available(out: str) -> dict[str, int]:
    return {z["name"]: int(next(r["available"] for r in z["resources"] if r["name"] == GPU))
            for z in json.loads(out)["zones"]}


def test_a_kubelets_snapshot_signs_the_pods_its_podresources_capture_lists(short_dir: Path) -> None:
    snap = _snapshot(short_dir, keep_record=False)
    nrt = run("nrt", "--node", str(snap), "-o", "json")
    assert nrt.returncode == 0, nrt.stderr
    # The golden vector's signature: the three pods List reported, two of which hold nothing.
    assert _attributes(nrt.stdout)["nodeTopologyPodsFingerprint"] == TINY_SIGNATURE
    assert "nodeTopologyPodsFingerprint" not in nrt.stderr  # no "known only by UID" note: the capture names them
    assert sorted(_available(nrt.stdout).values()) == [0, 1]  # the held GPU is taken, from the checkpoints

    # Pods admitted on top join List, so the signature covers them too.
    asked = run("nrt", "--node", str(snap), "-o", "json", "-", stdin=POD.format(name="ask", namespace="ml"))
    assert asked.returncode == 0, asked.stderr
    assert _attributes(asked.stdout)["nodeTopologyPodsFingerprint"] == fingerprint([*TINY, ("ml", "ask")])
    assert _available(asked.stdout) == {"node-0": 0, "node-1": 0}


def test_the_capture_wins_over_numaligns_own_record_names(short_dir: Path) -> None:
    """numalign's record names the pod default/held; the node's List names three other pods: NFD signs List."""
    snap = _snapshot(short_dir, keep_record=True)
    nrt = run("nrt", "--node", str(snap), "-o", "json")
    assert nrt.returncode == 0, nrt.stderr
    signed = _attributes(nrt.stdout)["nodeTopologyPodsFingerprint"]
    assert signed == TINY_SIGNATURE and signed != fingerprint([("default", "held")])


def test_a_damaged_capture_is_one_line_naming_the_member(short_dir: Path) -> None:
    snap = _snapshot(short_dir, keep_record=False)
    damaged = short_dir / "damaged.tgz"
    with tarfile.open(snap) as src, tarfile.open(damaged, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member) if member.isfile() else None
            if member.name.endswith("podresources/pods.json"):
                body = b'{"pod_resources": {"name": "not a list"}}'
                member.size = len(body)
                data = io.BytesIO(body)
            dst.addfile(member, data)
    for command in ("nrt", "pods"):
        out = run(command, "--node", str(damaged), "-o", "json")
        assert out.returncode == 2, out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert f"{damaged}:podresources/pods.json" in line and "pod_resources is a list" in line
