"""The node agent: a Node driven by real device plugins, a manifest directory and PodResources clients.

Threads: gRPC servers call back on their own threads, the manifest/capacity loop runs in one daemon
thread, and `stop()` comes from the main thread. Every touch of the Node (and its DeviceManager, which
is not thread-safe) happens under ONE lock, `_lock`, as the kubelet serialises its managers. Plugin
calls made during admission (Allocate, GetPreferredAllocation) carry deadlines, so a hung plugin holds
the lock for at most that long; with `parallel_allocate` (opt-in) Allocate is made off the lock
instead, on the `numalign-allocate` threads, so a hung plugin delays only the pods that wait on it.

Nothing a plugin or a manifest does may take the agent down: every callback and loop iteration
catches, logs and counts its failure (`faults`, shown in the status file and as
numalign_agent_faults_total on /metrics).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from numalign import metrics as m
from numalign.adapters.grpc.podresources import (
    SERVER_API_VERSION,
    PodResourcesServer,
    SnapshotPodResourcesSource,
)
from numalign.adapters.grpc.podresources import get_enabled as pr_get_enabled  # the KubeletPodResourcesGet gate
from numalign.adapters.grpc.registration import RegistrationServer
from numalign.adapters.grpc.sockets import refuse_live_socket
from numalign.adapters.statedir.directory import StateDirectory
from numalign.adapters.statedir.files import write_atomic
from numalign.adapters.statedir.locks import OwnerLock, acquire_owner, transaction_busy
from numalign.agent.endpoints import TimedEndpoint, check_topology
from numalign.agent.exposition import render_text
from numalign.agent.manifests import ManifestWatcher
from numalign.agent.metrics_http import MetricsServer
from numalign.agent.options import AgentOptions
from numalign.agent.pods import ADMITTED, FAILED, STARTING, PodBook
from numalign.agent.snapshot import allocatable_view, inactive_view, pods_view
from numalign.agent.status import machine_document, plugin_documents, read_status, write_status
from numalign.errors import NumalignError
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.devicemanager.endpoint import Device, Endpoint
from numalign.kubelet.devicemanager.prestart import run_pre_start
from numalign.kubelet.node import Node, Reservation
from numalign.kubelet.nodestate import Transaction
from numalign.limits import quote
from numalign.paths import DEFAULT_STATE_DIR as DEFAULT_STATE_DIR  # re-export

log = logging.getLogger("numalign.agent")

FAULT_LOG_SIZE = 50

_PR_REQUESTS = {"list": m.PR_REQUESTS_LIST, "get_allocatable": m.PR_REQUESTS_ALLOCATABLE, "get": m.PR_REQUESTS_GET}
_PR_ERRORS = {"list": m.PR_ERRORS_LIST, "get_allocatable": m.PR_ERRORS_ALLOCATABLE, "get": m.PR_ERRORS_GET}


class Agent:
    def __init__(self, options: AgentOptions) -> None:
        self.options = options
        self.metrics = m.Metrics()
        self.faults: Counter[str] = Counter()
        self.fault_log: deque[str] = deque(maxlen=FAULT_LOG_SIZE)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        # Container starts run here, off the agent's lock: a plugin's PreStartContainer may take up to
        # its deadline, and must not hold up other pods' admission or PodResources.
        self._starter = ThreadPoolExecutor(max_workers=4, thread_name_prefix="numalign-start")
        # One pending back-off timer per pod uid; each start is bound to the status entry it was
        # scheduled for, so a pod replaced or removed meanwhile is never started by a stale timer.
        self._start_timers: dict[str, threading.Timer] = {}
        # parallel_allocate: admissions' Allocate calls, off the agent's lock (one thread per call in
        # flight, up to this many; more wait for a free thread, never for the lock).
        self._allocator = ThreadPoolExecutor(max_workers=8, thread_name_prefix="numalign-allocate")
        self._allocating = 0  # reservations whose calls are not settled yet (allocations_in_flight)
        self._t0 = time.monotonic()
        self._nrt_written = b""
        self._endpoints: dict[str, Endpoint] = {}
        self.source = SnapshotPodResourcesSource()
        self.node: Node | None = None
        self.book: PodBook | None = None
        self._machine_cache: dict[str, Any] | None = None
        self._watcher = ManifestWatcher(options.manifests) if options.manifests is not None else None
        self._loop: threading.Thread | None = None
        self._owner: OwnerLock | None = None
        self.registration = RegistrationServer(
            options.device_plugin_dir,
            on_request=self._on_request,
            on_register=self._on_register,
            on_devices=self._on_devices,
            on_disconnect=self._on_disconnect,
            on_refused=self._on_refused,
            on_malformed=self._on_malformed,
            socket_group=options.socket_group,
            dial_timeout=options.dial_timeout,
            call_timeout=options.call_timeout,
        )
        self.pod_resources = PodResourcesServer(
            self.source, options.pod_resources_socket, socket_group=options.socket_group, on_call=self._on_pr_call,
            on_alpha_call=lambda: self.metrics.inc(m.PR_REQUESTS, server_api_version="v1alpha1"),
            get_enabled=pr_get_enabled(options.config.feature_gates),
        )
        self.metrics_server = (
            MetricsServer(options.metrics_address, self.render_metrics) if options.metrics_address else None
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since start: the device manager's clock (restored endpoints are stopped at 0)."""
        return time.monotonic() - self._t0

    def start(self) -> None:
        opts = self.options
        # Before any state is read or written: the state directory has one owner, and a live kubelet.sock
        # or PodResources socket means another agent (or the kubelet) owns this node's files too.
        opts.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._owner = acquire_owner(opts.state_dir, "numalign serve")
        try:
            refuse_live_socket(self.registration.socket_path, "device-plugin registration")
            refuse_live_socket(opts.pod_resources_socket, "PodResources")
            from numalign.run.leftovers import process_alive_reclaiming  # `numalign run` pods whose process ended

            node = Node(opts.machine, opts.config, store=StateDirectory(opts.state_dir), metrics=self.metrics,
                        static_devices=False, process_alive=process_alive_reclaiming)
        except BaseException:
            self._owner.release()
            raise
        node.devices.endpoint_stop_grace_period = opts.endpoint_grace_period
        previous: dict[str, Any] | None = None
        try:
            previous = read_status(opts.state_dir)
        except NumalignError as e:
            self._fault("status_unreadable", f"previous status file ignored: {e}")
        with self._lock:
            self.node = node
            self.book = PodBook(node, previous, self._fault, wait_for_plugins=opts.wait_for_device_plugins,
                                start=self._schedule_start, node_name=opts.node_name,
                                mirror_names=opts.mirror_pod_names,
                                allocate=self._schedule_allocate if opts.parallel_allocate else None)
            self._publish()
        try:
            self.pod_resources.start()
            self.registration.start()
            if self.metrics_server is not None:
                self.metrics_server.start()
            # The first scan runs before start() returns, so pods restored from the state are reconciled
            # with the directory (files removed while we were down release their pods) deterministically.
            self._scan_manifests(initial=True)
            with self._lock:
                for uid, entry in list(self.book.pods.items()):
                    if entry["status"] == ADMITTED and entry.get("containers") in (FAILED, STARTING):
                        self._schedule_start(uid)  # the previous run had not started them: try again
        except BaseException:
            self.stop()  # never leave a half-started agent serving sockets
            raise
        self._loop = threading.Thread(target=self._run, name="numalign-agent-loop", daemon=True)
        self._loop.start()
        log.info("numalign agent started (state %s, plugins %s, pod-resources %s)", opts.state_dir,
                 opts.device_plugin_dir, opts.pod_resources_socket)

    def stop(self) -> None:
        """Stop serving, then save every state file and the status. Idempotent."""
        self._stop.set()
        with self._lock:
            timers, self._start_timers = list(self._start_timers.values()), {}
        for t in timers:
            t.cancel()
        # Not waiting: a start blocked in a plugin's PreStartContainer ends at its deadline and then
        # sees the stop flag; it records nothing after the state below is saved.
        self._starter.shutdown(wait=False, cancel_futures=True)
        # Not waiting either: an admission whose Allocate is in flight is not recorded, so the state
        # saved below does not hold it, and the next start admits its pod afresh.
        self._allocator.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            self._loop.join(10)
            self._loop = None
        self.registration.stop(grace=0.5)
        self.pod_resources.stop(grace=0.5)
        if self.metrics_server is not None:
            self.metrics_server.stop()
        with self._lock:
            if self.node is not None:
                # Admissions whose Allocate is still out are not recorded: release what they took, so
                # the files saved below hold only admitted pods (the next start admits them afresh).
                for uid in list(self.node.reserved):
                    self.node.cancel(uid)
                try:
                    self.node.save()
                    self._write_status()
                except NumalignError as e:
                    log.error("saving state at shutdown failed: %s", e)
        if self._owner is not None:
            self._owner.release()
            self._owner = None
        log.info("numalign agent stopped")

    def __enter__(self) -> Agent:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self) -> None:
        """Block until stop() is called from another thread (or a signal handler)."""
        while not self._stop.wait(0.5):
            pass

    # -- the loop ----------------------------------------------------------------------------------

    def _run(self) -> None:
        last_capacity = self.now()
        while not self._stop.wait(self.options.poll_interval):
            try:
                self._scan_manifests()
                if self.now() - last_capacity >= self.options.capacity_interval:
                    last_capacity = self.now()
                    self._capacity_tick()
            except Exception as e:  # a bug here must not end the loop
                log.exception("agent loop iteration failed")
                self._fault("agent_loop_error", str(e))

    def _scan_manifests(self, initial: bool = False) -> None:
        if self._watcher is None:
            if initial:
                with self._lock:
                    self._write_status()
            return
        changes = self._watcher.scan()
        if not changes and not initial:
            return
        with self._lock:
            book = self._require_book()
            if initial:
                # Files the previous run knew that are gone now were removed while we were down.
                for f in sorted(set(book.files()) - set(self._watcher.known())):
                    book.remove_file(f)
            for f in changes.removed:
                book.remove_file(f)
            for f in changes.changed:
                book.sync_file(f)
            self._after_change()

    def _capacity_tick(self) -> None:
        """Also the state's reconcile tick: reads the directory again if another process (`numalign
        run`) changed it, retries writes and removals that failed, and drops plugins gone too long.
        Skipped while another process holds the directory's transaction (the next tick catches up), so
        the agent's lock is never held waiting on it."""
        if transaction_busy(self.options.state_dir):
            return
        with self._lock:
            node, book = self._require_node(), self._require_book()
            generation = self._generation(node)
            with node.transaction() as tx:
                cap = node.devices.get_capacity(self.now())
                ended = node.reclaim_ended()  # `numalign run` processes killed without releasing
            self._check(tx, "capacity update")
            retried = book.retry_releases()
            if not cap.deleted and not retried and not ended and generation == self._generation(node):
                return
            for resource in cap.deleted:
                log.warning("device plugin resource %s dropped: its plugin stayed away longer than %gs",
                            resource, node.devices.endpoint_stop_grace_period)
                self._endpoints.pop(resource, None)
            self._after_change()

    @staticmethod
    def _generation(node: Node) -> int:
        record = getattr(node.store, "record", None)
        return -1 if record is None else int(record.generation)

    def _check(self, tx: Transaction, what: str) -> None:
        if tx.failure is not None:
            self._fault("state_write_error", f"{what}: {tx.failure} (retried at the next change or tick)")

    # -- Allocate off the lock (parallel_allocate; worker threads) ----------------------------------

    def allocations_in_flight(self) -> int:
        """Admissions whose plugin Allocate calls are made but not settled yet (parallel_allocate)."""
        with self._lock:
            return self._allocating

    def _schedule_allocate(self, res: Reservation, entry: dict[str, Any]) -> None:
        with self._lock, contextlib.suppress(RuntimeError):  # the pool is shut down while stopping
            self._allocator.submit(self._run_allocate, res, entry)
            self._allocating += 1

    def _run_allocate(self, res: Reservation, entry: dict[str, Any]) -> None:
        """Make a reservation's Allocate calls in the kubelet's order, stopping at the first failure,
        then settle the admission under the lock (PodBook.finish)."""
        def unexpected(e: Exception) -> None:  # a bug in a plugin client must not leave the pod admitting
            log.exception("Allocate for pod %s failed", res.pod.key, exc_info=e)

        responses, error = res.make_calls(self._stop.is_set, unexpected)
        with self._lock:
            self._allocating -= 1
            if self._stop.is_set() or self.book is None:
                return
            try:
                self.book.finish(res, entry, responses, error)
            except Exception as e:
                log.exception("settling the admission of pod %s failed", res.pod.key)
                self._fault("admission_error", f"pod {res.pod.key}: {e}")
            self._after_change()

    # -- starting containers (worker threads) -------------------------------------------------------

    def _schedule_start(self, uid: str, delay: float = 0.0) -> None:
        """Start the containers of the pod whose status entry is current for `uid` now (PodBook calls
        this right after admitting it), at once or after `delay` seconds."""
        with self._lock:
            if self._stop.is_set() or self.book is None:
                return
            entry = self.book.pods.get(uid)
            if entry is None:
                return
            old = self._start_timers.pop(uid, None)
            if old is not None:
                old.cancel()  # a fresh admission or a new attempt supersedes a pending retry
            if delay <= 0:
                with contextlib.suppress(RuntimeError):  # the pool is shut down while stopping
                    self._starter.submit(self._start_pod, uid, entry)
                return

            def fire() -> None:
                with self._lock:
                    if self._start_timers.get(uid) is timer:
                        del self._start_timers[uid]
                    if self._stop.is_set() or self.book is None or self.book.pods.get(uid) is not entry:
                        return  # stopped, or the pod was removed or replaced meanwhile
                    with contextlib.suppress(RuntimeError):
                        self._starter.submit(self._start_pod, uid, entry)

            timer = threading.Timer(delay, fire)
            timer.daemon = True
            self._start_timers[uid] = timer
            timer.start()

    def _start_pod(self, uid: str, entry: dict[str, Any]) -> None:
        """Start an admitted pod's containers as the kubelet's pod worker does: PreStartContainer for
        devices whose plugin requires it (the RPC made without the agent's lock, as upstream makes it
        without the device manager's), then the run options. A failure is recorded per container and
        retried with back-off while the pod stays admitted; `entry` ties the attempt to one admission."""
        try:
            with self._lock:
                node, book = self._require_node(), self._require_book()
                pod = node.pods.get(uid)
                if self._stop.is_set() or pod is None or book.pods.get(uid) is not entry:
                    return
                if entry["status"] != ADMITTED:
                    return
                errors: dict[str, str] = {}
                calls: dict[str, list[tuple[Endpoint, list[str]]]] = {}
                for c in pod.all_containers():
                    try:
                        calls[c.name] = node.devices.pre_start_calls(pod, c)
                    except NumalignError as e:
                        errors[c.name] = str(e)
            for name, container_calls in calls.items():
                for endpoint, ids in container_calls:
                    if self._stop.is_set():
                        return
                    try:
                        run_pre_start(endpoint, ids)
                    except NumalignError as e:
                        errors[name] = str(e)
                        break
            with self._lock:
                if self._stop.is_set() or node.pods.get(uid) is not pod or book.pods.get(uid) is not entry:
                    return  # stopping, or the pod was removed or replaced meanwhile
                with node.transaction() as tx:  # a container's devices may be allocated again here
                    for c in pod.all_containers():
                        if c.name in errors:
                            continue
                        try:
                            node.devices.get_device_run_container_options(pod, c, pre_start=False)
                        except NumalignError as e:
                            errors[c.name] = str(e)
                self._check(tx, f"starting pod uid {uid}")
                book.record_start(uid, errors)
                if errors:
                    self._retry_start(uid, entry)
                else:
                    entry.pop("start_attempts", None)
                self._after_change()
        except Exception as e:  # a bug or a failed save must not leave the pod unstarted for good
            log.exception("starting the containers of pod %s failed", uid)
            self._fault("container_start_error", f"pod uid {uid}: {e}")
            with self._lock:
                if self.book is not None and self.book.pods.get(uid) is entry:
                    self._retry_start(uid, entry)

    def _retry_start(self, uid: str, entry: dict[str, Any]) -> None:
        """Schedule the next attempt with the kubelet's back-off, counted on this admission's entry."""
        attempt = int(entry.get("start_attempts", 0))
        entry["start_attempts"] = attempt + 1
        delay = min(self.options.start_backoff * (2 ** attempt), self.options.start_backoff_max)
        log.info("pod %s: starting its containers failed; retrying in %gs", uid, delay)
        self._schedule_start(uid, delay)

    # -- device-plugin callbacks (gRPC threads) ----------------------------------------------------

    def _on_request(self, resource: str) -> None:
        self.metrics.inc(m.DP_REGISTRATION, resource_name=resource)

    def _on_register(self, resource: str, endpoint: Endpoint) -> None:
        if self._stop.is_set():
            return  # shutting down: the final save has been or is being made
        with self._lock:
            wrapped = TimedEndpoint(resource, endpoint, self.metrics)
            self._endpoints[resource] = wrapped
            self._require_node().devices.register_endpoint(resource, wrapped)
            self._require_book().plugin_registered(resource)
            log.info("device plugin %s registered", resource)
            self._write_status()

    def _on_devices(self, resource: str, devices: list[Device]) -> None:
        if self._stop.is_set():
            return  # shutting down: the final save has been or is being made
        node = self._require_node()
        numa_ids = set(node.machine.numa_ids())

        def report(dev: Device, bad: list[int]) -> None:
            self._fault("device_on_missing_numa_node",
                        f"device plugin {resource}: device {dev.id} reports NUMA node(s) {bad}, which this machine "
                        f"lacks (it has {sorted(numa_ids)}); the device is marked unhealthy")

        checked = check_topology(devices, numa_ids, report)
        with self._lock:
            if self._stop.is_set():
                return
            with node.transaction() as tx:
                node.devices.update_devices(resource, checked)
            self._check(tx, f"device plugin {resource} update")
            self._require_book().devices_reported(resource)
            self._require_book().retry_pending()
            self._after_change()

    def _on_disconnect(self, resource: str) -> None:
        if self._stop.is_set():
            return  # shutting down: the final save has been or is being made
        with self._lock:
            node = self._require_node()
            with node.transaction() as tx:
                node.devices.plugin_disconnected(resource, self.now(), self._endpoints.get(resource))
            self._fault("plugin_disconnected",
                        f"device plugin {resource} disconnected; its devices are unhealthy until it re-registers "
                        f"(dropped after {self.options.endpoint_grace_period:g}s)")
            self._check(tx, f"device plugin {resource} disconnection")
            self._after_change()

    def _on_refused(self, resource: str, message: str) -> None:
        self._fault("registration_refused", f"registration of {quote(resource)} refused: {message}")
        with self._lock:
            self._write_status()

    def _on_malformed(self, resource: str, message: str) -> None:
        self._fault("malformed_device_update", f"device plugin {resource}: malformed ListAndWatch update: {message}")
        with self._lock:
            self._write_status()

    def _on_pr_call(self, method: str, failed: bool) -> None:
        self.metrics.inc(m.PR_REQUESTS, server_api_version=SERVER_API_VERSION)
        self.metrics.inc(_PR_REQUESTS[method], server_api_version=SERVER_API_VERSION)
        if failed:
            self.metrics.inc(_PR_ERRORS[method], server_api_version=SERVER_API_VERSION)

    # -- shared helpers ----------------------------------------------------------------------------

    def _fault(self, kind: str, message: str) -> None:
        log.error("%s: %s", kind, message)
        with self._lock:
            self.faults[kind] += 1
            self.fault_log.append(f"{kind}: {message}")

    def _require_node(self) -> Node:
        if self.node is None:
            raise RuntimeError("the agent is not started")
        return self.node

    def _require_book(self) -> PodBook:
        if self.book is None:
            raise RuntimeError("the agent is not started")
        return self.book

    def _after_change(self) -> None:
        self._publish()
        self._write_status()

    def _publish(self) -> None:
        node = self._require_node()
        self.source.publish(pods=pods_view(node), allocatable=allocatable_view(node),
                            inactive=inactive_view(self._require_book().inactive_pods()))
        self._update_cpu_gauges(node)
        if self.options.nrt_file is not None:
            self._write_nrt(node, self.options.nrt_file)

    def _write_nrt(self, node: Node, path: Path) -> None:
        from numalign.cluster.nrt_export import node_resource_topology

        data = (json.dumps(node_resource_topology(node, self.options.node_name).to_dict(), indent=2) + "\n").encode()
        if data == self._nrt_written:
            return
        try:
            write_atomic(path, data, mode=0o644)
            self._nrt_written = data
        except NumalignError as e:
            log.error("cannot write the NodeResourceTopology file: %s", e)

    def _update_cpu_gauges(self, node: Node) -> None:
        # The static policy's gauges are pure functions of its state, so we set them from the state
        # after every change rather than tracking the kubelet's incremental Add()s.
        if not isinstance(node.cpu, StaticPolicy):
            return
        available = len(node.cpu.get_available_cpus())
        self.metrics.set(m.CPU_SHARED_POOL, available * 1000.0)
        self.metrics.set(m.CPU_EXCLUSIVE, float(len(node.cpu.get_allocatable_cpus()) - available))
        for numa, count in node.cpu.allocated_per_numa().items():
            self.metrics.set(m.CPU_PER_NUMA, float(count), numa_node=str(numa))

    def _write_status(self) -> None:
        node, book = self._require_node(), self._require_book()
        if self._machine_cache is None:  # the machine never changes: rendered once
            self._machine_cache = machine_document(node)
        doc = {**book.to_dict(), **plugin_documents(node, book, self._endpoints),
               "faults": dict(sorted(self.faults.items())), "fault_log": list(self.fault_log),
               **self._machine_cache}
        try:
            write_status(self.options.state_dir, doc)
        except NumalignError as e:
            log.error("cannot write the status file: %s", e)

    def render_metrics(self) -> bytes:
        """The kubelet's metrics, then numalign's own fault counters."""
        lines = [
            "# HELP numalign_agent_faults_total Faults the numalign agent survived, by kind.",
            "# TYPE numalign_agent_faults_total counter",
        ]
        with self._lock:
            faults = sorted(self.faults.items())
        lines += [f'numalign_agent_faults_total{{kind="{k}"}} {v}' for k, v in faults]
        return render_text(self.metrics) + ("\n".join(lines) + "\n").encode()
