"""Golden device_hints vectors (copied from ../shared/oracle/provider_vectors.jsonl) must replay equal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numalign.replay.runner import replay_lines

DATA = Path(__file__).parent / "data" / "provider_vectors_devices.jsonl"


def _lines() -> list[str]:
    return [line for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_vector_file_holds_only_device_hints() -> None:
    kinds = {json.loads(line)["scenario"]["kind"] for line in _lines()}
    assert kinds == {"device_hints"}
    assert len(_lines()) >= 300


def test_all_device_vectors_replay_equal() -> None:
    outcomes = list(replay_lines(_lines(), str(DATA)))
    bad = [(o.scenario_id, o.expected, o.result) for o in outcomes if not o.equal]
    assert not bad, f"{len(bad)} of {len(outcomes)} differ; first: {bad[:3]}"


@pytest.mark.parametrize("shape", ["null", "empty", "hints"])
def test_vectors_cover_each_result_shape(shape: str) -> None:
    def kind(result: dict[str, Any]) -> str:
        h = result["hints"]
        return "null" if h is None else "empty" if h == [] else "hints"

    assert any(kind(json.loads(line)["result"]) == shape for line in _lines())
