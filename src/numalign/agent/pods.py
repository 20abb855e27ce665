"""The agent's pod book: which manifest file holds which pods, and what became of each.

Called with the agent's lock held. Rules (the kubelet's static-pod file source, adapted):
- a new or changed file is loaded; pods that left the file or whose spec changed are removed, new ones
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
- with `allocate` given (opt-in, not the kubelet's behaviour: it admits one pod at a time), a pod whose
  devices need a plugin's Allocate is decided and its resources taken at once, then waits
  ("admitting") while `allocate` makes the calls off the caller's lock and hands the outcome to
  `finish`: a hung plugin delays only its own pods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from numalign.adapters.textfiles import load_pods
from numalign.core.decision import DecisionRecord
from numalign.errors import NumalignError
from numalign.k8s.pod import Pod
from numalign.k8s.resources import is_extended_resource_name
from numalign.kubelet.devicemanager.pod_devices import RunContainerOptions
from numalign.kubelet.node import Node, Reservation, pod_to_manifest

log = logging.getLogger("numalign.agent.pods")

ADMITTED = "admitted"
REJECTED = "rejected"
# An admitted pod's containers: being started (PreStartContainer in flight), all started, or at
# least one failed to start (retried with back-off, as the kubelet retries a container start).
STARTING = "starting"
STARTED = "started"
FAILED = "failed"
PENDING = "pending"
ADMITTING = "admitting"  # decided, resources taken; a device plugin's Allocate is in flight

FaultFn = Callable[[str, str], None]


class PodBook:
    def __init__(
        self,
        node: Node,
        previous: dict[str, Any] | None,
        fault: FaultFn,
        *,
        wait_for_plugins: bool = False,
        start: Callable[[str], None] | None = None,
        node_name: str = "node",
        mirror_names: bool = True,
        allocate: Callable[[Reservation, dict[str, Any]], None] | None = None,
    ) -> None:
        self.node = node
        self.wait_for_plugins = wait_for_plugins
        self.node_name = node_name.lower()
        self.mirror_names = mirror_names
        # Resources whose current plugin has answered ListAndWatch since it registered.
        self._reported: set[str] = set()
        # start(uid): start an admitted pod's containers (PreStartContainer, run options) off the
        # caller's thread, as the kubelet's pod workers do; None starts them here, synchronously.
        self._start = start
        # allocate(reservation, entry): make a reservation's Allocate calls off the caller's lock,
        # then call finish(); None makes them during admission, as the kubelet does.
        self._allocate = allocate
        self._fault = fault
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> status entry
        self.manifests: dict[str, dict[str, Any]] = {}  # file -> {"status", "error", "pods"}
        self.pending: dict[str, Pod] = {}
        self.rejected: dict[str, Pod] = {}
        self.unreleased: set[str] = set()  # removals not written yet (retry_releases)
        old_pods = (previous or {}).get("pods") or {}
        for uid, pod in node.pods.items():
            entry = old_pods.get(uid) if isinstance(old_pods.get(uid), dict) else None
            self.pods[uid] = self._entry(pod, entry.get("file") if entry else None, ADMITTED, None, "", None)
            if entry is not None:
                for key in ("record", "container_errors", "containers"):
                    if entry.get(key):
                        self.pods[uid][key] = entry[key]
        for uid, e in self.pods.items():
            if e["file"] is not None:
                self.manifests.setdefault(e["file"], {"status": "ok", "error": None, "pods": []})["pods"].append(uid)
        if node.pods:
            log.info("restored %d pod(s) from %s", len(node.pods), getattr(node.store, "state_dir", "memory"))

    # -- queries -----------------------------------------------------------------------------------

    def files(self) -> list[str]:
        return sorted(self.manifests)

    def inactive_pods(self) -> list[Pod]:
        """Pods from the manifests that hold no resources: rejected, or pending on a device plugin."""
        return [*self.rejected.values(), *self.pending.values()]

    def to_dict(self) -> dict[str, Any]:
        for uid, entry in self.pods.items():
            if entry["status"] == ADMITTED and uid in self.node.pods:
                containers = list(self.node.pods[uid].all_containers())
                entry["allocations"] = {c.name: self.node.allocation(uid, c.name).to_dict() for c in containers}
                runtime = {}
                for c in containers:
                    opts = self.node.devices.pod_devices.run_container_options(uid, c.name)
                    if opts is not None:
                        runtime[c.name] = _runtime_dict(opts)
                entry["runtime"] = runtime
            elif entry["status"] == ADMITTING and (res := self.node.reserved.get(uid)) is not None:
                # What it holds already (no plugin answer yet, so no runtime).
                entry["allocations"] = {c.name: self.node.allocation(uid, c.name).to_dict()
                                        for c in res.pod.all_containers()}
        return {"pods": self.pods, "manifests": self.manifests}

    # -- files -------------------------------------------------------------------------------------

    def remove_file(self, path: str) -> None:
        info = self.manifests.pop(path, None)
        if info is None:
            return
        log.info("manifest %s removed; releasing %d pod(s)", path, len(info["pods"]))
        for uid in info["pods"]:
            self._release(uid)

    def plugin_registered(self, resource: str) -> None:
        self._reported.discard(resource)

    def devices_reported(self, resource: str) -> None:
        self._reported.add(resource)

    def has_reported(self, resource: str) -> bool:
        return resource in self._reported

    def static_pod(self, pod: Pod) -> Pod:
        """The pod as the kubelet's file source names it (the uid stays numalign's, derived from the
        manifest, so state directories written before keep their pods)."""
        if not self.mirror_names:
            return pod
        return replace(pod, name=f"{pod.name}-{self.node_name}")

    def sync_file(self, path: str) -> None:
        try:
            pods = [self.static_pod(p) for p in load_pods(path)]
        except Exception as e:  # NumalignError for bad input; anything else must not stop the agent either
            err = str(e).removeprefix(f"{path}: ")  # manifest errors already start with the file name
            self._fault("invalid_manifest", f"{path}: {err}")
            info = self.manifests.setdefault(path, {"status": "ok", "error": None, "pods": []})
            info["status"], info["error"] = "invalid", err
            return
        old = self.manifests.get(path, {"pods": []})["pods"]
        new_uids = [p.uid for p in pods]
        for uid in old:
            current = self._held(uid)
            keep = uid in new_uids and current is not None and _same(current, _by_uid(pods, uid))
            if not keep:
                self._release(uid)
        info = {"status": "ok", "error": None, "pods": []}
        self.manifests[path] = info
        errors: list[str] = []
        for pod in pods:
            owner = self._owner(pod.uid)
            if pod.uid in info["pods"] or (owner is not None and owner != path):
                where = "earlier in this file" if owner in (None, path) else f"in {owner}"
                msg = f"pod {pod.key} (uid {pod.uid}) is already defined {where}; give it another name or uid"
                errors.append(msg)
                self._fault("duplicate_pod", f"{path}: {msg}")
                continue
            info["pods"].append(pod.uid)
            current = self._held(pod.uid)
            if current is not None and _same(current, pod):
                self.pods[pod.uid]["file"] = path  # restored and unchanged: keep its allocation
                continue
            if current is not None:
                self._release(pod.uid)  # restored from the state with another spec: admit it afresh
            self._admit(pod, path)
        if errors:
            info["status"], info["error"] = "invalid", "; ".join(errors)

    # -- pods --------------------------------------------------------------------------------------

    def retry_pending(self) -> None:
        for uid, pod in list(self.pending.items()):
            if not self._missing_resources(pod):
                del self.pending[uid]
                self._admit(pod, self.pods[uid]["file"])

    def _held(self, uid: str) -> Pod | None:
        """The pod holding resources under `uid`: admitted, or admitting (its Allocate in flight)."""
        res = self.node.reserved.get(uid)
        return res.pod if res is not None else self.node.pods.get(uid)

    def _owner(self, uid: str) -> str | None:
        entry = self.pods.get(uid)
        return None if entry is None else entry["file"]

    def _missing_resources(self, pod: Pod) -> list[str]:
        """Extended resources of the pod with no plugin connected right now. A resource known only from
        the device checkpoint (after a restart, before its plugin re-registers) or whose plugin went
        away counts as missing: admitting then would fail on devices that are merely not back yet."""
        wanted = {r for c in pod.all_containers() for r, q in c.limits.items()
                  if is_extended_resource_name(r) and q.value() > 0}
        return sorted(r for r in wanted if not self._plugin_connected(r))

    def _plugin_connected(self, resource: str) -> bool:
        info = self.node.devices.endpoints.get(resource)
        return (info is not None and info.endpoint is not None and not info.stopped
                and resource in self._reported)

    def _admit(self, pod: Pod, path: str | None) -> None:
        missing = self._missing_resources(pod) if self.wait_for_plugins else []
        if missing:
            self.pending[pod.uid] = pod
            msg = f"waiting for a device plugin to register {', '.join(missing)}"
            log.info("pod %s pending: %s", pod.key, msg)
            self.pods[pod.uid] = self._entry(pod, path, PENDING, "WaitingForDevicePlugin", msg, None)
            return
        self.rejected.pop(pod.uid, None)
        try:
            rec = self.node.admit(pod) if self._allocate is None else self.node.reserve(pod)
        except NumalignError as e:
            self._fault("admission_error", f"pod {pod.key}: {e}")
            self.pods[pod.uid] = self._entry(pod, path, REJECTED, "AdmissionError", str(e), None)
            self.rejected[pod.uid] = pod
            return
        except Exception as e:  # a plugin or provider bug must not take the agent down
            log.exception("admitting pod %s failed", pod.key)
            self._fault("admission_error", f"pod {pod.key}: {e}")
            self.pods[pod.uid] = self._entry(pod, path, REJECTED, "AdmissionError", str(e), None)
            self.rejected[pod.uid] = pod
            return
        if isinstance(rec, Reservation):
            entry = self._entry(pod, path, ADMITTING, None, "waiting for the device plugins' Allocate", None)
            self.pods[pod.uid] = entry
            assert self._allocate is not None
            self._allocate(rec, entry)
            return
        self._record(pod, path, rec)

    def finish(self, res: Reservation, entry: dict[str, Any], responses: list[Any], error: str | None) -> None:
        """The outcome of a reservation's Allocate calls (see Node.complete), for the admission that
        made `entry`; an admission superseded meanwhile (its pod removed or changed) has nothing to do."""
        pod = res.pod
        if self.pods.get(pod.uid) is not entry:
            return
        rec = self.node.complete(res, responses, error)
        if rec is None:  # the state was read again meanwhile and the reservation went with it
            log.info("pod %s: the state changed during its admission; admitting it again", pod.key)
            self._admit(pod, entry["file"])
            return
        self._record(pod, entry["file"], rec)

    def _record(self, pod: Pod, path: str | None, rec: DecisionRecord) -> None:
        res = rec.result
        if not res.admit:
            self.rejected[pod.uid] = pod
        status = ADMITTED if res.admit else REJECTED
        log.info("pod %s %s%s", pod.key, status, "" if res.admit else f": {res.reason}: {res.message}")
        self.pods[pod.uid] = self._entry(pod, path, status, res.reason, res.message or "", rec.to_dict())
        if res.admit:
            self.pods[pod.uid]["allocations"] = rec.allocations
            if self._start is not None:
                self.pods[pod.uid]["containers"] = STARTING
                self._start(pod.uid)
            else:
                self.record_start(pod.uid, self._start_containers(pod))

    def record_start(self, uid: str, errors: dict[str, str]) -> None:
        """The outcome of starting a pod's containers: errors per container, {} when all started."""
        entry = self.pods.get(uid)
        if entry is None:
            return
        entry["container_errors"] = errors
        entry["containers"] = FAILED if errors else STARTED
        for name, err in sorted(errors.items()):
            self._fault("container_start_error", f"pod {entry['namespace']}/{entry['name']} container {name}: {err}")

    def _start_containers(self, pod: Pod) -> dict[str, str]:
        """What the kubelet does next for each container: PreStartContainer where a plugin requires
        it and the device run options (GetDeviceRunContainerOptions). A failure here fails the
        container's start, not the admission: the pod keeps its resources, the error is recorded."""
        errors: dict[str, str] = {}
        for c in pod.all_containers():
            try:
                self.node.devices.get_device_run_container_options(pod, c)
            except NumalignError as e:
                errors[c.name] = str(e)
        return errors

    def _release(self, uid: str) -> None:
        entry = self.pods.pop(uid, None)
        self.pending.pop(uid, None)
        self.rejected.pop(uid, None)
        self.node.cancel(uid)  # an admission in flight: its resources go now, its outcome is ignored
        if uid in self.node.pods:
            try:
                self.node.remove(uid)
                log.info("released pod %s", "" if entry is None else f"{entry['namespace']}/{entry['name']}")
            except NumalignError as e:
                # Not written: the pod still holds its resources, here and on disk. Never forgotten:
                # retried on every tick until the removal is written.
                self.unreleased.add(uid)
                self._fault("release_error", f"pod uid {uid}: {e}")

    def retry_releases(self) -> bool:
        """Try again the removals that could not be written; True when one went through."""
        done = False
        for uid in sorted(self.unreleased):
            if uid in self.pods:  # admitted again (its manifest came back) meanwhile: nothing to release
                self.unreleased.discard(uid)
                continue
            if uid not in self.node.pods:
                self.unreleased.discard(uid)
                continue
            try:
                self.node.remove(uid)
            except NumalignError:
                continue
            self.unreleased.discard(uid)
            log.info("released pod uid %s (its removal is written now)", uid)
            done = True
        return done

    @staticmethod
    def _entry(pod: Pod, path: str | None, status: str, reason: str | None, message: str,
               record: dict[str, Any] | None) -> dict[str, Any]:
        return {"uid": pod.uid, "namespace": pod.namespace, "name": pod.name, "file": path, "status": status,
                "reason": reason, "message": message, "record": record, "allocations": {}, "runtime": {},
                "container_errors": {}, "containers": None}


def _runtime_dict(opts: RunContainerOptions) -> dict[str, Any]:
    """The device plugins' Allocate answers merged for the container runtime (CRI fields)."""
    return {
        "envs": dict(opts.envs),
        "mounts": [{"container_path": mt.container_path, "host_path": mt.host_path, "read_only": mt.read_only}
                   for mt in opts.mounts],
        "devices": [{"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions}
                    for d in opts.devices],
        "annotations": dict(opts.annotations),
        "cdi_devices": list(opts.cdi_devices),
    }


def _by_uid(pods: list[Pod], uid: str) -> Pod:
    return next(p for p in pods if p.uid == uid)


def _same(a: Pod, b: Pod) -> bool:
    return pod_to_manifest(a) == pod_to_manifest(b)
