"""`admit_pods(node, pods)`: `numalign admit` as a library call, the same answers as the command prints,
one transaction of the state directory, and --replace's meaning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.configs import static_node_config
from support.machines import gpu_node

import numalign
from numalign import InvalidInputError, Node, admit_pods, state_directory
from numalign.answer.present.html import admit_html
from numalign.cli.main import main
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod


def _pod(name: str, cpu: str) -> Pod:
    limits = {"cpu": cpu, "memory": "1Gi"}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}, name)


def test_the_library_call_answers_as_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from numalign.cli.options.nodeargs import data_file
    from numalign.k8s.manifest import pods_from_yaml

    assert main(["admit", "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    pods = pods_from_yaml(data_file("example-pods.yaml").read_text(encoding="utf-8"))
    node = Node(numalign.example("dual-socket"), numalign.config_from_yaml(
        data_file("example-kubelet-config.yaml").read_text(encoding="utf-8")))
    doc = admit_pods(node, pods)
    assert [p["result"] for p in doc.to_dict()["pods"]] == [p["result"] for p in printed["pods"]]
    assert doc.to_dict()["pods"] == printed["pods"]
    assert "<svg" in admit_html(node, doc)


def test_one_transaction_writes_every_pod_and_replace_takes_the_place(tmp_path: Path) -> None:
    node = Node(gpu_node(), static_node_config(), store=state_directory(tmp_path))
    doc = admit_pods(node, [_pod("a", "2"), _pod("b", "500")], notes=["given"])
    assert [p.record.result.admit for p in doc.pods] == [True, False]
    assert doc.notes == ["given"] and doc.pods[1].extra is not None  # a rejected pod has its why
    again = Node(gpu_node(), static_node_config(), store=state_directory(tmp_path))
    assert list(again.pods) == ["a"]  # written at the end of the call, read back by a new node
    with pytest.raises(InvalidInputError, match=r"already admitted.*replace=True"):
        admit_pods(again, [_pod("a", "4")])
    replaced = admit_pods(again, [_pod("a", "4")], replace=True)
    assert replaced.pods[0].record.result.admit
    assert replaced.notes == ["replaced: pod default/a removed from the state before admitting the new one"]
    assert again.allocation("a", "c").cpus is not None and len(again.allocation("a", "c").cpus) == 4
