"""`numalign replay` decides as kubelet 1.35 unless told otherwise: the shared oracle vectors were
recorded from 1.35-era code. At 1.36.0 the device-hint vectors whose devices leave NUMA nodes empty
change (k/k #138244); the others do not."""

from __future__ import annotations

import json

from support.shared import shared_dir

from numalign.k8s.version import KubeletVersion
from numalign.kubelet.versions import REPLAY_DEFAULT
from numalign.replay.runner import handler_for


def device_vectors() -> list[tuple[dict[str, object], dict[str, object]]]:
    out = []
    with (shared_dir() / "oracle" / "provider_vectors.jsonl").open(encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            if obj["scenario"].get("kind") == "device_hints":
                out.append((obj["scenario"], obj["result"]))
    return out


def test_replay_assumes_135() -> None:
    assert REPLAY_DEFAULT.minor_key == (1, 35)
    vectors = device_vectors()
    assert vectors
    default = handler_for("device_hints")
    assert all(default(dict(s)) == r for s, r in vectors)


def test_at_136_only_vectors_with_device_less_nodes_change() -> None:
    at_136 = handler_for("device_hints", KubeletVersion(1, 36, 0))
    changed = unchanged = 0
    for scenario, result in device_vectors():
        nodes = set(scenario["numa_nodes"])  # type: ignore[call-overload]
        hosting = {n for d in scenario["devices"] for n in (d.get("numa") or [])}  # type: ignore[attr-defined]
        got = at_136(dict(scenario))
        if got != result:
            changed += 1
            assert hosting < nodes, scenario.get("id")
            # fewer masks, never one with a node that hosts none of the resource's devices
            hints = got["hints"]
            assert len(hints) < len(result["hints"])  # type: ignore[arg-type]
            assert all(set(h["mask"]) <= hosting for h in hints), scenario.get("id")
        else:
            unchanged += 1
    assert changed > 0 and unchanged > 0
