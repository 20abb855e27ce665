"""The kubelet version as an input of every command that decides, and named with every decision: the
flag, what inputs record (a state directory's node record, a snapshot, a nodes dump mid-upgrade, a
cluster.yaml pool), the flag overriding them with a note, and bad input as one line with exit 2. The CLI
runs as a subprocess on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from numalign.cluster.dumps import cluster_from_dumps
from numalign.k8s.version import DEFAULT, resolve

EXE = [sys.executable, "-m", "numalign.cli.main"]
POD = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources: {limits: {cpu: "2", memory: 1Gi}}
"""


def v(text: str) -> str:
    """The modelled version X.Y names (its newest patch), as output prints it."""
    return str(resolve(text, "test"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False)


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_admit_names_the_version_it_decided_as(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    default = run("admit", str(pod))
    assert default.returncode == 0, default.stderr
    assert f"kubelet {DEFAULT};" in default.stdout.splitlines()[0]
    asked = run("admit", str(pod), "--kubelet-version", "1.36", "-o", "json")
    assert asked.returncode == 0, asked.stderr
    doc = json.loads(asked.stdout)
    assert doc["kubeletVersion"] == str(v("1.36")) and "previews" not in doc
    yaml_out = run("admit", str(pod), "--kubelet-version", "1.34.0", "-o", "yaml")
    assert "kubeletVersion: 1.34.0" in yaml_out.stdout


def test_bad_versions_and_previews_are_one_line_exit_2(tmp_path: Path) -> None:
    one_line_error(run("admit", "--kubelet-version", "1.99"), "--kubelet-version", "1.99")
    one_line_error(run("admit", "--kubelet-version", "1.32.4"), "--kubelet-version", "1.32.4")
    one_line_error(run("admit", "--kubelet-version", "banana"), "--kubelet-version", "banana", "expected X.Y")
    one_line_error(run("admit", "--preview", "warp-drive"), "--preview warp-drive", "numa-allocation-strategy")
    one_line_error(run("admit", "--preview", "numa-allocation-strategy=fastest"), "fastest", "most-allocated")
    one_line_error(run("simulate", "--kubelet-version", "2.0", "--generate", "5"), "2.0")
    one_line_error(run("capacity", "--preview-axis", "nope=1"), "nope")


def test_a_state_directory_remembers_its_version(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    state = tmp_path / "state"
    first = run("admit", str(pod), "--state-dir", str(state), "--kubelet-version", "1.35")
    assert first.returncode == 0, first.stderr
    v135 = str(v("1.35"))
    assert json.loads((state / "numalign_node.json").read_text())["kubelet_version"] == v135
    listed = run("pods", "--state-dir", str(state), "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["kubeletVersion"] == v135
    assert f"decided as kubelet {v135}" in run("pods", "--state-dir", str(state)).stdout
    (tmp_path / "q.yaml").write_text(POD.replace("name: p", "name: q"))
    again = run("admit", str(tmp_path / "q.yaml"), "--state-dir", str(state), "--dry-run")
    assert f"kubelet {v135};" in again.stdout.splitlines()[0]
    assert f"kubelet version: {v135}, as {state / 'numalign_node.json'} says" in again.stdout
    # The flag wins, and says so.
    over = run("admit", str(tmp_path / "q.yaml"), "--state-dir", str(state), "--dry-run", "--kubelet-version", "1.36")
    v136 = str(v("1.36"))
    assert f"kubelet {v136};" in over.stdout.splitlines()[0]
    assert f"kubelet version: {v136} from --kubelet-version, although {state / 'numalign_node.json'} says {v135}" \
        in over.stdout


def _node(name: str, version: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
    if version is not None:
        status["nodeInfo"] = {"kubeletVersion": version, "osImage": "Ubuntu"}
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}, "status": status}


def _dump(path: Path, nodes: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    return path


def test_a_cluster_mid_upgrade_simulates_each_node_at_its_own_version(tmp_path: Path) -> None:
    nodes = _dump(tmp_path / "nodes.json", [_node("old-a", "v1.35.1"), _node("new-a", "v1.36.1-eks-4f7ae1e"),
                                            _node("old-b", "v1.35.1"), _node("plain", None)])
    cluster = cluster_from_dumps(nodes, None)
    by_node = {n: str(p.version) for p in cluster.pools for n in p.node_names()}
    assert by_node == {"old-a": "1.35.1", "old-b": "1.35.1", "new-a": "1.36.1", "plain": str(DEFAULT)}
    # Each simulated node's kubelet is built at its pool's version.
    from numalign.cluster.state import ClusterState

    state = ClusterState(cluster)
    assert {sn.name: str(sn.node().kubelet_version) for sn in state.nodes} == by_node
    sim = run("simulate", "--nodes", str(nodes), "--generate", "10", "--scheduler", "default", "-j", "1",
              "-o", "json")
    assert sim.returncode == 0, sim.stderr
    (r,) = json.loads(sim.stdout)["runs"]
    assert r["config"]["kubeletVersions"] == {str(DEFAULT): 1, "1.36.1": 1, "1.35.1": 2}
    assert "kubelet=" in r["config"]["label"]  # a mixed cluster is named in the run's label
    cap = run("capacity", "--nodes", str(nodes), "-o", "json")
    assert sorted(p["kubeletVersion"] for p in json.loads(cap.stdout)["pools"]) == \
        sorted({"1.35.1", "1.36.1", str(DEFAULT)})
    text = run("simulate", "--nodes", str(nodes), "--generate", "10", "--scheduler", "default", "-j", "1")
    assert "kubelet versions of the cluster: " in text.stdout and "1.35.1 (2 nodes)" in text.stdout
    # A version numalign does not model names the node it came from.
    bad = _dump(tmp_path / "bad.json", [_node("ancient", "v1.28.3")])
    one_line_error(run("simulate", "--nodes", str(bad), "--generate", "5"), "ancient",
                   "status.nodeInfo.kubeletVersion", "v1.28.3", "--kubelet-version")


def test_versions_and_previews_are_axes_side_by_side(tmp_path: Path) -> None:
    sim = run("simulate", "--generate", "20", "--scheduler", "exact", "-j", "1", "--kubelet-version", "1.35",
              "--kubelet-version", "1.36", "--preview-axis", "", "--preview-axis",
              "numa-allocation-strategy=least-allocated", "-o", "json")
    assert sim.returncode == 0, sim.stderr
    runs = [r["config"] for r in json.loads(sim.stdout)["runs"]]
    assert [(c["kubeletVersion"], c["previews"]) for c in runs] == [
        (str(v("1.35")), {}), (str(v("1.35")), {"numa-allocation-strategy": "least-allocated"}),
        (str(v("1.36")), {}), (str(v("1.36")), {"numa-allocation-strategy": "least-allocated"})]
    assert "preview:numa-allocation-strategy=least-allocated" in runs[1]["label"]
    cap = run("capacity", "--kubelet-version", "1.34", "--kubelet-version", "1.37", "-o", "json")
    assert [r["kubeletVersion"] for r in json.loads(cap.stdout)["runs"]] == [str(v("1.34")),
                                                                               str(v("1.37"))]


def test_cluster_yaml_pool_kubelet_version(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "kind: Cluster\npools:\n- {name: old, count: 2, machine: dual-socket, kubeletVersion: \"1.34\"}\n"
        "- {name: new, count: 1, machine: dual-socket}\n")
    cap = run("capacity", "--cluster", str(tmp_path / "cluster.yaml"), "-o", "json")
    assert cap.returncode == 0, cap.stderr
    assert {p["name"]: p["kubeletVersion"] for p in json.loads(cap.stdout)["pools"]} == \
        {"old": str(v("1.34")), "new": str(DEFAULT)}
    (tmp_path / "float.yaml").write_text(
        "kind: Cluster\npools:\n- {name: old, count: 2, machine: dual-socket, kubeletVersion: 1.34}\n")
    one_line_error(run("capacity", "--cluster", str(tmp_path / "float.yaml")), "kubeletVersion", "quoted")


@pytest.mark.parametrize("command", ["admit", "pods", "nrt", "run", "serve", "simulate", "capacity"])
def test_help_names_the_version_flag_and_the_previews(command: str) -> None:
    shown = run(command, "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())  # argparse wraps (also at hyphens): compare words
    assert "--kubelet-version" in text and "PREVIEW of an open upstream proposal" in text
    assert "#138172" in text and "#142226" in text and "#6332" in text


def test_replay_decides_as_the_version_asked(tmp_path: Path) -> None:
    # The shared provider vectors were recorded from 1.35-era code: replay's default. From 1.36.0 the
    # device manager enumerates masks over the NUMA nodes holding devices (k/k #138244), so some device
    # vectors no longer match, and --check says which.
    golden = Path(__file__).parents[1] / "golden" / "data" / "provider_vectors_devices.jsonl"
    lines = [ln for ln in golden.read_text().splitlines() if ln.strip()]
    vectors = tmp_path / "devices.jsonl"
    vectors.write_text("\n".join(lines) + "\n")
    as_135 = run("replay", str(vectors), "--check")
    assert as_135.returncode == 0 and as_135.stdout.splitlines()[-1] == f"{len(lines)}/{len(lines)} equal"
    as_137 = run("replay", str(vectors), "--check", "--kubelet-version", "1.37")
    assert as_137.returncode == 1 and as_137.stdout.startswith("DIFF ")
    one_line_error(run("replay", str(vectors), "--kubelet-version", "1.2.3"), "--kubelet-version", "1.2.3")


def test_the_versions_nodes_report_today_are_decided(tmp_path: Path) -> None:
    """Issue 33 item 3: 1.37.2 is modelled; 1.37.5 (newer than the newest checked) is decided as 1.37.2 with one
    note on stderr, however many nodes report it; a v1.31 dump is simulated at --kubelet-version."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    exact = run("admit", str(pod), "--kubelet-version", "1.37.2", "-o", "json")
    assert exact.returncode == 0 and exact.stderr == "", exact.stderr
    assert json.loads(exact.stdout)["kubeletVersion"] == "1.37.2"
    newer = run("admit", str(pod), "--kubelet-version", "1.37.5", "-o", "json")
    assert newer.returncode == 0, newer.stderr
    assert json.loads(newer.stdout)["kubeletVersion"] == "1.37.2"
    (line,) = newer.stderr.splitlines()
    assert "1.37.5 is newer than the newest 1.37 patch" in line and line.endswith("decided as 1.37.2")

    today = _dump(tmp_path / "today.json", [_node(f"n{i}", "v1.37.2") for i in range(3)])
    sim = run("simulate", "--nodes", str(today), "--generate", "5", "--scheduler", "default", "-j", "1", "-o", "json")
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["runs"][0]["config"]["kubeletVersions"] == {"1.37.2": 3}

    ahead = _dump(tmp_path / "ahead.json", [_node(f"n{i}", "v1.37.5") for i in range(3)])
    sim = run("simulate", "--nodes", str(ahead), "--generate", "5", "--scheduler", "default", "-j", "1", "-o", "json")
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["runs"][0]["config"]["kubeletVersions"] == {"1.37.2": 3}
    notes = [ln for ln in sim.stderr.splitlines() if "v1.37.5" in ln]
    assert len(notes) == 1 and "decided as 1.37.2" in notes[0] and "3 nodes" in notes[0], sim.stderr

    old = _dump(tmp_path / "old.json", [_node("old-a", "v1.31.4"), _node("old-b", "v1.31.4")])
    one_line_error(run("simulate", "--nodes", str(old), "--generate", "5"), "old-a", "v1.31.4", "--kubelet-version")
    sim = run("simulate", "--nodes", str(old), "--kubelet-version", "1.33", "--generate", "5", "--scheduler",
              "default", "-j", "1", "-o", "json")
    assert sim.returncode == 0, sim.stderr
    assert [r["config"]["kubeletVersion"] for r in json.loads(sim.stdout)["runs"]] == ["1.33.13"]
    assert any("v1.31.4" in ln and "--kubelet-version" in ln for ln in sim.stderr.splitlines()), sim.stderr


HANG_FLAGS = ["--machine", "dual-socket", "--cpu-manager-policy", "static", "--topology-manager-policy", "none",
              "--memory-manager-policy", "None", "--reserved-cpus",
              "3-15,19-31,35-47,51-63,66-79,82-95,98-111,114-127",
              "--cpu-manager-policy-options", "full-pcpus-only=true",
              "--cpu-manager-policy-options", "distribute-cpus-across-numa=true"]


def test_where_the_kubelet_hangs_numalign_says_so(tmp_path: Path) -> None:
    """k/k #140730 (research upstream-2026-11 §7): 5 free CPUs per NUMA node, 14 CPUs in whole cores. Kubelet
    <= 1.37 never returns from Allocate; numalign says so instead of an allocation, and 1.38 answers."""
    pod = tmp_path / "pod14.yaml"
    pod.write_text(POD.replace('cpu: "2"', 'cpu: "14"'))
    text = run("admit", str(pod), "--kubelet-version", "1.37.2", *HANG_FLAGS)
    assert text.returncode == 0, text.stderr
    verdict = next(ln for ln in text.stdout.splitlines() if ln.startswith("pod default/p:"))
    assert verdict.startswith("pod default/p: HANGS: the kubelet 1.37.2 hangs here (k/k #140730")
    doc = json.loads(run("admit", str(pod), "--kubelet-version", "1.37.2", *HANG_FLAGS, "-o", "json").stdout)
    (rec,) = doc["pods"]
    assert rec["result"]["hangs"] is True and rec["result"]["admit"] is False
    assert rec["result"]["reason"] == "KubeletHangs" and rec["allocations"] == {}
    fixed = json.loads(run("admit", str(pod), "--kubelet-version", "1.38.0-beta.0", *HANG_FLAGS, "-o", "json").stdout)
    (rec,) = fixed["pods"]
    assert rec["result"]["admit"] is True and "hangs" not in rec["result"]
