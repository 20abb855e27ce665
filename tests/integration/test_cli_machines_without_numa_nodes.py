"""The CLI on the two dumps without a NUMA node directory (a machine with no NUMA node, and one whose
only node is -1), as a subprocess: discover (extracted and archived, every output, the HTML report),
the machine file read back, admit and pods, with exit codes and never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.dumps import TARBALLS, extracted

EXE = [sys.executable, "-m", "numalign.cli.main"]
POD = """apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: c
    image: x
    resources:
      requests: {cpu: "2", memory: 100Mi}
      limits: {cpu: "2", memory: 100Mi}
"""
NONE_POLICIES = ["--topology-manager-policy", "none", "--cpu-manager-policy", "static", "--memory-manager-policy",
                 "None", "--reserved-cpus", "", "--kube-reserved", "cpu=1"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    return p


def _tar(name: str) -> Path:
    (found,) = [t for t in TARBALLS if t.name.startswith(name + ".")]
    return found


@pytest.fixture(scope="module")
def pod_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pods") / "web.yaml"
    path.write_text(POD)
    return path


@pytest.mark.parametrize("name", ["2ps3-2t", "20s390-2g6s4c"])
def test_discover_reads_the_dump_extracted_and_archived_alike(
    name: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = extracted(_tar(name), tmp_path_factory)
    outputs = {}
    for source in (["--sysfs-root", str(root)], ["--machine", str(_tar(name))]):
        for fmt in ("text", "json", "yaml", "cadvisor"):
            p = _run("discover", *source, "-o", fmt)
            assert p.returncode == 0, p.stderr
            outputs[(source[0], fmt)] = p.stdout
    for fmt, name_key in (("json", "name"), ("cadvisor", "machine_id")):  # the same but for the name
        a, b = (json.loads(outputs[(flag, fmt)]) for flag in ("--sysfs-root", "--machine"))
        assert {k: v for k, v in a.items() if k != name_key} == {k: v for k, v in b.items() if k != name_key}
    machine = json.loads(outputs[("--machine", "json")])
    cadvisor = json.loads(outputs[("--machine", "cadvisor")])
    text = outputs[("--machine", "text")]
    if name == "2ps3-2t":
        assert machine["numaNodes"] == [] and machine["cpus"] == [] and machine["cadvisor"]["numCPUs"] == 2
        assert cadvisor["topology"] == [] and cadvisor["num_cores"] == 2
        assert "no NUMA node: the kubelet counts 2 CPUs" in text
    else:
        assert [n["id"] for n in machine["numaNodes"]] == [-1]
        assert {c["numaNode"] for c in machine["cpus"]} == {-1}
        assert [n["node_id"] for n in cadvisor["topology"]] == [-1]
        assert "NUMA node -1  memory 0 B  CPUs 0-19" in text and "NUMA -1  " in text
    # The machine file reads back to the same machine file.
    file = tmp_path / "machine.yaml"
    file.write_text(outputs[("--machine", "yaml")])
    again = _run("discover", "--machine", str(file), "-o", "yaml")
    assert again.returncode == 0 and yaml.safe_load(again.stdout) == yaml.safe_load(outputs[("--machine", "yaml")])
    report = tmp_path / "machine.html"
    p = _run("discover", "--machine", str(file), "--report", str(report))
    assert p.returncode == 0, p.stderr
    html = report.read_text()
    if name == "2ps3-2t":
        assert 'class="no-numa"' in html and "<svg" not in html.split('class="no-numa"')[0].split("<h2>Machine")[-1]
    else:
        assert "NUMA node -1" in html and 'data-socket="socket -1"' in html


def test_admit_on_node_minus_one_under_policy_none(pod_file: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    p = _run("admit", "--machine", str(_tar("20s390-2g6s4c")), *NONE_POLICIES, "--state-dir", str(state),
             "-o", "json", str(pod_file))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    records = out["pods"] if isinstance(out, dict) and "pods" in out else out
    assert isinstance(records, list) and records[0]["result"]["admit"] is True
    pods = _run("pods", "--state-dir", str(state))
    assert pods.returncode == 0, pods.stderr
    assert "NUMA -1" in pods.stdout and "web" in pods.stdout
    report = tmp_path / "pods.html"
    again = _run("pods", "--state-dir", str(state), "--report", str(report), "-o", "yaml")
    assert again.returncode == 0, again.stderr
    assert "NUMA node -1" in report.read_text()
    # The in-place resize preview under policy none builds no mask either: it grows on node -1.
    grown = _run("resize", "default/web", "--container", "c", "--cpus", "3", "--state-dir", str(state),
                 "--machine", str(_tar("20s390-2g6s4c")), *NONE_POLICIES, "--preview",
                 "inplace-resize-exclusive-cpus", "-o", "json")
    assert grown.returncode == 0, grown.stderr
    result = json.loads(grown.stdout)
    assert result["resized"] is True and result["numaNodes"] == [-1] and len(result["cpusAfter"]) == 3


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_admit_on_node_minus_one_under_other_policies_says_the_kubelet_panics(pod_file: Path, policy: str) -> None:
    p = _run("admit", "--machine", str(_tar("20s390-2g6s4c")), "--topology-manager-policy", policy,
             "--cpu-manager-policy", "none", "--memory-manager-policy", "None", str(pod_file))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len([line for line in lines if "error:" in line]) == 1
    assert "then panics at its first pod admission" in p.stderr and "--topology-manager-policy none" in p.stderr


def test_admit_on_a_machine_without_numa_nodes(pod_file: Path) -> None:
    tar = str(_tar("2ps3-2t"))
    # The static CPU manager has no CPU to reserve: the kubelet's start error.
    p = _run("admit", "--machine", tar, *NONE_POLICIES, str(pod_file))
    assert p.returncode == 2 and "unable to reserve the required amount of CPUs" in p.stderr
    # restricted rejects every pod: the answer is no (exit 1 with --exit-code).
    p = _run("admit", "--machine", tar, "--topology-manager-policy", "restricted", "--cpu-manager-policy", "none",
             "--memory-manager-policy", "None", "--exit-code", str(pod_file))
    assert p.returncode == 1, p.stderr
    assert "TopologyAffinityError" in p.stdout
    # The Static memory manager has no node to reserve memory on.
    p = _run("admit", "--machine", tar, "--topology-manager-policy", "none", "--cpu-manager-policy", "none",
             "--memory-manager-policy", "Static", "--reserved-memory", "0:memory=1124Mi", str(pod_file))
    assert p.returncode == 2 and "has no NUMA node" in p.stderr and "--memory-manager-policy None" in p.stderr


CLUSTER = """kind: Cluster
name: s390
pools:
- name: z
  count: 2
  machine: {machine}
  kubelet: {{topologyManagerPolicy: {policy}, cpuManagerPolicy: static, memoryManagerPolicy: None,
            reservedSystemCPUs: "", kubeReserved: {{cpu: "1", memory: 10Mi}}, systemReserved: {{memory: 10Mi}}}}
