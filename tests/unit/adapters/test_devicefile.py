"""A PodResources GetAllocatableResources answer read as devices: one entry per device, as the kubelet
lists them, read in time linear in the number of entries."""

from __future__ import annotations

from typing import Any

import pytest

from numalign.adapters.devicefile import devices_from_allocatable
from numalign.errors import InvalidInputError


def _answer(n: int, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"devices": [{"resourceName": resource, "deviceIds": [f"GPU-{i}"],
                         "topology": {"nodes": [{"ID": str(i % 2)}]}} for i in range(n)]}


def test_entries_of_one_resource_keep_their_order_and_drop_repeats() -> None:
    obj = _answer(5)
    obj["devices"].append({"resourceName": "nvidia.com/gpu", "deviceIds": ["GPU-1", "GPU-9"]})
    obj["devices"].append({"resource_name": "example.com/nic", "device_ids": ["nic0"], "topology": {"nodes": [{}]}})
    got = devices_from_allocatable(obj, "capture.json")
    assert [d.id for d in got["nvidia.com/gpu"]] == ["GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-9"]
    assert [d.numa_nodes for d in got["nvidia.com/gpu"]][:3] == [(0,), (1,), (0,)]
    assert got["nvidia.com/gpu"][-1].numa_nodes is None
    assert [(d.id, d.numa_nodes) for d in got["example.com/nic"]] == [("nic0", (0,))]


# 200,000 one-device entries: a linear reading takes about a second; the quadratic one this replaces
# (each entry rebuilt the set of the resource's ids read so far) took 2.7 s of CPU at 16,000 and would
# take about seven minutes here, far past the timeout.
@pytest.mark.timeout(120)
def test_a_large_answer_is_read_in_linear_time() -> None:
    n = 200_000
    got = devices_from_allocatable(_answer(n), "capture.json")
    devices = got["nvidia.com/gpu"]
    assert len(devices) == n and devices[-1].id == f"GPU-{n - 1}" and devices[-1].numa_nodes == (1,)


def test_an_entry_without_ids_names_the_entry_and_the_file() -> None:
    obj = _answer(3)
    obj["devices"][2]["deviceIds"] = [7]
    with pytest.raises(InvalidInputError, match=r"^capture\.json: devices\[2\]: expected resourceName"):
        devices_from_allocatable(obj, "capture.json")
