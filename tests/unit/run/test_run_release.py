"""A run releasing its own pod after its command ended: the pod is removed explicitly, not reported as
a crash leftover; another run's ended process is still released (and named) on the same open."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest

from numalign.adapters.statedir.directory import StateDirectory
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.run.process import ProcessRef, start_time
from numalign.run.records import RunProcesses
from numalign.run.session import RunNode, release

CONFIG = KubeletConfig(cpu_manager_policy="static", reserved_system_cpus="0")


def pod(name: str) -> Any:
    return pod_from_dict({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"containers": [
        {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})


def ended_process() -> ProcessRef:
    """A real process that ran and was reaped (its pid and start time name no running process)."""
    child = subprocess.Popen(["true"])
    started = start_time(child.pid)  # readable until the child is reaped
    child.wait()
    assert started is not None
    return ProcessRef(child.pid, started, ("true",))


def test_the_runs_own_release_is_not_a_crash_leftover(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    machine = example("dual-socket")
    store = StateDirectory(tmp_path)
    node = Node(machine, CONFIG, store=store)
    own, crashed = ended_process(), ended_process()
    for name, ref in (("own", own), ("crashed", crashed)):
        store.processes[f"uid-{name}"] = ref.to_dict()
        assert node.admit(pod(name)).result.admit

    with caplog.at_level(logging.INFO, logger="numalign.run"):
        assert release(RunNode(machine, CONFIG, tmp_path), "uid-own", own)
    ended = [r.getMessage() for r in caplog.records if "ended without releasing" in r.getMessage()]
    assert ended == [f"state {tmp_path}: released default/crashed: its numalign run process {crashed.pid} "
                     "ended without releasing it"]
    after_store = StateDirectory(tmp_path)
    after = Node(machine, CONFIG, store=after_store)
    assert after.pods == {} and after_store.processes == {}


def test_a_release_after_another_command_released_the_pod_says_so(tmp_path: Path) -> None:
    machine = example("dual-socket")
    store = StateDirectory(tmp_path)
    node = Node(machine, CONFIG, store=store)
    own = ended_process()
    store.processes["uid-own"] = own.to_dict()
    assert node.admit(pod("own")).result.admit
    other = StateDirectory(tmp_path)
    Node(machine, CONFIG, store=other, ended_pods=RunProcesses(other, lambda r: False).ended)  # e.g. an agent's tick
    assert not release(RunNode(machine, CONFIG, tmp_path), "uid-own", own)
