"""Every upstream merge vector: the fast merge and the exhaustive reference both reproduce it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.reference_merge import ref_policy_merge

from numalign.core.bitmask import bits_of
from numalign.core.hint import provider_hints_from_json
from numalign.replay.merge import numa_info_from_scenario, replay_merge
from numalign.replay.runner import replay_lines

DATA = Path(__file__).parent / "data" / "merge_vectors.jsonl"


def _load() -> list[dict[str, Any]]:
    with DATA.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


VECTORS = _load()


def test_all_vectors_present() -> None:
    assert len(VECTORS) == 3000


def test_fast_merge_matches_every_vector() -> None:
    bad = []
    for v in VECTORS:
        got = replay_merge(v["scenario"])
        exp = v["result"]
        if (got["mask"], got["preferred"], got["admit"]) != (exp["mask"], exp["preferred"], exp["admit"]):
            bad.append(v["scenario"]["id"])
    assert bad == []


def test_replay_engine_counts_every_vector_equal() -> None:
    with DATA.open(encoding="utf-8") as fh:
        outcomes = list(replay_lines(fh, str(DATA)))
    assert sum(o.equal for o in outcomes) == 3000


# The exhaustive reference is slow on the widest scenarios; cover every vector whose product is small.
def _product_size(s: dict[str, Any]) -> int:
    size = 1
    for p in s["providers"]:
        for hints in (p or {}).values():
            size *= max(1, len(hints or []))
    return size


@pytest.mark.parametrize("chunk", range(6))
def test_exhaustive_reference_matches_vectors(chunk: int) -> None:
    checked = 0
    for v in VECTORS[chunk::6]:
        s = v["scenario"]
        if _product_size(s) > 20000:
            continue
        numa = numa_info_from_scenario(s)
        providers = [provider_hints_from_json(p, "p") for p in s["providers"]]
        closest = (s.get("options") or {}).get("prefer-closest-numa-nodes") == "true"
        hint, admit = ref_policy_merge(s["policy"], providers, numa, closest)
        got = None if hint.mask is None else bits_of(hint.mask)
        assert (got, hint.preferred, admit) == (
            v["result"]["mask"],
            v["result"]["preferred"],
            v["result"]["admit"],
        ), s["id"]
        checked += 1
    assert checked > 300
