"""DRA in `numalign serve`: the claims of the pods from the manifest directory, allocated on this node
as the scheduler does before it binds a pod, and reported by PodResources v1 `dynamic_resources` as the
kubelet reports prepared claims (KEP-3695).

A manifest file may hold ResourceSlices, DeviceClasses and ResourceClaims beside its pods; the
machine's own DRA devices are published as this node's slices. A claim with `status.allocation` keeps
its devices. The kubelet never sees a pod the scheduler could not place, but the manifest directory
bypasses the scheduler: a pod whose claims cannot be allocated runs without them, with a fault
(`dra_unallocatable`) and a log line naming the allocator's reason and, where it says only `cannot
allocate all claims`, why (scheduler/dra/explain.py, as `admit` explains it); the status file keeps
each such pod's reason and why (`draUnallocatable`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from numalign.adapters.grpc.podresources import ClaimDevice, DynamicResource
from numalign.errors import CheckpointError
from numalign.k8s.dra.types import DRAObjects
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle, Unallocatable
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

log = logging.getLogger("numalign.agent.dra")


class AgentDRA:
    """The manifests' DRA objects and the node's claim life cycle (kubelet/dramanager): the claims the
    pods reserve live in the node's DRA manager, so they are written with the pod record and a restarted
    agent (graceful or kill -9) reports and keeps them."""

    def __init__(self, machine: Any, node: Any, node_name: str) -> None:
        from numalign.machine.dra import machine_slices

        self.by_file: dict[str, DRAObjects] = {}
        self.node = node
        self.node_name = node_name
        own = machine_slices(machine, node_name)
        self.life: ClaimLifecycle[PodClaims] = ClaimLifecycle(
            node.dra, DRAObjects(),
            lambda view: NodeDRA(view, node_name, version=node.kubelet_version, extra_slices=own,
                                 explain_failures=True))
        self.failed: dict[str, Unallocatable] = {}  # pod uid -> why its claims could not be allocated

    def load(self, path: str) -> list[Pod]:
        """The pods of a manifest file, keeping the DRA objects beside them."""
        from numalign.adapters.textfiles import load_documents, source_name
        from numalign.k8s.dra.documents import EXPECTED_WITH_DRA, pods_and_dra_from_documents
        from numalign.k8s.dra.read import checked_as

        docs = load_documents(path, "the manifest", EXPECTED_WITH_DRA)
        # Other kinds beside the pods and DRA objects (the Namespace of NVIDIA's quickstart specs) are
        # skipped with a log line, as admit notes them: refusing them made the whole file invalid.
        skipped: list[str] = []
        with checked_as(self.node.kubelet_version.minor):
            pods, objects = pods_and_dra_from_documents(docs, source_name(path), skipped=skipped)
        for note in skipped:
            log.info("%s", note)
        self.by_file[path] = objects
        self._given_changed()
        return pods

    def forget(self, path: str) -> None:
        if self.by_file.pop(path, None) is not None:
            self._given_changed()

    def _given_changed(self) -> None:
        objects = DRAObjects()
        for f in sorted(self.by_file):
            objects.merge(self.by_file[f])
        self.life.set_given(objects)

    def refresh(self, pods: list[Pod], fault: Callable[[str, str], None]) -> None:
        """Allocate the claims of admitted pods that reserve none yet (in admission order), and write
        them to the state directory. A removed pod's claims went with it (Node.remove)."""
        uids = {p.uid for p in pods}
        for uid in [u for u in self.failed if u not in uids]:
            del self.failed[uid]
        before = self.node.dra.generation
        for failed in self.life.allocate_missing(pods, skip=self.failed):
            self.failed[failed.pod.uid] = failed
            why = "".join(f"; why: {reason}" for reason in failed.why)
            fault("dra_unallocatable", f"pod {failed.pod.key}: its claims cannot be allocated on node "
                  f"{self.node_name}: {failed.message}{why}; it runs without them")
        allocated = self.node.dra.generation != before
        if allocated:
            try:
                self.node.save()  # the claims join the pod record (a failed write is retried at the next change)
            except CheckpointError as e:
                fault("state_write_error", f"the pods' DRA claims: {e} (retried at the next change or tick)")

    def unallocatable(self) -> dict[str, dict[str, Any]]:
        """The status file's `draUnallocatable`: per pod uid, its key, the allocator's reason and why."""
        return {uid: {"pod": f.pod.key, "message": f.message, "why": list(f.why)}
                for uid, f in sorted(self.failed.items())}

    def dynamic_resources(self, pod: Pod, container: Container) -> tuple[DynamicResource, ...]:
        """PodResources' dynamic_resources of a container: its claims' devices, per claim."""
        by_claim: dict[str, tuple[Any, list[ClaimDevice]]] = {}
        for held, r in self.node.dra.container_devices(pod, container.name):
            by_claim.setdefault(held.key, (held, []))[1].append(ClaimDevice(r.driver, r.pool, r.device))
        return tuple(DynamicResource(held.claim.name, held.claim.namespace, tuple(devices))
                     for held, devices in by_claim.values())
