"""A rejected pod as the answers read it: what it asks for and how the node's predicate sees it, read
once, when the answer starts.

The why, the shortfalls and the would-fit-if candidates all ask the same questions of the pod (its QoS
class, each container's effective requests, the pod's requests in the scheduler's units, which
container the rejection is about, what the predicate finds missing on the node). `Rejected(node, pod,
record)` answers them once, through the request helpers, and the answers read its fields; only a
changed pod, re-admitted by Node.probe, is a Pod again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from numalign.core.decision import ContainerDecision, DecisionRecord
from numalign.k8s.pod import Container, Pod, pod_to_manifest
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import container_requests
from numalign.kubelet.admission.allocatable import amount
from numalign.kubelet.admission.predicate import (
    InsufficientResource,
    fit_requests,
    insufficient_resources,
    requested_by,
)
from numalign.kubelet.node import Node


@dataclass(frozen=True)
class ContainerAsk:
    """One container and what it requests: its effective requests (a limit without a request requests
    the limit) and the same in the scheduler's units (cpu in millicores, bytes, devices)."""

    container: Container
    requests: Mapping[str, Quantity]
    amounts: Mapping[str, int]

    @property
    def name(self) -> str:
        return self.container.name

    def whole_cpus(self) -> int:
        """The exclusive CPUs the static CPU manager would give: whole CPUs, else 0 (the shared pool)."""
        milli = self.amounts.get("cpu", 0)
        return milli // 1000 if milli % 1000 == 0 else 0


@dataclass(frozen=True)
class Rejected:
    """A pod `node` rejected (`record`), with what it asks for and what the node's predicate sees now."""

    node: Node
    pod: Pod
    record: DecisionRecord
    qos: QOSClass = field(init=False)
    containers: tuple[ContainerAsk, ...] = field(init=False)  # init containers first (kubelet order)
    target: ContainerAsk | None = field(init=False)  # the container the rejection is about
    fit: Mapping[str, int] = field(init=False)  # the pod's requests in the scheduler's units, zeros left out
    shape: str = field(init=False)  # the pod without its metadata, and the reason: pods of one shape, one answer

    def __post_init__(self) -> None:
        pod = self.pod
        asks = tuple(ContainerAsk(c, r, {n: amount(n, q) for n, q in r.items()})
                     for c in pod.all_containers() for r in (container_requests(c),))
        manifest = pod_to_manifest(pod)
        manifest.pop("metadata", None)
        fields = {"qos": get_pod_qos(pod), "containers": asks, "target": _target(asks, self.record),
                  "fit": fit_requests(pod), "shape": json.dumps([manifest, self.reason], sort_keys=True)}
        for name, value in fields.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    # What the node's predicate sees, read when an answer first asks (pods of one shape rejected in a row
    # share their answer, and never ask).
    @cached_property
    def others(self) -> list[Pod]:
        """The pods on the node but this one."""
        return [p for uid, p in self.node.pods.items() if uid != self.pod.uid]

    @cached_property
    def allocatable(self) -> dict[str, int]:
        """The node's allocatable, as its predicate counts it."""
        return self.node.handlers.allocatable(self.node.devices.healthy)

    @cached_property
    def requested(self) -> dict[str, int]:
        """What the other pods on the node request, summed."""
        return requested_by(self.node.handlers.requests_of(self.others))

    @cached_property
    def failures(self) -> tuple[InsufficientResource, ...]:
        """The predicate's failures for the pod on the node as it is now (the pod not admitted)."""
        return tuple(insufficient_resources(dict(self.fit), self.allocatable, self.requested, len(self.others)))

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def reason(self) -> str:
        return self.record.result.reason

    @property
    def failed(self) -> ContainerDecision | None:
        return failed_decision(self.record)


def failed_decision(rec: DecisionRecord) -> ContainerDecision | None:
    return next((d for d in rec.decisions if d.allocation_error or not d.admit), None)


def _target(asks: tuple[ContainerAsk, ...], rec: DecisionRecord) -> ContainerAsk | None:
    """The container the rejection is about (in pod scope: the one asking most of NUMA-bound resources)."""
    d = failed_decision(rec)
    if d is not None and d.container:
        return next((a for a in asks if a.name == d.container), None)
    if not asks:
        return None
    return max(asks, key=lambda a: len(a.requests))
