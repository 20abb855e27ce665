"""Every golden provider hint vector (CPU, devices, memory) reproduced by the implicit families.

The replay handlers are run with their exhaustive generator swapped for the implicit one, whose
members are then listed in upstream's IterateBitMasks order; the handlers' output must equal the
recorded upstream output exactly (masks, flags, order, None / [] / {} shapes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from numalign.core.bitmask import iterate_bitmasks
from numalign.core.hint import TopologyHint
from numalign.kubelet.cpumanager.implicit_hints import cpu_topology_hints
from numalign.kubelet.devicemanager.implicit_hints import resource_topology_hints_implicit
from numalign.kubelet.memorymanager.implicit_hints import memory_topology_hints
from numalign.kubelet.topologymanager.provider import ListOrImplicit
from numalign.replay import cpu as cpu_replay
from numalign.replay import devices as device_replay
from numalign.replay import memory as memory_replay

DATA = Path(__file__).parent.parent / "golden" / "data"


def listed(src: ListOrImplicit | None, nodes: Sequence[int]) -> list[TopologyHint] | None:
    """An implicit family's members in IterateBitMasks order over `nodes` (the generator's order)."""
    if src is None or isinstance(src, list):
        return src
    out: list[TopologyHint] = []
    for m in iterate_bitmasks(list(nodes)):
        extra = [h for h in src.extras if h.mask == m]
        if extra:
            out.append(extra[0])
        elif src.in_up(m):
            out.append(TopologyHint(m, src.is_preferred(m)))
    return out


def _vectors(name: str, kind: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            if obj["scenario"]["kind"] == kind:
                out.append((obj["scenario"], obj["result"]))
    return out


def _check(vectors: list[tuple[dict[str, Any], dict[str, Any]]], handler: Callable[[dict[str, Any]], Any]) -> None:
    assert vectors
    bad = [s["id"] for s, want in vectors if handler(s) != want]
    assert bad == []


def test_cpu_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    def fast(topo: Any, available: Any, reusable: Any, request: int, align_by_socket: bool = False) -> Any:
        src = cpu_topology_hints(topo, available, reusable, request, align_by_socket)
        return listed(src, sorted(topo.details.numa_nodes()))

    monkeypatch.setattr(cpu_replay, "generate_cpu_topology_hints", fast)
    _check(_vectors("provider_vectors_cpu.jsonl", "cpu_hints"), cpu_replay.replay_cpu_hints)


def test_device_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    def fast(numa_nodes: Sequence[int], all_devices: Any, **kw: Any) -> Any:
        src = resource_topology_hints_implicit(numa_nodes, all_devices, **kw)
        return listed(src, list(numa_nodes))

    monkeypatch.setattr(device_replay, "resource_topology_hints", fast)
    _check(_vectors("provider_vectors_devices.jsonl", "device_hints"), device_replay.replay_device_hints)


def test_memory_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    def fast(machine_state: Mapping[int, Any], requested: Any, reusable: Any = None) -> Any:
        families = memory_topology_hints(machine_state, requested, reusable)
        return {r: listed(src, sorted(machine_state)) for r, src in families.items()}

    monkeypatch.setattr(memory_replay, "calculate_hints", fast)
    _check(_vectors("memory_vectors.jsonl", "memory_hints"), memory_replay.replay_memory_hints)
