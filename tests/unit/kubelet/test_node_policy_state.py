"""A Node opens both managers' checkpoints whatever the policy, as the kubelet does: a state directory
written under one policy is refused under another (none policies included), and the none policies
leave the files the kubelet's would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.configs import static_node_yaml

from numalign.adapters.statedir.directory import StateDirectory
from numalign.errors import CheckpointError
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example

STATIC = static_node_yaml()
NONE = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
CPU_STATIC_MEMORY_NONE = NONE + 'cpuManagerPolicy: static\nreservedSystemCPUs: "0"\n'


def _node(tmp_path: Path, config: str) -> Node:
    node = Node(example("dual-socket"), config_from_yaml(config), store=StateDirectory(tmp_path))
    node.save()
    return node


def test_none_policies_write_the_kubelets_files(tmp_path: Path) -> None:
    _node(tmp_path, NONE)
    cpu = json.loads((tmp_path / "cpu_manager_state").read_text())
    mem = json.loads((tmp_path / "memory_manager_state").read_text())
    assert {k: v for k, v in cpu.items() if k != "checksum"} == {"policyName": "none", "defaultCpuSet": ""}
    assert {k: v for k, v in mem.items() if k != "checksum"} == {"policyName": "None", "machineState": {}}
    _node(tmp_path, NONE)  # and read them back


@pytest.mark.parametrize(
    ("first", "second", "file", "text"),
    [
        (STATIC, NONE, "cpu_manager_state", 'configured policy "none" differs from state checkpoint policy "static"'),
        (NONE, STATIC, "cpu_manager_state", 'configured policy "static" differs from state checkpoint policy "none"'),
        (STATIC, CPU_STATIC_MEMORY_NONE, "memory_manager_state",
         'configured policy "None" differs from state checkpoint policy "Static"'),
    ],
)
def test_a_state_dir_of_another_policy_is_refused_and_left_untouched(
    tmp_path: Path, first: str, second: str, file: str, text: str
) -> None:
    _node(tmp_path, first)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(CheckpointError) as e:
        Node(example("dual-socket"), config_from_yaml(second), store=StateDirectory(tmp_path))
    assert text in str(e.value) and file in str(e.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
