"""The files users hold, read as they are (issue 31 items 1 and 2): public inputs real tools emitted or
real projects ship (tests/data/real-inputs/README.md names each source)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from numalign.cli.main import main
from numalign.cluster.dumps import cluster_from_dumps

DATA = Path(__file__).parent.parent / "data" / "real-inputs"


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("note: ")]


@pytest.mark.parametrize(("name", "policies"), [
    ("nto-default_cpuFrequency_manual_kubeletconfig.yaml", ("single-numa-node", "static", "Static")),
    ("nto-bootstrap_no-mcp_openshift-bootstrap-worker_kubeletconfig.yaml", ("best-effort", "static", "None")),
])
def test_openshift_kubeletconfig_cr_is_read_from_spec(
    name: str, policies: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["admit", "--config", str(DATA / name), str(DATA / "simple.yaml"), "-o", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    text = json.dumps(doc)
    for value in policies:
        assert f'"{value}"' in text
    (note,) = _notes(captured.err)
    assert "read spec.kubeletConfig of the OpenShift KubeletConfig" in note and name in note


def test_kubeadm_configmap_is_read_from_data_kubelet(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "kubeadm-kubelet-config-cm.yaml"
    assert main(["admit", "--config", str(path), str(DATA / "simple.yaml")]) == 0
    captured = capsys.readouterr()
    assert "cpuManagerPolicy none" in captured.out and "1/1 pods admitted" in captured.out
    assert _notes(captured.err) == [f"note: {path}: read the KubeletConfiguration under data.kubelet of the "
                                    "ConfigMap kubelet-config"]


def test_multi_document_config_picks_the_kubelet_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bundle.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n"
                    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                    "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\ntopologyManagerPolicy: restricted\n",
                    encoding="utf-8")
    assert main(["admit", "--config", str(path), str(DATA / "simple.yaml")]) == 0
    captured = capsys.readouterr()
    assert "topologyManagerPolicy restricted" in captured.out
    assert _notes(captured.err) == [f"note: {path}: read document 2 of 2 (KubeletConfiguration); the others are "
                                    "not kubelet configurations and are skipped"]
    two = tmp_path / "two.yaml"
    body = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    two.write_text(body + "---\n" + body, encoding="utf-8")
    assert main(["admit", "--config", str(two)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "2 kubelet configurations (documents 1 (KubeletConfiguration), 2 (KubeletConfiguration))" in line


def test_a_config_of_another_kind_names_every_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", "--config", str(DATA / "simple.yaml")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "not a KubeletConfiguration: got apiVersion 'v1', kind 'Pod'" in line
    assert "OpenShift KubeletConfig" in line and "kube-system/kubelet-config ConfigMap" in line


def _supported(tmp_path: Path) -> Path:
    """worker1.internal as dumped (kubelet v1.31.6, which numalign does not model), at 1.33.8."""
    text = (DATA / "worker1.internal.yaml").read_text(encoding="utf-8")
    path = tmp_path / "worker1.yaml"
    path.write_text(text.replace("kubeletVersion: v1.31.6", "kubeletVersion: v1.33.8"), encoding="utf-8")
    return path


def test_yaml_node_dump_uses_allocatable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # capacity cpu 80, allocatable 74: 37 two-CPU pods, not 40
    nodes = _supported(tmp_path)
    assert main(["capacity", "--nodes", str(nodes), str(DATA / "simple.yaml"), "-o", "json"]) == 0
    captured = capsys.readouterr()
    (pool,) = json.loads(captured.out)["runs"][0]["byPool"]
    assert (pool["exact"], pool["byRequests"]) == (37, 37)
    assert any("no NodeResourceTopology" in n and "worker1.internal" in n for n in _notes(captured.err))


def _node(name: str, capacity: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": capacity, "allocatable": allocatable, "nodeInfo": {"kubeletVersion": "v1.35.2"}}}


def test_allocatable_cpu_31500m_fits_15_two_cpu_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110", "hugepages-1Gi": "4Gi", "example.com/nic": "4"}
    alloc = {"cpu": "31500m", "memory": "120Gi", "pods": "20", "hugepages-1Gi": "4Gi", "example.com/nic": "3"}
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": [_node("ocp-1", cap, alloc)]}), encoding="utf-8")
    assert main(["capacity", "--nodes", str(nodes), str(DATA / "simple.yaml"), "-o", "json"]) == 0
    (pool,) = json.loads(capsys.readouterr().out)["runs"][0]["byPool"]
    assert (pool["exact"], pool["byRequests"]) == (15, 15)
    # every allocatable figure is the Node's
    from numalign.kubelet.admission.allocatable import node_allocatable

    (p,) = cluster_from_dumps(nodes, None).pools
    got = node_allocatable(p.machine, p.config)
    assert got["cpu"] == 31500 and got["memory"] == 120 << 30 and got["hugepages-1Gi"] == 4 << 30
    assert got["example.com/nic"] == 3 and p.max_pods == 20


def test_memoryless_nrt_takes_memory_from_the_node(capsys: pytest.CaptureFixture[str]) -> None:
    """scheduler-plugins' worker-node-A/B report cpu and devices only (memory manager None)."""
    assert main(["capacity", "--nodes", str(DATA / "nodes-ab.json"), "--nrts", str(DATA / "nrts-ab-v2.json"),
                 str(DATA / "simple.yaml"), "-o", "json"]) == 0
    captured = capsys.readouterr()
    pools = json.loads(captured.out)["runs"][0]["byPool"]
    # 3 allocatable CPUs per NUMA node: one 2-CPU pod each under single-numa-node; not 0 for want of memory
    assert [(p["exact"], p["byRequests"]) for p in pools] == [(2, 3), (2, 3)]
    assert all("Insufficient memory" not in json.dumps(p) for p in pools)
    assert any("NRT zones carry no memory" in n and "2 nodes: worker-node-a, worker-node-b" in n
               for n in _notes(captured.err))
    cluster = cluster_from_dumps(DATA / "nodes-ab.json", DATA / "nrts-ab-v2.json")
    assert [n.memory_bytes for n in cluster.pools[0].machine.numa_nodes] == [8 << 30, 8 << 30]


