"""`numalign admit` as a user runs it: a subprocess, real files, the main job with no arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXE = [sys.executable, "-m", "numalign.cli.main"]
CONFIG = Path(__file__).resolve().parents[2] / "src" / "numalign" / "data" / "example-kubelet-config.yaml"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False)


def test_main_job_with_no_arguments_admits_and_explains() -> None:
    p = run()
    assert p.returncode == 0, p.stderr
    assert "machine dual-socket" in p.stdout
    assert "pod ml/inference-gpu: admitted" in p.stdout
    assert "pod ml/training-4gpu: REJECTED: TopologyAffinityError" in p.stdout
    assert "why: devices/nvidia.com/gpu cannot be satisfied" in p.stdout
    assert "4/5 pods admitted" in p.stdout


def test_json_output_and_state_dir_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = run("admit", "--state-dir", str(state), "--output", "json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    server = next(p for p in doc["pods"] if p["pod"] == "ml/inference-gpu")
    assert server["result"]["admit"] is True
    gpu_ids = server["allocations"]["server"]["devices"]["nvidia.com/gpu"]
    assert (state / "cpu_manager_state").exists()
    assert (state / "memory_manager_state").exists()
    assert (state / "device-plugins" / "kubelet_internal_checkpoint").exists()
    pod = tmp_path / "extra.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: extra}\nspec:\n  containers:\n  - name: c\n"
        "    resources:\n      limits: {cpu: '4', memory: 8Gi, nvidia.com/gpu: '1'}\n"
    )
    second = run("admit", str(pod), "--state-dir", str(state), "--config", str(CONFIG), "--output", "json")
    assert second.returncode == 0, second.stderr
    rec = json.loads(second.stdout)["pods"][0]
    assert rec["result"]["admit"] is True
    got = rec["allocations"]["c"]["devices"]["nvidia.com/gpu"]
    assert not set(got) & set(gpu_ids)  # the restored state keeps the first run's GPU taken
    cpus_first = {server["allocations"]["server"]["cpus"]}
    assert rec["allocations"]["c"]["cpus"] not in cpus_first


def test_dry_run_reads_the_state_and_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert run("admit", "--state-dir", str(state)).returncode == 0
    before = {p: p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file()}
    pod = tmp_path / "extra.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: extra}\nspec:\n  containers:\n  - name: c\n"
        "    resources:\n      limits: {cpu: '4', memory: 8Gi, nvidia.com/gpu: '3'}\n"
    )
    # The first run holds 1 of the 4 GPUs: 3 more still fit (across NUMA nodes, hence best-effort) ...
    be = ("--state-dir", str(state), "--policy", "best-effort")
    dry = run("admit", str(pod), *be, "--dry-run", "--output", "json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["pods"][0]["result"]["admit"] is True
    assert any("dry run" in n for n in doc["notes"])
    # ... but nothing was written, so asking again gives the same answer and the files are unchanged.
    again = run("admit", str(pod), *be, "--dry-run", "--output", "json")
    assert json.loads(again.stdout)["pods"][0]["result"]["admit"] is True
    assert {p: p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file()} == before
    # Without --dry-run the pod is kept, and a second pod like it no longer fits.
    assert run("admit", str(pod), *be).returncode == 0
    other = tmp_path / "other.yaml"
    other.write_text(pod.read_text().replace("name: extra", "name: other"))
    third = run("admit", str(other), *be, "--dry-run", "--output", "json")
    assert json.loads(third.stdout)["pods"][0]["result"]["admit"] is False


def test_kubelet_flags_and_aliases(tmp_path: Path) -> None:
    pod = tmp_path / "p.yaml"
    pod.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: c\n        resources:\n          limits: {cpu: '2', memory: 1Gi}\n"
    )
    # Without --config the built-in example is the base; the first --kube-reserved replaces its
    # kubeReserved map (as for a file), so memory is kept to match the example's reservedMemory.
    p = run("admit", str(pod), "--policy", "restricted", "--cpu-manager-policy", "static",
            "--kube-reserved", "cpu=1,memory=1Gi", "--output", "json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)["pods"][0]
    assert rec["policy"] == "restricted" and rec["result"]["admit"] is True
    assert rec["allocations"]["c"]["exclusiveCPUs"] is True


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["admit", "--policy", "sometimes"], "topologyManagerPolicy (--topology-manager-policy) \"sometimes\""),
        (["admit", "--machine", "no-such-machine"], "no-such-machine"),
        (["admit", "missing.yaml"], "missing.yaml"),
        (["replay", "missing.jsonl"], "missing.jsonl"),
    ],
)
def test_bad_input_gets_one_clear_line_not_a_traceback(args: list[str], needle: str) -> None:
    p = run(*args)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    assert needle in p.stderr


def test_bad_quantity_names_the_field(tmp_path: Path) -> None:
    pod = tmp_path / "bad.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers:\n  - name: c\n"
        "    resources:\n      limits: {cpu: two}\n"
    )
    p = run("admit", str(pod))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "spec.containers[0].resources.limits.cpu" in p.stderr


def test_replay_check_reports_equal_count(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[1] / "golden" / "data" / "merge_vectors.jsonl"
    sample = tmp_path / "v.jsonl"
    sample.write_text("".join(data.read_text().splitlines(keepends=True)[:50]))
    p = run("replay", str(sample), "--check")
    assert p.returncode == 0 and p.stdout.strip().endswith("50/50 equal")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(sample.read_text().splitlines()[0] + "\n{not json\n")
    q = run("replay", str(broken), "--check")
    assert q.returncode != 0 and ":2:" in q.stderr


def test_a_deployment_is_admitted_with_all_its_replicas_and_a_note(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n"
                      "  replicas: 5\n  template:\n    spec:\n      containers:\n      - name: c\n"
                      "        resources: {limits: {cpu: '2', memory: 1Gi}}\n", encoding="utf-8")
    out = json.loads(run("admit", str(deploy), "-o", "json").stdout)
    assert [p["pod"] for p in out["pods"]] == [f"shop/web-{i}" for i in range(5)]
    assert "note: " + str(deploy) + ": Deployment shop/web: 5 pod(s) (its spec.replicas)" in out["notes"]
    # --replicas N still overrides, and says so.
    out = json.loads(run("admit", str(deploy), "--replicas", "2", "-o", "json").stdout)
    assert [p["pod"] for p in out["pods"]] == ["shop/web-0", "shop/web-1"]
    assert any("2 pod(s) (--replicas 2; its spec.replicas is 5)" in n for n in out["notes"])
    text = run("admit", str(deploy)).stdout
    assert "Deployment shop/web: 5 pod(s) (its spec.replicas)" in text
    bad = run("admit", "--replicas", str(deploy))
    assert bad.returncode == 2 and "is not a number of pods" in bad.stderr and len(bad.stderr.splitlines()) == 1
