"""A node's admission of pods: one path for every admission, `decide(pod) -> Plan` then `commit`, and
`probe`, the same decision released at once.

Upstream's allocation manager (pkg/kubelet/allocation, AddPod) runs kubelet.go's admit handlers in
order up to the first rejection and records the admitted pod with what it was given. The Topology
Manager's handler makes the device plugins' Allocate calls midway, as each container is allocated (the
device manager is its first provider), and a failing call ends the admission there: nothing after it is
looked at (no later hint, GetPreferredAllocation call, CPU or memory pinning, alignment count).

Here the admission is steps between those calls (TopologyManager.decide_steps): decide runs it up to the
first call, or to its end; the caller makes the call and commit hands the answer back, running it up to
the next call or the end, and so on (a Plan per pause). `admit` does it all inside one transaction; the
agent (--parallel-allocate) and `numalign run` make each call with the lock released. A failing call
is the device manager's AllocationError at that point, so the answer, the decisions, the counters and
what is held are the kubelet's. A paused admission's pod holds what it was given so far (`reserved`):
other admissions see it taken.

`PodAdmission` is a part of numalign.kubelet.node.Node, which builds it and hands it what it needs: the
container manager, the admit handlers, and itself as the keeper of the pods admitted (`AdmittedPods`,
what admission reads and keeps of the node). It owns the plans in flight and the probes' metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar, cast

from numalign import metrics as m
from numalign.core.decision import AdmitResult, ContainerAllocation, ContainerDecision, DecisionRecord
from numalign.errors import InvalidInputError, PluginError
from numalign.k8s.deviceplugin import ContainerAllocateResponse
from numalign.k8s.pod import Pod
from numalign.k8s.qos import get_pod_qos
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.admission.handlers import AdmitHandlers
from numalign.kubelet.containermanager import ContainerManager
from numalign.kubelet.devicemanager.manager import AllocateCall
from numalign.kubelet.nodestate import NodeStore, Transaction, recorded_allocation
from numalign.kubelet.plan import Plan, Run
from numalign.kubelet.state import AllocationRecord
from numalign.kubelet.topologymanager.provider import CallSteps
from numalign.kubelet.topologymanager.scopes import ScopeOutcome
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
        # kubelet.go counts each pod it admits by how its resources are set from 1.37 on, the family
        # registered only while PodLevelResources is on.
        self.count_pod_level = kubelet_version.minor_key >= (1, 37) and gates.get("PodLevelResources", False)
        # Admitted pods whose plugin Allocate calls are in flight (decide .. commit); not recorded.
        self.reserved: dict[str, Plan] = {}

    def admit(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Decide, make each call and hand its answer back, in one transaction. allocations=False: the
        record (the one returned and the one kept) leaves out what the pod holds, which the node still
        answers (allocation()); for callers that read only the verdict, as the simulator does for every
        pod it binds.

        The steps of decide and commit as plain calls (_admitted), each plugin call made where it comes:
        nothing else runs between them here, so no plan is paused, reserved or resumed."""
        scope = self.cm.tm.scope
        with self.node.transaction() as tx:
            calls = scope.plugin_calls
            try:
                record = self._admitted(pod, allocations)
            except BaseException:
                # Past a plugin call, as a paused admission abandoned (not a plugin's refusal: a bug in its
                # client, or in what ran after it): nothing stays held.
                if scope.plugin_calls != calls and pod.uid not in self.node.pods:
                    self.cm.release_pod(pod)
                raise
        return tx.outcome([record], self.node.pods)[0]

    def decide(self, pod: Pod) -> Plan:
        """Decide as `admit` does up to the first device plugin Allocate call, which is left to the caller
        (Plan.make_calls, then commit), so it need not hold up other admissions. A plan with no call left
        is settled: an admitted pod is recorded already (and commit hands its record back)."""
        with self.node.transaction() as tx:
            plan = self._advance(pod, Run(self._steps(pod)), self.node.reloads)
        return self._written(plan, tx)

    def commit(self, plan: Plan, responses: Sequence[Any] = (),
               error: PluginError | str | None = None) -> DecisionRecord | Plan | None:
        """Hand a plan's call outcome back (its response, or the plugin's error) and go on to the next call
        (a new Plan, whose call the caller makes and commits the same way) or the end (the record). None
        when the plan is gone meanwhile (cancelled, or dropped by a reload of the state: decide again)."""
        if plan.settled:
            return plan.record
        with self.node.transaction() as tx:
            # Checked under the lock: a process that wrote the directory since (the transaction read it
            # again) has dropped the plan, and may have given its resources to another pod.
            if self.reserved.get(plan.pod.uid) is not plan or self.node.reloads != plan.reloads:
                return None
            if isinstance(error, str):
                error = PluginError(error)
            try:
                nxt = self._advance(plan.pod, plan.steps, plan.reloads, responses, error)
            except BaseException:
                self._abandon(plan)
                raise
        nxt = self._written(nxt, tx)
        return nxt.record if nxt.settled else nxt

    def _written(self, plan: Plan, tx: Transaction) -> Plan:
        """The plan as its transaction's commit left it: a settled one's record as written; a paused one
        whose write failed is over (the state is the disk's again, nothing is held), with that failure."""
        if plan.settled:
            return replace(plan, outcome=tx.outcome([plan.record], self.node.pods)[0])
        if tx.failure is None:
            return plan
        self.reserved.pop(plan.pod.uid, None)
        if plan.steps is not None:
            plan.steps.close()
        failed = AdmitResult.from_allocation_error(None, str(tx.failure))
        return Plan(plan.pod, self._record(plan.pod, (), failed, {}), (), plan.reloads)

    def _advance(self, pod: Pod, steps: Run[DecisionRecord] | None, reloads: int,
                 responses: Sequence[Any] | None = None, error: PluginError | None = None) -> Plan:
        """Run the admission's steps to the next plugin call (a paused plan, reserved) or the end (a settled
        one): from the start (responses None), or with the last call's answer or error."""
        assert steps is not None
        self.reserved.pop(pod.uid, None)  # not among the "other pods" of its own predicate check
        if responses is None:
            call = steps.start()
        elif error is not None:
            call = steps.throw(error)
        else:
            call = steps.send(responses[0])
        if call is None:
            record = steps.result
            assert record is not None
            return Plan(pod, record, (), reloads)
        plan = Plan(pod, None, (cast("AllocateCall", call),), reloads, steps)
        self.reserved[pod.uid] = plan
        return plan

    def _abandon(self, plan: Plan) -> None:
        """A paused admission that ends otherwise than by its calls' answers (a bug in a plugin's client):
        nothing of it stays held."""
        self.reserved.pop(plan.pod.uid, None)
        if plan.steps is not None:
            plan.steps.close()
        if plan.pod.uid not in self.node.pods:
            self.cm.release_pod(plan.pod)

    def probe(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Would this node admit the pod now? Decided as `admit` decides it, then released: no pod, record,
        metric or state write is left, and no device plugin's Allocate is made (each is taken as answered).
        allocations=False: the record leaves out what the pod would hold (for callers that read only the
        verdict, as the simulator's exact scheduler does for every candidate node)."""
        cm = self.cm
        tm_metrics, counters = cm.tm.metrics, cm.counters()
        taken = dict(cm.devices.allocated)  # devices a failing allocation leaves taken are the probe's too
        # The Topology Manager counts into a sink nobody reads (one per node, not one per probe).
        cm.tm.metrics = cm.tm.scope.metrics = self.probe_metrics
        try:
            decisions, result = _answered_blank(self._verdict_steps(pod))
            held: dict[str, ContainerAllocation] = {}
            if result.admit:
                cm.start_pod(pod)
                if allocations:
                    held = cm.allocations(pod)
            cm.release_pod(pod)
        finally:
            cm.devices.allocated = taken
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

    def _steps(self, pod: Pod, *, allocations: bool = True) -> CallSteps[DecisionRecord]:
        """The admission, in the callers' transactions, as steps between the plugin calls: the verdict,
        then the record; an admitted pod is kept, a rejection counted once, with its final reason."""
        decisions, result = yield from self._verdict_steps(pod)
        return self._settled(pod, decisions, result, allocations)

    def _admitted(self, pod: Pod, allocations: bool) -> DecisionRecord:
        """_steps as plain calls, each plugin call made at once (admit)."""
        decisions, result = self._verdict(pod)
        return self._settled(pod, decisions, result, allocations)

    def _settled(self, pod: Pod, decisions: tuple[ContainerDecision, ...], result: AdmitResult,
                 allocations: bool) -> DecisionRecord:
        """The record of an admission whose verdict is final; the pod kept, or its rejection counted."""
        cm = self.cm
        cm.sync_metrics()
        if not result.admit:
            self._count_rejection(result)
            return self._record(pod, decisions, result, {})
        cm.start_pod(pod)
        if self.count_pod_level:
            self.metrics.inc_series(m.POD_LEVEL_ADMISSIONS, _pod_level_series(pod))
        rec = self._record(pod, decisions, result, cm.allocations(pod) if allocations else {})
        self._keep(pod, rec)
        return rec

    def _verdict_steps(self, pod: Pod) -> CallSteps[tuple[tuple[ContainerDecision, ...], AdmitResult]]:
        """The kubelet's admit handlers in order, up to the first rejection; an admitted pod holds what the
        managers gave it, a rejected one nothing."""
        early = self._before_topology(pod)
        if early is not None:
            return (), early
        outcome = yield from self.cm.tm.decide_steps(pod)
        return self._after_topology(pod, outcome)

    def _verdict(self, pod: Pod) -> tuple[tuple[ContainerDecision, ...], AdmitResult]:
        """_verdict_steps as plain calls, each plugin call made at once."""
        early = self._before_topology(pod)
        if early is not None:
            return (), early
        return self._after_topology(pod, self.cm.tm.decide(pod))

    def _before_topology(self, pod: Pod) -> AdmitResult | None:
        """The handlers before the Topology Manager's: their rejection, or None."""
        if pod.uid in self.node.pods or pod.uid in self.reserved:
            raise InvalidInputError(
                f"pod {pod.key} (uid {pod.uid}) is already admitted on this node; give the new pod another "
                "name or metadata.uid (Node.remove(uid) releases the old one; with `numalign admit "
                "--state-dir`, start from a fresh directory or use --dry-run to ask without keeping pods)"
            )
        if pod.has_pod_level_resources and not self.gates.get("PodLevelResources", False):
            # The kubelet's isPodLevelResourcesSupported admit handler; numalign checks it first (the
            # kubelet may run the Topology Manager's handler before it, with the same final verdict).
            return AdmitResult(False, "PodLevelResourcesNotSupported", "PodLevelResources feature gate is disabled")
        refuse_unmodelled(pod, self.gates, self.kubelet_version)  # KEP-5526: say so rather than guess
        early = self.handlers.before_topology(pod)
        return None if early.admit else early

    def _after_topology(self, pod: Pod, outcome: ScopeOutcome) -> tuple[tuple[ContainerDecision, ...], AdmitResult]:
        """The predicate handler after the Topology Manager admitted the pod; a rejected pod releases what
        it was given."""
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
        pod_devices = devices.pod_devices
        holds = False
        if pod_devices.has_pod(pod.uid):
            # (a plain loop over holds_devices: get_container_devices built a Device record an id to be
            # tested for truth, and any() over a generator is an object a call in the compiled core)
            for c in pod.init_containers + pod.containers:
                if pod_devices.holds_devices(pod.uid, c.name):
                    holds = True
                    break
        allocatable = self.handlers.allocatable(devices.healthy, devices.allocated if holds else {})
        return self.handlers.after_topology(pod, allocatable, self.node.pods, self.reserved_pods)

    def _count_rejection(self, result: AdmitResult) -> None:
        """The one place a rejection is counted: once its answer is final (calls made, if any)."""
        label = m.rejection_label(result.reason, self.kubelet_version.minor_key)
        self.metrics.inc(m.ADMISSION_REJECTIONS, reason=label)

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


def _pod_level_series(pod: Pod) -> m.LabelKey:
    """The POD_LEVEL_ADMISSIONS series of an admitted pod (kubelet_pods.go's recordPodLevelResourcesAdmission):
    whether spec.resources names a pod-level resource, whether any container or init container sets a
    request or a limit of any resource, and the QoS class."""
    pod_level = pod.has_pod_level_resources
    container_level = any(c.requests or c.limits for c in pod.init_containers) or any(
        c.requests or c.limits for c in pod.containers)
    mode = ("pod_and_container_level" if container_level else "pod_level") if pod_level else (
        "container_level" if container_level else "")
    return (("config_mode", mode), ("qos_class", get_pod_qos(pod).lower()))


_R = TypeVar("_R")


def _answered_blank(steps: CallSteps[_R]) -> _R:
    """A probe's steps: each plugin Allocate call taken as answered with an empty container response,
    never made (what the pod would hold does not depend on the answer)."""
    run = Run(steps)
    call = run.start()
    while call is not None:
        call = run.send(ContainerAllocateResponse())
    return cast("_R", run.result)
