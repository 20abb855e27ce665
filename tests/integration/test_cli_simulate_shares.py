"""simulate's figures of nothing and of mixed clusters (issue 31 item 5): a share of no pods is "–" (null
in JSON), not 100%; a run over pools with different kubelet settings is labelled with each, not with
the first pool's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalign.cli.main import main

MIXED = """pools:
- name: gpu
  count: 2
  machine: dual-socket
- name: plain
  count: 1
  machine: dual-socket
  kubelet:
    topologyManagerPolicy: none
    cpuManagerPolicy: none
    memoryManagerPolicy: None
"""
BEST_EFFORT = "apiVersion: v1\nkind: Pod\nmetadata: {name: be}\nspec:\n  containers:\n  - name: c\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cluster, pod = tmp_path / "mixed.yaml", tmp_path / "be.yaml"
    cluster.write_text(MIXED, encoding="utf-8")
    pod.write_text(BEST_EFFORT, encoding="utf-8")
    return cluster, pod


def test_no_guaranteed_pods_is_no_share(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cluster, pod = files
    args = ["simulate", "--cluster", str(cluster), str(pod), "-j", "1", "--scheduler", "exact"]
    assert main(args) == 0
    rows = {line[:31].strip(): line[31:].strip() for line in capsys.readouterr().out.splitlines()}
    assert rows["Guaranteed on 1 NUMA node"] == "–" and rows["Guaranteed on fewest possible"] == "–"
    assert main([*args, "-o", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["alignment"]["guaranteed"] == 0
    assert run["alignment"]["share"] is None and run["alignment"]["fewestShare"] is None
    assert main([*args, "-o", "csv"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(","), strict=False))
    assert cells["numaAlignedShare"] == "" and cells["numaFewestShare"] == ""


def test_a_mixed_cluster_is_labelled_per_pool(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cluster, pod = files
    assert main(["simulate", "--cluster", str(cluster), str(pod), "-j", "1", "--scheduler", "exact",
                 "-o", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    config = run["config"]
    assert config["topologyManagerPolicy"] == "single-numa-node|none"
    assert (config["cpuManagerPolicy"], config["memoryManagerPolicy"]) == ("static|none", "Static|None")
    # an axis sets every pool: one value again
    assert main(["simulate", "--cluster", str(cluster), str(pod), "-j", "1", "--scheduler", "exact",
                 "--policy", "restricted", "-o", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["config"]["topologyManagerPolicy"] == "restricted"
