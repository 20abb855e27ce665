"""`numalign simulate` and `capacity` with DRA, as a user runs them: the table's DRA rows, the report's
DRA section, capacity limited by the allocator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXE = [sys.executable, "-m", "numalign.cli.main"]
DATA = Path(__file__).resolve().parents[1] / "data" / "dra"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300, check=False)


def test_simulate_shows_dra_pods_and_their_alignment(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    p = run("simulate", "--cluster", str(DATA / "cluster" / "cluster.yaml"), str(DATA / "cluster" / "workload.yaml"),
            "--scheduler", "default", "--report", str(report))
    assert p.returncode == 0, p.stderr
    rows = {line.split("  ")[0]: line.split()[-1] for line in p.stdout.splitlines() if line.startswith("DRA ")}
    assert rows["DRA pods placed"] == "12/16"
    assert rows["DRA pods unschedulable"] == "4"
    assert rows["DRA devices with CPUs+memory"].endswith("%")
    assert "4 pod(s): cannot allocate all claims" in p.stdout
    html = report.read_text()
    assert 'id="dra-alignment"' in html and 'id="dra-outcome"' in html
    assert "cannot allocate all claims" in html
    doc = json.loads(run("simulate", "--cluster", str(DATA / "cluster" / "cluster.yaml"),
                         str(DATA / "cluster" / "workload.yaml"), "--scheduler", "exact", "-o", "json").stdout)
    dra = doc["runs"][0]["dra"]
    assert (dra["pods"], dra["placed"]) == (16, 12)
    assert dra["aligned"] + dra["notAligned"] + dra["nothingPinned"] + dra["unknown"] == 12


def test_capacity_is_limited_by_the_claims() -> None:
    p = run("capacity", "--cluster", str(DATA / "cluster" / "cluster.yaml"), str(DATA / "claim-and-pod.yaml"))
    assert p.returncode == 0, p.stderr
    gpu = next(line for line in p.stdout.splitlines() if line.startswith("gpu ") and "LIMITED" not in line
               and "claims" in line)
    assert "cannot allocate all claims (3)" in gpu and " 12 " in gpu
    # why, as admit says it: the copies counted hold the node's 8 GPUs
    assert ("  why gpu: claim gpus (template default/two-gpus), request gpus: needs 2 device(s), 0 usable: 8 on the "
            "node, class h100 selector #0 matched 8, 8 held by other claims (3 nodes)") in p.stdout.splitlines()


MAP_ORDER_CLUSTER = """kind: Cluster
name: map-order
pools:
- name: old
  count: 2
  machine: dual-socket
  kubeletVersion: "1.35"
  draDevices:
    gpu.example.com: {count: 2, attributes: {model: h100}}
    accel.example.com: {count: 2, attributes: {model: h100}}
"""
MAP_ORDER_WORKLOAD = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: any}
spec: {}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one}
spec:
  spec:
    devices:
      requests:
      - {name: dev, exactly: {deviceClassName: any}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: w}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: w}}
    spec:
      resourceClaims: [{name: d, resourceClaimTemplateName: one}]
      containers:
      - {name: c, image: x, resources: {claims: [{name: d}]}}
"""


def test_simulate_says_when_a_pods_devices_depend_on_go_map_order(tmp_path: Path) -> None:
    """Kubelet 1.35's scheduler ranges over a Go map of pools: a class matching the devices of both of a
    node's pools gets one or the other, as admit's 'dra map order:' says; simulate says it per run."""
    from support.schemas import validate

    cluster, workload = tmp_path / "cluster.yaml", tmp_path / "workload.yaml"
    cluster.write_text(MAP_ORDER_CLUSTER)
    workload.write_text(MAP_ORDER_WORKLOAD)
    p = run("simulate", "--cluster", str(cluster), str(workload), "--scheduler", "default")
    assert p.returncode == 0, p.stderr
    (line,) = [line for line in p.stdout.splitlines() if line.startswith("dra map order (")]
    assert "2 placed pod(s) got devices another pool order would change; e.g. pod default/w-0 on old-0: " in line
    assert "searches the node's resource pools in Go map order" in line
    doc = json.loads(run("simulate", "--cluster", str(cluster), str(workload), "--scheduler", "default",
                         "-o", "json").stdout)
    validate("simulate", doc)
    assert doc["runs"][0]["dra"]["mapOrder"]["pods"] == 2
    newer = run("simulate", "--cluster", str(cluster), str(workload), "--scheduler", "default", "--kubelet-version",
                "1.36")
    assert newer.returncode == 0 and "dra map order" not in newer.stdout  # 1.36 sorts its pools