"""


@pytest.mark.parametrize("policy", ["none", "restricted"])
def test_simulate_a_cluster_of_node_minus_one_machines(tmp_path: Path, policy: str) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER.format(machine=_tar("20s390-2g6s4c"), policy=policy))
    pods = tmp_path / "pods.yaml"
    pods.write_text("---\n".join(POD.replace("name: web", f"name: web-{i}").replace('"2"', '"1"') for i in range(6)))
    p = _run("simulate", "--cluster", str(cluster), str(pods))
    if policy == "none":
        # Exclusive CPUs on node -1: the exact scheduler's footprint of a pod there is every node.
        assert p.returncode == 0, p.stderr
        assert "Guaranteed on 1 NUMA node" in p.stdout
    else:  # refused in the worker processes, reported once in the parent
        assert p.returncode == 2, p.stderr
        assert "then panics at its first pod admission" in p.stderr


@pytest.mark.parametrize(("name", "needed"), [
    ("2ps3-2t", ["--cpu-manager-policy none", "--topology-manager-policy none", "--memory-manager-policy None"]),
    ("20s390-2g6s4c", ["--topology-manager-policy none", "--memory-manager-policy None"]),
])
def test_the_first_refusal_names_every_change_the_machine_needs(name: str, needed: list[str], pod_file: Path) -> None:
    # With the built-in example configuration the kubelet's start errors come one at a time; the first
    # one names all the options, and giving them gets past start-up (an answer, not another refusal).
    first = _run("admit", "--machine", str(_tar(name)), str(pod_file))
    assert first.returncode == 2
    for option in needed:
        assert option in first.stderr
    flags = [part for option in needed for part in option.split()]
    second = _run("admit", "--machine", str(_tar(name)), *flags, str(pod_file))
    assert second.returncode in (0, 1), second.stderr  # admitted or rejected: the kubelet runs
