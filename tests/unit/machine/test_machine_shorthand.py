"""The compact machine description: one line or a few YAML lines give a realistic node."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalign.adapters.sysfs import load_machine
from numalign.errors import InvalidInputError


def test_one_line_gives_the_224_cpu_8_gpu_node() -> None:
    m = load_machine("2s x 2n x 28c x 2t, 256Gi/node, hugepages-1Gi=16/node, nvidia.com/gpu=2/node, name=gpu-1")
    assert m.name == "gpu-1"
    assert len(m.online_cpus()) == 224 and m.sockets() == [0, 1] and m.numa_ids() == [0, 1, 2, 3]
    assert m.memory_by_node() == dict.fromkeys(range(4), 256 << 30)
    assert m.hugepages_by_node()[3] == {1 << 30: 16}
    gpus = m.devices_by_resource()["nvidia.com/gpu"]
    assert [d.numa_nodes for d in gpus] == [(0,), (0,), (1,), (1,), (2,), (2,), (3,), (3,)]
    assert len({d.id for d in gpus}) == 8
    # Linux numbering: first threads of all 112 cores, then their siblings; 56 CPUs per NUMA node.
    assert sorted(m.node(0).cpus) == [*range(28), *range(112, 140)]
    assert m.distance_matrix() == {0: [10, 11, 21, 21], 1: [11, 10, 21, 21], 2: [21, 21, 10, 11],
                                   3: [21, 21, 11, 10]}


def test_yaml_form_is_the_same_machine(tmp_path: Path) -> None:
    f = tmp_path / "node.yaml"
    f.write_text("name: gpu-1\nsockets: 2\nnuma_nodes_per_socket: 2\ncores_per_numa_node: 28\nthreads_per_core: 2\n"
                 "memory_per_numa_node: 256Gi\nhugepages_per_numa_node: {1Gi: 16}\n"
                 "devices_per_numa_node: {nvidia.com/gpu: 2}\n")
    line = "2s x 2n x 28c x 2t, 256Gi/node, hugepages-1Gi=16/node, nvidia.com/gpu=2/node, name=gpu-1"
    assert load_machine(str(f)) == load_machine(line)


@pytest.mark.parametrize(("spec", "expected"), [
    ("2s x 2q", "'2q' is not a count with s, n, c or t"),
    ("2s x 4c, 256Gb per node", "cannot read '256Gb per node'"),
    ("2s x 2n, 8Gi/node", "cores_per_numa_node is missing"),
    ("2s x 2n x 4c", "memory_per_numa_node is missing"),
    ("2s x 0c, 8Gi/node", "cores_per_numa_node: expected a count >= 1, got 0"),
])
def test_bad_shorthand_names_the_part_and_the_form(spec: str, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=r"expected|missing") as e:
        load_machine(spec)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)
