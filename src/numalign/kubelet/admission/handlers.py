"""The kubelet's pod admit handlers around the Topology Manager's, in the kubelet's order.

kubelet.go (1.35) registers, and the allocation manager runs until the first rejection:

1. the eviction manager (node pressure conditions)            modelled: numalign.kubelet.admission.eviction
2. the sysctls allowlist                                       not modelled: pods carry no sysctls
3. the Topology Manager (CPU, memory and device managers)      numalign.kubelet.topologymanager.manager
4. the predicate handler (GeneralPredicates: resource fit,     modelled: numalign.kubelet.admission.predicate
   pods limit; node affinity, ports, taints)                   (resource fit and pods limit only)
5. AppArmor, pod features, node-declared features, shutdown    not modelled: nothing of them in pods

So the Topology Manager decides before the resource fit: a pod that both fails alignment and does
not fit is a TopologyAffinityError, and a pod the Topology Manager admitted can still be OutOfcpu
(its CPUs, memory and devices are then released, as the kubelet's next removeStaleState would).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from types import MappingProxyType

from numalign.core.decision import AdmitResult
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod
from numalign.kubelet.admission.allocatable import RESOURCE_PODS, allowed_pod_number, node_allocatable
from numalign.kubelet.admission.eviction import NodeCondition, eviction_admit
from numalign.kubelet.admission.predicate import (
    fit_requests,
    held_requests,
    predicate_admit,
)
from numalign.machine.topology import Machine

_NONE: Mapping[str, Collection[str]] = MappingProxyType({})


class AdmitHandlers:
    """The eviction and predicate handlers of one node; pure but for the running sum of held pods' requests.
    They take values (the pod, the pods held, the devices' counts), never the node that builds them."""

    def __init__(self, machine: Machine, config: KubeletConfig, conditions: Sequence[NodeCondition] = ()) -> None:
        self.conditions: tuple[NodeCondition, ...] = tuple(dict.fromkeys(conditions))
        base = node_allocatable(machine, config)
        # Extended resources come from the device manager (plugins come and go), not the machine file.
        devices = machine.devices_by_resource()
        self._static = {k: v for k, v in base.items() if k not in devices}
        self._static[RESOURCE_PODS] = allowed_pod_number(machine, config)
        # The pods whose requests `_requested` sums (see requested).
        self._counted: dict[str, Pod] = {}
        self._requested: dict[str, int] = {}

    @property
    def counted_pods(self) -> Mapping[str, Pod]:
        """The pods whose requests the running sum holds now (those held at the last admission)."""
        return self._counted

    def before_topology(self, pod: Pod) -> AdmitResult:
        return eviction_admit(pod, self.conditions)

    def allocatable(self, healthy: Mapping[str, Collection[str]],
                    allocated: Mapping[str, Collection[str]] = _NONE) -> dict[str, int]:
        """The node status allocatable the predicate sees: the healthy devices per plugin resource and, once
        the pod holds devices (the caller passes the device manager's `allocated` then), at least the
        devices allocated (sanitizeNodeAllocatable)."""
        out = dict(self._static)
        for resource, ids in healthy.items():
            out[resource] = len(ids)
        for resource, ids in allocated.items():
            if out.get(resource, -1) < len(ids):
                out[resource] = len(ids)
        return out

    def requests_of(self, pods: Iterable[Pod]) -> list[dict[str, int]]:
        return [fit_requests(pod) for pod in pods]

    def requested(self, others: Mapping[str, Pod]) -> dict[str, int]:
        """requested_by(others' requests), kept from one admission to the next: only the pods admitted
        or removed since the last call are added or taken off (integers, so the sum is exact)."""
        total, counted = self._requested, self._counted
        gone: list[str] | None = None  # made only when a pod went (most admissions: none did)
        for uid, held in counted.items():
            if uid not in others or others[uid] is not held:  # (not .get: a Mapping's is called by name)
                if gone is None:
                    gone = []
                gone.append(uid)
        if gone is not None:
            for uid in gone:
                self._count(counted.pop(uid), False)
        if len(counted) != len(others):  # every pod counted is in `others` now: equal sizes, the same pods
            for uid, held in others.items():
                if uid not in counted:
                    counted[uid] = held
                    self._count(held, True)
        return total

    def _count(self, pod: Pod, add: bool) -> None:
        total = self._requested
        for name, value in held_requests(pod).items():
            now = total.get(name, 0) + (value if add else -value)
            if now:
                total[name] = now
            else:
                del total[name]  # as requested_by: a resource no pod requests is absent

    def after_topology(self, pod: Pod, allocatable: Mapping[str, int], pods: Mapping[str, Pod],
                       reserved: Sequence[Pod]) -> AdmitResult:
        """The predicate handler: `pods` are the admitted ones, `reserved` those whose admission waits on a
        plugin's Allocate (they count as admitted: they hold their resources)."""
        others: Mapping[str, Pod] = pods  # read only; copied only when it must change
        count = len(others) + len(reserved)
        if pod.uid in others or reserved:
            others = {uid: p for uid, p in pods.items() if uid != pod.uid}
            count = len(others) + len(reserved)
            for p in reserved:
                others[p.uid] = p
        return predicate_admit(pod, allocatable, self.requested(others), count)
