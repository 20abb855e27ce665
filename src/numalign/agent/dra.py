"""DRA in `numalign serve`: the claims of the pods from the manifest directory, allocated on this node
as the scheduler does before it binds a pod, and reported by PodResources v1 `dynamic_resources` as the
kubelet reports prepared claims (KEP-3695).

A manifest file may hold ResourceSlices, DeviceClasses and ResourceClaims beside its pods; the
machine's own DRA devices are published as this node's slices. A claim with `status.allocation` keeps
its devices. The kubelet never sees a pod the scheduler could not place, but the manifest directory
bypasses the scheduler: a pod whose claims cannot be allocated runs without them, with a fault
(`dra_unallocatable`) and a log line naming the allocator's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from numalign.adapters.grpc.podresources import ClaimDevice, DynamicResource
from numalign.k8s.dra.types import DRAObjects
from numalign.k8s.pod import Container, Pod
from numalign.scheduler.dra.api import AllocationResult
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

log = logging.getLogger("numalign.agent.dra")


class AgentDRA:
    def __init__(self, machine: Any, node_name: str, version: Any) -> None:
        from numalign.machine.dra import machine_slices

        self.by_file: dict[str, DRAObjects] = {}
        self.node_name = node_name
        self.version = version
        self.own_slices = machine_slices(machine, node_name)
        self.claims: dict[str, PodClaims] = {}  # pod uid -> its allocated claims
        self.failed: dict[str, str] = {}  # pod uid -> why its claims could not be allocated
        self._dra: NodeDRA | None = None

    def load(self, path: str) -> list[Pod]:
        """The pods of a manifest file, keeping the DRA objects beside them."""
        from numalign.adapters.textfiles import load_documents, source_name
        from numalign.k8s.dra.documents import EXPECTED_WITH_DRA, pods_and_dra_from_documents

        docs = load_documents(path, "the manifest", EXPECTED_WITH_DRA)
        pods, objects = pods_and_dra_from_documents(docs, source_name(path))
        self.by_file[path] = objects
        self._dra = None
        return pods

    def forget(self, path: str) -> None:
        if self.by_file.pop(path, None) is not None:
            self._dra = None

    def _ledger(self) -> NodeDRA:
        if self._dra is None:
            objects = DRAObjects()
            for f in sorted(self.by_file):
                objects.merge(self.by_file[f])
            for held in self.claims.values():  # what earlier pods hold stays theirs
                if isinstance(held.result, AllocationResult):
                    for c in held.result.claims:
                        objects.claims[c.claim.key] = c.allocated_claim()
            self._dra = NodeDRA(objects, self.node_name, version=self.version, extra_slices=self.own_slices)
        return self._dra

    def refresh(self, pods: list[Pod], fault: Callable[[str, str], None]) -> None:
        """Allocate the claims of pods that hold none yet (in admission order); forget pods gone."""
        uids = {p.uid for p in pods}
        for uid in [u for u in self.claims if u not in uids]:
            del self.claims[uid]
            self._dra = None
        for uid in [u for u in self.failed if u not in uids]:
            del self.failed[uid]
        for pod in pods:
            if not pod.resource_claims or pod.uid in self.claims or pod.uid in self.failed:
                continue
            ledger = self._ledger()
            try:
                outcome = ledger.allocate(pod)
            except Exception as e:  # a claim or template missing from the manifests
                self.failed[pod.uid] = str(e)
                fault("dra_unallocatable", f"pod {pod.key}: {e}")
                continue
            if outcome is None:
                continue
            failure = outcome.failure
            if failure is not None:
                self.failed[pod.uid] = failure.line()
                fault("dra_unallocatable", f"pod {pod.key}: its claims cannot be allocated on node "
                      f"{self.node_name}: {failure.line()}; it runs without them")
                continue
            ledger.commit(outcome)
            self.claims[pod.uid] = outcome

    def dynamic_resources(self, pod: Pod, container: Container) -> tuple[DynamicResource, ...]:
        outcome = self.claims.get(pod.uid)
        if outcome is None:
            return ()
        devices = outcome.container_devices(container.name)
        out: list[DynamicResource] = []
        for claim in outcome.claims:
            mine = [d for d in devices if d.claim == claim.key]
            if mine:
                out.append(DynamicResource(claim.name, claim.namespace, tuple(
                    ClaimDevice(d.driver, d.pool, d.device) for d in mine)))
        return tuple(out)
