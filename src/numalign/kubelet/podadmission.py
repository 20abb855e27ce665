"""A node's admission of pods: one path for every admission, `decide(pod) -> Plan` then `commit`, and
`probe`, the same decision released at once.

Upstream's allocation manager (pkg/kubelet/allocation, AddPod) runs kubelet.go's admit handlers in
order up to the first rejection and records the admitted pod with what it was given. Here decide takes
the pod's resources and says which device-plugin Allocate calls are left; commit records the outcome.
`admit` makes the calls at once, inside one transaction; the agent and `numalign run` make them with the
lock released (decide, Plan.make_calls, commit).

`PodAdmission` is a part of numalign.kubelet.node.Node, which builds it and hands it what it needs: the
container manager, the admit handlers, and itself as the keeper of the pods admitted (`AdmittedPods`,
what admission reads and keeps of the node). It owns the plans in flight and the probes' metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from numalign import metrics as m
from numalign.core.decision import AdmitResult, ContainerAllocation, ContainerDecision, DecisionRecord
from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.admission.handlers import AdmitHandlers
from numalign.kubelet.containermanager import ContainerManager
from numalign.kubelet.nodestate import NodeStore, Transaction, recorded_allocation
from numalign.kubelet.plan import Plan
from numalign.kubelet.versions import refuse_unmodelled


class AdmittedPods(Protocol):
    """What admission reads and keeps of its node (numalign.kubelet.node.Node): the pods admitted with
    their decision records and recorded allocations, its store (None: nothing is recorded), how often
    its state was read again (a reload drops every plan), and its transactions."""

    pods: dict[str, Pod]
    records: dict[str, DecisionRecord]
    allocations: dict[str, Mapping[str, Any] | None]
    store: NodeStore | None
    reloads: int

    def transaction(self) -> contextlib.AbstractContextManager[Transaction]: ...


class PodAdmission:
    """decide / commit / probe over a node's pods (a part of numalign.kubelet.node.Node, which builds it
    with the container manager and the admit handlers, and keeps the pods it admits)."""

    def __init__(self, node: AdmittedPods, cm: ContainerManager, handlers: AdmitHandlers, metrics: m.Metrics,
                 gates: dict[str, bool], kubelet_version: KubeletVersion) -> None:
        self.node, self.cm, self.handlers, self.metrics = node, cm, handlers, metrics
        self.gates, self.kubelet_version = gates, kubelet_version
        self.probe_metrics = m.Metrics()  # what probes count, read by nobody
        # Admitted pods whose plugin Allocate calls are in flight (decide .. commit); not recorded.
        self.reserved: dict[str, Plan] = {}

    def admit(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Decide and commit at once. allocations=False: the record (the one returned and the one kept)
        leaves out what the pod holds, which the node still answers (allocation()); for callers that
        read only the verdict, as the simulator does for every pod it binds."""
        with self.node.transaction() as tx:
            plan = self._decide(pod, defer_calls=False, allocations=allocations)
        return tx.outcome([plan.record], self.node.pods)[0]

    def decide(self, pod: Pod) -> Plan:
        """Decide as `admit` does, leaving the device plugins' Allocate calls to the caller (Plan.make_calls,
        then commit), so they need not hold up other admissions. A plan with no call left is settled: an
        admitted pod is recorded already (and commit hands its record back)."""
        with self.node.transaction() as tx:
            plan = self._decide(pod, defer_calls=True)
        if tx.failure is not None:  # the write failed: the state is the disk's again, nothing is held
            self.reserved.pop(pod.uid, None)
            return replace(plan, record=tx.outcome([plan.record], self.node.pods)[0], calls=())
        return plan

    def commit(self, plan: Plan, responses: Sequence[Any] = (), error: str | None = None) -> DecisionRecord | None:
        """Settle a plan with its calls' outcome: one response per call made, and the first call's error
        (the calls stop there, as the kubelet's Allocate does). None when the plan is gone meanwhile
        (cancelled, or dropped by a reload of the state: decide again)."""
        pod, rec = plan.pod, plan.record
        if plan.settled:
            return rec
        if not rec.result.admit:
            # The kubelet made these calls before it rejected the pod: a failing one is the answer.
            return rec if error is None else replace(rec, result=AdmitResult.from_allocation_error(None, error))
        with self.node.transaction() as tx:
            # Checked under the lock: a process that wrote the directory since (the transaction read it
            # again) has dropped the plan, and may have given its resources to another pod.
            if self.reserved.get(pod.uid) is not plan or self.node.reloads != plan.reloads:
                return None
            del self.reserved[pod.uid]
            if error is not None:
                self.cm.release_pod(pod)
                return self._record(pod, rec.decisions, AdmitResult.from_allocation_error(None, error), {})
            for call, resp in zip(plan.calls, responses, strict=True):
                self.cm.devices.answered(call, resp)
            self._keep(pod, rec)
        return tx.outcome([rec], self.node.pods)[0]

    def probe(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Would this node admit the pod now? Decided as `admit` decides it, then released: no pod, record,
        metric or state write is left, and no device plugin is called. allocations=False: the record
        leaves out what the pod would hold (for callers that read only the verdict, as the simulator's
        exact scheduler does for every candidate node)."""
        cm = self.cm
        tm_metrics, counters = cm.tm.metrics, cm.counters()
        # The Topology Manager counts into a sink nobody reads (one per node, not one per probe).
        cm.tm.metrics = cm.tm.scope.metrics = self.probe_metrics
        cm.devices.deferred = []
        try:
            decisions, result = self._verdict(pod)
            held: dict[str, ContainerAllocation] = {}
            if result.admit:
                cm.start_pod(pod)
                if allocations:
                    held = cm.allocations(pod)
            cm.release_pod(pod)
        finally:
            cm.devices.deferred = None
            cm.tm.metrics = cm.tm.scope.metrics = tm_metrics
            cm.set_counters(counters)
        return DecisionRecord(pod.key, pod.uid, cm.tm.policy_name, cm.tm.scope_name, dict(cm.tm.options),
                              decisions, result, held)

    @property
    def reserved_pods(self) -> list[Pod]:
        return [plan.pod for plan in self.reserved.values()]

    def cancel(self, pod_uid: str) -> None:
        """Release a plan whose pod went away; its calls' outcome is then ignored (commit)."""
        plan = self.reserved.pop(pod_uid, None)
        if plan is not None:
            with self.node.transaction():
                self.cm.release_pod(plan.pod)

    def _decide(self, pod: Pod, *, defer_calls: bool, allocations: bool = True) -> Plan:
        """The admission, in the caller's transaction: the verdict, the pod's resources taken, the record
        built once. Without calls left the pod is recorded at once; with some it is reserved."""
        cm = self.cm
        cm.devices.deferred = [] if defer_calls else None
        try:
            decisions, result = self._verdict(pod)
        finally:
            calls, cm.devices.deferred = tuple(cm.devices.deferred or ()), None
        cm.sync_metrics()
        if not result.admit:
            return Plan(pod, self._record(pod, decisions, result, {}), calls, self.node.reloads)
        cm.start_pod(pod)
        rec = self._record(pod, decisions, result, cm.allocations(pod) if allocations else {})
        plan = Plan(pod, rec, calls, self.node.reloads)
        if calls:
            # Taken but not recorded: a crash now leaves the pod unadmitted and its files reconciled.
            self.reserved[pod.uid] = plan
        else:
            self._keep(pod, rec)
        return plan

    def _verdict(self, pod: Pod) -> tuple[tuple[ContainerDecision, ...], AdmitResult]:
        """The kubelet's admit handlers in order, up to the first rejection; an admitted pod holds what the
        managers gave it, a rejected one nothing."""
        if pod.uid in self.node.pods or pod.uid in self.reserved:
            raise InvalidInputError(
                f"pod {pod.key} (uid {pod.uid}) is already admitted on this node; give the new pod another "
                "name or metadata.uid (Node.remove(uid) releases the old one; with `numalign admit "
                "--state-dir`, start from a fresh directory or use --dry-run to ask without keeping pods)"
            )
        if pod.has_pod_level_resources and not self.gates.get("PodLevelResources", False):
            # The kubelet's isPodLevelResourcesSupported admit handler; numalign checks it first (the
            # kubelet may run the Topology Manager's handler before it, with the same final verdict).
            return (), AdmitResult(False, "PodLevelResourcesNotSupported", "PodLevelResources feature gate is disabled")
        refuse_unmodelled(pod, self.gates, self.kubelet_version)  # KEP-5526: say so rather than guess
        early = self.handlers.before_topology(pod)
        if not early.admit:
            return (), early
        outcome = self.cm.tm.decide(pod)
        result = outcome.result
        if result.admit:
            result = self._fit(pod)
        if not result.admit:
            self.cm.tm.remove_pod(pod)
        return tuple(outcome.decisions), result

    def _fit(self, pod: Pod) -> AdmitResult:
        """The predicate handler, given what it reads of this node: the allocatable (the devices allocated
        count once the pod holds some), the pods held and those waiting on a plugin's Allocate."""
        devices = self.cm.devices
        holds = devices.pod_devices.has_pod(pod.uid) and any(
            devices.get_container_devices(pod.uid, c.name) for c in pod.all_containers())
        allocatable = self.handlers.allocatable(devices.healthy, devices.allocated if holds else {})
        return self.handlers.after_topology(pod, allocatable, self.node.pods, self.reserved_pods)

    def _record(self, pod: Pod, decisions: tuple[ContainerDecision, ...], result: AdmitResult,
                allocations: Mapping[str, ContainerAllocation]) -> DecisionRecord:
        """The admission's decision record; the one place a rejection is counted."""
        if not result.admit:
            self.metrics.inc(m.ADMISSION_REJECTIONS, reason=m.rejection_label(result.reason))
        tm = self.cm.tm
        return DecisionRecord(pod.key, pod.uid, tm.policy_name, tm.scope_name, dict(tm.options),
                              decisions, result, allocations)

    def _keep(self, pod: Pod, rec: DecisionRecord) -> None:
        """Record an admitted pod (the pod record's commit point is the caller's transaction)."""
        self.node.pods[pod.uid] = pod
        if self.node.store is not None:
            cm = self.cm
            self.node.allocations[pod.uid] = recorded_allocation(pod, cm.cpu, cm.memory, cm.devices)
        self.node.records[pod.uid] = rec