def test_reconstructed_reserved_cpus_are_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--nodes", str(DATA / "nodes-ab.json"), "--nrts", str(DATA / "nrts-ab-v2.json"), str(DATA / "simple.yaml")]
    assert main(["capacity", *args]) == 0
    out = capsys.readouterr().out
    assert "static reserved 0,4 (ids reconstructed)" in out
    assert main(["capacity", *args, "-o", "json"]) == 0
    settings = json.loads(capsys.readouterr().out)["pools"][0]
    assert settings["reconstructed"] == ["reservedSystemCPUs"]


@pytest.mark.parametrize("nrt", ["worker-node-A.yaml", "nrt-api-crd-instance-example-v1alpha1.yaml"])
def test_v1alpha1_nrts_are_read_as_v1alpha2(nrt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "worker-node-a" if nrt.startswith("worker") else "node1"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: test-namespace}\n---\n"
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n"
        "status:\n  capacity: {cpu: '120', memory: 64Gi, pods: '110'}\n"
        "  allocatable: {cpu: '120', memory: 63Gi, pods: '110'}\n  nodeInfo: {kubeletVersion: v1.35.2}\n",
        encoding="utf-8")
    assert main(["capacity", "--nodes", str(nodes), "--nrts", str(DATA / nrt), str(DATA / "simple.yaml")]) == 0
    captured = capsys.readouterr()
    notes = _notes(captured.err)
    assert any("topology.node.k8s.io/v1alpha1 read as topology.node.k8s.io/v1alpha2" in n for n in notes)
    assert any("skipped 1 object(s) that are not Nodes (Namespace: 1)" in n for n in notes)
    if nrt.startswith("worker"):
        assert "single-numa-node/container" in captured.out
        assert any("without `available`" in n for n in notes)
    else:  # "SingleNUMANode" is no value scheduler-plugins reads
        assert any("'SingleNUMANode' is not one scheduler-plugins reads" in n for n in notes)


