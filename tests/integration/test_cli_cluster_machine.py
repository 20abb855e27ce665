"""`capacity --machine M` and `simulate --machine M`: the cluster of one node of M (newcomer finding 7:
`capacity --machine` was an unrecognized argument, the way `admit` names a node did not work for "how
many copies of my pod fit on this node"). It answers as a cluster.yaml of one pool of M does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numalign.cli.main import main
from numalign.cli.output import EXIT_INVALID

POD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ml}\nspec:\n  containers:\n  - name: c\n"
       "    resources: {limits: {cpu: '6', memory: 20Gi}}\n")


def document(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main([*args, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("machine", ["dual-socket", "2s x 2n x 8c x 2t, 64Gi/node, nvidia.com/gpu=2/node"])
def test_capacity_of_one_machine_is_a_cluster_of_one_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          machine: str) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(json.dumps({"kind": "Cluster", "name": "one", "pools": [
        {"name": "machine", "count": 1, "machine": machine}]}))
    one = document(capsys, "capacity", str(pod), "--machine", machine)
    same = document(capsys, "capacity", str(pod), "--cluster", str(cluster))
    assert one["nodes"] == 1 and one["cluster"] == f"--machine {machine}"
    assert one["summary"] == same["summary"] and one["runs"] == [
        {**run, "byPool": [{**p, "pool": one["pools"][0]["name"]} for p in run["byPool"]]} for run in same["runs"]]
    assert one["summary"]["runs"][0]["exact"] > 0
    text_args = ["capacity", str(pod), "--machine", machine]
    assert main(text_args) == 0
    assert "(1 node); pod " in capsys.readouterr().out


def test_simulate_on_one_machine(capsys: pytest.CaptureFixture[str]) -> None:
    doc = document(capsys, "simulate", "--machine", "epyc-nps4", "--generate", "12", "-j", "1",
                   "--scheduler", "exact")
    (run,) = doc["runs"]
    assert run["pods"] == 12 and run["placed"] + run["unschedulable"] + run["failed"] == 12


def test_machine_and_another_cluster_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--machine", "dual-socket", "--nodes", str(tmp_path / "n.json")]) == EXIT_INVALID
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("numalign capacity: error: --machine dual-socket and --nodes: both say what the cluster is; "
                    "give one (a cluster.yaml pool names its machine with `machine:`)")
    # --cluster example is its default, yet given beside --machine it is a second cluster (review 4 L7)
    assert main(["simulate", "--machine", "dual-socket", "--cluster", "example"]) == EXIT_INVALID
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("numalign simulate: error: --machine dual-socket and --cluster: both say what")
    assert main(["capacity", "--machine", "no-such-machine"]) == EXIT_INVALID
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("numalign capacity: error: --machine 'no-such-machine': not a built-in machine")
