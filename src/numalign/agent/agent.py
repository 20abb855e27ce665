"""The node agent: a Node driven by real device plugins, a manifest directory and PodResources clients.

The parts: the pod book (numalign.agent.book) decides what to do with pods, without I/O; the executor
(numalign.agent.executor) carries out its effects on the Node and the worker pools; the plugin
listener (numalign.agent.plugins) turns device-plugin registrations into device-manager updates and
book events; the core (numalign.agent.core) holds the lock, the faults and what is published.

Threads: gRPC servers call in on their own threads, the manifest/capacity loop runs in one daemon
thread, and `stop()` comes from the main thread. Every touch of the Node happens under the core's ONE
lock. Plugin calls made during admission (Allocate, GetPreferredAllocation) carry deadlines, so a hung
plugin holds the lock for at most that long; with `parallel_allocate` (opt-in) Allocate is made off
the lock instead, so a hung plugin delays only the pods that wait on it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from typing import Any

from numalign import metrics as m
from numalign.adapters.grpc.podresources import SERVER_API_VERSION, PodResourcesServer
from numalign.adapters.grpc.podresources import get_enabled as pr_get_enabled  # the KubeletPodResourcesGet gate
from numalign.adapters.grpc.registration import RegistrationServer
from numalign.adapters.grpc.sockets import refuse_live_socket
from numalign.adapters.statedir.directory import StateDirectory
from numalign.adapters.statedir.locks import OwnerLock, acquire_owner, transaction_busy
from numalign.adapters.textfiles import load_pods
from numalign.agent.book import PodBook
from numalign.agent.core import AgentCore, NodeReader
from numalign.agent.events import Event, ManifestInvalid, ManifestLoaded, ManifestRemoved, Resumed, Tick
from numalign.agent.executor import Executor
from numalign.agent.exposition import render_text
from numalign.agent.manifests import ManifestWatcher
from numalign.agent.metrics_http import MetricsServer
from numalign.agent.options import AgentOptions
from numalign.agent.plugins import PluginListener
from numalign.agent.status import read_status
from numalign.errors import NumalignError
from numalign.kubelet.node import Node
from numalign.paths import DEFAULT_STATE_DIR as DEFAULT_STATE_DIR  # re-export

log = logging.getLogger("numalign.agent")

_PR_REQUESTS = {"list": m.PR_REQUESTS_LIST, "get_allocatable": m.PR_REQUESTS_ALLOCATABLE, "get": m.PR_REQUESTS_GET}
_PR_ERRORS = {"list": m.PR_ERRORS_LIST, "get_allocatable": m.PR_ERRORS_ALLOCATABLE, "get": m.PR_ERRORS_GET}


class Agent:
    def __init__(self, options: AgentOptions) -> None:
        self.options = options
        self.core = AgentCore(options)
        self.executor = Executor(self.core)
        self._watcher = ManifestWatcher(options.manifests) if options.manifests is not None else None
        self._loop: threading.Thread | None = None
        self._owner: OwnerLock | None = None
        self.registration = RegistrationServer(
            options.device_plugin_dir,
            listener=PluginListener(self.core, self.executor),
            socket_group=options.socket_group,
            dial_timeout=options.dial_timeout,
            call_timeout=options.call_timeout,
        )
        self.pod_resources = PodResourcesServer(
            self.core.source, options.pod_resources_socket, socket_group=options.socket_group,
            on_call=self._on_pr_call,
            on_alpha_call=lambda: self.metrics.inc(m.PR_REQUESTS, server_api_version="v1alpha1"),
            get_enabled=pr_get_enabled(options.config.feature_gates),
        )
        self.metrics_server = (
            MetricsServer(options.metrics_address, self.render_metrics) if options.metrics_address else None
        )

    # -- what the agent shows -----------------------------------------------------------------------

    @property
    def node(self) -> Node | None:
        return self.core.node

    @property
    def book(self) -> PodBook | None:
        return self.core.book

    @property
    def metrics(self) -> m.Metrics:
        return self.core.metrics

    @property
    def faults(self) -> Counter[str]:
        return self.core.faults

    @property
    def fault_log(self) -> deque[str]:
        return self.core.fault_log

    def now(self) -> float:
        """Seconds since start: the device manager's clock (restored endpoints are stopped at 0)."""
        return self.core.now()

    def allocations_in_flight(self) -> int:
        """Admissions whose plugin Allocate calls are made but not settled yet (parallel_allocate)."""
        return self.executor.allocations_in_flight()

    def scheduled_starts(self) -> int:
        """Pods whose next container start waits for its back-off (one pending retry per pod at most)."""
        return self.executor.scheduled_starts()

    def responsive(self, timeout: float) -> bool:
        """Whether the agent's lock can be taken within `timeout` seconds: no admission, tick or
        callback holds it (PodResources answers and plugin registrations would wait on it)."""
        if not self.core.lock.acquire(timeout=timeout):
            return False
        self.core.lock.release()
        return True

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        opts, core = self.options, self.core
        # Before any state is read or written: the state directory has one owner, and a live kubelet.sock
        # or PodResources socket means another agent (or the kubelet) owns this node's files too.
        opts.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._owner = acquire_owner(opts.state_dir, "numalign serve")
        try:
            refuse_live_socket(self.registration.socket_path, "device-plugin registration")
            refuse_live_socket(opts.pod_resources_socket, "PodResources")
            from numalign.run.leftovers import process_alive_reclaiming  # `numalign run` pods whose process ended
            from numalign.run.records import RunProcesses

            store = StateDirectory(opts.state_dir, kubelet_version=opts.kubelet_version)
            runs = RunProcesses(store, process_alive_reclaiming)
            node = Node(opts.machine, opts.config, store=store, metrics=core.metrics,
                        static_devices=False, ended_pods=runs.ended,
                        kubelet_version=opts.kubelet_version, previews=opts.previews)
        except BaseException:
            self._owner.release()
            raise
        node.devices.endpoint_stop_grace_period = opts.endpoint_grace_period
        previous: dict[str, Any] | None = None
        try:
            previous = read_status(opts.state_dir)
        except NumalignError as e:
            core.fault("status_unreadable", f"previous status file ignored: {e}")
        from numalign.agent.dra import AgentDRA

        with core.lock:
            core.node = node
            core.runs = runs
            core.dra = AgentDRA(opts.machine, node, opts.node_name, core)
            core.book = PodBook(NodeReader(node), node.pods, previous, wait_for_plugins=opts.wait_for_device_plugins,
                                node_name=opts.node_name, mirror_names=opts.mirror_pod_names,
                                reserve=opts.parallel_allocate, start_backoff=opts.start_backoff,
                                start_backoff_max=opts.start_backoff_max)
            if node.pods:
                log.info("restored %d pod(s) from %s", len(node.pods), opts.state_dir)
            core.publish()
        try:
            self.pod_resources.start()
            self.registration.start()
            if self.metrics_server is not None:
                self.metrics_server.start()
            # The first scan runs before start() returns, so pods restored from the state are reconciled
            # with the directory (files removed while we were down release their pods) deterministically.
            self._scan_manifests(initial=True)
            with core.lock:
                self.executor.dispatch(Resumed())
        except BaseException:
            self.stop()  # never leave a half-started agent serving sockets
            raise
        self._loop = threading.Thread(target=self._run, name="numalign-agent-loop", daemon=True)
        self._loop.start()
        log.info("numalign agent started (state %s, plugins %s, pod-resources %s)", opts.state_dir,
                 opts.device_plugin_dir, opts.pod_resources_socket)

    def stop(self) -> None:
        """Stop serving, then save every state file and the status. Idempotent."""
        core = self.core
        core.stopping.set()
        self.executor.shutdown()
        if self._loop is not None:
            self._loop.join(10)
            self._loop = None
        self.registration.stop(grace=0.5)
        self.pod_resources.stop(grace=0.5)
        if self.metrics_server is not None:
            self.metrics_server.stop()
        with core.lock:
            if core.node is not None:
                # Admissions whose Allocate is still out are not recorded: release what they took, so
                # the files saved below hold only admitted pods (the next start admits them afresh).
                for uid in list(core.node.reserved):
                    core.node.cancel(uid)
                try:
                    core.node.save()
                    core.write_status()
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
        while not self.core.stopping.wait(0.5):
            pass

    # -- the loop ----------------------------------------------------------------------------------

    def _run(self) -> None:
        last_capacity = self.now()
        while not self.core.stopping.wait(self.options.poll_interval):
            try:
                self._scan_manifests()
                if self.now() - last_capacity >= self.options.capacity_interval:
                    last_capacity = self.now()
                    self.tick()
            except Exception as e:  # a bug here must not end the loop
                log.exception("agent loop iteration failed")
                self.core.fault("agent_loop_error", str(e))

    def _scan_manifests(self, initial: bool = False) -> None:
        core = self.core
        if self._watcher is None:
            if initial:
                with core.lock:
                    core.write_status()
            return
        changes = self._watcher.scan()
        if not changes and not initial:
            return
        events: list[Event] = []
        if initial:
            # Files the previous run knew that are gone now were removed while we were down.
            with core.lock:
                gone = sorted(set(core.require_book().files()) - set(self._watcher.known()))
            events += [ManifestRemoved(f) for f in gone]
        events += [ManifestRemoved(f) for f in changes.removed]
        dra = core.dra
        for f in changes.removed:
            if dra is not None:
                dra.forget(f)
        for f in changes.changed:
            try:
                # Pods, and the DRA objects beside them (agent/dra.py) when the agent keeps them.
                events.append(ManifestLoaded(f, dra.load(f) if dra is not None else load_pods(f)))
            except Exception as e:  # NumalignError for bad input; anything else must not stop the agent either
                events.append(ManifestInvalid(f, str(e)))
        with core.lock:
            for event in events:
                self.executor.dispatch(event)
            core.after_change()

    def tick(self) -> None:
        """The capacity tick, which is also the state's reconcile tick: reads the directory again if
        another process (`numalign run`) changed it, retries writes and removals that failed, and drops
        plugins gone too long. Skipped while another process holds the directory's transaction (the
        next tick catches up), so the agent's lock is never held waiting on it."""
        if transaction_busy(self.options.state_dir):
            return
        core = self.core
        with core.lock:
            node = core.require_node()
            generation = _generation(node)
            with node.transaction() as tx:
                cap = node.devices.get_capacity(self.now())
                ended = core.require_runs().release_ended(node)  # `numalign run` processes killed without releasing
            core.check(tx, "capacity update")
            retried = self.executor.releases_retried
            self.executor.dispatch(Tick())
            retried = self.executor.releases_retried != retried
            if not cap.deleted and not retried and not ended and generation == _generation(node):
                return
            for resource in cap.deleted:
                log.warning("device plugin resource %s dropped: its plugin stayed away longer than %gs",
                            resource, node.devices.endpoint_stop_grace_period)
                core.endpoints.pop(resource, None)
            core.after_change()

    # -- metrics -----------------------------------------------------------------------------------

    def _on_pr_call(self, method: str, failed: bool) -> None:
        self.metrics.inc(m.PR_REQUESTS, server_api_version=SERVER_API_VERSION)
        self.metrics.inc(_PR_REQUESTS[method], server_api_version=SERVER_API_VERSION)
        if failed:
            self.metrics.inc(_PR_ERRORS[method], server_api_version=SERVER_API_VERSION)

    def render_metrics(self) -> bytes:
        """The kubelet's metrics, then numalign's own fault counters."""
        lines = [
            "# HELP numalign_agent_faults_total Faults the numalign agent survived, by kind.",
            "# TYPE numalign_agent_faults_total counter",
        ]
        with self.core.lock:
            faults = sorted(self.faults.items())
        lines += [f'numalign_agent_faults_total{{kind="{k}"}} {v}' for k, v in faults]
        return render_text(self.metrics) + ("\n".join(lines) + "\n").encode()


def _generation(node: Node) -> int:
    record = getattr(node.store, "record", None)
    return -1 if record is None else int(record.generation)
