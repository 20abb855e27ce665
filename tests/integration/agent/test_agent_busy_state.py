"""The agent's periodic tick never waits on another process's transaction while it holds its own lock
(`numalign run` may hold the directory's transaction across a device plugin's Allocate)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from integration.agent.conftest import Layout

from numalign.agent.agent import Agent

_HOLD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from numalign.adapters.statedir.locks import transaction
    with transaction(Path(sys.argv[1])):
        print("held", flush=True)
        sys.stdin.read()
    """
)


def test_the_tick_is_skipped_while_another_process_holds_the_transaction(agent: Agent, layout: Layout) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(layout.state)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        tick = threading.Thread(target=agent.tick)
        tick.start()
        tick.join(timeout=20)  # before the change it waited for the holder (30 s, then an error)
        assert not tick.is_alive(), "the tick waited on another process's transaction"
        assert holder.poll() is None  # the transaction was still held while the tick came back
        # and the agent's lock is free: the PodResources and plugin callbacks' side is not stalled
        assert agent.responsive(timeout=5)
    finally:
        holder.kill()
        holder.wait()
        for f in (holder.stdin, holder.stdout):
            if f is not None:
                f.close()
