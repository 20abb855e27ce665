"""Golden memory manager vectors (copy of ../shared/oracle/memory_vectors.jsonl): every line must replay
equal, and the file must exercise every result shape the README documents."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from numalign.replay.runner import replay_lines

DATA = Path(__file__).parent / "data" / "memory_vectors.jsonl"
LINES = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def _ids() -> list[str]:
    return [str(json.loads(line)["scenario"]["id"]) for line in LINES]


def test_vector_file_has_both_kinds() -> None:
    kinds = Counter(json.loads(line)["scenario"]["kind"] for line in LINES)
    assert kinds == {"memory_hints": 520, "memory_allocate": 280}


@pytest.mark.parametrize("line", LINES, ids=_ids())
def test_memory_vector_replays_equal(line: str) -> None:
    (outcome,) = list(replay_lines([line], str(DATA)))
    assert outcome.expected is not None
    assert outcome.result == outcome.expected


def _shape(result: dict[str, Any]) -> str:
    if "error" in result:
        return "error:" + str(result["error"]).split("] ", 1)[1][:30]
    if "blocks" in result:
        return "blocks"
    hints = result["hints"]
    return "null" if hints is None else "empty" if hints == {} else "hints"


def test_vectors_cover_every_result_shape() -> None:
    shapes = {_shape(json.loads(line)["result"]) for line in LINES}
    assert {"null", "empty", "hints", "blocks"} <= shapes
    # all five upstream Allocate errors
    assert len([s for s in shapes if s.startswith("error:")]) == 5
