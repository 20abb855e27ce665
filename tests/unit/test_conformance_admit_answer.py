"""The admit area's answer on numalign's side reads each container's holdings from the managers' own
queries (it runs per admission inside the timed side of benchmarks/admissions_go.py); it must say what
the node's public `allocation` says, on every kind of holding the area's cases make."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest
from conformance.areas import admit

from numalign import Node
from numalign.k8s.pod import Pod

VERSION = "1.37.2"


def _by_allocation(node: Node, pod: Pod) -> dict[str, Any]:
    """The answer as `node.allocation` tells it (how the area built it before it read the managers)."""
    ctrs: dict[str, Any] = {}
    for c in pod.all_containers():
        a = node.allocation(pod.uid, c.name)
        hint = node.tm.get_affinity(pod.uid, c.name)
        ctrs[c.name] = {
            "affinity": {"mask": hint.nodes(), "preferred": hint.preferred},
            "cpus": list(a.cpus) if a.exclusive else None,
            "memory": sorted(({"numa": sorted(b.numa_nodes), "type": b.type, "size": b.size} for b in a.memory),
                             key=lambda b: str(b["type"])),
            "devices": {res: sorted(ids) for res, ids in a.devices.items()},
        }
    return ctrs


def _cases() -> list[dict[str, Any]]:
    rng = random.Random(29)
    cases = [admit.generate(rng, VERSION) for _ in range(60)]
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        import admissions_go  # the timed cases themselves: the dual-socket mix, a GPU and a NIC
    finally:
        sys.path.pop(0)
    for numa, name, build, _ in admissions_go.MACHINES:
        if name == "dual-socket":
            cases.append(admissions_go.case_for(numa, build(), 2))
    return cases


def test_the_answer_says_what_node_allocation_says(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = admit.containers_answer
    seen = {"containers": 0, "exclusive": 0, "shared": 0, "blocks>1": 0, "devices": 0}

    def both(node: Node, pod: Pod) -> dict[str, Any]:
        got = fast(node, pod)
        assert got == _by_allocation(node, pod)
        for ctr in got.values():
            seen["containers"] += 1
            seen["exclusive" if ctr["cpus"] is not None else "shared"] += 1
            seen["blocks>1"] += len(ctr["memory"]) > 1
            seen["devices"] += bool(ctr["devices"])
        return got

    monkeypatch.setattr(admit, "containers_answer", both)
    for case in _cases():
        admit.numalign(case, VERSION)
    # every kind of holding was compared, not just the common ones
    assert seen["containers"] > 100 and all(n > 0 for n in seen.values()), seen
