"""A host whose memory changed under a state directory (balloon, hotplug, a hugepage pool resized): the
kubelet refuses its memory_manager_state; `numalign run`, a host tool, rebuilds the state around what is
held and says what changed (issue 22, item 6)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from numalign.adapters.statedir.directory import StateDirectory
from numalign.errors import CheckpointError
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node
from numalign.machine.shorthand import parse_shorthand
from numalign.paths import DATA_DIR
from numalign.run.process import ProcessRef
from numalign.run.records import RunProcesses
from numalign.run.session import RunNode

CONFIG = config_from_yaml((DATA_DIR / "run-kubelet-config.yaml").read_text(encoding="utf-8"), "run config")
BEFORE = parse_shorthand("1s x 2n x 2c x 1t, 4Gi/node")
GREW = parse_shorthand("1s x 2n x 2c x 1t, 6Gi/node")
SHRANK = parse_shorthand("1s x 2n x 2c x 1t, 1Gi/node")


def pod(name: str, memory: str) -> Any:
    return pod_from_dict({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "main", "resources": {"limits": {"cpu": "1", "memory": memory}}}]}})


def live_process() -> dict[str, Any]:
    """This test's own process: a run whose command still runs."""
    import os

    from numalign.run.process import start_time

    started = start_time(os.getpid())
    assert started is not None
    return ProcessRef(os.getpid(), started, ("test",)).to_dict()


def write_state(state: Path, *pods: Any) -> None:
    store = StateDirectory(state)
    node = Node(BEFORE, CONFIG, store=store)
    runs = RunProcesses(store)
    with node.transaction():
        for p in pods:
            runs.records[p.uid] = live_process()
            assert node.admit(p).result.admit


def test_the_kubelet_refuses_a_state_made_before_the_host_changed(tmp_path: Path) -> None:
    write_state(tmp_path)
    with pytest.raises(CheckpointError, match="the expected machine state is different from the real one"):
        Node(GREW, CONFIG, store=StateDirectory(tmp_path))


def test_a_run_reinitialises_when_nothing_is_held(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_state(tmp_path)
    with caplog.at_level(logging.WARNING, logger="numalign.run"):
        node, _ = RunNode(GREW, CONFIG, tmp_path).open()
    assert node.memory.host_changes[-1] == "nothing was held"
    assert any("memory allocatable" in c for c in node.memory.host_changes)
    (said,) = [r.getMessage() for r in caplog.records]  # one line for every change, naming both causes
    assert "memory allocatable" in said and "; nothing was held): the host's memory or the reserved memory" in said
    with node.transaction():
        assert node.admit(pod("after", "5Gi")).result.admit  # the grown node is usable
    # Written for the new host: the kubelet's own check now passes.
    Node(GREW, CONFIG, store=StateDirectory(tmp_path))


def test_a_run_keeps_what_is_held_and_says_what_changed(tmp_path: Path) -> None:
    held = pod("held", "2Gi")
    write_state(tmp_path, held)
    node, _ = RunNode(GREW, CONFIG, tmp_path).open()
    assert node.memory.host_changes[-1] == "kept the 1 memory block(s) held"
    assert list(node.pods) == [held.uid]
    assert node.memory.get_memory(held.uid, "main")[0].size == 2 << 30  # type: ignore[index]


def test_a_host_that_shrank_below_what_is_held_is_refused_with_the_run_named(tmp_path: Path) -> None:
    write_state(tmp_path, pod("held", "3Gi"))
    named = r"\(pod: uid-held, container: main\) holds .* more than this host now has"
    with pytest.raises(CheckpointError, match=named):
        RunNode(SHRANK, CONFIG, tmp_path).open()
