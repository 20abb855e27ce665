"""adapters/statedir/allocation.py: the recorded allocation's JSON <-> RecordedAllocation, read once and
written back as read (a CPU set's spelling included); what numalign does not write is unreadable."""

from __future__ import annotations

from typing import Any

from numalign.adapters.statedir.allocation import allocation_from_json, allocation_to_json
from numalign.kubelet.state import (
    RecordedAllocation,
    RecordedBlock,
    RecordedContainer,
    SpelledCPUSet,
    UnreadableAllocation,
)

GOOD: dict[str, Any] = {
    "app": {"cpus": "1,2,3", "memory": [{"type": "memory", "size": 2147483648, "numa_nodes": [0]}],
            "devices": {"nvidia.com/gpu": ["b", "a"]}},
    "init": {"cpus": "4-5"},
}


def test_what_numalign_writes_reads_typed_and_writes_back_the_same() -> None:
    got = allocation_from_json(GOOD, "pods[0].allocation")
    assert got == RecordedAllocation((
        ("app", RecordedContainer(SpelledCPUSet(frozenset({1, 2, 3}), "1,2,3"),
                                  (RecordedBlock("memory", 2147483648, (0,)),), (("nvidia.com/gpu", ("b", "a")),))),
        ("init", RecordedContainer(SpelledCPUSet(frozenset({4, 5}), "4-5"))),
    ))
    assert allocation_to_json(got) == GOOD


def test_the_same_cpus_in_another_spelling_hold_the_same() -> None:
    a = allocation_from_json({"app": {"cpus": "1-3"}}, "a")
    b = allocation_from_json({"app": {"cpus": "1,2,3"}}, "b")
    assert isinstance(a, RecordedAllocation) and isinstance(b, RecordedAllocation)
    assert a != b and a.holds_same(b)
    assert not a.holds_same(RecordedAllocation((("app", RecordedContainer()),)))
    assert not a.holds_same(RecordedAllocation())


def test_what_numalign_does_not_write_is_unreadable_and_kept_as_read() -> None:
    for raw, where in (({"app": {"cpus": 3}}, "x.app.cpus"), ({"app": {"cpus": "3-1"}}, "x.app.cpus"),
                       ({"app": {"memory": [{"type": "memory", "size": True, "numa_nodes": [0]}]}}, "x.app.memory[0]"),
                       ({"app": {"devices": {}}}, "x.app.devices"), ({"app": []}, "x.app")):
        got = allocation_from_json(raw, "x")
        assert isinstance(got, UnreadableAllocation) and got.problem.startswith(where), (raw, got)
        assert allocation_to_json(got) is raw
