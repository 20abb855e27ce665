"""`numalign simulate` and `numalign capacity` on the command line, and their one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.terminal import run_on_a_terminal

from numalign.cli.main import main
from numalign.k8s.version import DEFAULT


def test_simulate_with_no_files_prints_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.split()[:1] == ["default"])
    assert header.split() == ["default", "nrt", "exact"]
    assert "every run: single-numa-node" in out.splitlines()
    row = next(line for line in out.splitlines() if line.startswith("kubelet rejections"))
    default_rej, nrt_rej, exact_rej = (int(v) for v in row.split()[2:5])
    assert default_rej > nrt_rej == exact_rej == 0
    # each reason's most frequent message follows the table, under the run that got it, with its node and pod
    lines = out.splitlines()
    at = lines.index("kubelet rejections, the most frequent message of each reason (with the node and pod that gave "
                     "it first):")
    assert lines[at + 1] == "  default single-numa-node:"
    assert lines[at + 2].startswith("    TopologyAffinityError (")
    assert lines[at + 2].endswith(": Resources cannot be allocated with Topology locality")
    assert ", node cpu-" in lines[at + 2] or ", node gpu-" in lines[at + 2]


def test_simulate_json_csv_and_a_cluster_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kubelet.yaml").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"
        "reservedSystemCPUs: '0'\ntopologyManagerPolicy: restricted\n", encoding="utf-8")
    (tmp_path / "cluster.yaml").write_text("""
kind: Cluster
name: mine
pools:
- name: big
  count: 3
  machine: epyc-nps4
  kubeletConfig: kubelet.yaml
  kubelet: {topologyManagerScope: pod}
  devices: {nvidia.com/gpu: {0: 1, 4: 1}}
  labels: {tier: big}
  taints: [{key: dedicated, value: big, effect: NoSchedule}]
- name: small
  count: 2
  machine: dual-socket
