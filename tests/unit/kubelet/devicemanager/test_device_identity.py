"""Devices as plugins name them: --devices files, PodResources captures, and the checkpoint check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalign.adapters.devicefile import devices_from_allocatable
from numalign.adapters.statedir.directory import state_directory
from numalign.cli.options.nodeargs import apply_devices_options
from numalign.errors import InvalidInputError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.manifest import pods_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example

POD = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: c, resources: {limits: {nvidia.com/gpu: "1"}}}
"""


def test_plugin_list_replaces_its_resource_and_a_capture_every_resource(tmp_path: Path) -> None:
    machine = example("dual-socket")
    (tmp_path / "gpus.yaml").write_text("- {id: GPU-a, numa: 0}\n- {id: GPU-b, numa: 3}\n")
    given = apply_devices_options(machine, [f"nvidia.com/gpu={tmp_path / 'gpus.yaml'}"])
    by = given.devices_by_resource()
    assert [(d.id, d.numa_nodes) for d in by["nvidia.com/gpu"]] == [("GPU-a", (0,)), ("GPU-b", (3,))]
    assert by["intel.com/sriov_netdevice"] == machine.devices_by_resource()["intel.com/sriov_netdevice"]
    # grpcurl's camelCase JSON; proto3 leaves node 0's ID out ({}), int64 IDs are strings.
    capture = {"devices": [{"resourceName": "intel.com/sriov_netdevice", "deviceIds": ["0000:18:02.1"],
                            "topology": {"nodes": [{}]}},
                           {"resourceName": "intel.com/sriov_netdevice", "deviceIds": ["0000:58:02.1"],
                            "topology": {"nodes": [{"ID": "1"}]}}], "cpuIds": ["0"]}
    (tmp_path / "alloc.json").write_text(json.dumps(capture))
    both = apply_devices_options(given, [str(tmp_path / "alloc.json")]).devices_by_resource()
    assert [(d.id, d.numa_nodes) for d in both["intel.com/sriov_netdevice"]] == [("0000:18:02.1", (0,)),
                                                                                 ("0000:58:02.1", (1,))]
    # The capture is every plugin's devices: the machine's GPUs are not served there...
    assert set(both) == {"intel.com/sriov_netdevice"}
    # ...and a device list given after it adds its resource back.
    later = apply_devices_options(machine, [str(tmp_path / "alloc.json"), f"nvidia.com/gpu={tmp_path / 'gpus.yaml'}"])
    assert later.devices_by_resource()["nvidia.com/gpu"] == by["nvidia.com/gpu"]


@pytest.mark.parametrize(("obj", "expected"), [
    ({"cpu_ids": [1]}, 'with a "devices" list'),
    ({"devices": [{"resource_name": "x.io/a", "device_ids": "a"}]}, "deviceIds (a list of strings)"),
    ({"devices": [{"resource_name": "x.io/a", "device_ids": ["a"], "topology": {"nodes": [{"ID": "x"}]}}]},
     "topology.nodes: expected {ID: N} entries"),
])
def test_bad_capture_is_one_line_naming_the_entry(obj: object, expected: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        devices_from_allocatable(obj, "alloc.json")
    assert expected in str(e.value) and str(e.value).startswith("alloc.json")


def test_devices_on_a_missing_numa_node_are_refused(tmp_path: Path) -> None:
    (tmp_path / "gpus.yaml").write_text("- {id: GPU-a, numa: 9}\n")
    with pytest.raises(InvalidInputError, match=r"names NUMA nodes \[9\].*on the machine's NUMA nodes \(0, 1, 2, 3\)"):
        apply_devices_options(example("dual-socket"), [f"nvidia.com/gpu={tmp_path / 'gpus.yaml'}"])


def test_checkpoint_holding_unknown_devices_is_refused_not_counted_free(tmp_path: Path) -> None:
    config = KubeletConfig()
    (tmp_path / "gpus.yaml").write_text("".join(f"- {{id: GPU-{n}, numa: {n}}}\n" for n in range(4)))
    plugin_ids = apply_devices_options(example("dual-socket"), [f"nvidia.com/gpu={tmp_path / 'gpus.yaml'}"])
    node = Node(plugin_ids, config, store=state_directory(tmp_path / "s"))
    assert node.admit(pods_from_yaml(POD)[0]).result.admit
    with pytest.raises(InvalidInputError, match=r"pods hold nvidia.com/gpu GPU-0, which machine dual-socket does "
                       r"not have \(its nvidia.com/gpu devices are 0000:17:00.0, .*; the plugin reported GPU-0, "
                       r"GPU-1, GPU-2, GPU-3\)"):
        Node(example("dual-socket"), config, store=state_directory(tmp_path / "s", read_only=True))
    again = Node(plugin_ids, config, store=state_directory(tmp_path / "s", read_only=True))
    assert again.devices.get_container_devices(node.pods.popitem()[0], "c") is not None


def test_devices_option_errors_name_the_value_and_the_forms(tmp_path: Path) -> None:
    (tmp_path / "gpus.yaml").write_text("- {id: GPU-a, numa: 0}\n")
    cases = {
        f"nvidia.com/gpu={tmp_path / 'none.yaml'}": "none.yaml: no such file; expected RESOURCE=FILE",
        str(tmp_path / "none.json"): "none.json: cannot read the --devices file: No such file or directory; "
                                     "expected RESOURCE=FILE",
        str(tmp_path / "gpus.yaml"): "not JSON (Expecting value: line 1 column 1 (char 0)); expected RESOURCE=FILE",
    }
    for spec, expected in cases.items():
        with pytest.raises(InvalidInputError) as e:
            apply_devices_options(example("dual-socket"), [spec])
        assert expected in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InvalidInputError, match=r"--devices example\.com/gpu=.*gpus\.yaml"):
        apply_devices_options(example("dual-socket"), [str(tmp_path / "gpus.yaml")])


def test_only_resources_the_machine_describes_are_checked() -> None:
    from numalign.kubelet.devicemanager.identity import unknown_held_devices
    from numalign.kubelet.devicemanager.state import PodDevicesEntry

    entries = [PodDevicesEntry("p", "c", "example.com/fpga", {0: ["fpga0"]}),  # a plugin's own resource
               PodDevicesEntry("p", "c", "nvidia.com/gpu", {0: ["GPU-a"], 1: ["0000:57:00.0"]})]
    assert unknown_held_devices(entries, example("dual-socket")) == {"nvidia.com/gpu": ["GPU-a"]}
