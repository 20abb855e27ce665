"""Topology Manager scopes: where hints are merged (per container or per pod) and stored.

Upstream order is kept: hints are stored before Allocate, earlier containers are never rolled back
when a later one fails (the kubelet doesn't either), and policy none only calls Allocate.

`admit_steps` is the admission as steps between the plugin calls a provider's Allocate makes (the
device manager's, SteppedProvider): each is yielded where the kubelet makes it and its answer sent back,
so a failing call ends the admission there, before any later provider or container is looked at, as
upstream's loop returns. `admit` makes the calls at once, as plain calls: the same steps without a
generator between them (every admission of `Node.admit` takes it, and most make no plugin call at all,
so the generators' frames and their hand-offs would be all they paid for).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from numalign import metrics as m
from numalign.core.decision import AdmitResult, ContainerDecision, ProviderRecord, explain
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ProviderAnswer
from numalign.core.implicit.merge import MergeWorkBoundError
from numalign.core.policies import Policy, PolicyName, is_alignment_guaranteed
from numalign.errors import AllocationError, ConfigError, PluginError
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager import merge_memo
from numalign.kubelet.topologymanager.provider import CallSteps, HintProvider, PluginCall

NO_AFFINITY = TopologyHint(None, False)
_NO_LABELS: m.LabelKey = ()


@dataclass
class ScopeOutcome:
    result: AdmitResult
    decisions: list[ContainerDecision] = field(default_factory=list)

    def __init__(self, result: AdmitResult, decisions: list[ContainerDecision] | None = None) -> None:
        # Written out: the dataclass decorator's __init__ is interpreted even in the compiled core.
        self.result = result
        self.decisions = [] if decisions is None else decisions


class Scope:
    """Bookkeeping shared by every scope: hints per (pod UID, container) and the container map."""

    name = "none"

    def __init__(self, policy: Policy, metrics: m.Metrics) -> None:
        self.policy = policy
        self.metrics = metrics
        self.providers: list[HintProvider] = []
        self._hints: dict[str, dict[str, TopologyHint]] = {}
        self._containers: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        # The policy whose merges merge_memo keys were made for, and that key (the policy may be replaced).
        self._memo_policy: Policy | None = None
        self._memo_key: int | None = None
        # The alignment counters' series of this scope (labels sorted as Metrics keys them).
        self._aligned_key: m.LabelKey = (("boundary", "numa_node"), ("scope", self.name))
        # Plugin calls `admit` has made (counted before each is made): Node.admit tells by it whether an
        # admission that raised had reached a call (what it then releases; podadmission).
        self.plugin_calls = 0
        # Called with every provider's answer for a container (None: the pod, under the pod scope) just
        # before they are merged; None for every caller but one: the conformance harness counts there the
        # hint lists upstream's merge would walk (tests/conformance/merge_budget.py), with one call a
        # container where wrapping each provider cost an interpreted call per provider.
        self.answers_seen: Callable[[Pod, Container | None, list[ProviderAnswer]], None] | None = None

    # --- the Store interface
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        # Without the lock: two dict reads, each whole under the GIL, see the stored hint or none (the
        # writers' lock keeps a pod's map from being dropped between a set's two steps); every provider
        # asks at each container's Allocate.
        pod_hints = self._hints.get(pod_uid)
        if pod_hints is None:
            return NO_AFFINITY
        return pod_hints.get(container_name, NO_AFFINITY)

    # Each container's admission and start store here: the lock taken with acquire/release, not `with`
    # (two looked-up method calls more in the compiled core).
    def set_topology_hint(self, pod_uid: str, container_name: str, hint: TopologyHint) -> None:
        lock = self._lock
        lock.acquire()
        try:
            self._hints.setdefault(pod_uid, {})[container_name] = hint
        finally:
            lock.release()

    def add_container(self, pod: Pod, container: Container, container_id: str) -> None:
        lock = self._lock
        lock.acquire()
        try:
            self._containers[container_id] = (pod.uid, container.name)
        finally:
            lock.release()

    def remove_container(self, container_id: str) -> None:
        """Upstream RemoveContainer: hints go only when no other container ID maps to the same
        (pod, container), i.e. the container was not restarted under a new ID."""
        with self._lock:
            key = self._containers.pop(container_id, None)
            if key is None:
                return
            if key in self._containers.values():
                return
            uid, name = key
            pod_hints = self._hints.get(uid)
            if pod_hints is not None:
                pod_hints.pop(name, None)
                if not pod_hints:
                    del self._hints[uid]

    def forget_pod(self, pod_uid: str) -> None:
        lock = self._lock  # (acquire/release: every pod released comes here)
        lock.acquire()
        try:
            self._hints.pop(pod_uid, None)
            containers = self._containers
            gone = [cid for cid, key in containers.items() if key[0] == pod_uid]
            for cid in gone:
                del containers[cid]
        finally:
            lock.release()

    def pods_with_hints(self) -> dict[str, dict[str, TopologyHint]]:
        with self._lock:
            return {uid: dict(h) for uid, h in self._hints.items()}

    # --- admission
    def admit(self, pod: Pod) -> ScopeOutcome:
        """The admission with every plugin call made at once (admit_steps' steps as plain calls)."""
        raise NotImplementedError

    def admit_steps(self, pod: Pod) -> CallSteps[ScopeOutcome]:
        raise NotImplementedError

    def _provider_names(self) -> list[str]:
        return [p.name for p in self.providers]

    def _allocate(self, pod: Pod, container: Container) -> CallSteps[AdmitResult | None]:
        """allocateAlignedResources: each provider's Allocate in order, up to the first error."""
        for p in self.providers:
            try:
                # a plain attribute test, as in _provider_answers (SteppedProvider: the device manager)
                steps = getattr(p, "allocate_steps", None)
                if steps is None:
                    p.allocate(pod, container)
                else:
                    yield from steps(pod, container)
            except AllocationError as e:
                return AdmitResult.from_allocation_error(e.reason, str(e))
        return None

    def _allocate_now(self, pod: Pod, container: Container) -> AdmitResult | None:
        """_allocate with each plugin call made at once."""
        for p in self.providers:
            try:
                steps = getattr(p, "allocate_steps", None)
                if steps is None:
                    p.allocate(pod, container)
                else:
                    self._make_calls(steps(pod, container))
            except AllocationError as e:
                return AdmitResult.from_allocation_error(e.reason, str(e))
        return None

    def _make_calls(self, steps: CallSteps[None]) -> None:
        """Run a provider's Allocate steps, making each plugin call as it comes and handing its answer (or
        its PluginError) back, as make_calls_now does. Started with next(steps, None), which ends steps
        that make no call (most containers) without raising StopIteration: catching one costs more than
        the rest of this."""
        call: PluginCall | None = next(steps, None)  # plugin calls are never None
        while call is not None:
            self.plugin_calls += 1
            try:
                answer = call.make()
            except PluginError as e:
                call = _thrown(steps, e)
            else:
                call = _sent(steps, answer)

    def _merge(self, container_name: str, hints: Sequence[ProviderAnswer]) -> ContainerDecision:
        names = self._provider_names()
        records = tuple([ProviderRecord(n, h) for n, h in zip(names, hints, strict=True)])
        policy = self.policy
        if policy is not self._memo_policy:
            self._memo_policy, self._memo_key = policy, merge_memo.policy_key(policy)
        key = None
        if self._memo_key is not None:
            answers = merge_memo.answers_key(hints)
            if answers is not None:
                key = (self._memo_key, tuple(names), answers)
                known = merge_memo.lookup(key)
                if known is not None:
                    hint, admit, why, considered = known
                    return ContainerDecision(container_name, records, hint, admit, why, considered=considered)
        # (a refusal is looked up only once some merge of the process stopped at the work bound)
        refusal = self._refusal(names, hints) if merge_memo.refusals else None
        if refusal is not None:
            line = merge_memo.refusals.get(refusal)
            if line is not None:
                return ContainerDecision(container_name, records, None, False, (line,))
        try:
            res = policy.merge(hints)
        except MergeWorkBoundError as e:
            # This pod's merge alone: it is rejected with the bound's line (no merged hint: _rejection), and the
            # same lists are refused from memory from now on instead of spending the bound again.
            refusal = refusal or self._refusal(names, hints)
            if refusal is not None:
                merge_memo.refuse(refusal, str(e))
            return ContainerDecision(container_name, records, None, False, (str(e),))
        why = explain(policy.name, names, res.lists, hints, res.hint, res.admit)
        if key is not None:
            merge_memo.keep(key, (res.hint, res.admit, why, res.considered))
        return ContainerDecision(container_name, records, res.hint, res.admit, why, considered=res.considered)

    def _refusal(self, names: list[str], hints: Sequence[ProviderAnswer]) -> Hashable | None:
        """The key of a merge stopped at the work bound (None: not remembered), as _merge's memo key."""
        if self._memo_key is None:
            return None
        answers = merge_memo.refusal_answers(hints)
        return None if answers is None else (self._memo_key, tuple(names), answers)

    def _provider_answers(self, pod: Pod, container: Container | None) -> list[ProviderAnswer]:
        """Every provider's answer; implicit lists from providers that can give them."""
        out: list[ProviderAnswer] = []
        for p in self.providers:
            # a plain attribute test: isinstance against the runtime Protocol costs more than a
            # whole small merge, and this runs per provider per admission
            if container is None:
                pod_implicit = getattr(p, "implicit_pod_topology_hints", None)
                out.append(pod_implicit(pod) if pod_implicit is not None else p.get_pod_topology_hints(pod))
            else:
                implicit = getattr(p, "implicit_topology_hints", None)
                out.append(implicit(pod, container) if implicit is not None else p.get_topology_hints(pod, container))
        seen = self.answers_seen
        if seen is not None:
            seen(pod, container, out)
        return out

    def _count_alignment(self, ok: bool) -> None:
        if is_alignment_guaranteed(self.policy):
            self.metrics.inc_series(m.ALIGNED_COUNT if ok else m.ALIGNED_FAILURE, self._aligned_key)


# Containers are walked as `pod.init_containers + pod.containers`: Pod.all_containers' order (init
# containers, sidecars included, then app containers) as one tuple, not a generator made per loop.


# Each scope's admission is written twice over the same parts: admit_steps (a generator, pausing at each
# plugin call) and admit (plain calls, each plugin call made at once); only the Allocate step differs.


class NoneScope(Scope):
    name = "none"

    def admit_steps(self, pod: Pod) -> CallSteps[ScopeOutcome]:
        for c in pod.init_containers + pod.containers:
            failed = yield from self._allocate(pod, c)
            if failed is not None:
                return _none_failed(c, failed)
        return ScopeOutcome(AdmitResult.admitted())

    def admit(self, pod: Pod) -> ScopeOutcome:
        for c in pod.init_containers + pod.containers:
            failed = self._allocate_now(pod, c)
            if failed is not None:
                return _none_failed(c, failed)
        return ScopeOutcome(AdmitResult.admitted())


def _none_failed(c: Container, failed: AdmitResult) -> ScopeOutcome:
    return ScopeOutcome(failed, [ContainerDecision(c.name, (), None, False, (), failed.message)])


class ContainerScope(Scope):
    name = "container"

    def admit_steps(self, pod: Pod) -> CallSteps[ScopeOutcome]:
        out = ScopeOutcome(AdmitResult.admitted())
        for c in pod.init_containers + pod.containers:
            d = self._hinted(pod, c, out)
            if d is None:
                return out
            failed = yield from self._allocate(pod, c)
            if not self._allocated(d, failed, out):
                return out
        return out

    def admit(self, pod: Pod) -> ScopeOutcome:
        out = ScopeOutcome(AdmitResult.admitted())
        for c in pod.init_containers + pod.containers:
            d = self._hinted(pod, c, out)
            if d is None or not self._allocated(d, self._allocate_now(pod, c), out):
                return out
        return out

    def _hinted(self, pod: Pod, c: Container, out: ScopeOutcome) -> ContainerDecision | None:
        """The container's merge, its hint stored for its Allocate; None when the merge rejects it (`out`
        then holds the rejection)."""
        d = self._merge(c.name, self._provider_answers(pod, c))
        if not d.admit:
            self._count_alignment(False)
            self.metrics.inc_series(m.TM_ADMISSION_ERRORS, _NO_LABELS)
            out.decisions.append(d)
            out.result = _rejection(d)
            return None
        assert d.merged is not None
        self.set_topology_hint(pod.uid, c.name, d.merged)
        return d

    def _allocated(self, d: ContainerDecision, failed: AdmitResult | None, out: ScopeOutcome) -> bool:
        """The container's decision once its Allocate is over: False when it failed (`out` then holds the
        failure)."""
        if failed is not None:
            self.metrics.inc_series(m.TM_ADMISSION_ERRORS, _NO_LABELS)
            out.decisions.append(_with_error(d, failed))
            out.result = failed
            return False
        self._count_alignment(True)
        out.decisions.append(d)
        return True


class PodScope(Scope):
    name = "pod"

    def admit_steps(self, pod: Pod) -> CallSteps[ScopeOutcome]:
        d = self._pod_hinted(pod)
        if not d.admit:
            return self._rejected(d)
        for c in pod.init_containers + pod.containers:
            self._hint_container(pod, c, d)
            failed = yield from self._allocate(pod, c)
            if failed is not None:
                return self._failed(d, failed, c)
        return self._admitted(d)

    def admit(self, pod: Pod) -> ScopeOutcome:
        d = self._pod_hinted(pod)
        if not d.admit:
            return self._rejected(d)
        for c in pod.init_containers + pod.containers:
            self._hint_container(pod, c, d)
            failed = self._allocate_now(pod, c)
            if failed is not None:
                return self._failed(d, failed, c)
        return self._admitted(d)

    def _pod_hinted(self, pod: Pod) -> ContainerDecision:
        return self._merge("", self._provider_answers(pod, None))

    def _rejected(self, d: ContainerDecision) -> ScopeOutcome:
        self._count_alignment(False)
        self.metrics.inc_series(m.TM_ADMISSION_ERRORS, _NO_LABELS)
        return ScopeOutcome(_rejection(d), [d])

    def _hint_container(self, pod: Pod, c: Container, d: ContainerDecision) -> None:
        assert d.merged is not None
        self.set_topology_hint(pod.uid, c.name, d.merged)

    def _failed(self, d: ContainerDecision, failed: AdmitResult, c: Container) -> ScopeOutcome:
        self.metrics.inc_series(m.TM_ADMISSION_ERRORS, _NO_LABELS)
        return ScopeOutcome(failed, [_with_error(d, failed, c.name)])

    def _admitted(self, d: ContainerDecision) -> ScopeOutcome:
        self._count_alignment(True)
        return ScopeOutcome(AdmitResult.admitted(), [d])


def _rejection(d: ContainerDecision) -> AdmitResult:
    """A merge's rejection: TopologyAffinityError, or, for a merge stopped at numalign's work bound (the one
    merge with no merged hint: every policy's merge gives one), that bound's line."""
    if d.merged is None:
        return AdmitResult.merge_work_bound(d.explanation[0])
    return AdmitResult.topology_affinity_error()


def _sent(steps: CallSteps[None], answer: object) -> PluginCall | None:
    """steps.send(answer): the next call, or None once the steps have ended."""
    try:
        return steps.send(answer)
    except StopIteration:
        return None


def _thrown(steps: CallSteps[None], error: PluginError) -> PluginCall | None:
    """steps.throw(error), as _sent."""
    try:
        return steps.throw(error)
    except StopIteration:
        return None


def _with_error(d: ContainerDecision, failed: AdmitResult, container: str | None = None) -> ContainerDecision:
    where = f"container {container}: " if container else ""
    return ContainerDecision(
        d.container, d.providers, d.merged, False, d.explanation, f"{where}{failed.reason}: {failed.message}",
        d.considered,
    )


def make_scope(policy: Policy, scope_name: str, metrics: m.Metrics) -> Scope:
    if policy.name is PolicyName.NONE:
        return NoneScope(policy, metrics)
    if scope_name == "container":
        return ContainerScope(policy, metrics)
    if scope_name == "pod":
        return PodScope(policy, metrics)
    raise ConfigError(f'unknown scope: "{scope_name}"')
