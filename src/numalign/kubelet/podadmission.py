"""A node's admission of pods: one path for every admission, `decide(pod) -> Plan` then `commit`, and
`probe`, the same decision released at once.

Upstream's allocation manager (pkg/kubelet/allocation, AddPod) runs kubelet.go's admit handlers in
order up to the first rejection and records the admitted pod with what it was given. Here every
admission is decide, make the calls, commit: decide takes the pod's resources and says which
device-plugin Allocate calls are left (the device manager decides them without making them), the calls
are made in the kubelet's order up to the first failure, and commit records the outcome. `admit` does
the three inside one transaction; the agent and `numalign run` make the calls with the lock released.

The kubelet makes each call as it allocates the container, and a failing one ends the admission there.
A failure is settled as that end: the pod holds nothing, its answer is the call's error
(UnexpectedAdmissionError), its decisions stop at the failing container (Scope.failed_at), the Topology
Manager counts the admission error it counted, and the rejection is counted once, with that reason.

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
from numalign.kubelet.state import AllocationRecord
from numalign.kubelet.versions import refuse_unmodelled


class AdmittedPods(Protocol):
    """What admission reads and keeps of its node (numalign.kubelet.node.Node): the pods admitted with
    their decision records and recorded allocations, its store (None: nothing is recorded), how often
    its state was read again (a reload drops every plan), and its transactions."""

    pods: dict[str, Pod]
    records: dict[str, DecisionRecord]
    allocations: dict[str, AllocationRecord | None]
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
        """Decide, make the calls and commit, in one transaction. allocations=False: the record (the one
        returned and the one kept) leaves out what the pod holds, which the node still answers
        (allocation()); for callers that read only the verdict, as the simulator does for every pod it
        binds."""
        with self.node.transaction() as tx:
            plan = self._decide(pod, allocations=allocations)
            try:
                rec = plan.record if plan.settled else self._settle(plan, *plan.make_calls())
            except BaseException:  # not a plugin's refusal (a bug in its client): nothing stays held
                if self.reserved.pop(pod.uid, None) is not None:
                    self.cm.release_pod(pod)
                raise
        return tx.outcome([rec], self.node.pods)[0]

    def decide(self, pod: Pod) -> Plan:
        """Decide as `admit` does, leaving the device plugins' Allocate calls to the caller (Plan.make_calls,
        then commit), so they need not hold up other admissions. A plan with no call left is settled: an
        admitted pod is recorded already (and commit hands its record back)."""
        with self.node.transaction() as tx:
            plan = self._decide(pod)
        if tx.failure is not None:  # the write failed: the state is the disk's again, nothing is held
            self.reserved.pop(pod.uid, None)
            return replace(plan, record=tx.outcome([plan.record], self.node.pods)[0], calls=())
        return plan

    def commit(self, plan: Plan, responses: Sequence[Any] = (), error: str | None = None) -> DecisionRecord | None:
        """Settle a plan with its calls' outcome: one response per call made, and the first call's error
        (the calls stop there, as the kubelet's Allocate does). None when the plan is gone meanwhile
        (cancelled, or dropped by a reload of the state: decide again)."""
        if plan.settled:
            return plan.record
        if not plan.record.result.admit:
            return self._settle(plan, responses, error)  # holds nothing: no transaction needed
        with self.node.transaction() as tx:
            # Checked under the lock: a process that wrote the directory since (the transaction read it
            # again) has dropped the plan, and may have given its resources to another pod.
            if self.reserved.get(plan.pod.uid) is not plan or self.node.reloads != plan.reloads:
                return None
            rec = self._settle(plan, responses, error)
        return tx.outcome([rec], self.node.pods)[0]

    def _settle(self, plan: Plan, responses: Sequence[Any], error: str | None) -> DecisionRecord:
        """A plan with calls, settled by their outcome (in the caller's transaction). An admitted pod's
        answers are recorded and the pod kept; a failing call ends the admission where the kubelet ends
        it (see the module's docstring). A rejected plan's calls were made by the kubelet before the
        rejection: a failing one is the answer."""
        pod, rec = plan.pod, plan.record
        self.reserved.pop(pod.uid, None)
        if error is None:
            if rec.result.admit:
                self.cm.devices.answered(plan.calls, responses)
                self._keep(pod, rec)
            else:
                self._count_rejection(rec.result)
            return rec
        failing = plan.calls[len(responses)]
        result = AdmitResult.from_allocation_error(None, error)
        if rec.result.admit:
            self.cm.release_pod(pod)
        if plan.topology_admitted:  # the Topology Manager's handler would have failed on the call
            self.cm.tm.metrics.inc(m.TM_ADMISSION_ERRORS)
        self._count_rejection(result)
        decisions = tuple(self.cm.tm.scope.failed_at(rec.decisions, failing.container_name, result))
        return replace(rec, decisions=decisions, result=result, allocations={})

    def probe(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Would this node admit the pod now? Decided as `admit` decides it, then released: no pod, record,
        metric or state write is left, and no device plugin is called. allocations=False: the record
        leaves out what the pod would hold (for callers that read only the verdict, as the simulator's
        exact scheduler does for every candidate node)."""
        cm = self.cm
        tm_metrics, counters = cm.tm.metrics, cm.counters()
        # The Topology Manager counts into a sink nobody reads (one per node, not one per probe).
        cm.tm.metrics = cm.tm.scope.metrics = self.probe_metrics
        try:
            decisions, result, _ = self._verdict(pod)
            held: dict[str, ContainerAllocation] = {}
            if result.admit:
                cm.start_pod(pod)
                if allocations:
                    held = cm.allocations(pod)
            cm.release_pod(pod)
        finally:
            cm.devices.take_calls()  # decided, never made: a probe calls no plugin
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

    def _decide(self, pod: Pod, *, allocations: bool = True) -> Plan:
        """The admission, in the caller's transaction: the verdict, the pod's resources taken, the record
        built once, the plugin calls it needs taken from the device manager. Without calls left the pod
        is settled at once (an admitted one recorded); with some, an admitted pod is reserved."""
        cm = self.cm
        try:
            decisions, result, topology_admitted = self._verdict(pod)
        finally:
            calls = cm.devices.take_calls()
        cm.sync_metrics()
        if not result.admit:
            if not calls:
                self._count_rejection(result)
            return Plan(pod, self._record(pod, decisions, result, {}), calls, self.node.reloads, topology_admitted)
        cm.start_pod(pod)
        rec = self._record(pod, decisions, result, cm.allocations(pod) if allocations else {})
        plan = Plan(pod, rec, calls, self.node.reloads, topology_admitted)
        if calls:
            # Taken but not recorded: a crash now leaves the pod unadmitted and its files reconciled.
            self.reserved[pod.uid] = plan
        else:
            self._keep(pod, rec)
        return plan

    def _verdict(self, pod: Pod) -> tuple[tuple[ContainerDecision, ...], AdmitResult, bool]:
        """The kubelet's admit handlers in order, up to the first rejection; an admitted pod holds what the
        managers gave it, a rejected one nothing. Also whether the Topology Manager's handler admitted it."""
        if pod.uid in self.node.pods or pod.uid in self.reserved:
            raise InvalidInputError(
                f"pod {pod.key} (uid {pod.uid}) is already admitted on this node; give the new pod another "
                "name or metadata.uid (Node.remove(uid) releases the old one; with `numalign admit "
                "--state-dir`, start from a fresh directory or use --dry-run to ask without keeping pods)"
            )
        if pod.has_pod_level_resources and not self.gates.get("PodLevelResources", False):
            # The kubelet's isPodLevelResourcesSupported admit handler; numalign checks it first (the
            # kubelet may run the Topology Manager's handler before it, with the same final verdict).
            refusal = AdmitResult(False, "PodLevelResourcesNotSupported", "PodLevelResources feature gate is disabled")
            return (), refusal, False
        refuse_unmodelled(pod, self.gates, self.kubelet_version)  # KEP-5526: say so rather than guess
        early = self.handlers.before_topology(pod)
        if not early.admit:
            return (), early, False
        outcome = self.cm.tm.decide(pod)
        result = outcome.result
        if result.admit:
            result = self._fit(pod)
        if not result.admit:
            self.cm.tm.remove_pod(pod)
        return tuple(outcome.decisions), result, outcome.result.admit

    def _fit(self, pod: Pod) -> AdmitResult:
        """The predicate handler, given what it reads of this node: the allocatable (the devices allocated
        count once the pod holds some), the pods held and those waiting on a plugin's Allocate."""
        devices = self.cm.devices
        holds = devices.pod_devices.has_pod(pod.uid) and any(
            devices.get_container_devices(pod.uid, c.name) for c in pod.all_containers())
        allocatable = self.handlers.allocatable(devices.healthy, devices.allocated if holds else {})
        return self.handlers.after_topology(pod, allocatable, self.node.pods, self.reserved_pods)

    def _count_rejection(self, result: AdmitResult) -> None:
        """The one place a rejection is counted: once its answer is final (calls made, if any)."""
        self.metrics.inc(m.ADMISSION_REJECTIONS, reason=m.rejection_label(result.reason))

    def _record(self, pod: Pod, decisions: tuple[ContainerDecision, ...], result: AdmitResult,
                allocations: Mapping[str, ContainerAllocation]) -> DecisionRecord:
        """The admission's decision record."""
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
