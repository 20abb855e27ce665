"""What would make a rejected pod fit: candidate changes, each checked by the kubelet's admission of the
changed pod (Node.probe), never guessed. A change of configuration is checked on the node restarted with
that configuration (Node.restarted: the same state, as a kubelet restart keeps it); an eviction on the
node restarted without the evicted pods.

Theory of operation. The rejection's reason names the resources that stopped the pod (OutOf<r>: r;
SMTAlignmentError: cpu; an allocation error: the manager that failed; TopologyAffinityError: every
NUMA-managed resource of the rejected container). Candidates come in this order, and at most
MAX_TRIES re-admissions are run per rejected pod:

1. configuration: another Topology Manager scope, then a weaker policy (single-numa-node ->
   restricted -> best-effort); single-numa-node, then none, for a merge stopped at numalign's work
   bound; full-pcpus-only off for SMTAlignmentError; the node without its conditions for Evicted; a
   pods limit one higher for OutOfpods;
2. a smaller request: what the best NUMA node has free (or the node, for OutOf<r>), for the rejected
   container, less what the pod's containers placed beside it take there (_alongside); for
   SMTAlignmentError the CPU count rounded up and down to whole cores;
3. evictions: the pods holding the missing resource (on the NUMA node with the most of it free, or
   anywhere for OutOf<r>), BestEffort first, then Burstable, then Guaranteed, largest holders first,
   until enough would be free; one pod more if that did not suffice.

Only changes that admitted the pod on the copy are reported, each with where the pod would land.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numalign.answer.alignment import AlignmentJudge, PodAlignment, empty_node_capacity
from numalign.answer.free import FreeCapacity, node_capacity, numa_capacity
from numalign.answer.rejected import ContainerAsk, Rejected
from numalign.answer.shortfall import shortfalls
from numalign.answer.why import current_failures, explain_rejection, limiting_resources
from numalign.core.bitmask import bits_of
from numalign.core.decision import MERGE_WORK_BOUND, DecisionRecord
from numalign.errors import NumalignError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, is_hugepage_resource_name
from numalign.kubelet.admission.allocatable import RESOURCE_PODS
from numalign.kubelet.admission.predicate import INSUFFICIENT_RESOURCE_PREFIX, InsufficientResource
from numalign.kubelet.node import Node

MAX_TRIES = 8
MAX_EVICTED = 8
WEAKER_POLICY = {"single-numa-node": "restricted", "restricted": "best-effort"}
_QOS_ORDER = {QOSClass.BEST_EFFORT: 0, QOSClass.BURSTABLE: 1, QOSClass.GUARANTEED: 2}


@dataclass(frozen=True)
class Suggestion:
    kind: str        # topology-manager | cpu-manager | node | request | evict
    change: str      # what to change, in words (with the flag or field where there is one)
    outcome: str     # where the pod landed on the changed node
    alignment: PodAlignment

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "change": self.change, "outcome": self.outcome, "verified": True,
                "alignment": self.alignment.to_dict()}


@dataclass(frozen=True)
class Answer:
    pod: str
    reason: str
    why: tuple[str, ...]
    free: tuple[FreeCapacity, ...]
    would_fit_if: tuple[Suggestion, ...]
    tried: int
    tried_changes: tuple[str, ...] = ()  # every change re-admitted, in order (those that admitted too)
    # Every resource the pod falls short of, need and free per NUMA node and on the node
    # (answer/shortfall.py): the kubelet's message names only the first it stopped at.
    short_of: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """In the documents' key style (answer/present/keys.py): `readmissions` counts the changes re-admitted,
        `tried` names them, `shortOf` says every resource the pod falls short of."""
        return {"pod": self.pod, "reason": self.reason, "why": list(self.why),
                "free": [f.to_dict() for f in self.free], "wouldFitIf": [s.to_dict() for s in self.would_fit_if],
                "readmissions": self.tried, "tried": list(self.tried_changes), "shortOf": list(self.short_of)}


class _Trial:
    """Runs candidate changes on the node changed as each says, within the budget."""

    def __init__(self, node: Node, judge: AlignmentJudge) -> None:
        self.node, self.judge = node, judge
        self.tried = 0
        self.tried_changes: list[str] = []
        self.found: list[Suggestion] = []
        self.seen: set[str] = set()

    def run(self, kind: str, change: str, make: Callable[..., Node | None], pod: Pod) -> bool:
        if self.tried >= MAX_TRIES or change in self.seen:
            return False
        self.seen.add(change)
        try:
            twin = make()
        except NumalignError:
            return False  # a configuration the kubelet would refuse to start with
        if twin is None:
            return False
        self.tried += 1
        self.tried_changes.append(change)
        rec = twin.probe(pod)
        if not rec.result.admit:
            return False
        alignment = self.judge.pod(rec.allocations)
        self.found.append(Suggestion(kind, change, f"admitted; {alignment.summary()}", alignment))
        return True


def would_fit_if(node: Node, pod: Pod, rec: DecisionRecord, judge: AlignmentJudge | None = None) -> Answer:
    """The full answer for a pod `node` just rejected (node is left untouched)."""
    return answer(node, Rejected(node, pod, rec), judge)


def answer(node: Node, pod: Rejected, judge: AlignmentJudge | None = None) -> Answer:
    """The full answer for a pod `node` just rejected, its requests read (node is left untouched)."""
    free_numa = numa_capacity(node)
    judge = judge or AlignmentJudge(node.machine, empty_node_capacity(free_numa))
    reason = pod.reason
    resources = limiting_resources(node, pod)
    shown = [f for f in free_numa if f.resource in resources]
    if reason.startswith(INSUFFICIENT_RESOURCE_PREFIX):
        shown = [f for f in node_capacity(node) if f.resource in resources]  # the predicate counts node-wide
    trial = _Trial(node, judge)
    _config_changes(trial, node, pod)
    if reason.startswith(INSUFFICIENT_RESOURCE_PREFIX):
        _fit_node(trial, node, pod, shown)
    elif resources and pod.target is not None:
        _fit_numa(trial, node, pod, pod.target, resources, free_numa)
    # Every resource the pod falls short of, not only the one the kubelet stopped at; free now shows
    # each (a node-wide row where no NUMA node has it: "0 free of 0", this node has none).
    short = [s for s in shortfalls(node, pod)
             if not (reason.startswith(INSUFFICIENT_RESOURCE_PREFIX) and s.resource in _failing(node, pod))]
    short_of = tuple(s.text() for s in short)
    listed = {f.resource for f in shown}
    by_numa = {f.resource for f in free_numa}
    node_rows = {f.resource: f for f in node_capacity(node, {s.resource for s in short})}
    for s in short:
        if s.resource in listed:
            continue
        if s.per_numa and s.resource in by_numa:
            shown += [f for f in free_numa if f.resource == s.resource]
        elif s.resource in node_rows:
            shown.append(node_rows[s.resource])
    return Answer(pod.key, reason, explain_rejection(node, pod), tuple(shown), tuple(trial.found),
                  trial.tried, tuple(trial.tried_changes), short_of)


def _failing(node: Node, pod: Rejected) -> set[str]:
    return {f.resource for f in current_failures(node, pod)}


# ---- 1. configuration ----------------------------------------------------------------------------

def _config_changes(trial: _Trial, node: Node, rejected: Rejected) -> None:
    reason, pod = rejected.reason, rejected.pod
    if reason == "TopologyAffinityError":
        other = "pod" if node.tm.scope_name == "container" else "container"
        trial.run("topology-manager", f"topologyManagerScope {other} (--topology-manager-scope {other})",
                  lambda: _with_topology_manager(node, scope=other), pod)
        policy = node.tm.policy_name
        while policy in WEAKER_POLICY:
            policy = WEAKER_POLICY[policy]
            if trial.run("topology-manager", f"topologyManagerPolicy {policy} (--topology-manager-policy {policy})",
                         functools.partial(_with_topology_manager, node, policy=policy), pod):
                break
    elif reason == MERGE_WORK_BOUND:
        # The bound's own fix (its message names it): a policy whose merge numalign does not bound.
        for policy in ("single-numa-node", "none"):
            if policy != node.tm.policy_name and trial.run(
                    "topology-manager", f"topologyManagerPolicy {policy} (--topology-manager-policy {policy})",
                    functools.partial(_with_topology_manager, node, policy=policy), pod):
                break
    elif reason == "SMTAlignmentError":
        trial.run("cpu-manager", "cpuManagerPolicyOptions without full-pcpus-only (a drain and kubelet restart)",
                  lambda: _without_full_pcpus_only(node), pod)
    elif reason == "Evicted":
        names = " and ".join(c.value for c in node.handlers.conditions)
        trial.run("node", f"the node no longer had {names}", lambda: node.restarted(node_conditions=()), pod)
        if rejected.qos == QOSClass.BEST_EFFORT and pod.containers:
            first = pod.containers[0]
            changed = _with_request(pod, first.name, {RESOURCE_CPU: Quantity.from_milli(100)}, limits=False)
            trial.run("request", f"container {first.name} requested cpu: 100m (a Burstable pod is admitted "
                      "under MemoryPressure alone)", lambda: node, changed)
    elif reason == "PodLevelResourcesNotSupported":
        trial.run("node", "the PodLevelResources feature gate were on (--feature-gates PodLevelResources=true)",
                  lambda: _with_gate(node, "PodLevelResources"), pod)
    elif reason == "OutOfpods":
        limit = len(node.pods) + 1
        trial.run("node", f"maxPods {limit} (--max-pods {limit})",
                  lambda: _with_config(node, max_pods=limit, pods_per_core=0), pod)


# ---- 2 and 3 for OutOf<resource> -----------------------------------------------------------------

def _fit_node(trial: _Trial, node: Node, rejected: Rejected, shown: Sequence[FreeCapacity]) -> None:
    pod = rejected.pod
    failures = current_failures(node, rejected)  # recomputed: the handler's last answer may be another pod's
    if not failures:
        return
    first = failures[0]
    if first.resource == RESOURCE_PODS:
        smallest = sorted(node.pods.values(), key=lambda p: _total(node.handlers.requests_of([p])[0]))
        if smallest:
            victim = smallest[0]
            trial.run("evict", f"pod {victim.key} was evicted",
                      lambda: _without_pods(node, [victim.uid]), pod)
        return
    # A smaller request: the container asking most of the resource gives up what is missing.
    def asked(c: ContainerAsk) -> int:
        return c.amounts.get(first.resource, 0)

    holders = [c for c in rejected.containers if asked(c)]
    if holders:
        big = max(holders, key=asked)
        new = asked(big) - first.short
        if new > 0:
            q = _node_quantity(first.resource, new)
            trial.run("request", f"container {big.name} requested {first.resource}: {q} (not "
                      f"{big.requests[first.resource]})",
                      lambda: node, _with_request(pod, big.name, {first.resource: q}))
    _fit_node_all(trial, node, rejected, failures)
    # Evictions: the pods requesting the resource, BestEffort-first, largest first, until enough.
    node_view = next((f for f in shown if f.numa_node is None and f.resource == first.resource), None)
    if node_view is not None:
        _evict_until(trial, node, pod, [(h.pod_uid, h.amount) for h in node_view.held_by], first.short)


def _fit_node_all(trial: _Trial, node: Node, rejected: Rejected, failures: Sequence[InsufficientResource]) -> None:
    """Short of several resources (24 CPUs and 96Gi on a 2-CPU, 23Gi node), the smaller request of the
    first alone fails on the next: the change giving up every missing amount at once, each from the
    container asking most of it, is tried too (without it the answer was "none of the changes tried")."""
    short = [f for f in failures if f.resource != RESOURCE_PODS]
    if len(short) < 2:
        return
    changed, asks = rejected.pod, dict[str, list[str]]()
    for f in short:
        big, most = None, 0
        for c in rejected.containers:  # the first container asking most of it
            if c.amounts.get(f.resource, 0) > most:
                big, most = c, c.amounts[f.resource]
        if big is None:
            return
        new = most - f.short
        if new <= 0:
            return  # nothing of it would be left to ask for: no smaller request can fit
        q = _node_quantity(f.resource, new)
        changed = _with_request(changed, big.name, {f.resource: q})
        asks.setdefault(big.name, []).append(f"{f.resource}: {q} (not {big.requests[f.resource]})")
    change = "; ".join(f"container {name} requested {', '.join(words)}" for name, words in asks.items())
    trial.run("request", change, lambda: node, changed)


# ---- 2 and 3 for NUMA-level rejections ------------------------------------------------------------

def _fit_numa(trial: _Trial, node: Node, rejected: Rejected, target: ContainerAsk, resources: Sequence[str],
              free: Sequence[FreeCapacity]) -> None:
    pod = rejected.pod
    want = {r: _amount(target, r) for r in resources}
    want = {r: v for r, v in want.items() if v > 0}
    if not want:
        return
    per_core = _cpus_per_core(node)
    if want.get(RESOURCE_CPU) and per_core > 1 and want[RESOURCE_CPU] % per_core:
        # SMT: whole cores, rounded up then down.
        n = want[RESOURCE_CPU]
        for rounded in ((n // per_core + 1) * per_core, (n // per_core) * per_core):
            if rounded > 0:
                q = Quantity.from_int(rounded)
                trial.run("request", f"container {target.name} requested cpu: {rounded} (whole cores of "
                          f"{per_core} threads, not {n})", lambda: node,
                          _with_request(pod, target.name, {RESOURCE_CPU: q}))
    by_numa: dict[int, dict[str, FreeCapacity]] = {}
    for f in free:
        if f.numa_node is not None:
            by_numa.setdefault(f.numa_node, {})[f.resource] = f
    ranked = sorted(by_numa, key=lambda n: _shortfall(by_numa[n], want))
    # A smaller request: what the best NUMA nodes have left for the container once the pod's containers
    # placed beside it have taken theirs there (the policy decides whether one node suffices). What one
    # NUMA node has free alone was often too much: the containers admitted before it take part of it.
    alongside = _alongside(rejected, target, by_numa, want)
    left = {n: {r: (by_numa[n][r].free if r in by_numa[n] else 0) - alongside[n][0].get(r, 0) for r in want}
            for n in by_numa}
    for numa in sorted(by_numa, key=lambda n: _shortfall_left(left[n], want))[:2]:
        smaller = {}
        for r, v in want.items():
            have = left[numa][r]
            if r == RESOURCE_CPU and per_core > 1 and _full_pcpus_only(node):
                have -= have % per_core
            if have < v:
                smaller[r] = have
        if not smaller or any(v <= 0 for v in smaller.values()):
            continue
        qs = {r: _quantity(r, v) for r, v in smaller.items()}
        text = ", ".join(f"{r}: {q}" for r, q in qs.items())
        beside = alongside[numa][1]
        why = (f"what one NUMA node has left beside container{'s' if len(beside) > 1 else ''} {', '.join(beside)}"
               if beside else "what one NUMA node has free")
        trial.run("request", f"container {target.name} requested {text} ({why})",
                  lambda: node, _with_request(pod, target.name, qs))
    if node.tm.policy_name in ("none", "best-effort"):
        # No NUMA constraint on admission: what is missing node-wide, from whoever holds it.
        missing = {r: v - sum(by_numa[n][r].free for n in by_numa if r in by_numa[n]) for r, v in want.items()}
        holders: dict[str, dict[str, int]] = {}
        for n in by_numa:
            for r in missing:
                for h in by_numa[n][r].held_by if r in by_numa[n] else ():
                    holders.setdefault(h.pod_uid, {})
                    holders[h.pod_uid][r] = holders[h.pod_uid].get(r, 0) + h.amount
        _evict_multi(trial, node, pod, holders, {r: v for r, v in missing.items() if v > 0}, "")
    # Evictions on the NUMA node closest to fitting.
    elif ranked:
        numa = ranked[0]
        missing = {r: v - (by_numa[numa][r].free if r in by_numa[numa] else 0) for r, v in want.items()}
        missing = {r: v for r, v in missing.items() if v > 0}
        holders = {}
        for r in missing:
            held = by_numa[numa].get(r)
            for h in held.held_by if held is not None else ():
                holders.setdefault(h.pod_uid, {})
                holders[h.pod_uid][r] = holders[h.pod_uid].get(r, 0) + h.amount
        _evict_multi(trial, node, pod, holders, missing, f"on NUMA node {numa}")


def _alongside(rejected: Rejected, target: ContainerAsk, by_numa: Mapping[int, Mapping[str, FreeCapacity]],
               want: Mapping[str, int]) -> dict[int, tuple[dict[str, int], list[str]]]:
    """Per NUMA node: what the pod's other containers would hold there beside the target, of the resources
    it wants, and their names.

    Init containers that are not sidecars run before the others and hand what they held on (the CPU,
    memory and device managers' reuse), so they take nothing from the target. Container scope: the
    containers admitted before the target, each on the NUMA nodes its merged hint named in this
    admission (the whole amount counted on each node of a wider hint: where it went is not recorded).
    Pod scope: one hint for the pod, so every other container the target runs beside shares its node."""
    out: dict[int, tuple[dict[str, int], list[str]]] = {n: ({}, []) for n in by_numa}
    asks = {c.name: c for c in rejected.containers}
    failed = rejected.failed
    placed: list[tuple[ContainerAsk, int | None]] = []
    if failed is not None and failed.container:
        for d in rejected.record.decisions:
            if d is failed:
                break
            ask = asks.get(d.container)
            if ask is not None and d.admit and d.merged is not None:
                placed.append((ask, d.merged.mask))
    else:
        after = False
        for ask in rejected.containers:
            if ask is target:
                after = True
            elif not after or not _reused(target):  # an init container runs beside what came before only
                placed.append((ask, None))
    for ask, mask in placed:
        if _reused(ask):
            continue
        amounts = {r: v for r in want if (v := _amount(ask, r)) > 0}
        if not amounts:
            continue
        for n in by_numa if mask is None else bits_of(mask):
            if n in out:
                held, names = out[n]
                for r, v in amounts.items():
                    held[r] = held.get(r, 0) + v
                names.append(ask.name)
    return out


def _reused(ask: ContainerAsk) -> bool:
    """An init container that is not a sidecar: the containers after it reuse what it held."""
    return ask.container.is_init and not ask.container.is_sidecar


def _evict_until(trial: _Trial, node: Node, pod: Pod, held: Sequence[tuple[str, int]], short: int) -> None:
    holders: dict[str, dict[str, int]] = {}
    for uid, value in held:
        holders.setdefault(uid, {})["x"] = holders.get(uid, {}).get("x", 0) + value
    _evict_multi(trial, node, pod, holders, {"x": short}, "")


def _evict_multi(trial: _Trial, node: Node, pod: Pod, holders: Mapping[str, Mapping[str, int]],
                 missing: Mapping[str, int], where: str) -> None:
    if not missing or not holders:
        return
    order = sorted(holders, key=lambda u: (_QOS_ORDER[get_pod_qos(node.pods[u])],
                                           -sum(holders[u].values()), node.pods[u].key))
    chosen: list[str] = []
    left = dict(missing)
    for uid in order:
        if all(v <= 0 for v in left.values()):
            break
        chosen.append(uid)
        for r, v in holders[uid].items():
            if r in left:
                left[r] -= v
    for extra in (0, 1):
        picked = order[: len(chosen) + extra]
        if len(picked) > MAX_EVICTED or (extra and len(picked) == len(chosen)):
            return
        names = ", ".join(node.pods[u].key for u in picked)
        suffix = f" (freeing what they hold {where})" if where else ""
        verb = "were" if len(picked) > 1 else "was"
        if trial.run("evict", f"pod{'s' if len(picked) > 1 else ''} {names} {verb} evicted{suffix}",
                     functools.partial(_without_pods, node, picked), pod):
            return


# ---- helpers --------------------------------------------------------------------------------------

def _shortfall(free: Mapping[str, FreeCapacity], want: Mapping[str, int]) -> tuple[float, int]:
    """How far a NUMA node is from holding the request: the worst missing share, then the NUMA id."""
    worst = 0.0
    for r, v in want.items():
        have = free[r].free if r in free else 0
        worst = max(worst, max(v - have, 0) / v)
    return worst, 0


def _shortfall_left(left: Mapping[str, int], want: Mapping[str, int]) -> float:
    """_shortfall of what a NUMA node has left for the container (the NUMA id breaks ties: sort is stable)."""
    return max(max(v - left.get(r, 0), 0) / v for r, v in want.items())


def _amount(container: ContainerAsk, resource: str) -> int:
    """A NUMA-bound amount: whole CPUs (0 for a fractional request: the shared pool), bytes, devices."""
    if resource not in container.amounts:
        return 0
    if resource == RESOURCE_CPU:
        return container.whole_cpus()
    return container.amounts[resource]


def _quantity(resource: str, amount: int) -> Quantity:
    """The inverse of _amount."""
    if resource == RESOURCE_MEMORY or is_hugepage_resource_name(resource):
        return Quantity.from_int(amount, QuantityFormat.BINARY_SI)
    return Quantity.from_int(amount)


def _node_quantity(resource: str, amount: int) -> Quantity:
    """The inverse of the predicate's units (cpu in millicores)."""
    if resource == RESOURCE_CPU:
        return Quantity.from_int(amount // 1000) if amount % 1000 == 0 else Quantity.from_milli(amount)
    return _quantity(resource, amount)


def _total(req: Mapping[str, int]) -> int:
    return sum(req.values())


def _with_request(pod: Pod, container: str, values: Mapping[str, Quantity], limits: bool = True) -> Pod:
    """The pod with these requests for one container (and limits where it had one, or is Guaranteed)."""

    def change(c: Container) -> Container:
        if c.name != container:
            return c
        req = dict(c.requests)
        lim = dict(c.limits)
        for r, q in values.items():
            req[r] = q
            if limits and r in lim:
                lim[r] = q
        return dataclasses.replace(c, requests=req, limits=lim)

    return dataclasses.replace(pod, init_containers=tuple(change(c) for c in pod.init_containers),
                               containers=tuple(change(c) for c in pod.containers))


def _with_gate(node: Node, gate: str) -> Node:
    return _with_config(node, feature_gates={**node.config.feature_gates, gate: True})


def _with_config(node: Node, **fields: Any) -> Node:
    """The node restarted with these kubelet configuration fields changed."""
    return node.restarted(dataclasses.replace(node.config, **fields))


def _with_topology_manager(node: Node, policy: str | None = None, scope: str | None = None) -> Node:
    """The node restarted with another Topology Manager policy or scope."""
    return _with_config(node, topology_manager_policy=policy or node.config.topology_manager_policy,
                        topology_manager_scope=scope or node.config.topology_manager_scope)


def _without_full_pcpus_only(node: Node) -> Node | None:
    """The node restarted without the static CPU policy's full-pcpus-only (None when it is not set)."""
    if not _full_pcpus_only(node):
        return None
    options = dict(node.config.cpu_manager_policy_options)
    options.pop("full-pcpus-only", None)
    return _with_config(node, cpu_manager_policy_options=options)


def _without_pods(node: Node, uids: Sequence[str]) -> Node:
    """The node restarted, then these pods evicted (everything they held released)."""
    twin = node.restarted()
    for uid in uids:
        twin.remove(uid)
    return twin


def _cpus_per_core(node: Node) -> int:
    # Whole cores matter only where the CPU manager gives exclusive CPUs (static).
    return node.cpu.topology.cpus_per_core() if node.cpu.pins else 1


def _full_pcpus_only(node: Node) -> bool:
    return node.cpu.options.full_pcpus_only


class AnswerCache:
    """Rejections do not change a node, so pods of one shape rejected in a row share their answer."""

    def __init__(self) -> None:
        self._key: tuple[str, tuple[str, ...]] | None = None
        self._answer: Answer | None = None

    def answer(self, node: Node, rejected: Rejected) -> Answer:
        key = (rejected.shape, tuple(node.pods))
        if self._key == key and self._answer is not None:
            return dataclasses.replace(self._answer, pod=rejected.key)
        self._key, self._answer = key, answer(node, rejected)
        return self._answer
