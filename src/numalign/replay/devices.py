"""Replay of `device_hints` golden vectors (schema: ../shared/oracle/PROVIDERS-README.md).

A scenario is one resource's inventory and a container's request; the result is the per-resource
part of the device manager's GetTopologyHints (None / [] / hints).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import InvalidInputError
from numalign.k8s.deviceplugin import Device
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.devicemanager.hints import resource_topology_hints
from numalign.kubelet.versions import REPLAY_DEFAULT, behaviours
from numalign.validation import expect_int, expect_str_list


def _int_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, list):
        raise InvalidInputError(f"{where}: expected a list of integers, got {value!r}")
    return [expect_int(v, f"{where}[{i}]") for i, v in enumerate(value)]


def parse_devices(value: Any, where: str = "devices") -> dict[str, Device]:
    """`[{"id": str, "numa": [ids] | [] | null}]` -> id -> Device (null = no TopologyInfo)."""
    if not isinstance(value, list):
        raise InvalidInputError(f"{where}: expected a list of {{'id', 'numa'}} objects, got {value!r}")
    out: dict[str, Device] = {}
    for i, obj in enumerate(value):
        if not isinstance(obj, Mapping) or not isinstance(obj.get("id"), str):
            raise InvalidInputError(
                f"{where}[{i}]: expected {{'id': str, 'numa': [ids] | null}}, got {obj!r}"
            )
        numa = obj.get("numa")
        topology = None if numa is None else tuple(_int_list(numa, f"{where}[{i}].numa"))
        health = obj.get("health", "Healthy")
        if not isinstance(health, str):
            raise InvalidInputError(f"{where}[{i}].health: expected a string, got {health!r}")
        out[obj["id"]] = Device(obj["id"], health, topology)
    return out


def replay_device_hints(scenario: dict[str, Any], version: KubeletVersion = REPLAY_DEFAULT) -> dict[str, Any]:
    """kind "device_hints" -> {"hints": null | [{"mask": [...], "preferred": bool}, ...]}, as the kubelet
    at `version` lists them."""
    sid = scenario.get("id", "device_hints")
    missing = [k for k in ("numa_nodes", "devices", "available", "request") if k not in scenario]
    if missing:
        raise InvalidInputError(f"scenario {sid}: missing field(s) {missing}; see PROVIDERS-README.md")
    numa_nodes = _int_list(scenario["numa_nodes"], f"{sid}.numa_nodes")
    devices = parse_devices(scenario["devices"], f"{sid}.devices")
    available = expect_str_list(scenario["available"], f"{sid}.available", "device ids (strings)")
    reusable = expect_str_list(scenario.get("reusable", []), f"{sid}.reusable", "device ids (strings)")
    request = expect_int(scenario["request"], f"{sid}.request")
    allocated_raw = scenario.get("allocated")
    allocated = (
        None if allocated_raw is None else expect_str_list(allocated_raw, f"{sid}.allocated", "device ids (strings)")
    )
    hints = resource_topology_hints(
        numa_nodes, devices, allocated=allocated, available=available, reusable=reusable, request=request,
        over_device_nodes=behaviours(version).device_hints_over_device_numa_nodes,
    )
    return {"hints": None if hints is None else [h.to_dict() for h in hints]}
