"""NodeExporter: a node's NodeResourceTopology kept up to date is the one exported from scratch."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from numalign.adapters.statedir.directory import StateDirectory
from numalign.cluster.examples import example_workload, gpu_node
from numalign.cluster.model import example_config
from numalign.cluster.nrt_export import node_resource_topology
from numalign.cluster.nrt_live import NodeExporter
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.machine.topology import Machine


@pytest.mark.parametrize("machine", [gpu_node(), example("epyc-nps4")], ids=["gpu", "epyc-nps4"])
def test_kept_up_to_date_through_admissions_removals_and_a_uid_admitted_again(machine: Machine) -> None:
    node = Node(machine, example_config(machine))
    exporter = NodeExporter(node, "n")
    assert exporter.export() == node_resource_topology(node, "n")  # empty: no fingerprint
    pods = [p for g in example_workload(5, count=120).groups for p in g.pods]
    rng = random.Random(5)
    admitted = rejected = 0
    for step, pod in enumerate(pods):
        rec = node.admit(pod)
        admitted += rec.result.admit
        rejected += not rec.result.admit
        if node.pods and rng.random() < 0.35:
            uid = rng.choice(list(node.pods))
            again = node.remove(uid)
            if rng.random() < 0.5:  # the same uid admitted again, between two exports or not
                if rng.random() < 0.5:
                    assert exporter.export() == node_resource_topology(node, "n")
                node.admit(dataclasses.replace(again, name=f"{again.name}-again"))
        if step % 3 == 0:  # several changes between exports too
            assert exporter.export() == node_resource_topology(node, "n"), step
    assert exporter.export() == node_resource_topology(node, "n")
    assert admitted > 20 and rejected > 0  # the node filled up: zones ran dry and pods were refused


def test_refuses_a_node_with_a_state_directory(tmp_path: Path) -> None:
    machine = gpu_node()
    node = Node(machine, example_config(machine), store=StateDirectory(tmp_path))
    with pytest.raises(ValueError, match="without a state directory"):
        NodeExporter(node, "n")
