"""Preview `dra-topology-hints`: DRA devices as a Topology Manager hint provider, as the closed k/k PR
#139982 proposed ("DRA: Fix Numa hinting for Topology Manager"). No kubelet release does this: the
kubelet prepares DRA claims after admission and its Topology Manager takes no hint from them.

The design: by the time the kubelet admits a pod the scheduler has allocated its claims, so their
devices are fixed. For each claim a container uses whose devices report a NUMA node, the provider
gives one hint, the NUMA nodes of those devices, preferred; claims whose devices report none give no
preference. With single-numa-node or restricted the CPU and memory managers then follow the devices,
or the pod is rejected when they cannot (TopologyAffinityError), as with device-plugin devices.

The provider learns a pod's devices before its admission (`set_pod`, from whoever allocated the
claims: admit's DRA hook, the simulated scheduler); it allocates nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from numalign.core.hint import ProviderHints, TopologyHint
from numalign.k8s.pod import Container, Pod

PROVIDER_NAME = "dra (preview)"


class DRAHintProvider:
    name = PROVIDER_NAME

    def __init__(self) -> None:
        # pod uid -> container -> {"dra:<claim>/<request>": NUMA nodes of its devices}
        self._pods: dict[str, dict[str, dict[str, tuple[int, ...]]]] = {}

    def set_pod(self, pod_uid: str, containers: Mapping[str, Mapping[str, tuple[int, ...]]]) -> None:
        self._pods[pod_uid] = {c: dict(r) for c, r in containers.items()}

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        per = self._pods.get(pod.uid, {}).get(container.name, {})
        return {res: [TopologyHint.of(nodes, True)] for res, nodes in sorted(per.items()) if nodes}

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        merged: dict[str, set[int]] = {}
        for per in self._pods.get(pod.uid, {}).values():
            for res, nodes in per.items():
                merged.setdefault(res, set()).update(nodes)
        return {res: [TopologyHint.of(sorted(nodes), True)] for res, nodes in sorted(merged.items()) if nodes}

    def allocate(self, pod: Pod, container: Container) -> None:
        return None  # the scheduler allocated the devices already

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        per = self._pods.get(pod_uid)
        if per is not None:
            per.pop(container_name, None)
            if not per:
                del self._pods[pod_uid]
