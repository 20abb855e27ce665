"""Node.complete when another process writes the directory after the reservation but before complete
takes the lock (a `numalign run` sharing an agent's directory): the reservation is gone, not a crash."""

from __future__ import annotations

from pathlib import Path

from integration.state.test_state_parallel_allocate import CONFIG, MACHINE, plugin, pod
from support.nodecheck import check_node, open_read_only

from numalign.adapters.statedir.directory import StateDirectory
from numalign.core.decision import DecisionRecord
from numalign.kubelet.node import Node


def test_a_write_before_complete_drops_the_reservation(tmp_path: Path) -> None:
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    plugin(n)
    res = n.decide(pod("a", gpus=1))
    assert not res.settled
    other = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))  # releases a's orphaned resources
    assert other.admit(pod("z")).result.admit
    assert n.commit(res, *res.make_calls()) is None
    assert "uid-a" not in n.pods and not n.reserved and sorted(n.pods) == ["uid-z"]
    res = n.decide(pod("a", gpus=1))  # admitted again, as the agent does
    assert not res.settled
    rec = n.commit(res, *res.make_calls())
    assert isinstance(rec, DecisionRecord) and rec.result.admit
    check_node(open_read_only(MACHINE, CONFIG, tmp_path), tmp_path)
