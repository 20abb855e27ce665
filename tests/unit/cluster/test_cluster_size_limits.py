"""A pool's `count`, the pools' total, `--generate` and a Mix's `count` are bounded (numalign.limits):
past the limit, one line of invalid input before any node or pod is built, instead of taking all memory
and ending as an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from numalign.cluster.model import load_cluster
from numalign.cluster.workload import generate, mix_from_dict
from numalign.errors import InvalidInputError
from numalign.limits import MAX_CLUSTER_NODES, MAX_GENERATED_PODS

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}


def _cluster(tmp_path: Path, *counts: int) -> Path:
    path = tmp_path / "cluster.yaml"
    pools = "".join(f"- {{name: p{i}, count: {c}, machine: dual-socket}}\n" for i, c in enumerate(counts))
    path.write_text(f"kind: Cluster\npools:\n{pools}")
    return path


def test_a_pool_past_the_node_limit_is_refused_before_its_nodes_are_built(tmp_path: Path) -> None:
    path = _cluster(tmp_path, 10**9)
    with pytest.raises(InvalidInputError, match=rf"^{path}: pools\[0\] \(p0\)\.count: 1,000,000,000 nodes is more "
                                                rf"than the limit of {MAX_CLUSTER_NODES:,}; lower it"):
        load_cluster(path)


def test_the_pools_together_are_bounded(tmp_path: Path) -> None:
    half = MAX_CLUSTER_NODES // 2 + 1
    with pytest.raises(InvalidInputError, match=rf"pools: {2 * half:,} nodes in all is more than the limit"):
        load_cluster(_cluster(tmp_path, half, half))
    assert load_cluster(_cluster(tmp_path, 3, 2)).node_count == 5


def test_generated_pods_are_bounded() -> None:
    (shape,), _ = mix_from_dict({"shapes": [{"weight": 1, "pod": POD}]}, "mix.yaml")
    with pytest.raises(InvalidInputError, match=rf"^--generate: {MAX_GENERATED_PODS + 1:,} pods is more than the "
                                                r"limit"):
        generate([shape], MAX_GENERATED_PODS + 1, 1)
    with pytest.raises(InvalidInputError, match=r"^mix\.yaml: count: 1,000,000,000 pods is more than the limit"):
        mix_from_dict({"shapes": [{"weight": 1, "pod": POD}], "count": 10**9}, "mix.yaml")
    assert len(generate([shape], 7, 1).groups) == 7


@pytest.mark.parametrize("argv", [["capacity"], ["simulate", "--generate", "10"]], ids=["capacity", "simulate"])
def test_the_cli_says_so_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    path = _cluster(tmp_path, 10**9)
    done = subprocess.run([sys.executable, "-m", "numalign.cli.main", *argv, "--cluster", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "more than the limit of" in line and "internal error" not in line


def test_simulate_generate_past_the_limit_is_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "numalign.cli.main", "simulate", "--generate", str(10**9)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "--generate: 1,000,000,000 pods is more than the limit" in line
