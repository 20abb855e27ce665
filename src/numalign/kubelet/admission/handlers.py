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

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from numalign import metrics as m
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
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.machine.topology import Machine


class Node(Protocol):
    """What the handlers read of numalign.kubelet.node.Node (which builds them: a Protocol, not an import)."""

    @property
    def machine(self) -> Machine: ...
    @property
    def config(self) -> KubeletConfig: ...
    @property
    def metrics(self) -> m.Metrics: ...
    @property
    def devices(self) -> DeviceManager: ...
    @property
    def pods(self) -> Mapping[str, Pod]: ...
    @property
    def reserved_pods(self) -> Sequence[Pod]: ...


class AdmitHandlers:
    """The eviction and predicate handlers of one node; pure but for the running sum of held pods' requests."""

    def __init__(self, node: Node, conditions: Sequence[NodeCondition] = ()) -> None:
        self.conditions: tuple[NodeCondition, ...] = tuple(dict.fromkeys(conditions))
        base = node_allocatable(node.machine, node.config)
        # Extended resources come from the device manager (plugins come and go), not the machine file.
        devices = node.machine.devices_by_resource()
        self._static = {k: v for k, v in base.items() if k not in devices}
        self._static[RESOURCE_PODS] = allowed_pod_number(node.machine, node.config)
        # The pods whose requests `_requested` sums (see requested).
        self._counted: dict[str, Pod] = {}
        self._requested: dict[str, int] = {}

    @property
    def counted_pods(self) -> Mapping[str, Pod]:
        """The pods whose requests the running sum holds now (those held at the last admission)."""
        return self._counted

    def before_topology(self, node: Node, pod: Pod) -> AdmitResult:
        return eviction_admit(pod, self.conditions)

    def allocatable(self, node: Node, pod_holds_devices: bool) -> dict[str, int]:
        """The node status allocatable the predicate sees: healthy devices per plugin resource and, once
        the pod holds devices, at least the devices allocated (sanitizeNodeAllocatable)."""
        out = dict(self._static)
        for resource, ids in node.devices.healthy.items():
            out[resource] = len(ids)
        if pod_holds_devices:
            for resource, ids in node.devices.allocated.items():
                if out.get(resource, -1) < len(ids):
                    out[resource] = len(ids)
        return out

    def requests_of(self, pods: Iterable[Pod]) -> list[dict[str, int]]:
        return [fit_requests(pod) for pod in pods]

    def requested(self, others: Mapping[str, Pod]) -> dict[str, int]:
        """requested_by(others' requests), kept from one admission to the next: only the pods admitted
        or removed since the last call are added or taken off (integers, so the sum is exact)."""
        total, counted = self._requested, self._counted
        for uid, held in list(counted.items()):
            if others.get(uid) is not held:
                del counted[uid]
                self._count(held, -1)
        for uid, held in others.items():
            if uid not in counted:
                counted[uid] = held
                self._count(held, 1)
        return total

    def _count(self, pod: Pod, sign: int) -> None:
        total = self._requested
        for name, value in held_requests(pod).items():
            now = total.get(name, 0) + sign * value
            if now:
                total[name] = now
            else:
                del total[name]  # as requested_by: a resource no pod requests is absent

    def after_topology(self, node: Node, pod: Pod) -> AdmitResult:
        # Pods whose admission waits on a plugin's Allocate count as admitted: they hold their resources.
        reserved = node.reserved_pods
        others: Mapping[str, Pod] = node.pods  # read only; copied only when it must change
        count = len(others) + len(reserved)
        if pod.uid in others or reserved:
            others = {uid: p for uid, p in node.pods.items() if uid != pod.uid}
            count = len(others) + len(reserved)
            for p in reserved:
                others[p.uid] = p
        holds = node.devices.pod_devices.has_pod(pod.uid) and any(
            node.devices.get_container_devices(pod.uid, c.name) for c in pod.all_containers())
        return predicate_admit(pod, self.allocatable(node, holds), self.requested(others), count)
