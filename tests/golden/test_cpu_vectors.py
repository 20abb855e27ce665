"""Every published cpu_hints / cpu_take golden vector must replay to exactly its recorded result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numalign.kubelet.cpumanager.hint_queries import CPUHintQueries
from numalign.replay.cpu import replay_cpu_hints, replay_cpu_take, topology_from_json

DATA = Path(__file__).parent / "data" / "provider_vectors_cpu.jsonl"


def _load() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for line in DATA.read_text().splitlines():
        if line.strip():
            obj = json.loads(line)
            out.append((obj["scenario"], obj["result"]))
    return out


VECTORS = _load()


def test_vector_file_has_both_kinds() -> None:
    kinds = {s["kind"] for s, _ in VECTORS}
    assert kinds == {"cpu_hints", "cpu_take"}
    assert len(VECTORS) >= 1000


@pytest.mark.parametrize("kind", ["cpu_hints", "cpu_take"])
def test_all_vectors_equal(kind: str) -> None:
    handler = replay_cpu_hints if kind == "cpu_hints" else replay_cpu_take
    mismatches = []
    for scenario, expected in VECTORS:
        if scenario["kind"] != kind:
            continue
        got = handler(scenario)
        if got != expected:
            mismatches.append((scenario["id"], expected, got))
    assert mismatches == [], f"{len(mismatches)} {kind} vectors differ; first: {mismatches[:1]}"


def test_hint_space_reproduces_every_cpu_hints_vector() -> None:
    checked = 0
    for scenario, expected in VECTORS:
        if scenario["kind"] != "cpu_hints":
            continue
        topo = topology_from_json(scenario["machine"], scenario["id"])
        space = CPUHintQueries(
            topo,
            scenario["available"],
            scenario["reusable"],
            scenario["request"],
            scenario["options"].get("align-by-socket") == "true",
        )
        assert [h.to_dict() for h in space.iter_hints()] == expected["hints"], scenario["id"]
        checked += 1
    assert checked >= 400
