"""cpu_hints / cpu_take replay: results for hand-made scenarios and clear errors for bad input."""

from __future__ import annotations

from typing import Any

import pytest

from numalign.errors import InvalidInputError
from numalign.replay.cpu import replay_cpu_hints, replay_cpu_take

MACHINE = {"cpus": [{"id": c, "socket": c % 2, "numa": c % 2, "core": c % 6, "uncore": c % 2} for c in range(12)]}


def scenario(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "t", "machine": MACHINE, "available": list(range(12)), "reusable": [], "request": 2, "options": {},
    }
    base.update(kw)
    return base


def test_hints_and_take() -> None:
    assert replay_cpu_hints(scenario(kind="cpu_hints")) == {
        "hints": [
            {"mask": [0], "preferred": True},
            {"mask": [1], "preferred": True},
            {"mask": [0, 1], "preferred": False},
        ]
    }
    assert replay_cpu_take(scenario(kind="cpu_take", affinity_numa=[1])) == {"cpus": [1, 7]}
    assert replay_cpu_take(scenario(kind="cpu_take", affinity_numa=None, request=13)) == {
        "error": "not enough cpus available to satisfy request: requested=13, available=12"
    }
    assert replay_cpu_take(
        scenario(kind="cpu_take", affinity_numa=None, request=3, options={"full-pcpus-only": "true"})
    ) == {
        "error": "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2",
        "error_type": "SMTAlignmentError",
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"machine": {"cpus": "none"}}, "expected an object with a 'cpus' list"),
        ({"machine": {"cpus": [{"id": 0}]}}, "missing socket, numa, core"),
        ({"request": "2"}, "request: expected an integer"),
        ({"available": [0, "1"]}, r"available\[1\]: expected an integer"),
        ({"options": {"make-it-fast": "true"}}, "unknown option 'make-it-fast'"),
        ({"options": {"full-pcpus-only": "yes"}}, "expected \"true\" or \"false\""),
    ],
)
def test_bad_input(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        replay_cpu_take(scenario(kind="cpu_take", affinity_numa=None, **change))
