"""A Node's state between processes: the store contract, transactions, and reconciliation. No I/O.

The files themselves are written by an adapter (numalign.adapters.statedir.directory.StateDirectory) that the
composition (CLI, agent, `numalign run`) hands to the Node. The rules it and the Node keep:

* numalign's pod record says which pods exist; the kubelet's files say what each one holds. The
  record is the commit point: an admission writes the kubelet files first and the record last, a
  removal writes the record first. Whatever a crash interrupts, the files can then only hold *more*
  than the record (orphaned allocations), never less, and the kubelet can read every file at every
  moment.
* Every open of a state directory reconciles, as the kubelet's removeStaleState does: allocations of
  pods the record does not list are released; a listed pod whose allocations are missing is admitted
  again, or dropped and reported when it no longer fits. One log line per repair.
* A transaction holds the directory's lock from the first read to the last write, reloads first when
  another process wrote since this one's last write, writes only the files that changed, and on a
  failed write puts the in-memory state back to what is on disk: a failed write is a failed admission.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from numalign.core.decision import AdmitResult, DecisionRecord
from numalign.errors import CheckpointError
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.pod import Pod
from numalign.kubelet.cpumanager.policy import CPUPolicy
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.memorymanager.policy import MemoryPolicy
from numalign.kubelet.state import (
    AllocationRecord,
    NodeState,
    RecordedAllocation,
    RecordedBlock,
    RecordedContainer,
    SpelledCPUSet,
)


class NodeStore(Protocol):
    """Where a Node's state lives between processes. It trades NodeState values, never a Node."""

    read_only: bool

    @property
    def name(self) -> str:
        """Where, for log lines (the directory)."""

    @property
    def device_checkpoint(self) -> str:
        """The device checkpoint's path, for messages about its content."""

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """The directory's transaction lock (shared for a read-only store)."""

    def load(self, *, cpu_policy: str, memory_policy: str) -> NodeState:
        """The state on disk (nothing on disk: an empty state). The managers' configured policies are
        checked against their checkpoints' as the kubelet checks them, whatever the policy."""

    def adopted(self, state: NodeState) -> None:
        """The state `load` returned as the node adopted it (its managers validate and complete what they
        read): a checkpoint is rewritten only when the state to commit differs from this, never for its
        formatting alone."""

    def changed(self) -> bool:
        """True when another process wrote the directory since this store last read or wrote it."""

    def commit(self, state: NodeState) -> None:
        """Write what differs from disk, in the safe order; CheckpointError when a write fails."""


@dataclass
class Transaction:
    """One transaction's outcome: `failure` is the write error, if the commit failed."""

    failure: CheckpointError | None = None
    removed: list[str] = field(default_factory=list)

    def __init__(self, failure: CheckpointError | None = None, removed: list[str] | None = None) -> None:
        # Written out: the dataclass decorator's __init__ is interpreted even in the compiled core, and
        # every admission and removal opens a transaction.
        self.failure = failure
        self.removed = [] if removed is None else removed

    def outcome(self, records: Sequence[DecisionRecord], admitted: Collection[str]) -> list[DecisionRecord]:
        """The records as they stand after the commit: an admission whose write failed (its pod is
        not in `admitted`, the uids of the pods on disk) is reported with the real reason, as the kubelet reports
        a device-checkpoint write that failed during Allocate."""
        if self.failure is None:
            return list(records)
        result = AdmitResult.from_allocation_error(None, str(self.failure))
        return [replace(r, result=result, allocations={}) if r.result.admit and r.pod_uid not in admitted
                else r for r in records]


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield


def recorded_allocation(pod: Pod, cpu: CPUPolicy, memory: MemoryPolicy, devices: DeviceManager) -> RecordedAllocation:
    """What the kubelet files must hold for `pod`, per container: exclusive CPUs, memory blocks, devices."""
    out: list[tuple[str, RecordedContainer]] = []
    for c in pod.init_containers + pod.containers:
        own = cpu.get_cpu_set(pod.uid, c.name)
        blocks = memory.get_memory(pod.uid, c.name) or []
        devs = devices.get_container_devices(pod.uid, c.name) or {}
        if own is None and not blocks and not devs:
            continue
        out.append((c.name, RecordedContainer(
            None if own is None else SpelledCPUSet(frozenset(own), format_cpuset(own)),
            tuple(RecordedBlock(b.type, b.size, tuple(sorted(b.numa_affinity))) for b in blocks),
            tuple((res, tuple(sorted(ids))) for res, ids in sorted(devs.items())))))
    return RecordedAllocation(tuple(sorted(out, key=lambda named: named[0])))


def reconcile(
    pods: dict[str, Pod],
    allocations: dict[str, AllocationRecord | None],
    cpu: CPUPolicy,
    memory: MemoryPolicy,
    devices: DeviceManager,
    forget: Callable[[Pod], None],
    readmit: Callable[[Pod], DecisionRecord],
) -> list[str]:
    """Bring the kubelet files' allocations in line with the pods the record lists; one line per repair.

    `allocations` holds each pod's recorded allocation (None: not recorded, a first-format file), and is
    updated for pods admitted again; pods that no longer fit leave `pods`."""
    repairs: list[str] = []
    active = list(pods.values())
    for what, stale in (("CPUs", cpu.remove_stale_state(active)), ("memory", memory.remove_stale_state(active))):
        for uid, name in stale:
            repairs.append(f"released the {what} of container {name} of pod uid {uid}: no pod numalign admitted "
                           "holds them (an admission or removal was interrupted)")
    for uid in sorted(devices.pod_devices.pods() - set(pods)):
        devices.remove_pod(uid)
        repairs.append(f"released the devices of pod uid {uid}: no pod numalign admitted holds them "
                       "(an admission or removal was interrupted)")
    # An unreadable recorded allocation matches no holding: its pod is admitted again, as one whose
    # allocations the files lost.
    missing = [p for uid, p in pods.items() if (want := allocations.get(uid)) is not None
               and not (isinstance(want, RecordedAllocation)
                        and want.holds_same(recorded_allocation(p, cpu, memory, devices)))]
    for pod in missing:
        forget(pod)  # release what is left of it first, so its re-admission sees the node without it
    for pod in missing:
        rec = readmit(pod)
        if rec.result.admit:
            allocations[pod.uid] = recorded_allocation(pod, cpu, memory, devices)
            repairs.append(f"admitted pod {pod.key} (uid {pod.uid}) again: the kubelet files did not hold what "
                           "numalign's pod record says it was given")
        else:
            del pods[pod.uid]
            allocations.pop(pod.uid, None)
            repairs.append(f"pod {pod.key} (uid {pod.uid}) is no longer admitted: the kubelet files did not hold "
                           f"its allocations and admitting it again failed ({rec.result.reason}: {rec.result.message})")
    return repairs
