"""A node's state directory through the library: the write order, reconciliation on open, the
checksummed pod record, writes of only what changed, and a reload when another process wrote."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support.configs import static_node_config
from support.nodecheck import check_node, open_read_only

from numalign.adapters.statedir.directory import StateDirectory
from numalign.errors import CheckpointError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.examples import example

Q = Quantity.parse
MACHINE = example("dual-socket")
CONFIG = static_node_config(reserved="0,64")


def pod(name: str, cpus: int = 4, gpus: int = 0, guaranteed: bool = True) -> Pod:
    limits = {"cpu": Q(str(cpus)), "memory": Q("2Gi")}
    if gpus:
        limits["nvidia.com/gpu"] = Q(str(gpus))
    requests = dict(limits) if guaranteed else {"cpu": Q("100m")}
    return Pod(name=name, uid=f"uid-{name}", containers=(Container("app", requests=requests, limits=limits),))


def node(state: Path, **kw: Any) -> Node:
    return Node(MACHINE, CONFIG, store=StateDirectory(state, **kw))


def files(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in sorted(state.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


class Crash(BaseException):
    """Stands for SIGKILL at one point of a commit: nothing after it runs."""


def crashing_store(state: Path, at: str) -> StateDirectory:
    """A store that dies right before the first write of `at` ("record" or a kubelet file key)."""
    def crash(what: str) -> None:
        if what == at:
            raise Crash

    return StateDirectory(state, before_write=crash)


def test_an_admission_killed_before_its_record_leaves_orphans_that_the_next_open_releases(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = node(tmp_path)
    first.admit(pod("kept", gpus=1))
    before = check_node(open_read_only(MACHINE, CONFIG, tmp_path), tmp_path)
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    n.store = crashing_store(tmp_path, "record")
    n.store.load(cpu_policy=n.cpu.policy_name, memory_policy=n.memory.policy_name)
    n.store.adopted(n.state())
    with pytest.raises(Crash):
        n.admit(pod("lost", gpus=1))
    on_disk = json.loads((tmp_path / "cpu_manager_state").read_text())
    assert "uid-lost" in on_disk["entries"]  # the kubelet files were ahead of the record
    with caplog.at_level(logging.WARNING, logger="numalign.kubelet.node"):
        again = node(tmp_path)
    assert check_node(again, tmp_path) == before
    lines = [r.getMessage() for r in caplog.records]
    assert sum("uid-lost" in line for line in lines) == 3  # CPUs, memory, devices: one line each
    assert all("released the" in line for line in lines)
    assert "uid-lost" not in json.loads((tmp_path / "cpu_manager_state").read_text())["entries"]
    again.admit(pod("lost", gpus=1))  # an interrupted admission can be made again


def test_a_removal_killed_after_its_record_stays_removed(tmp_path: Path) -> None:
    first = node(tmp_path)
    first.admit(pod("a"))
    first.admit(pod("b"))
    n = node(tmp_path)
    n.store = crashing_store(tmp_path, "cpu")
    n.store.load(cpu_policy=n.cpu.policy_name, memory_policy=n.memory.policy_name)
    n.store.adopted(n.state())
    with pytest.raises(Crash):
        n.remove("uid-a")
    again = node(tmp_path)
    assert sorted(again.pods) == ["uid-b"]
    check_node(again, tmp_path)


def test_missing_allocations_are_admitted_again_or_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    n = node(tmp_path)
    n.admit(pod("a", cpus=8))
    held = check_node(n, tmp_path)
    (tmp_path / "cpu_manager_state").unlink()  # lost: the record still says what uid-a holds
    with caplog.at_level(logging.WARNING, logger="numalign.kubelet.node"):
        again = node(tmp_path)
    assert check_node(again, tmp_path) == held  # the same CPUs: admission is deterministic
    assert any("admitted pod default/a (uid uid-a) again" in r.getMessage() for r in caplog.records)


def test_only_what_changed_is_written(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.admit(pod("a"))
    before = {p: (tmp_path / p).stat().st_ino for p in files(tmp_path)}
    rec = n.admit(pod("big", cpus=500))  # rejected: nothing is written
    assert not rec.result.admit
    assert {p: (tmp_path / p).stat().st_ino for p in files(tmp_path)} == before
    n.admit(pod("shared", guaranteed=False))  # a Burstable pod changes only the pod record
    after = {p: (tmp_path / p).stat().st_ino for p in files(tmp_path)}
    assert [p for p in after if after[p] != before[p]] == ["numalign_pods.json"]


def test_the_pod_record_is_checksummed_and_typed(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.admit(pod("a"))
    path = tmp_path / "numalign_pods.json"
    good = path.read_text()
    path.write_text(good.replace("uid-a", "uid-b", 1))  # one changed uid
    with pytest.raises(CheckpointError, match="checksum mismatch") as e:
        node(tmp_path)
    assert "\n" not in str(e.value) and "numalign_pods.json" in str(e.value)
    for bad, expected in (("[]", "the top level is a JSON a list"), ('{"pods": 3}', '"pods" is an integer'),
                          ('{"pods": [{"uid": "x", "manifest": []}]}', "pods[0].manifest is a list")):
        path.write_text(bad)
        with pytest.raises(CheckpointError, match=expected.replace("[", r"\[").replace("]", r"\]")):
            node(tmp_path)
    path.unlink()
    path.symlink_to(path)  # a loop is an error, not "no file"
    with pytest.raises(CheckpointError, match="symbolic links"):
        node(tmp_path)


def test_processes_survive_load_and_save_and_a_reload_follows_another_writer(tmp_path: Path) -> None:
    # The process records `numalign run` keeps beside the node's state: read and written by the directory.
    agent_store = StateDirectory(tmp_path)
    agent = Node(MACHINE, CONFIG, store=agent_store)
    agent.admit(pod("a"))
    other_store = StateDirectory(tmp_path)  # e.g. `numalign run`, sharing the directory through transactions
    other = Node(MACHINE, CONFIG, store=other_store)
    other.admit(pod("run", cpus=2))
    with other.transaction():
        other_store.processes["uid-run"] = {"pid": 42, "start_time": 7, "command": ["sleep", "1"]}
    assert "uid-run" not in agent.pods
    agent.admit(pod("b"))  # reloads first: the other process's pod is seen, not overwritten
    assert sorted(agent.pods) == ["uid-a", "uid-b", "uid-run"]
    assert agent_store.processes == {"uid-run": {"pid": 42, "start_time": 7, "command": ["sleep", "1"]}}
    agent.remove("uid-run")  # the record goes with its pod
    assert agent_store.processes == {}
    assert StateDirectory(tmp_path).load().pods and "process" not in (tmp_path / "numalign_pods.json").read_text()
    check_node(node(tmp_path), tmp_path)
    generation = json.loads((tmp_path / "numalign_pods.json").read_text())["generation"]
    assert generation >= 4


def test_a_failed_write_is_a_failed_admission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import tempfile

    n = node(tmp_path)
    n.admit(pod("a"))
    real = tempfile.mkstemp

    def read_only(*a: Any, **kw: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)  # as a read-only directory fails
    rec = n.admit(pod("b"))
    assert not rec.result.admit and rec.result.reason == "UnexpectedAdmissionError"
    assert "Read-only file system" in rec.result.message and rec.allocations == {}
    assert sorted(n.pods) == ["uid-a"]  # rolled back to what is on disk
    with pytest.raises(CheckpointError, match="Read-only file system"):
        n.remove("uid-a")
    assert sorted(n.pods) == ["uid-a"]  # not written, so not removed: the caller retries
    monkeypatch.setattr(tempfile, "mkstemp", real)
    restarted = node(tmp_path)
    assert sorted(restarted.pods) == ["uid-a"]
    check_node(restarted, tmp_path)
