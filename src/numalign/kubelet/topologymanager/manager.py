"""TopologyManager: the facade over providers, scope, policy and the affinity store.

Construction follows the kubelet's NewManager, errors and their order included: option errors,
then NUMA discovery, then the NUMA-count limit (max-allowable-numa-nodes), then the policy name, then
the scope name (core/policies/startup.py, shared with `numalign replay`). Policy none skips all of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from numalign import metrics as m
from numalign.core.decision import DecisionRecord
from numalign.core.hint import TopologyHint
from numalign.core.numa import NUMAInfo
from numalign.core.policies import PolicyName
from numalign.core.policies.options import Maturity
from numalign.core.policies.startup import start_policy
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.topologymanager.provider import CallSteps, HintProvider
from numalign.kubelet.topologymanager.scopes import Scope, ScopeOutcome, make_scope

log = logging.getLogger("numalign.kubelet.topologymanager.manager")
_NO_LABELS: m.LabelKey = ()

class TopologyManager:
    def __init__(
        self,
        numa: NUMAInfo,
        policy: str = "none",
        scope: str = "container",
        options: Mapping[str, str] | None = None,
        gates: Mapping[str, bool] | None = None,
        metrics: m.Metrics | None = None,
        option_maturity: Mapping[str, Maturity] | None = None,
        release: tuple[int, int] = m.NEWEST_RELEASE,
    ) -> None:
        self.metrics = metrics or m.Metrics()
        self.release = release  # the kubelet release whose rejection labels admit counts under
        self.numa = numa
        self.policy_name = policy
        self.scope_name = scope
        self.options: dict[str, str] = dict(options or {})
        started = start_policy(policy, numa, self.options, gates, option_maturity)
        self.opts = started.opts
        self.scope: Scope = make_scope(started.policy, scope, self.metrics)
        if policy == PolicyName.NONE:
            return
        for s in ("container", "pod"):
            self.metrics.init_series(m.ALIGNED_COUNT, scope=s, boundary="numa_node")
            self.metrics.init_series(m.ALIGNED_FAILURE, scope=s, boundary="numa_node")

    @property
    def providers(self) -> list[HintProvider]:
        return self.scope.providers

    def add_hint_provider(self, provider: HintProvider) -> None:
        self.scope.providers.append(provider)

    # --- Store
    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return self.scope.get_affinity(pod_uid, container_name)

    def add_container(self, pod: Pod, container: Container, container_id: str) -> None:
        self.scope.add_container(pod, container, container_id)

    def remove_container(self, container_id: str) -> None:
        self.scope.remove_container(container_id)

    def remove_pod(self, pod: Pod) -> None:
        """Release everything a pod holds: every provider's allocation, then its stored hints."""
        for c in pod.init_containers + pod.containers:
            for p in self.providers:
                p.remove_container(pod.uid, c.name)
        self.scope.forget_pod(pod.uid)

    # --- admission
    def decide(self, pod: Pod) -> ScopeOutcome:
        """The Topology Manager admit handler's verdict and per-container decisions; an admitted pod holds
        what the providers allocated. The kubelet's rejection count is its caller's (Node, or admit).
        Plugin calls are made at once (Scope.admit: decide_steps as plain calls)."""
        t0 = self._started()
        return self._ended(pod, self.scope.admit(pod), t0)

    def decide_steps(self, pod: Pod) -> CallSteps[ScopeOutcome]:
        """decide, as steps between the plugin calls a provider's Allocate makes (Scope.admit_steps)."""
        t0 = self._started()
        outcome = yield from self.scope.admit_steps(pod)
        return self._ended(pod, outcome, t0)

    def _started(self) -> float:
        self.metrics.inc_series(m.TM_ADMISSION_REQUESTS, _NO_LABELS)
        return time.perf_counter()

    def _ended(self, pod: Pod, outcome: ScopeOutcome, t0: float) -> ScopeOutcome:
        elapsed_ms = int((time.perf_counter() - t0) * 1000)  # the kubelet observes whole milliseconds
        self.metrics.observe_series(m.TM_ADMISSION_DURATION, _NO_LABELS, float(elapsed_ms))
        if not outcome.result.admit:
            log.info("pod %s rejected: %s: %s", pod.key, outcome.result.reason, outcome.result.message)
        return outcome

    def admit(self, pod: Pod) -> DecisionRecord:
        """Admit a pod as the kubelet's Topology Manager admit handler does, counting a rejection as the
        kubelet does; return the full record (the Topology Manager used alone, without a Node)."""
        outcome = self.decide(pod)
        if not outcome.result.admit:
            self.metrics.inc(m.ADMISSION_REJECTIONS, reason=m.rejection_label(outcome.result.reason, self.release))
        return DecisionRecord(
            pod=pod.key,
            pod_uid=pod.uid,
            policy=self.policy_name,
            scope=self.scope.name,
            options=self.options,
            decisions=tuple(outcome.decisions),
            result=outcome.result,
        )
