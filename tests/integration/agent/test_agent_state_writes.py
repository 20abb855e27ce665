"""The agent on a state directory it cannot write (read-only, or full): a pod whose admission could not
be written is reported rejected with the write error and is not admitted on disk; a removal that could
not be written is retried on the agent's tick until it is, never forgotten."""

from __future__ import annotations

import errno
import tempfile
from typing import Any

import pytest
from integration.agent.conftest import DATA, Layout, gpu_pod, wait_for, wait_pod

from numalign.adapters.statedir.directory import StateDirectory
from numalign.agent import Agent
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example

STATE_FILES = (".numalign_pods.json.", ".cpu_manager_state.", ".memory_manager_state.", ".kubelet_internal_checkpoint.")


def on_disk(layout: Layout) -> list[str]:
    config = config_from_yaml((DATA / "example-kubelet-config.yaml").read_text(encoding="utf-8"), "cfg")
    node = Node(example("dual-socket"), config, store=StateDirectory(layout.state, read_only=True))
    return sorted(p.name for p in node.pods.values())


def test_unwritable_state_rejects_admissions_and_retries_removals(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(layout.options())
    agent.start()
    try:
        layout.write_manifest("one.yaml", gpu_pod("one", gpus=0))
        wait_pod(layout, "one", "admitted")
        real = tempfile.mkstemp

        def read_only(*a: Any, **kw: Any) -> Any:
            if str(kw.get("prefix", "")).startswith(STATE_FILES):
                raise OSError(errno.EROFS, "Read-only file system")
            return real(*a, **kw)  # the status file stays writable, so the test can watch

        monkeypatch.setattr(tempfile, "mkstemp", read_only)
        layout.write_manifest("two.yaml", gpu_pod("two", gpus=0))
        two = wait_pod(layout, "two", "rejected")
        assert two["reason"] == "UnexpectedAdmissionError" and "Read-only file system" in two["message"]
        (layout.manifests / "one.yaml").unlink()
        wait_for(lambda: agent.faults["release_error"] >= 1, "the removal fails")
        assert on_disk(layout) == ["one"]  # still admitted: the removal was not written
        monkeypatch.setattr(tempfile, "mkstemp", real)  # space again
        wait_for(lambda: on_disk(layout) == [], "the removal retried and written")
    finally:
        agent.stop()