def test_pods_dump_in_yaml_with_other_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: running, namespace: default}\n"
        "  spec:\n    nodeName: worker-node-a\n    containers:\n    - name: c\n"
        "      resources: {limits: {cpu: '2', memory: 1Gi}}\n  status: {phase: Running}\n",
        encoding="utf-8")
    assert main(["capacity", "--nodes", str(DATA / "nodes-ab.json"), "--nrts", str(DATA / "nrts-ab-v2.json"),
                 "--pods-dump", str(pods), str(DATA / "simple.yaml"), "-o", "json"]) == 0
    captured = capsys.readouterr()
    pools = json.loads(captured.out)["runs"][0]["byPool"]
    assert [p["exact"] for p in pools] == [1, 2]  # one already runs on worker-node-a
    assert any("skipped 1 object(s) that are not Pods (ConfigMap: 1)" in n for n in _notes(captured.err))


def test_python_dash_m_numalign() -> None:
    done = subprocess.run([sys.executable, "-m", "numalign", "admit", str(DATA / "simple.yaml")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "1/1 pods admitted" in done.stdout, done.stderr


def _deployment(tmp_path: Path) -> Path:
    path = tmp_path / "web.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n"
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n"
                    "spec:\n  replicas: 4\n  template:\n    spec:\n      containers:\n      - name: c\n"
                    "        resources: {limits: {cpu: '2', memory: 1Gi}}\n", encoding="utf-8")
    return path


def test_other_kinds_are_skipped_with_one_note_in_simulate_and_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    web = _deployment(tmp_path)
    assert main(["simulate", str(web), "-j", "1", "--scheduler", "exact", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"][0]["pods"] == 4
    assert f"note: {web}: document 1: Namespace shop skipped (no pod template)" in _notes(captured.err)
    assert main(["capacity", str(web)]) == 0
    captured = capsys.readouterr()
    assert f"note: {web}: document 1: Namespace shop skipped (no pod template)" in _notes(captured.err)
    assert f"note: {web}: Deployment shop/web: 4 pod(s) (its spec.replicas)" in _notes(captured.err)


def test_replicas_means_pods_per_workload_in_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    web = _deployment(tmp_path)
    assert main(["simulate", str(web), "--replicas", "7", "-j", "1", "--scheduler", "exact", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"][0]["pods"] == 7
    assert f"note: {web}: Deployment shop/web: 7 pod(s) (--replicas 7; its spec.replicas is 4)" in _notes(captured.err)
    nodes = _supported(tmp_path)  # 74 allocatable CPUs: 37 copies of a 2-CPU pod
    assert main(["capacity", str(web), "--nodes", str(nodes), "--replicas", "40"]) == 0
    assert "the workload's 40 pod(s): do not fit (37 copies fit NUMA-exact)" in capsys.readouterr().out
    assert main(["capacity", str(web), "--nodes", str(nodes), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["workloadPods"] == 4
    # a bare Pod stays one pod, in admit as in capacity, and says so once
    for command in (["admit"], ["capacity"]):
        assert main([*command, str(DATA / "simple.yaml"), "--replicas", "3"]) == 0
        captured = capsys.readouterr()
        said = [line for line in (captured.out + captured.err).splitlines() if "a bare Pod is one pod" in line]
        assert len(said) == 1, said
    assert main(["admit", str(DATA / "simple.yaml"), "--replicas", "3", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["pods"]) == 1
    # without manifests there is nothing for --replicas to set
    assert main(["simulate", "--generate", "5", "--replicas", "3", "-j", "1"]) == 2
    assert "--replicas 3 sets the pods of each workload manifest" in capsys.readouterr().err
