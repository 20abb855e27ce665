"""The agent's pod book: which manifest file holds which pods, and what became of each. A state machine
without I/O, as h11 is one: `handle(event)` updates the book and returns the effects to carry out
(numalign.agent.events); it reads the node only through a `NodeView`.

Rules (the kubelet's static-pod file source, adapted):
- a new or changed file is loaded; pods that left the file or whose spec changed are released, new ones
  admitted; pods already on the node with the same spec (e.g. restored after a restart) are kept;
- a removed file releases its pods;
- an invalid file is recorded with its error and changes nothing (its previous pods stay: bad input
  never loses state);
- a pod whose uid another file (or an earlier document) already holds is refused and recorded on the
  file;
- static pods are named as the kubelet names them (pkg/kubelet/config common.go generatePodName):
  `<name>-<node name, lower-cased>`, which is also their mirror pod's name in the API server, so
  PodResources clients (the NFD topology-updater) find them there; `mirror_names=False` keeps the
  manifest's names (a deliberate difference, opt-in);
- a pod asking for an extended resource is admitted at once, as the kubelet admits it: without those
  devices if no plugin has reported the resource yet (the predicate drops extended resources the node
  does not know, the device manager skips resources it has no devices for), rejected by the device
  manager if the plugin went away (its devices are unhealthy) or has too few. With
  `wait_for_plugins=True` (opt-in, not the kubelet's behaviour) such a pod waits ("pending") until the
  plugin is connected *and* has answered ListAndWatch at least once since it registered, so another
  plugin's event in that gap cannot admit it before the device manager knows the resource;
- with `reserve=True` (parallel_allocate, opt-in, not the kubelet's behaviour: it admits one pod at a
  time), a pod whose devices need a plugin's Allocate is decided and its resources taken at once, then
  waits ("admitting") while the calls are made off the agent's lock: a hung plugin delays only its own
  pods;
- an admitted pod's containers are started, and a failed start is retried with the kubelet's back-off
  (doubling from `start_backoff` up to `start_backoff_max`) while that admission stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from numalign.agent.entries import ContainersStatus, ManifestEntry, ManifestStatus, PodEntry, PodStatus
from numalign.agent.events import (
    AdmissionFailed,
    Admit,
    Admitted,
    Allocate,
    AllocateAnswered,
    Complete,
    ContainersStarted,
    DevicesReported,
    Effect,
    Event,
    Fault,
    ManifestInvalid,
    ManifestLoaded,
    ManifestRemoved,
    PluginRegistered,
    Release,
    Released,
    ReleaseFailed,
    ReservationLost,
    Reserved,
    Resumed,
    Start,
    StartCrashed,
    Tick,
)
from numalign.k8s.pod import Pod, pod_to_manifest
from numalign.k8s.resources import is_extended_resource_name

log = logging.getLogger("numalign.agent.book")


class NodeView(Protocol):
    """What the book reads of the node: pure queries, no I/O."""

    def held(self, uid: str) -> Pod | None:
        """The pod holding resources under `uid`: admitted, or admitting (its Allocate in flight)."""

    def plugin_connected(self, resource: str) -> bool:
        """A plugin for `resource` is registered now (not stopped, not only known from the checkpoint)."""


class PodBook:
    def __init__(
        self,
        view: NodeView,
        restored: Mapping[str, Pod] | None = None,
        previous: Mapping[str, Any] | None = None,
        *,
        wait_for_plugins: bool = False,
        node_name: str = "node",
        mirror_names: bool = True,
        reserve: bool = False,
        start_backoff: float = 10.0,
        start_backoff_max: float = 300.0,
    ) -> None:
        """`restored`: the pods the node holds at start (read from its state); `previous`: the status
        document the previous run wrote, for their files, records and container starts."""
        self.view = view
        self.wait_for_plugins = wait_for_plugins
        self.node_name = node_name.lower()
        self.mirror_names = mirror_names
        self.reserve = reserve
        self.start_backoff = start_backoff
        self.start_backoff_max = start_backoff_max
        self.pods: dict[str, PodEntry] = {}  # uid -> the entry of its current admission
        self.manifests: dict[str, ManifestEntry] = {}
        self.pending: dict[str, Pod] = {}
        self.rejected: dict[str, Pod] = {}
        self.unreleased: set[str] = set()  # removals not written yet (retried on every Tick)
        # Resources whose current plugin has answered ListAndWatch since it registered.
        self._reported: set[str] = set()
        self._serial = 0
        old = previous.get("pods") if previous is not None else None
        old_pods: Mapping[str, Any] = old if isinstance(old, Mapping) else {}
        for uid, pod in (restored or {}).items():
            before = old_pods.get(uid)
            before = before if isinstance(before, Mapping) else None
            file = before.get("file") if before is not None else None
            entry = self._new_entry(pod, file if isinstance(file, str) else None, PodStatus.ADMITTED)
            if before is not None:
                entry.restore(before)
            if entry.file is not None:
                self.manifests.setdefault(entry.file, ManifestEntry()).pods.append(uid)

    # -- queries -----------------------------------------------------------------------------------

    def files(self) -> list[str]:
        return sorted(self.manifests)

    def inactive_pods(self) -> list[Pod]:
        """Pods from the manifests that hold no resources: rejected, or pending on a device plugin."""
        return [*self.rejected.values(), *self.pending.values()]

    def has_reported(self, resource: str) -> bool:
        return resource in self._reported

    def is_current(self, uid: str, serial: int) -> bool:
        """Whether `serial` is still the admission standing for `uid` (not removed or replaced since)."""
        entry = self.pods.get(uid)
        return entry is not None and entry.serial == serial

    def static_pod(self, pod: Pod) -> Pod:
        """The pod as the kubelet's file source names it (the uid stays numalign's, derived from the
        manifest, so state directories written before keep their pods)."""
        if not self.mirror_names:
            return pod
        return replace(pod, name=f"{pod.name}-{self.node_name}")

    # -- events ------------------------------------------------------------------------------------

    def handle(self, event: Event) -> list[Effect]:
        """Take one event; return the effects to carry out, in order."""
        match event:
            case ManifestLoaded():
                return self._loaded(event.path, [self.static_pod(p) for p in event.pods])
            case ManifestInvalid():
                return self._invalid(event.path, event.error)
            case ManifestRemoved():
                return self._removed(event.path)
            case PluginRegistered():
                self._reported.discard(event.resource)
                return []
            case DevicesReported():
                self._reported.add(event.resource)
                return self._retry_pending()
            case Admitted():
                return self._admitted(event)
            case AdmissionFailed():
                return self._admission_failed(event)
            case Reserved():
                return self._reserved(event)
            case AllocateAnswered():
                if not self.is_current(event.uid, event.serial):
                    return []  # superseded meanwhile (its pod removed or changed): nothing to do
                return [Complete(event.reservation, event.serial, event.responses, event.error)]
            case ReservationLost():
                entry = self.pods.get(event.uid)
                if entry is None or entry.serial != event.serial:
                    return []
                log.info("pod %s: the state changed during its admission; admitting it again", entry.key)
                return self._admit(entry.pod, entry.file)
            case ContainersStarted():
                return self._started(event)
            case StartCrashed():
                effects: list[Effect] = [Fault("container_start_error", f"pod uid {event.uid}: {event.error}")]
                entry = self.pods.get(event.uid)
                if entry is not None and entry.serial == event.serial:
                    effects += self._retry_start(entry)
                return effects
            case Released():
                self.unreleased.discard(event.uid)
                return []
            case ReleaseFailed():
                # Not written: the pod still holds its resources, here and on disk. Never forgotten:
                # retried on every tick until the removal is written.
                self.unreleased.add(event.uid)
                return [] if event.retry else [Fault("release_error", f"pod uid {event.uid}: {event.error}")]
            case Resumed():
                # The previous run had not started them: try again.
                return [Start(uid, e.serial) for uid, e in self.pods.items()
                        if e.status == PodStatus.ADMITTED
                        and e.containers in (ContainersStatus.FAILED, ContainersStatus.STARTING)]
            case Tick():
                return self._retry_releases()
        raise TypeError(f"not a pod book event: {event!r}")

    # -- files -------------------------------------------------------------------------------------

    def _removed(self, path: str) -> list[Effect]:
        info = self.manifests.pop(path, None)
        if info is None:
            return []
        log.info("manifest %s removed; releasing %d pod(s)", path, len(info.pods))
        return [e for uid in info.pods for e in self._release(uid)]

    def _invalid(self, path: str, error: str) -> list[Effect]:
        err = error.removeprefix(f"{path}: ")  # manifest errors already start with the file name
        info = self.manifests.setdefault(path, ManifestEntry())
        info.status, info.error = ManifestStatus.INVALID, err
        return [Fault("invalid_manifest", f"{path}: {err}")]

    def _loaded(self, path: str, pods: Sequence[Pod]) -> list[Effect]:
        effects: list[Effect] = []
        released: set[str] = set()  # released by this change: no longer held once the effects are made
        old = self.manifests[path].pods if path in self.manifests else []
        new = {p.uid: p for p in reversed(pods)}  # the first document of a uid
        for uid in old:
            current = self.view.held(uid)
            if not (uid in new and current is not None and _same(current, new[uid])):
                effects += self._release(uid)
                released.add(uid)
        info = ManifestEntry()
        self.manifests[path] = info
        errors: list[str] = []
        for pod in pods:
            owner = self._owner(pod.uid)
            if pod.uid in info.pods or (owner is not None and owner != path):
                where = "earlier in this file" if owner in (None, path) else f"in {owner}"
                msg = f"pod {pod.key} (uid {pod.uid}) is already defined {where}; give it another name or uid"
                errors.append(msg)
                effects.append(Fault("duplicate_pod", f"{path}: {msg}"))
                continue
            info.pods.append(pod.uid)
            current = None if pod.uid in released else self.view.held(pod.uid)
            if current is not None and _same(current, pod):
                self.pods[pod.uid].file = path  # restored and unchanged: keep its allocation
                continue
            if current is not None:
                effects += self._release(pod.uid)  # restored from the state with another spec: admit it afresh
            effects += self._admit(pod, path)
        if errors:
            info.status, info.error = ManifestStatus.INVALID, "; ".join(errors)
        return effects

    def _owner(self, uid: str) -> str | None:
        entry = self.pods.get(uid)
        return None if entry is None else entry.file

    # -- admission ---------------------------------------------------------------------------------

    def _new_entry(self, pod: Pod, path: str | None, status: PodStatus, **fields: Any) -> PodEntry:
        self._serial += 1
        entry = PodEntry(pod, path, status, self._serial, **fields)
        self.pods[pod.uid] = entry
        return entry

    def _missing_resources(self, pod: Pod) -> list[str]:
        """Extended resources of the pod with no plugin connected right now. A resource known only from
        the device checkpoint (after a restart, before its plugin re-registers) or whose plugin went
        away counts as missing: admitting then would fail on devices that are merely not back yet."""
        wanted = {r for c in pod.all_containers() for r, q in c.limits.items()
                  if is_extended_resource_name(r) and q.value() > 0}
        return sorted(r for r in wanted if not (self.view.plugin_connected(r) and r in self._reported))

    def _retry_pending(self) -> list[Effect]:
        effects: list[Effect] = []
        for uid, pod in list(self.pending.items()):
            if not self._missing_resources(pod):
                del self.pending[uid]
                effects += self._admit(pod, self.pods[uid].file)
        return effects

    def _admit(self, pod: Pod, path: str | None) -> list[Effect]:
        missing = self._missing_resources(pod) if self.wait_for_plugins else []
        if missing:
            self.pending[pod.uid] = pod
            msg = f"waiting for a device plugin to register {', '.join(missing)}"
            log.info("pod %s pending: %s", pod.key, msg)
            self._new_entry(pod, path, PodStatus.PENDING, reason="WaitingForDevicePlugin", message=msg)
            return []
        self.rejected.pop(pod.uid, None)
        # Undecided until the Admit effect reports back (the agent does so before anything else).
        entry = self._new_entry(pod, path, PodStatus.ADMITTING)
        return [Admit(pod, entry.serial, reserve=self.reserve)]

    def _admission_failed(self, event: AdmissionFailed) -> list[Effect]:
        entry = self.pods.get(event.uid)
        if entry is None or entry.serial != event.serial:
            return []
        pod = entry.pod
        self._new_entry(pod, entry.file, PodStatus.REJECTED, reason="AdmissionError", message=event.error)
        self.rejected[pod.uid] = pod
        return [Fault("admission_error", f"pod {pod.key}: {event.error}")]

    def _reserved(self, event: Reserved) -> list[Effect]:
        entry = self.pods.get(event.uid)
        if entry is None or entry.serial != event.serial:
            return []
        entry.message = "waiting for the device plugins' Allocate"
        return [Allocate(event.reservation, entry.serial)]

    def _admitted(self, event: Admitted) -> list[Effect]:
        entry = self.pods.get(event.uid)
        if entry is None or entry.serial != event.serial:
            return []
        pod, rec = entry.pod, event.record
        res = rec.result
        if not res.admit:
            self.rejected[pod.uid] = pod
        status = PodStatus.ADMITTED if res.admit else PodStatus.REJECTED
        log.info("pod %s %s%s", pod.key, status, "" if res.admit else f": {res.reason}: {res.message}")
        new = self._new_entry(pod, entry.file, status, reason=res.reason, message=res.message or "",
                              record=rec.to_dict())
        if not res.admit:
            return []
        new.allocations = dict(rec.allocations)
        new.containers = ContainersStatus.STARTING
        return [Start(pod.uid, new.serial)]

    # -- containers --------------------------------------------------------------------------------

    def _started(self, event: ContainersStarted) -> list[Effect]:
        entry = self.pods.get(event.uid)
        if entry is None or entry.serial != event.serial:
            return []
        entry.container_errors = dict(event.errors)
        entry.containers = ContainersStatus.FAILED if event.errors else ContainersStatus.STARTED
        effects: list[Effect] = [
            Fault("container_start_error", f"pod {entry.pod.namespace}/{entry.pod.name} container {name}: {err}")
            for name, err in sorted(event.errors.items())
        ]
        if event.errors:
            effects += self._retry_start(entry)
        else:
            entry.start_attempts = 0
        return effects

    def _retry_start(self, entry: PodEntry) -> list[Effect]:
        """The next attempt with the kubelet's back-off, counted on this admission's entry."""
        attempt = entry.start_attempts
        entry.start_attempts = attempt + 1
        delay = min(self.start_backoff * (2 ** attempt), self.start_backoff_max)
        log.info("pod %s: starting its containers failed; retrying in %gs", entry.uid, delay)
        return [Start(entry.uid, entry.serial, delay)]

    # -- releases ----------------------------------------------------------------------------------

    def _release(self, uid: str) -> list[Effect]:
        entry = self.pods.pop(uid, None)
        self.pending.pop(uid, None)
        self.rejected.pop(uid, None)
        # An admission in flight: its resources go now, its outcome is ignored (its serial is gone).
        return [Release(uid, "" if entry is None else entry.key)]

    def _retry_releases(self) -> list[Effect]:
        effects: list[Effect] = []
        for uid in sorted(self.unreleased):
            if uid in self.pods:  # admitted again (its manifest came back) meanwhile: nothing to release
                self.unreleased.discard(uid)
                continue
            effects.append(Release(uid, retry=True))
        return effects


def _same(a: Pod, b: Pod) -> bool:
    return pod_to_manifest(a) == pod_to_manifest(b)
