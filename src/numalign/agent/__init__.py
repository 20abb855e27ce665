"""numalign.agent: the node agent behind `numalign serve`.

It wires a numalign.kubelet.node.Node (Topology Manager, CPU/memory/device managers, kubelet state files) to
the kubelet's real surfaces: device plugins registering over gRPC, static-pod manifests in a
directory, the PodResources v1 socket, a Prometheus endpoint, and a status file beside the state.

    agent = Agent(AgentOptions(machine=..., config=..., device_plugin_dir=..., ...))
    agent.start()
    ...
    agent.stop()
"""

from __future__ import annotations

from numalign.adapters.statedir.layout import STATUS_FILE
from numalign.agent.agent import Agent
from numalign.agent.options import AgentOptions
from numalign.agent.status import read_status

__all__ = ["STATUS_FILE", "Agent", "AgentOptions", "read_status"]
