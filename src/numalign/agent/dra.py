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

The allocation runs on a thread of its own, one pod at a time, outside the agent's lock, as the
scheduler is a program of its own: a costly claim (a search that runs to its work bound, ~10 s of CPU)
no longer holds back the manifests dropped after it. Its answer is reserved under the lock only if the
node's claims and the given objects are still what it was computed from; otherwise it is computed again.
The status file lists the pods waiting for it (`draAllocating`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from numalign.adapters.grpc.podresources import ClaimDevice, DynamicResource
from numalign.errors import CheckpointError, NumalignError
from numalign.k8s.dra.types import DRAObjects
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle, Unallocatable
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

log = logging.getLogger("numalign.agent.dra")


class AgentDRA:
    """The manifests' DRA objects and the node's claim life cycle (kubelet/dramanager): the claims the
    pods reserve live in the node's DRA manager, so they are written with the pod record and a restarted
    agent (graceful or kill -9) reports and keeps them."""

    def __init__(self, machine: Any, node: Any, node_name: str, core: Any = None) -> None:
        """`core`: the agent's core (its lock, stopping event, fault and after_change); the allocation runs
        on a thread when given, in refresh() itself when not."""
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
        self._core = core
        self._working: Pod | None = None  # the pod whose claims the allocation thread is working on

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
        with self._locked():  # read outside the agent's lock, swapped in under it (review-3 M3)
            self.by_file[path] = objects
            self._given_changed()
        return pods

    def forget(self, path: str) -> None:
        with self._locked():
            if self.by_file.pop(path, None) is not None:
                self._given_changed()

    def _locked(self) -> Any:
        """The agent's lock, which refresh() and the allocation thread hold while they read the objects
        given (none without an agent core)."""
        return self._core.lock if self._core is not None else contextlib.nullcontext()

    def _given_changed(self) -> None:
        objects = DRAObjects()
        for f in sorted(self.by_file):
            objects.merge(self.by_file[f])
        if not _same_objects(objects, self.life.given):
            # a manifest of pods only leaves the scheduler's view (and an allocation under way) as it is
            self.life.set_given(objects)

    def pending(self, pods: list[Pod]) -> list[Pod]:
        """The admitted pods whose claims are still to be allocated, in admission order."""
        return [p for p in pods if p.resource_claims and p.uid not in self.failed and not self.life.holds(p)]

    def refresh(self, pods: list[Pod], fault: Callable[[str, str], None]) -> None:
        """Allocate the claims of admitted pods that reserve none yet (in admission order), and write
        them to the state directory. A removed pod's claims went with it (Node.remove). The agent's lock
        is held."""
        uids = {p.uid for p in pods}
        for uid in [u for u in self.failed if u not in uids]:
            del self.failed[uid]
        if self._working is not None:
            return  # its answer comes back through _work, which refreshes again
        if self._core is None:
            before = self.node.dra.generation
            for failed in self.life.allocate_missing(pods, skip=self.failed):
                self._failed(failed, fault)
            if self.node.dra.generation != before:
                self._save(fault)
            return
        waiting = self.pending(pods)
        if waiting:
            self._working = pod = waiting[0]
            ledger = self.life.ledger  # built here, under the lock, from the node's claims as they are now
            basis = (self.life.given, self.node.dra.snapshot())
            threading.Thread(target=self._work, args=(pod, ledger, basis), name="numalign-dra-allocate",
                             daemon=True).start()

    def allocating(self) -> list[str]:
        """The status file's `draAllocating`: the pods whose claims are being or still to be allocated."""
        node = self.node
        return [p.key for p in self.pending(list(node.pods.values()))]

    def _work(self, pod: Pod, ledger: Any, basis: tuple[DRAObjects, tuple[Any, ...]]) -> None:
        """The allocation thread: one pod's claims allocated outside the lock, reserved under it."""
        outcome: Any
        try:
            outcome = ledger.allocate(pod)
            if outcome is not None and outcome.failure is not None:
                # why, as admit explains it (a search of its own, bounded): worked out here, off the lock
                outcome = Unallocatable(pod, outcome.failure.line(), outcome.reasons())
        except NumalignError as e:  # a claim or template missing from the input
            outcome = Unallocatable(pod, str(e))
        except Exception as e:  # a bug must not leave the pod waiting for ever, nor end the agent
            log.exception("allocating the claims of pod %s failed", pod.key)
            outcome = Unallocatable(pod, f"internal error: {e}")
        core = self._core
        with core.lock:
            self._working = None
            if core.stopping.is_set():
                return  # stop() has saved the state: nothing more is written
            given, held = basis
            # Still the claims held and the objects given that the answer was computed from: another pod's
            # admission or removal that held no claim does not make it stale (churn would starve it).
            current = self.life.given is given and _same_items(held, self.node.dra.snapshot())
            if self.node.pods.get(pod.uid) is pod and current:
                if isinstance(outcome, Unallocatable):
                    self._failed(outcome, core.fault)
                elif outcome is not None:
                    self.life.commit(outcome)
                    self._save(core.fault)
            # else the node's claims or the given objects changed meanwhile: the next refresh computes it again
            core.after_change()

    def _failed(self, failed: Unallocatable, fault: Callable[[str, str], None]) -> None:
        self.failed[failed.pod.uid] = failed
        why = "".join(f"; why: {reason}" for reason in failed.why)
        fault("dra_unallocatable", f"pod {failed.pod.key}: its claims cannot be allocated on node "
              f"{self.node_name}: {failed.message}{why}; it runs without them")

    def _save(self, fault: Callable[[str, str], None]) -> None:
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


def _same_items(a: tuple[Any, ...] | list[Any], b: tuple[Any, ...] | list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _same_objects(a: DRAObjects, b: DRAObjects) -> bool:
    """The same objects read (by identity: a file read again is a change, whatever its text)."""
    return (_same_items(a.slices, b.slices) and all(
        x.keys() == y.keys() and all(x[k] is y[k] for k in x)
        for x, y in ((a.classes, b.classes), (a.claims, b.claims), (a.templates, b.templates))))
