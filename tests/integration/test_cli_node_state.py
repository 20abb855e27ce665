"""A node's real state as a user brings it: device IDs as plugins report them, snapshots, state-directory
lifecycle (remove, pods, --replace), manifests from stdin. The CLI runs as a subprocess on real files;
the PodResources socket is a real gRPC server on a unix socket."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.schemas import validate
from support.sysfs_tree import write_sysfs

EXE = [sys.executable, "-m", "numalign.cli.main"]
# The realistic node of the issue: 224 CPUs, 8 GPUs, two per NUMA node, PCI addresses in the description.
NODE = "2s x 2n x 28c x 2t, 256Gi/node, nvidia.com/gpu=2/node"
DEPLOY = """---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    spec:
      containers:
      - name: main
        image: trainer
        resources:
          limits: {{cpu: "8", memory: 16Gi, nvidia.com/gpu: "2"}}
"""


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False, input=stdin)


def gpu_uuids(path: Path, per_node: dict[int, int]) -> Path:
    """A device list as NVIDIA's plugin names GPUs (UUIDs), for `--devices nvidia.com/gpu=FILE`."""
    lines = [f"- {{id: GPU-{n}{k}5c1f0e-8d1a-4b7e-9c4f-2e6a0b3d9{n}{k}, numa: {n}}}"
             for n, count in per_node.items() for k in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_eight_gpu_node_held_gpus_under_plugin_ids_are_not_counted_free(tmp_path: Path) -> None:
    gpus = gpu_uuids(tmp_path / "gpus.yaml", {0: 2, 1: 2, 2: 2, 3: 2})
    state = tmp_path / "state"
    (tmp_path / "train.yaml").write_text(DEPLOY.format(name="train-a") + DEPLOY.format(name="train-b"))
    (tmp_path / "ask.yaml").write_text("".join(DEPLOY.format(name=f"ask-{i}") for i in range(4)))
    held = run("admit", str(tmp_path / "train.yaml"), "--machine", NODE, "--devices", f"nvidia.com/gpu={gpus}",
               "--state-dir", str(state), "--reserved-cpus", "0-1")
    assert held.returncode == 0, held.stderr
    assert "2/2 pods admitted" in held.stdout
    assert "GPU-005c1f0e" in (state / "device-plugins" / "kubelet_internal_checkpoint").read_text()
    # admit recorded its machine (devices included) and kubelet flags: pods needs neither repeated.
    listed = run("pods", "--state-dir", str(state), "-o", "json")
    assert listed.returncode == 0, listed.stderr
    held_gpus = [d for p in json.loads(listed.stdout)["pods"].values()
                 for d in p["allocations"]["main"]["devices"]["nvidia.com/gpu"]]
    assert len(held_gpus) == 4 and all(d.startswith("GPU-") for d in held_gpus)

    # The machine description names the GPUs by PCI address: refused, the mismatch named, never 4 of 4.
    mismatch = run("admit", str(tmp_path / "ask.yaml"), "--machine", NODE, "--state-dir", str(state), "--dry-run",
                   "--reserved-cpus", "0-1")
    assert mismatch.returncode != 0
    assert "pods admitted" not in mismatch.stdout
    line = mismatch.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "pods hold nvidia.com/gpu GPU-005c1f0e" in line
    assert "0000:10:00.0" in line  # the machine's own IDs, for comparison
    assert "--devices nvidia.com/gpu=FILE" in line

    # With the plugin's IDs: 4 of the 8 GPUs are held, so 2 of the 4 new pods fit.
    fits = run("admit", str(tmp_path / "ask.yaml"), "--machine", NODE, "--devices", f"nvidia.com/gpu={gpus}",
               "--state-dir", str(state), "--dry-run", "--reserved-cpus", "0-1", "--output", "json")
    assert fits.returncode == 0, fits.stderr
    verdicts = [p["result"]["admit"] for p in json.loads(fits.stdout)["pods"]]
    assert verdicts == [True, True, False, False]


def test_state_dir_lifecycle_pods_remove_replace_and_stdin(tmp_path: Path) -> None:
    state = tmp_path / "state"
    one_gpu = DEPLOY.format(name="web").replace('gpu: "2"', 'gpu: "1"')  # dual-socket: one GPU per NUMA node
    manifest = (one_gpu + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
                "spec: {ports: [{port: 80}]}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n")
    first = run("admit", "-", "--state-dir", str(state), stdin=manifest)  # `helm template ... | numalign admit -`
    assert first.returncode == 0, first.stderr
    assert "# <stdin>: document 2: Service web skipped (no pod template)" in first.stdout
    assert "ConfigMap cfg skipped" in first.stdout
    assert "1/1 pods admitted" in first.stdout

    listed = run("pods", "--state-dir", str(state), "-o", "json")
    assert listed.returncode == 0, listed.stderr
    pods = json.loads(listed.stdout)["pods"]
    (uid, pod), = pods.items()
    assert (pod["namespace"], pod["name"]) == ("default", "web-0")
    assert pod["allocations"]["main"]["devices"]["nvidia.com/gpu"]

    again = run("admit", "-", "--state-dir", str(state), stdin=manifest)
    assert again.returncode != 0
    assert "already admitted" in again.stderr and "--replace" in again.stderr
    replaced = run("admit", "-", "--state-dir", str(state), "--replace", stdin=manifest.replace('"8"', '"4"'))
    assert replaced.returncode == 0, replaced.stderr
    assert "replaced: pod default/web-0" in replaced.stdout
    after = json.loads(run("pods", "--state-dir", str(state), "-o", "json").stdout)["pods"]
    cpus = after[uid]["allocations"]["main"]["cpus"]
    assert len(after) == 1 and cpus.count(",") + 1 == 2  # 4 CPUs: two ranges of a core's threads

    removed = run("remove", "default/web-0", "--state-dir", str(state))
    assert removed.returncode == 0, removed.stderr
    assert f"removed default/web-0 (uid {uid})" in removed.stdout
    assert json.loads(run("pods", "--state-dir", str(state), "-o", "json").stdout)["pods"] == {}
    assert '"entries"' not in (state / "cpu_manager_state").read_text()
    missing = run("remove", "web-0", "--state-dir", str(state))
    assert missing.returncode != 0 and "no pod default/web-0" in missing.stderr


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))  # unix socket paths stay under 108 bytes
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_snapshot_then_admit_on_it_uses_the_plugins_ids_and_never_writes(short_dir: Path) -> None:
    from numalign.adapters.grpc.podresources import (
        AllocatableDevice,
        AllocatableResources,
        AssignedDevices,
        ContainerResources,
        PodResources,
        PodResourcesServer,
        SnapshotPodResourcesSource,
    )

    pci = {"0000:17:00.0": 0, "0000:18:00.0": 0, "0000:57:00.0": 1, "0000:58:00.0": 1}
    root = write_sysfs(short_dir / "root", cores=8, gpus=pci)
    gpus = gpu_uuids(short_dir / "gpus.yaml", {0: 2, 1: 2})
    state = short_dir / "kubelet"
    machine = ["--machine", str(root), "--devices", f"nvidia.com/gpu={gpus}", "--cpu-manager-policy", "none",
               "--memory-manager-policy", "None"]
    held = run("admit", "-", *machine, "--state-dir", str(state), stdin=DEPLOY.format(name="held"))
    assert held.returncode == 0 and "1/1 pods admitted" in held.stdout, held.stderr + held.stdout
    uuids = [line.split("id: ")[1].split(",")[0] for line in gpus.read_text().splitlines()]
    listed = run("pods", "--state-dir", str(state), *machine, "-o", "json")
    (pod,) = json.loads(listed.stdout)["pods"].values()
    held_gpus = tuple(pod["allocations"]["main"]["devices"]["nvidia.com/gpu"])
    # As a kubelet leaves it: its own state files only; PodResources knows the pod by name.
    (state / "numalign_pods.json").unlink()
    running = PodResources("trainer", "ml", (ContainerResources("main", devices=(
        AssignedDevices("nvidia.com/gpu", held_gpus, 0),)),))
    allocatable = AllocatableResources(devices=tuple(
        AllocatableDevice("nvidia.com/gpu", u, (i // 2,)) for i, u in enumerate(uuids)))
    (short_dir / "config.yaml").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: "
        "restricted\n")
    # The running kubelet, as /proc shows it: its --config and --root-dir are where the snapshot looks, and
    # its resource-manager flags override the config file, as they do on the node.
    kubelet = short_dir / "proc" / "4242"
    kubelet.mkdir(parents=True)
    (kubelet / "comm").write_text("kubelet\n")
    argv = ["/usr/bin/kubelet", f"--config={short_dir / 'config.yaml'}", "--root-dir", str(state), "--v=2",
            "--fail-swap-on", "--topology-manager-policy", "single-numa-node"]
    (kubelet / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    # /proc/PID/exe: the running binary, whose --version the snapshot records.
    (kubelet / "exe").write_text("#!/bin/sh\necho 'Kubernetes v1.35.2'\n")
    (kubelet / "exe").chmod(0o755)
    sock = short_dir / "pr.sock"
    with PodResourcesServer(SnapshotPodResourcesSource((running,), allocatable), sock):
        snap = run("snapshot", str(short_dir / "node.tgz"), "--sysfs-root", str(root), "--proc-root",
                   str(short_dir / "proc"), "--pod-resources-socket", str(sock), "-o", "json")
    assert snap.returncode == 0, snap.stderr
    doc = json.loads(snap.stdout)
    validate("snapshot", doc)
    assert doc["nodeName"] == "worker-1" and doc["missing"] == [] and doc["summary"]["nodeName"] == "worker-1"
    assert "kubelet command line (pid 4242, 1 resource-manager flag(s))" in doc["included"]
    assert "kubelet version v1.35.2 (`kubelet --version` of pid 4242)" in doc["included"]
    digest = hashlib.sha256((short_dir / "node.tgz").read_bytes()).hexdigest()

    ask = "".join(DEPLOY.format(name=f"ask-{i}") for i in range(2))
    fits = run("admit", "-", "--node", str(short_dir / "node.tgz"), stdin=ask)
    assert fits.returncode == 0, fits.stderr
    assert "node snapshot" in fits.stdout and "kubelet config: " in fits.stdout and "node.tgz" in fits.stdout
    assert "topologyManagerPolicy single-numa-node" in fits.stdout and "cpuManagerPolicy none" in fits.stdout
    assert "kubelet flags --topology-manager-policy=single-numa-node" in fits.stdout
    assert "1/2 pods admitted" in fits.stdout  # one NUMA node's GPUs are held
    assert "kubelet 1.35.2" in fits.stdout.splitlines()[0]  # the version the snapshot recorded
    listed = run("pods", "--node", str(short_dir / "node.tgz"), "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [(p["namespace"], p["name"]) for p in json.loads(listed.stdout)["pods"].values()] == [("ml", "trainer")]
    assert hashlib.sha256((short_dir / "node.tgz").read_bytes()).hexdigest() == digest
    assert run("discover", "--machine", str(short_dir / "node.tgz"), "-o", "json").returncode == 0  # a sysfs dump
    shown = json.loads(run("discover", "--node", str(short_dir / "node.tgz"), "-o", "json").stdout)
    assert [(d["id"], d["numaNodes"]) for d in shown["devices"]] == [(u, [i // 2]) for i, u in enumerate(uuids)]

    # A setting the state was not written under: the kubelet's refusal, naming the snapshot's file.
    other = run("admit", "-", "--node", str(short_dir / "node.tgz"), "--cpu-manager-policy", "static",
                "--reserved-cpus", "0", stdin=ask)
    assert other.returncode != 0 and "numalign-node-" not in other.stderr
    assert f"{short_dir / 'node.tgz'}:state/cpu_manager_state" in other.stderr
    assert "read from the snapshot" in other.stderr

    # Without the PodResources capture the PCI addresses stand: refused with the mismatch named.
    bare = run("snapshot", str(short_dir / "bare.tgz"), "--sysfs-root", str(root), "--state-dir", str(state),
               "--config", str(short_dir / "config.yaml"), "--pod-resources-socket", str(short_dir / "none.sock"))
    assert bare.returncode == 0 and "missing:  PodResources" in bare.stdout
    refused = run("admit", "-", "--node", str(short_dir / "bare.tgz"), stdin=ask)
    assert refused.returncode != 0 and "which machine worker-1 does not have" in refused.stderr


def test_pods_on_a_snapshot_of_a_node_without_state_says_no_pods(tmp_path: Path) -> None:
    empty = tmp_path / "kubelet"
    empty.mkdir()
    snap = tmp_path / "node.tgz"
    made = run("snapshot", str(snap), "--state-dir", str(empty), "--config", str(tmp_path / "none.yaml"),
               "--pod-resources-socket", str(tmp_path / "none.sock"))
    assert made.returncode == 0, made.stderr
    shown = run("pods", "--node", str(snap))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("no pods\n") and "NUMA nodes of" in shown.stdout
    as_json = run("pods", "--node", str(snap), "-o", "json")
    assert json.loads(as_json.stdout)["pods"] == {}


def test_an_admit_refused_on_the_directory_keeps_its_node_record(tmp_path: Path) -> None:
    """A wrong --machine is refused by the CPU manager's state check; the record of the machine the
    directory was written on stays, so pods (and remove, nrt) still read the directory without flags (the
    record was replaced first, and every later command met the same refusal, with its 'remove the state
    file' fix)."""
    state = tmp_path / "state"
    assert run("admit", "--state-dir", str(state), "--machine", NODE).returncode == 0
    record = (state / "numalign_node.json").read_bytes()
    wrong = run("admit", "--state-dir", str(state), "--machine", "epyc-nps4")
    assert wrong.returncode == 3 and "doesn't match with CPUs in state" in wrong.stderr
    assert (state / "numalign_node.json").read_bytes() == record
    listed = run("pods", "--state-dir", str(state))
    assert listed.returncode == 0 and "admitted" in listed.stdout, listed.stderr


def test_pods_admitted_again_on_a_load_keep_their_devices_in_the_checkpoint(tmp_path: Path) -> None:
    """The device checkpoint deleted (the kubelet's own fix for a damaged one): the next command admits its
    pods again, and what it writes holds their devices, so the load after it finds nothing to repair.
    A re-admission's plugin calls were decided but never answered, so a remove (or resize, or a rejected
    admit) wrote a checkpoint without them, and every later load admitted those pods again."""
    state = tmp_path / "state"
    assert run("admit", "--state-dir", str(state), "--machine", NODE, "-o", "json").returncode in (0, 1)
    checkpoint = state / "device-plugins" / "kubelet_internal_checkpoint"
    held = {(e["PodUID"], e["ResourceName"]) for e in json.loads(checkpoint.read_text())["Data"]["PodDeviceEntries"]}
    assert held
    checkpoint.unlink()
    first = run("pods", "--state-dir", str(state), "-o", "json")
    pods = json.loads(first.stdout)["pods"].values()
    assert "admitted pod" in first.stderr and "again" in first.stderr  # the repair, said
    victim = next(f"{p['namespace']}/{p['name']}" for p in pods
                  if p["status"] == "admitted" and not any(d for a in p["allocations"].values() for d in a["devices"]))
    removed = run("remove", "--state-dir", str(state), victim)
    assert removed.returncode == 0, removed.stderr
    entries = json.loads(checkpoint.read_text())["Data"]["PodDeviceEntries"] or []
    assert {(e["PodUID"], e["ResourceName"]) for e in entries} == held
    again = run("pods", "--state-dir", str(state))
    assert again.returncode == 0 and "again" not in again.stderr, again.stderr