""", encoding="utf-8")
    (tmp_path / "pods.yaml").write_text("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: svc, namespace: t}
spec:
  replicas: 5
  template:
    spec:
      tolerations: [{key: dedicated, operator: Equal, value: big, effect: NoSchedule}]
      nodeSelector: {tier: big}
      containers:
      - name: c
        resources: {limits: {cpu: '4', memory: 4Gi, nvidia.com/gpu: '1'}}
""", encoding="utf-8")
    args = ["simulate", "--cluster", str(tmp_path / "cluster.yaml"), str(tmp_path / "pods.yaml"), "-j", "1",
            "--scheduler", "exact"]
    assert main([*args, "-o", "json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    (run,) = sim["runs"]
    assert sim["nodes"] == 5 and run["pods"] == 5
    # Only the 3 tainted, labelled EPYC nodes take them: 2 GPUs each, so 5 fit.
    assert run["placed"] == 5 and run["resources"]["nvidia.com/gpu"]["requested"] == 5
    # the pools differ in scope: the run names both, in pool order (not the first pool's alone)
    assert run["config"]["topologyManagerScope"] == "pod|container"
    assert main([*args, "-o", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("scheduler,scoring,")
    assert lines[1].startswith("exact,LeastAllocated,restricted|single-numa-node,pod|container,")


@pytest.mark.parametrize(
    ("cluster_yaml", "expected"),
    [
        ("kind: Cluster\npools:\n- {name: a, count: 1, machine: quantum-9000}\n",
         "pools[0] (a).machine: --machine 'quantum-9000': not a built-in machine"),
        ("kind: Cluster\npools:\n- {name: a, count: 0}\n", "pools[0] (a).count: expected a whole number >= 1"),
        ("kind: Cluster\npools:\n- {name: a, devices: {gpu: {0: 1}}}\n",
         "pools[0] (a).devices.gpu: 'gpu' is not an extended resource name"),
        ("kind: Cluster\npools:\n- {name: a, devices: {x.io/gpu: {9: 1}}}\n",
         "NUMA node 9 does not exist on machine dual-socket"),
        ("kind: Cluster\npools:\n- {name: a, cores: 4}\n", "pools[0].cores: unknown field"),
        ("kind: NodeList\nitems: []\n", "a Kubernetes NodeList, not a cluster.yaml"),
    ],
)
def test_bad_cluster_files_get_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster_yaml: str,
                                        expected: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(cluster_yaml, encoding="utf-8")
    assert main(["simulate", "--cluster", str(path), "-j", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and expected in err[0], err


def test_capacity_built_in_and_bad_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "-o", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["summary"]["runs"] == [{"kubeletVersion": str(DEFAULT), "exact": 32, "byRequests": 40}]
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n", encoding="utf-8")
    assert main(["capacity", str(empty)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty.yaml: no Pod or workload" in err[0]


def test_sweep_file_and_its_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("kind: Sweep\nschedulers: [default, exact]\nscoring: {exact: LeastNUMANodes}\n"
                     "topologyManagerPolicies: [single-numa-node, best-effort]\n", encoding="utf-8")
    assert main(["simulate", "--sweep", str(sweep), "--generate", "40", "-j", "1", "-o", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["config"]["scheduler"], r["config"]["scoring"], r["config"]["topologyManagerPolicy"]) for r in runs] \
        == [("default", "LeastAllocated", "single-numa-node"), ("exact", "LeastNUMANodes", "single-numa-node"),
            ("default", "LeastAllocated", "best-effort"), ("exact", "LeastNUMANodes", "best-effort")]
    assert main(["simulate", "--sweep", str(sweep), "--policy", "restricted", "-j", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sweep and axis flags" in err[0]
    sweep.write_text("kind: Sweep\ntopologyManagerScopes: [pod, pod]\n", encoding="utf-8")
    assert main(["simulate", "--sweep", str(sweep), "-j", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep.yaml: topologyManagerScopes: 'pod' is listed twice" in err[0]


@pytest.mark.parametrize(("body", "message"), [
    # a map where the file format wants a string: named with its file, field and index
    ("topologyManagerPolicyOptions: [{prefer-closest-numa-nodes: 'true'}]",
     "sweep.yaml: topologyManagerPolicyOptions[0]: expected a string, got {'prefer-closest-numa-nodes': 'true'}; "
     'write it as "prefer-closest-numa-nodes=true"'),
    ("cpuManagerPolicyOptions: [full-pcpus-only]",
     "sweep.yaml: cpuManagerPolicyOptions: 'full-pcpus-only': 'full-pcpus-only' is not KEY=VALUE"),
    # refused by the kubelet's start-up, before any run starts (not inside a worker process)
    ("topologyManagerPolicyOptions: ['bogus=1']",
     'sweep.yaml: the run with --topology-manager-policy-options bogus=1: unknown Topology Manager Policy option: '
     '"bogus"'),
    ("cpuManagerPolicies: [none, static]\ncpuManagerPolicyOptions: ['full-pcpus-only=true']",
     "sweep.yaml: the run with --cpu-manager-policy none --cpu-manager-policy-options full-pcpus-only=true: "
     "None policy: cannot create with options"),
])
def test_sweep_values_the_kubelet_refuses_name_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"kind: Sweep\n{body}\n", encoding="utf-8")
    assert main(["simulate", "--sweep", str(sweep), "--generate", "10", "-j", "2"]) != 0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and message in lines[0], lines


def test_the_readme_examples_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The commands the README shows, on docs/examples, from that directory."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2] / "docs" / "examples")
    assert main(["simulate", "--cluster", "cluster.yaml", "deploy.yaml", "--policy", "single-numa-node",
                 "--policy", "restricted", "--scope", "container", "--scope", "pod", "-j", "1", "-o", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert len(runs) == 12 and all(r["pods"] == 100 for r in runs)
    assert all(r["rejections"] == 0 for r in runs if r["config"]["scheduler"] == "exact")
    assert any(r["rejections"] > 0 for r in runs if r["config"]["scheduler"] == "default")
    # The kubelets here refuse with the memory manager's UnexpectedAdmissionError, not TopologyAffinityError:
    # exact's unschedulable reason names no reason it did not see.
    assert {k for r in runs for k in r["kubeletRejections"]} == {"UnexpectedAdmissionError"}
    exact_reasons = {k for r in runs if r["config"]["scheduler"] == "exact" for k in r["unschedulableReasons"]}
    assert exact_reasons and not any("TopologyAffinityError" in k for k in exact_reasons)
    assert main(["capacity", "train.yaml", "--cluster", "cluster.yaml", "-o", "json"]) == 0
    cap = json.loads(capsys.readouterr().out)
    assert (cap["runs"][0]["exact"], cap["runs"][0]["byRequests"]) == (24, 32)
    assert main(["simulate", "--cluster", "cluster.yaml", "deploy.yaml", "--sweep", "sweep.yaml", "-j", "1",
                 "-o", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 13
    assert main(["simulate", "--cluster", "cluster.yaml", "deploy.yaml", "--timeline", "timeline.csv", "-j", "1",
                 "--scheduler", "exact", "-o", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["deleted"] == 60 and run["placed"] == 40


def test_simulate_and_capacity_show_each_pools_configuration(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.yaml").write_text("""
kind: Cluster
name: two
pools:
- {name: aligned, count: 2, machine: dual-socket}
- name: loose
  count: 1
  machine: epyc-nps4
  kubelet: {topologyManagerPolicy: best-effort, topologyManagerScope: pod,
            cpuManagerPolicyOptions: {full-pcpus-only: "true"}}
""", encoding="utf-8")
    assert main(["capacity", "--cluster", str(tmp_path / "cluster.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out.index(next(line for line in out if line.startswith("POOL") and "TOPOLOGY MANAGER" in line))
    assert out[head + 1].split() == ["aligned", "2", "dual-socket", str(DEFAULT), "single-numa-node/container",
                                     "static", "reserved", "0,64", "Static", "110"]
    # The example's reservation is the pool machine's first core: CPUs 0 and 128 on epyc-nps4.
    assert out[head + 2].split() == ["loose", "1", "epyc-nps4", str(DEFAULT), "best-effort/pod", "static", "reserved",
                                     "0,128", "full-pcpus-only=true", "Static", "110"]
    assert main(["capacity", "--cluster", str(tmp_path / "cluster.yaml"), "-o", "json"]) == 0
    pools = json.loads(capsys.readouterr().out)["pools"]
    assert pools[1]["kubeletConfig"]["topologyManagerScope"] == "pod"
    assert main(["simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--generate", "10", "--jobs", "1",
                 "--scheduler", "exact"]) == 0
    text = capsys.readouterr().out
    assert "best-effort/pod" in text and "single-numa-node/container" in text
    assert main(["simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--generate", "10", "--jobs", "1",
                 "--scheduler", "exact", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in doc["pools"]] == ["aligned", "loose"]
    assert doc["pools"][1]["kubeletConfig"]["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def test_the_timeline_table_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cluster", str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "deploy.yaml"),
                 "--timeline", str(EXAMPLES / "timeline.csv"), "--jobs", "1"]) == 0
    rows = {line[:31].strip(): line[31:].split() for line in capsys.readouterr().out.splitlines()
            if line[:2] in ("po", "  ") and len(line) > 31}
    pods = [int(v) for v in rows["pods"]]
    parts = [rows[k] for k in ("placed", "unschedulable", "failed after retries", "deleted (timeline)")]
    assert [sum(int(p[i]) for p in parts) for i in range(len(pods))] == pods
    assert any(int(v) > 0 for v in rows["deleted (timeline)"])


def test_many_runs_keep_table_lines_readable(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--generate", "12", "--jobs", "1", "--scheduler", "default", "--scheduler", "nrt",
            "--policy", "single-numa-node", "--policy", "restricted", "--policy", "best-effort",
            "--scope", "container", "--scope", "pod", "--cpu-manager-policy-options", "full-pcpus-only=true"]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) <= 120
    # What every run shares is said once; each of the 12 runs keeps its own column, in blocks.
    assert "every run: full-pcpus-only=true" in out
    heads = [line.split() for line in out if line.startswith(" " * 31) and line.split()[0] in ("default", "nrt")]
    assert sum(len(h) for h in heads) == 12
    assert sum(1 for line in out if line.startswith("  placed")) == len(heads) > 1


def test_simulate_shows_progress_with_jobs_on_a_terminal_only() -> None:
    """Several runs in worker processes report their pods placed to the terminal (stderr on a real
    pseudo-terminal); piped, nothing is written to stderr and stdout is the same."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "numalign.cli.main", "simulate", "--generate", "40", "--jobs", "2",
           "--scheduler", "default", "--scheduler", "exact", "-o", "json"]
    proc, shown = run_on_a_terminal(cmd, timeout=300)
    # Each worker's run reports its start (and then its progress) before its result arrives.
    assert "run 1/2: " in shown and "run 2/2: " in shown and "/40 pods placed" in shown
    assert "2 done" in shown and shown.endswith("\x1b[2K")
    piped = subprocess.run(cmd, capture_output=True, check=True, timeout=300)
    assert piped.stderr == b"" and json.loads(piped.stdout)["runs"] == json.loads(proc.stdout)["runs"]
