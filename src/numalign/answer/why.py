"""Why a pod was rejected, in words, for every rejection numalign can give: the eviction handler's
(node conditions), the predicate handler's (OutOf<resource>), the Topology Manager's
(TopologyAffinityError: the decision record's own explanation) and the hint providers' allocation
errors (SMTAlignmentError; UnexpectedAdmissionError from the memory manager, the device manager or
the CPU manager).
"""

from __future__ import annotations

import re

from numalign.answer.rejected import Rejected
from numalign.core.decision import ContainerDecision
from numalign.k8s.qos import QOSClass
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY, is_hugepage_resource_name
from numalign.kubelet.admission.allocatable import RESOURCE_PODS
from numalign.kubelet.admission.eviction import NodeCondition
from numalign.kubelet.admission.predicate import INSUFFICIENT_RESOURCE_PREFIX, InsufficientResource
from numalign.kubelet.node import Node
from numalign.machine.render import binary_quantity, readable_bytes


def current_failures(node: Node, pod: Rejected) -> list[InsufficientResource]:
    """The predicate's failures for `pod` on the node as it is now (the pod not admitted)."""
    return list(pod.failures)


def show(resource: str, value: int) -> str:
    """An amount in the predicate's units, as a person reads it."""
    if resource == RESOURCE_CPU:
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    if resource == RESOURCE_MEMORY or is_hugepage_resource_name(resource):
        return readable_bytes(value)
    return str(value)


def numa_bound(node: Node, pod: Rejected) -> list[str]:
    """The rejected container's resources the NUMA-aware managers place: exclusive CPUs, pinned memory,
    devices."""
    guaranteed = pod.qos == QOSClass.GUARANTEED
    out: list[str] = []
    if pod.target is None:
        return out
    for name in sorted(pod.target.requests):
        if name == RESOURCE_CPU:
            if guaranteed and node.cpu.pins and pod.target.whole_cpus() > 0:
                out.append(name)
        elif name == RESOURCE_MEMORY or is_hugepage_resource_name(name):
            if guaranteed and node.memory.pins:
                out.append(name)
        elif node.devices.is_device_plugin_resource(name):
            out.append(name)
    return out


def limiting_resources(node: Node, pod: Rejected) -> list[str]:
    reason = pod.reason
    if reason.startswith(INSUFFICIENT_RESOURCE_PREFIX):
        return [reason[len(INSUFFICIENT_RESOURCE_PREFIX):]]
    if pod.target is None or reason in ("Evicted", "PodLevelResourcesNotSupported"):
        return []
    bound = numa_bound(node, pod)
    if reason == "SMTAlignmentError":
        return [RESOURCE_CPU]
    d = pod.failed
    error = (d.allocation_error if d is not None else None) or ""
    if reason == "UnexpectedAdmissionError":
        if "[memorymanager]" in error:
            return [r for r in bound if r == RESOURCE_MEMORY or is_hugepage_resource_name(r)]
        named = [r for r in bound if r != RESOURCE_CPU and r in error]
        if named:
            return named
        return [RESOURCE_CPU] if RESOURCE_CPU in bound else bound
    return bound


def explain_rejection(node: Node, pod: Rejected) -> tuple[str, ...]:
    reason, rec = pod.reason, pod.record
    if reason == "Evicted":
        return (_evicted(node),)
    if reason.startswith(INSUFFICIENT_RESOURCE_PREFIX):
        return tuple(_out_of(node, f) for f in current_failures(node, pod)) or (rec.result.message,)
    if reason == "PodLevelResourcesNotSupported":
        return ("the pod sets spec.resources and the PodLevelResources feature gate is off "
                "(--feature-gates PodLevelResources=true turns it on)",)
    d = pod.failed
    if reason == "TopologyAffinityError":
        return tuple(e for x in rec.decisions for e in x.explanation)
    name = pod.target.name if pod.target is not None else "?"
    error = (d.allocation_error if d is not None else None) or rec.result.message
    if reason == "SMTAlignmentError":
        return (_smt(node, name, error),)
    if "[memorymanager]" in error:
        return (_memory(node, pod, d, error),)
    m = re.search(r"requested number of devices unavailable for (\S+)\. Requested: (\d+), Available: (\d+)", error)
    if m:
        resource, asked, have = m.group(1), int(m.group(2)), int(m.group(3))
        healthy = len(node.devices.healthy.get(resource, ()))
        return (f"device manager: container {name} asks for {asked} {resource} and {have} of the node's {healthy} "
                f"healthy {resource} are free; the {node.tm.policy_name} policy admits a pod whose device hints "
                "are empty (too few free devices), so Allocate was reached and failed",)
    return (f"container {name}: {error}",)


