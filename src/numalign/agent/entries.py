"""What the agent knows of each pod and manifest file: the entries of numalign_status.json, typed.

A `PodEntry` is one admission of one pod: every time the pod book decides anew for a uid (admitted,
rejected, pending, its Allocate in flight) it makes a new entry with a new `serial`, so work started
for an earlier admission (an Allocate answer, a container start) is recognised as stale and dropped.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from numalign.core.decision import ContainerAllocation
from numalign.k8s.pod import Pod


class PodStatus(enum.StrEnum):
    ADMITTED = "admitted"
    REJECTED = "rejected"
    # With wait_for_device_plugins: an extended resource's plugin is not connected and reported yet.
    PENDING = "pending"
    # With parallel_allocate: decided, resources taken, a device plugin's Allocate in flight.
    ADMITTING = "admitting"


class ContainersStatus(enum.StrEnum):
    """An admitted pod's containers: being started (PreStartContainer in flight), all started, or at
    least one failed to start (retried with back-off, as the kubelet retries a container start)."""

    STARTING = "starting"
    STARTED = "started"
    FAILED = "failed"


class ManifestStatus(enum.StrEnum):
    OK = "ok"
    INVALID = "invalid"  # unreadable, or a document the book refused (its error says which)


@dataclass(eq=False)
class PodEntry:
    pod: Pod
    file: str | None
    status: PodStatus
    serial: int
    reason: str | None = None
    message: str = ""
    record: Mapping[str, Any] | None = None  # DecisionRecord.to_dict() of the decision
    # container -> what it holds, and -> the Allocate answers merged for the runtime
    allocations: Mapping[str, ContainerAllocation] = field(default_factory=dict)
    runtime: Mapping[str, Any] = field(default_factory=dict)
    container_errors: Mapping[str, str] = field(default_factory=dict)
    containers: ContainersStatus | None = None
    start_attempts: int = 0  # failed starts of this admission's containers so far (the back-off's step)

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def key(self) -> str:
        return self.pod.key

    def to_dict(self) -> dict[str, Any]:
        """The entry as numalign_status.json holds it (`numalign pods` reads it)."""
        out: dict[str, Any] = {
            "uid": self.pod.uid, "namespace": self.pod.namespace, "name": self.pod.name, "file": self.file,
            "status": str(self.status), "reason": self.reason, "message": self.message,
            "record": None if self.record is None else dict(self.record),
            "allocations": {name: a.to_dict() for name, a in self.allocations.items()}, "runtime": dict(self.runtime),
            # The file's keys are sorted: this keeps the kubelet's order (init containers first, in spec
            # order), so a reader draws an app container over the finished init container whose CPUs it reuses.
            "container_order": [c.name for c in self.pod.all_containers()],
            "container_errors": dict(self.container_errors),
            "containers": None if self.containers is None else str(self.containers),
        }
        if self.start_attempts:
            out["start_attempts"] = self.start_attempts
        return out

    def restore(self, previous: Mapping[str, Any]) -> None:
        """Take back what the previous run's status file said of this (restored, admitted) pod: its
        decision record and how far its containers got. Values of the wrong type are ignored."""
        record, errors = previous.get("record"), previous.get("container_errors")
        containers = previous.get("containers")
        if isinstance(record, Mapping) and record:
            self.record = dict(record)
        if isinstance(errors, Mapping) and errors:
            self.container_errors = {str(k): str(v) for k, v in errors.items()}
        if isinstance(containers, str) and containers in {c.value for c in ContainersStatus}:
            self.containers = ContainersStatus(containers)


@dataclass
class ManifestEntry:
    """A manifest file: whether it could be used, and the uids of the pods it holds (in file order)."""

    status: ManifestStatus = ManifestStatus.OK
    error: str | None = None
    pods: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"status": str(self.status), "error": self.error, "pods": list(self.pods)}
