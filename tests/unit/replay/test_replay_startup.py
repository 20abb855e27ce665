"""Replay runs the Topology Manager's start-up checks (upstream NewManager) per scenario: a scenario the
kubelet could not start reports that error as its result, and the rest of the file still runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from numalign.core.numa import NUMAInfo
from numalign.core.policies.startup import StartupError, start_policy
from numalign.kubelet.topologymanager.manager import TopologyManager
from numalign.replay.runner import replay_lines

NINE = list(range(9))
ONE_HINT = [{"cpu": [{"mask": [0], "preferred": True}]}]
NO_DISTANCES = "cannot discover NUMA topology: error getting NUMA distances from cadvisor"
TOO_MANY = "unsupported on machines with more than 8 NUMA Nodes"


def _line(sid: str, **scenario: object) -> str:
    return json.dumps({"id": sid, "providers": ONE_HINT, **scenario})


def _results(*lines: str) -> dict[str, dict[str, object]]:
    return {o.scenario_id: o.result for o in replay_lines(lines)}


def test_a_failing_scenario_reports_the_kubelet_error_and_the_rest_still_runs() -> None:
    out = _results(
        _line("nine", numa_nodes=NINE, policy="restricted"),
        _line("after", numa_nodes=[0, 1], policy="restricted"),
    )
    assert out["nine"]["startup_error"] == TOO_MANY
    assert "max-allowable-numa-nodes=9" in str(out["nine"]["fix"])
    assert out["after"] == {"mask": [0], "preferred": True, "admit": True, "deterministic": True}


def test_the_node_limit_is_raised_by_the_option_and_does_not_apply_to_policy_none() -> None:
    out = _results(
        _line("raised", numa_nodes=NINE, policy="best-effort", options={"max-allowable-numa-nodes": "9"}),
        _line("none", numa_nodes=NINE, policy="none"),
    )
    assert out["raised"]["admit"] is True
    assert "startup_error" not in out["none"]


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_prefer_closest_without_distances_stops_every_policy_but_none(policy: str) -> None:
    # single-numa-node never uses distances, yet NewNUMAInfo reads them before the policy is chosen
    out = _results(_line("x", numa_nodes=[0, 1], policy=policy, options={"prefer-closest-numa-nodes": "true"}))
    assert out["x"]["startup_error"] == NO_DISTANCES


def test_policy_none_short_circuits_before_any_check() -> None:
    out = _results(_line("x", numa_nodes=NINE, policy="none",
                         options={"prefer-closest-numa-nodes": "true", "bogus": "1"}))
    assert out["x"] == {"mask": None, "preferred": False, "admit": True, "deterministic": True}


def test_prefer_closest_with_distances_starts() -> None:
    rows = {"0": [10, 20], "1": [20, 10]}
    out = _results(_line("x", numa_nodes=[0, 1], distances=rows, policy="single-numa-node",
                         options={"prefer-closest-numa-nodes": "true"}))
    assert "startup_error" not in out["x"]


def test_a_recorded_startup_error_compares_equal_without_the_fix() -> None:
    line = json.dumps({
        "scenario": {"id": "nine", "numa_nodes": NINE, "policy": "single-numa-node", "providers": ONE_HINT},
        "result": {"startup_error": TOO_MANY},
    })
    [outcome] = list(replay_lines([line]))
    assert outcome.equal


def test_the_cli_prints_one_result_line_per_scenario(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "v.jsonl"
    path.write_text(_line("nine", numa_nodes=NINE, policy="restricted") + "\n"
                    + _line("two", numa_nodes=[0, 1], policy="restricted") + "\n")
    proc = subprocess.run([sys.executable, "-m", "numalign.cli.main", "replay", str(path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x["id"] for x in lines] == ["nine", "two"]
    assert lines[0]["result"]["startup_error"] == TOO_MANY
    assert lines[1]["result"]["admit"] is True


def test_the_topology_manager_applies_the_same_checks() -> None:
    with pytest.raises(StartupError, match="error getting NUMA distances"):
        TopologyManager(NUMAInfo.create([0, 1]), "single-numa-node", options={"prefer-closest-numa-nodes": "true"})
    TopologyManager(NUMAInfo.create(NINE), "none", options={"prefer-closest-numa-nodes": "true"})
    with pytest.raises(StartupError, match="more than 8 NUMA Nodes"):
        start_policy("single-numa-node", NUMAInfo.create(NINE))
