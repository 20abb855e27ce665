"""A second agent on the same paths must not take over a running one's sockets or state."""

from __future__ import annotations

import pytest
from integration.agent.conftest import Layout, gpu_pod, pod_status, wait_for, wait_pod

from numalign.adapters.statedir.locks import StateDirInUseError
from numalign.agent import Agent
from numalign.errors import InvalidInputError


def test_a_second_agent_on_live_sockets_is_refused_and_changes_nothing(layout: Layout) -> None:
    first = Agent(layout.options())
    first.start()
    try:
        layout.write_manifest("one.yaml", gpu_pod("one", gpus=0))
        wait_pod(layout, "one", "admitted")
        # and its containers started (the agent's last write for this pod), so the files are at rest
        wait_for(lambda: (pod_status(layout, "one") or {}).get("containers") == "started", "containers started")
        state_before = {p.name: p.read_bytes() for p in layout.state.iterdir() if p.is_file()}
        kubelet_sock = layout.plugins / "kubelet.sock"
        ino = (kubelet_sock.stat().st_ino, layout.pr_socket.stat().st_ino)

        with pytest.raises(StateDirInUseError, match=r"is in use by numalign serve \(pid \d+, since "):
            Agent(layout.options()).start()
        # Other sockets, the same state directory: refused by the directory's owner lock.
        other = layout.options(device_plugin_dir=layout.root / "dp2", pod_resources_socket=layout.root / "pr2" / "s")
        with pytest.raises(StateDirInUseError, match="is in use by numalign serve"):
            Agent(other).start()
        # The same sockets, another state directory: refused by the live sockets.
        with pytest.raises(InvalidInputError, match="is in use"):
            Agent(layout.options(state_dir=layout.root / "state2")).start()
        # The first agent still owns both sockets and its files are as it left them.
        assert (kubelet_sock.stat().st_ino, layout.pr_socket.stat().st_ino) == ino
        assert {p.name: p.read_bytes() for p in layout.state.iterdir() if p.is_file()} == state_before
        # ... and it still works.
        layout.write_manifest("two.yaml", gpu_pod("two", gpus=0))
        wait_pod(layout, "two", "admitted")
    finally:
        first.stop()
    # Once it has stopped, its leftovers are stale and a new agent starts normally.
    second = Agent(layout.options())
    second.start()
    second.stop()


def test_a_leftover_socket_file_is_not_in_use(layout: Layout) -> None:
    import socket

    layout.plugins.mkdir(parents=True)
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(layout.plugins / "kubelet.sock"))
    leftover.close()  # bound, never listening: what a crashed kubelet leaves behind
    agent = Agent(layout.options())
    agent.start()
    agent.stop()
