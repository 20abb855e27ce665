"""A node's state as a value: what survives a kubelet restart, and what a store keeps between processes.

The kubelet keeps its managers' checkpoints (cpu_manager_state, memory_manager_state, the device
checkpoint, dra_manager_state) across a restart; numalign adds its pod record, the pods it admitted
with what the kubelet files must hold for each, and keeps the DRA claims those pods reserve inside it,
so a pod and its claims are committed together. A NodeState is those, frozen: a store loads one and
commits one (numalign.kubelet.nodestate says in which order), and a Node built from one is that node
after a restart, with whatever configuration it is given (the what-if answers build theirs that way).

A pod's recorded allocation (`RecordedAllocation`) is typed here and read from and written to JSON only
at the edge (numalign.adapters.statedir.allocation). It keeps each CPU set as it was spelled, so a state
directory read and committed without a change is written back byte for byte; a recorded entry the
reader cannot take is an `UnreadableAllocation`, which holds nothing, so the pod is admitted again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numalign.k8s.pod import Pod
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.devicemanager.state import DeviceManagerState
from numalign.kubelet.dramanager.state import HeldClaim
from numalign.kubelet.memorymanager.state import MemoryManagerState


@dataclass(frozen=True)
class SpelledCPUSet:
    """A CPU set with the text it was written as ("1-3" or "1,2,3"): two are the same CPUs when their
    `cpus` are equal, whatever the spelling; the spelling is what is written back."""

    cpus: frozenset[int]
    text: str


@dataclass(frozen=True)
class RecordedBlock:
    """A memory block as the memory manager assigns it (upstream's state.Block): its type ("memory" or a
    hugepages size), size in bytes and NUMA nodes, in the order recorded (numalign records them sorted)."""

    type: str
    size: int
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True)
class RecordedContainer:
    """What the kubelet files must hold for one container: exclusive CPUs (None: none, it runs in the
    shared pool), memory blocks, and device IDs per resource name (sorted by name; IDs as recorded)."""

    cpus: SpelledCPUSet | None = None
    memory: tuple[RecordedBlock, ...] = ()
    devices: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def holds_same(self, other: RecordedContainer) -> bool:
        """The same CPUs (any spelling), memory blocks and devices."""
        mine, theirs = self.cpus, other.cpus
        if (mine is None) != (theirs is None) or (mine is not None and theirs is not None and mine.cpus != theirs.cpus):
            return False
        return self.memory == other.memory and self.devices == other.devices


@dataclass(frozen=True)
class RecordedAllocation:
    """A pod's recorded allocation: per container name (sorted) what the kubelet files must hold for it;
    containers that hold nothing exclusive are not listed."""

    containers: tuple[tuple[str, RecordedContainer], ...] = ()

    def holds_same(self, other: RecordedAllocation) -> bool:
        """The same containers holding the same resources, whatever the CPU sets' spelling."""
        pairs = self.containers, other.containers
        return len(pairs[0]) == len(pairs[1]) and all(
            name == o_name and c.holds_same(o) for (name, c), (o_name, o) in zip(*pairs, strict=True))


@dataclass(frozen=True)
class UnreadableAllocation:
    """A recorded allocation not in the shape numalign writes (`problem` says where and what): it matches
    no holding, so the pod is admitted again (or dropped) when its state is opened. `raw` is the JSON as
    read, written back unchanged should a state be committed before that."""

    problem: str
    raw: Any


# A pod record's allocation as read: the typed value, or what could not be read as one.
AllocationRecord = RecordedAllocation | UnreadableAllocation


@dataclass(frozen=True)
class AdmittedPod:
    """A pod of the pod record: its allocation is what the kubelet files must hold for it, per container
    (None: not recorded, a first-format record; an UnreadableAllocation: recorded, not readable). The
    process a `numalign run` pod runs as is not the kubelet's: the run layer keeps it beside this state
    (run/records.py)."""

    pod: Pod
    allocation: AllocationRecord | None = None


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
