"""`pods -o wide` names each resource's devices with their NUMA nodes, worded as `admit` words them."""

from __future__ import annotations

from numalign.cli.commands.pods_table import _device_numa


def test_device_numa_nodes_as_admit_lists_them() -> None:
    assert _device_numa({"gpu0": [0], "gpu1": [1]}) == " (NUMA 0,1)"  # admit: "(NUMA 0,1)", never "0-1"
    assert _device_numa({"a": [2], "b": [2]}) == " (NUMA 2)"
    assert _device_numa({"nic0": []}) == " (NUMA none)"  # the plugin reported no topology
    assert _device_numa(["gpu0"]) == ""  # ids alone carry no NUMA node to show