def _evicted(node: Node) -> str:
    conditions = node.handlers.conditions
    names = ", ".join(c.value for c in conditions)
    if list(conditions) == [NodeCondition.MEMORY_PRESSURE]:
        return ("the node has MemoryPressure (--node-condition), under which the eviction manager admits "
                "no BestEffort pod; this pod is BestEffort (it requests no cpu or memory)")
    return (f"the node has {names} (--node-condition); the eviction manager admits no pod under "
            f"{'that condition' if len(conditions) == 1 else 'these conditions'} but critical ones")


def _out_of(node: Node, f: InsufficientResource) -> str:
    if f.resource == RESOURCE_PODS:
        limit = "maxPods" if node.config.pods_per_core == 0 else "maxPods or podsPerCore x CPUs"
        return f"pods: {f.used} pods run here and the node's pods limit ({limit}) is {f.capacity}"
    others = sum(1 for p in node.handlers.requests_of(node.pods.values()) if p.get(f.resource))
    note = ""
    if f.resource == RESOURCE_CPU:
        note = (f" ({node.machine.capacity_cpus()} CPUs less reservedSystemCPUs, or kubeReserved + "
                "systemReserved cpu)")
    elif f.resource == RESOURCE_MEMORY:
        note = " (memory less kubeReserved, systemReserved, the hard eviction threshold and hugepage pools)"
    return (f"{f.resource}: the pod requests {show(f.resource, f.requested)}; the {others} pod"
            f"{'s' if others != 1 else ''} admitted here request {show(f.resource, f.used)} of the node's "
            f"{show(f.resource, f.capacity)} allocatable{note}; {show(f.resource, f.short)} more would have "
            "to be free")


def _smt(node: Node, container: str, error: str) -> str:
    per_core = node.cpu.topology.cpus_per_core()
    m = re.search(r"requested (\d+) cpus not multiple cpus per core = (\d+)", error)
    if m:
        n = int(m.group(1))
        return (f"full-pcpus-only: container {container} asks for {n} CPUs, not a multiple of the {m.group(2)} "
                f"hardware threads per core, so it cannot have whole cores to itself; {n - n % per_core or per_core}"
                f" or {n + per_core - n % per_core} CPUs would be")
    m = re.search(r"available physical CPUs = (\d+), requested CPUs = (\d+)", error)
    if m:
        return (f"full-pcpus-only: container {container} needs {m.group(2)} CPUs on whole free cores and only "
                f"{m.group(1)} free CPUs are on cores with every thread free ({per_core} threads per core)")
    return f"full-pcpus-only: container {container}: {error}"


def _memory(node: Node, pod: Rejected, d: ContainerDecision | None, error: str) -> str:
    name = pod.target.name if pod.target is not None else "?"
    amounts = pod.target.amounts if pod.target is not None else {}
    asked = [f"{r} {binary_quantity(v)}" for r, v in sorted(amounts.items())
             if r == RESOURCE_MEMORY or is_hugepage_resource_name(r)]
    free = []
    for numa, st in sorted(node.memory.machine_state.items()):  # the None policy's is empty
        parts = [f"{r} {readable_bytes(t.free)}" for r, t in sorted(st.memory_map.items()) if t.allocatable]
        free.append(f"NUMA {numa}: {', '.join(parts)}")
    merged = "none" if d is None or d.merged is None else str(d.merged)
    what = ", ".join(asked) or "memory"
    if "extend" in error:
        return (f"memory manager: container {name} asks for {what}; the merged hint {merged} does not have that "
                "much free and no larger set of NUMA nodes containing it does either (the "
                f"{node.tm.policy_name} policy admitted the pod without a memory hint that fits); free: "
                + "; ".join(free))
    return f"memory manager: container {name} asks for {what}: {error}; free: " + "; ".join(free)
