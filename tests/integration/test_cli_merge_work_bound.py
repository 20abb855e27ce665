"""How `admit` and `simulate` report a pod whose Topology Manager merge stops at numalign's work bound
(review-3 M2): as a rejection like any other (reason TopologyMergeWorkBound, the bound's line as the message;
exit 0, or 1 under --exit-code), the run's other pods decided as ever; never the whole run ending in exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.merge_bound import BIG, SHORT_BOUND, kubelet_yaml, pod_yaml

from numalign.cli.main import main
from numalign.core.implicit import merge as implicit_merge
from numalign.kubelet.topologymanager import merge_memo


@pytest.fixture(autouse=True)
def _short_bound(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(implicit_merge, "MERGE_WORK_BOUND", SHORT_BOUND)
    merge_memo.clear()
    yield
    merge_memo.clear()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "kubelet.yaml"
    config.write_text(kubelet_yaml(), encoding="utf-8")
    pods = tmp_path / "pods.yaml"
    shapes = [pod_yaml("small-a", "4", "8Gi"), pod_yaml("big", *BIG), pod_yaml("small-b", "2", "4Gi")]
    pods.write_text("---\n".join(shapes), encoding="utf-8")
    return config, pods


def test_admit_reports_the_pod_over_the_bound_as_a_rejection(files: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    config, pods = files
    args = ["admit", str(pods), "--machine", "numa-64", "--config", str(config)]
    assert main([*args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    results = {p["pod"]: p["result"] for p in doc["pods"]}
    assert results["default/small-a"]["admit"] and results["default/small-b"]["admit"]
    big = results["default/big"]
    assert (big["admit"], big["reason"]) == (False, "TopologyMergeWorkBound")
    assert f"stopped at numalign's work bound ({SHORT_BOUND:,} steps;" in big["message"]
    assert "fix: topologyManagerPolicy single-numa-node (or none)" in big["message"]
    assert main([*args, "--exit-code"]) == 1  # as for any rejected pod
    text = capsys.readouterr().out
    assert "pod default/big: REJECTED: TopologyMergeWorkBound: Topology Manager merge over 64 NUMA nodes" in text
    assert "pod default/small-b: admitted" in text
    # what would make it fit starts with the bound's own fix, checked by admitting it again
    assert "    - topologyManagerPolicy none (--topology-manager-policy none): admitted;" in text


def test_simulate_places_the_other_pods_and_counts_the_rejection(files: tuple[Path, Path], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    config, pods = files
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(f"kind: Cluster\nname: t\npools:\n- name: wide\n  count: 1\n  machine: numa-64\n"
                       f"  kubeletConfig: {config}\n", encoding="utf-8")
    assert main(["simulate", "--cluster", str(cluster), str(pods), "--scheduler", "default", "-o", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert (run["pods"], run["placed"], run["failed"]) == (3, 2, 1)
    assert set(run["kubeletRejections"]) == {"TopologyMergeWorkBound"}
    assert "numalign's work bound" in run["kubeletRejectionMessages"]["TopologyMergeWorkBound"]["message"]
