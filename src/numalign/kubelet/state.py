"""A node's state as a value: what survives a kubelet restart, and what a store keeps between processes.

The kubelet keeps its managers' checkpoints (cpu_manager_state, memory_manager_state, the device
checkpoint, dra_manager_state) across a restart; numalign adds its pod record, the pods it admitted
with what the kubelet files must hold for each, and keeps the DRA claims those pods reserve inside it,
so a pod and its claims are committed together. A NodeState is those, frozen: a store loads one and
commits one (numalign.kubelet.nodestate says in which order), and a Node built from one is that node
after a restart, with whatever configuration it is given (the what-if answers build theirs that way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numalign.k8s.pod import Pod
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.devicemanager.state import DeviceManagerState
from numalign.kubelet.dramanager.state import HeldClaim
from numalign.kubelet.memorymanager.state import MemoryManagerState


@dataclass(frozen=True)
class AdmittedPod:
    """A pod of the pod record: its allocation is what the kubelet files must hold for it, per container
    (None: not recorded, a first-format record). The process a `numalign run` pod runs as is not the
    kubelet's: the run layer keeps it beside this state (run/records.py)."""

    pod: Pod
    allocation: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class NodeState:
    """The pods in admission order and each manager's state model (None: no checkpoint, as on a node
    whose kubelet never wrote one). `recorded`: False for a directory without numalign's pod record (the
    kubelet's own), whose checkpoints are then the truth and whose pods numalign does not know."""

    pods: tuple[AdmittedPod, ...] = ()
    cpu: CPUManagerState | None = None
    memory: MemoryManagerState | None = None
    devices: DeviceManagerState | None = None
    recorded: bool = True
    claims: tuple[HeldClaim, ...] = ()  # the DRA claims the pods reserve, by claim key
