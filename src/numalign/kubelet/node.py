"""A node: the machine, the kubelet configuration, the Topology Manager and its three providers, and
the kubelet's state files. This is what `numalign admit` and `numalign serve` drive.

Providers are registered in the order CPU, memory, devices; the order changes only the decision
record's layout, never the decision (the merge is a total order).

Rejected pods: the kubelet leaves the partial allocations of a rejected pod in place until its next
removeStaleState pass drops them (the pod is not active); we release them at once, which is the state
the kubelet reaches before it admits anything else.

The Node does no I/O: a NodeStore (numalign.adapters.statedir.directory.StateDirectory) keeps its state, a
NodeState value (numalign.kubelet.state), in a directory; numalign.kubelet.nodestate says in which order,
and how a directory is reconciled on open. A Node built from another's NodeState is that node after a
kubelet restart, with whatever configuration it is given.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from numalign import metrics as m
from numalign.core.decision import (
    AdmitResult,
    ContainerAllocation,
    ContainerDecision,
    DecisionRecord,
    MemoryBlock,
)
from numalign.core.numa import NUMAInfo
from numalign.errors import CheckpointError, InvalidInputError
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod
from numalign.k8s.previews import NO_PREVIEWS, NUMA_ALLOCATION_STRATEGY, RESTRICT_TO_CPU_NUMA_NODES, Previews
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY
from numalign.kubelet.admission.eviction import NodeCondition
from numalign.kubelet.admission.handlers import AdmitHandlers
from numalign.kubelet.cpumanager.manager import new_cpu_manager_policy
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.devicemanager.endpoint import Device
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.devicemanager.state import DeviceManagerState
from numalign.kubelet.memorymanager.manager import new_memory_manager
from numalign.kubelet.memorymanager.reserved import MemoryReservation
from numalign.kubelet.nodestate import NodeStore, Transaction, reconcile, recorded_allocation
from numalign.kubelet.plan import Plan
from numalign.kubelet.previews.cpu_numa_nodes import effective_machine
from numalign.kubelet.previews.numa_allocation import node_scorer, scored_policy
from numalign.kubelet.state import AdmittedPod, NodeState
from numalign.kubelet.topologymanager.manager import TopologyManager
from numalign.kubelet.topologymanager.provider import DEFAULT_IMPLICIT_FROM_NODES
from numalign.kubelet.versions import DEFAULT as DEFAULT_KUBELET_VERSION
from numalign.kubelet.versions import (
    KubeletVersion,
    behaviours,
    check_feature_gates,
    check_option_gates,
    effective_gates,
    refuse_unmodelled,
)
from numalign.machine.topology import Machine

log = logging.getLogger("numalign.kubelet.node")

# The providers' pinning counters as Node._sync_provider_metrics publishes them.
_PINNING_METRICS = (m.CPU_PINNING_REQUESTS, m.CPU_PINNING_ERRORS, m.MEM_PINNING_REQUESTS, m.MEM_PINNING_ERRORS)
# The managers' counters an admission moves (a probe puts them back).
_COUNTERS = ("pinning_requests_total", "pinning_errors_total", "aligned_physical_cpu_total",
             "aligned_physical_cpu_failures_total", "aligned_uncore_cache_total")


def numa_info_for(machine: Machine) -> NUMAInfo:
    """The kubelet's NUMAInfo: node ids in cadvisor order, each node's distance row as the kubelet
    keeps it (cadvisor's raw row, indexed by node id: Machine.kubelet_distances)."""
    order = machine.cadvisor_numa_order()
    rows = machine.kubelet_distances()
    return NUMAInfo.create(order) if rows is None else NUMAInfo.create(order, rows)


class Node:
    def __init__(
        self,
        machine: Machine,
        config: KubeletConfig,
        *,
        store: NodeStore | None = None,
        metrics: m.Metrics | None = None,
        static_devices: bool = True,
        node_conditions: Sequence[NodeCondition] = (),
        implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
        process_alive: Callable[[Mapping[str, Any]], bool] | None = None,
        kubelet_version: KubeletVersion = DEFAULT_KUBELET_VERSION,
        adapt_memory_to_host: bool = False,
        previews: Previews = NO_PREVIEWS,
        state: NodeState | None = None,
    ) -> None:
        # implicit_from_nodes: the NUMA-node count from which providers describe hints implicitly
        # (providers/implicit). state: start from this state, as a kubelet restarted with `config` would
        # (a node with a store reads its own instead).
        # The kubelet validates its configuration before it builds any manager; a library caller gets
        # the same refusal (and the CLI, which validated already, no second pass).
        config.validate()
        # Previews of open proposals (kubelet/previews), off unless asked for: a node built with one
        # decides as that proposal says, never as a released kubelet.
        self.previews = previews
        if previews.on(RESTRICT_TO_CPU_NUMA_NODES):
            machine = effective_machine(machine)
        self.machine = machine
        self.config = config
        # The kubelet release decided as: its gate defaults under the config's gates, and its behaviours.
        self.kubelet_version = kubelet_version
        self.behaviours = behaviours(kubelet_version)
        check_feature_gates(config.feature_gates, kubelet_version, "featureGates (--feature-gates)")
        self.gates = effective_gates(config.feature_gates, kubelet_version)
        check_option_gates(config.topology_manager_policy_options, self.gates)
        self.implicit_from_nodes = implicit_from_nodes
        self.metrics = metrics or m.Metrics()
        self.numa = numa_info_for(machine)
        self.tm = TopologyManager(
            self.numa,
            config.topology_manager_policy,
            config.topology_manager_scope,
            config.topology_manager_policy_options,
            self.gates,
            self.metrics,
            option_maturity=self.behaviours.topology_option_maturity,
        )
        # GetNodeAllocatableReservation against the node's capacity (cadvisor: NumCores online CPUs,
        # MemoryCapacity = the NUMA nodes' memory), so percentage eviction thresholds resolve.
        capacity = {
            RESOURCE_CPU: Quantity.from_int(len(machine.online_cpus())),
            RESOURCE_MEMORY: Quantity.from_int(
                sum(machine.memory_by_node().values()), QuantityFormat.BINARY_SI
            ),
        }
        reservation = config.node_allocatable_reservation(capacity)
        self.cpu = new_cpu_manager_policy(
            config.cpu_manager_policy,
            CPUTopology.from_machine(machine),
            reserved_cpu=reservation.get("cpu"),
            reserved_system_cpus=config.reserved_cpus(),
            policy_options=config.cpu_manager_policy_options,
            feature_gates=self.gates,
            topology_manager_policy=config.topology_manager_policy,
            affinity=self.tm,
            shared_cpus=machine.online_cpus(),
            implicit_from_nodes=implicit_from_nodes,
            option_maturity=self.behaviours.cpu_option_maturity,
        )
        self.memory = new_memory_manager(
            config.memory_manager_policy,
            machine,
            reservation,
            [MemoryReservation(r.numa_node, dict(r.limits)) for r in config.reserved_memory],
            affinity=self.tm,
            implicit_from_nodes=implicit_from_nodes,
            # `numalign run` only: a memory_manager_state made before this host's memory changed is
            # rebuilt around what it holds (memory.host_changes says what), where the kubelet refuses it.
            adapt_to_host=adapt_memory_to_host,
        )
        self.devices = DeviceManager(machine.numa_ids(), self.tm, implicit_from_nodes=implicit_from_nodes,
                                     behaviours=self.behaviours)
        self.static_devices = static_devices
        if static_devices:
            self._register_static_plugins()
        # The kubelet's container manager registers the device manager, then the CPU manager, then the
        # memory manager (container_manager_linux.go); hints are listed and Allocate is called in
        # that order, so a device failure stops admission before any CPU or memory is pinned.
        for provider in (self.devices, self.cpu, self.memory):
            self.tm.add_hint_provider(provider)
        if previews.on(NUMA_ALLOCATION_STRATEGY):
            self.tm.scope.policy = scored_policy(self.tm.scope.policy, self.numa, previews,
                                                 node_scorer(self.cpu, self.memory, self.devices),
                                                 self.tm.opts.prefer_closest_numa)
        self.pods: dict[str, Pod] = {}
        self.records: dict[str, DecisionRecord] = {}
        # The kubelet's other admit handlers, run before and after the Topology Manager's.
        self.handlers = AdmitHandlers(self, node_conditions)
        # Per pod, what numalign's pod record keeps beside the manifest: the allocation the kubelet
        # files must hold (None when not recorded) and `numalign run`'s process, carried untouched.
        self.allocations: dict[str, Mapping[str, Any] | None] = {}
        self.processes: dict[str, Mapping[str, Any]] = {}
        # `numalign run` pods whose process ended (kill -9) are released on every load: `process_alive`
        # (I/O, given by the composition) tells; `reclaimed` lists them with their process records.
        self.process_alive = process_alive
        self.reclaimed: list[tuple[Pod, Mapping[str, Any]]] = []
        # Admitted pods whose plugin Allocate calls are in flight (decide .. commit); not recorded.
        self.reserved: dict[str, Plan] = {}
        self.reloads = 0  # how often the state was read again: a reload drops every reservation
        self.store = store
        self._tx: Transaction | None = None
        self._cpuset_texts: dict[frozenset[int], tuple[tuple[int, ...], str]] = {}  # see allocation()
        # The providers' pinning counters at the last _sync_provider_metrics (metrics only grow).
        self._synced_counts: tuple[int, ...] = ()  # in _PINNING_METRICS order
        self.cpu.start()
        self.memory.start()
        if store is not None:
            with store.lock():
                self._reload()
                if not store.read_only:
                    store.commit(self.state())  # the repairs, and fresh files where none were (as the kubelet starts)
        elif state is not None:
            self._adopt(state)

    def _register_static_plugins(self) -> None:
        for resource, devs in sorted(self.machine.devices_by_resource().items()):
            self.devices.add_static_plugin(resource, [Device(d.id, d.health, d.numa_nodes) for d in devs])

    # ---- state -----------------------------------------------------------------------------------
    @property
    def _where(self) -> str:
        return "" if self.store is None else self.store.name

    def state(self) -> NodeState:
        """This node's state as a value: what its store commits, and what a restart starts from."""
        pods = tuple(AdmittedPod(p, self.allocations.get(uid), self.processes.get(uid)) for uid, p in self.pods.items())
        return NodeState(pods, self.cpu.snapshot(), self.memory.snapshot(), self.devices.snapshot())

    def restarted(self, config: KubeletConfig | None = None, *,
                  node_conditions: Sequence[NodeCondition] | None = None) -> Node:
        """This node after a kubelet restart with `config` (default: its own) and, optionally, other node
        conditions: a new Node from this one's state, in memory (no store, fresh metrics). The kubelet keeps
        its checkpoints across a restart, so every pod keeps what it holds. ConfigError when the kubelet
        would refuse to start with `config`."""
        return Node(self.machine, self.config if config is None else config, static_devices=self.static_devices,
                    node_conditions=self.handlers.conditions if node_conditions is None else node_conditions,
                    implicit_from_nodes=self.implicit_from_nodes, kubelet_version=self.kubelet_version,
                    previews=self.previews, state=self.state())

    def restore(self, state: NodeState, *, reload: bool = False) -> None:
        """Adopt a state (read from disk, or another node's): the managers' states (None: no checkpoint),
        then the pods with their recorded allocation and process. `reload`: this Node ran before, so the
        device plugins that registered with it stay (a first load restores them stopped, as the kubelet's
        restart does)."""
        for pod in self.pods.values():
            self.tm.scope.forget_pod(pod.uid)
        if state.cpu is None:
            self.cpu.start()
        else:
            self.cpu.restore(state.cpu)
        if state.memory is None:
            self.memory.start()
        else:
            self.memory.restore(state.memory)
        devices = state.devices
        if devices is not None and self.static_devices:
            # The machine describes the devices: pods must hold devices it has, or they count as free.
            from numalign.kubelet.devicemanager.identity import check_device_identity

            source = "the device checkpoint" if self.store is None else self.store.device_checkpoint
            check_device_identity(devices.pod_device_entries, self.machine, source, devices.registered_devices)
        self.devices.restore(devices or DeviceManagerState(), now=0.0, keep_endpoints=reload)
        if devices is not None and self.static_devices and not reload:
            # In-process plugins register again at once, as real plugins re-register with a restarted kubelet.
            self._register_static_plugins()
        self.pods = {a.pod.uid: a.pod for a in state.pods}
        self.allocations = {a.pod.uid: a.allocation for a in state.pods}
        self.processes = {a.pod.uid: a.process for a in state.pods if a.process is not None}
        self.records = {uid: r for uid, r in self.records.items() if uid in self.pods}

    def _reload(self) -> None:
        """Read the store into this Node and reconcile the kubelet files with the pod record."""
        assert self.store is not None
        self.reloads += 1
        self.reserved.clear()
        state = self.store.load(cpu_policy=self.cpu.policy_name, memory_policy=self.memory.policy_name)
        self._adopt(state, reload=self.reloads > 1)

    def _adopt(self, state: NodeState, *, reload: bool = False) -> None:
        self.restore(state, reload=reload)
        if self.store is not None:
            self.store.adopted(self.state())
        if not state.recorded:
            # No pod record: the kubelet's own directory (or a copy). Its checkpoints are the truth, and
            # the pods in them, which numalign never admitted, keep what they hold: releasing it as
            # orphans would count CPUs and devices in use as free.
            return
        for line in reconcile(self.pods, self.allocations, self.cpu, self.memory, self.devices,
                              self.tm.remove_pod, self._readmit):
            log.warning("state %s: %s", self._where, line)
        for uid in set(self.processes) - set(self.pods):
            del self.processes[uid]
        self.reclaimed = []
        self._reclaim()

    def _reclaim(self) -> bool:
        found = False
        for uid, proc in list(self.processes.items()):
            if self.process_alive is not None and not self.process_alive(proc):
                pod = self._forget(uid)
                log.info("state %s: released %s: its numalign run process %s ended without releasing it",
                         self._where, pod.key, proc.get("pid"))
                self.reclaimed.append((pod, proc))
                found = True
        return found

    def reclaim_ended(self) -> bool:
        """Release, in a transaction, the pods of `numalign run` processes that ended since the last
        load (a long-lived agent asks on its tick); True when there were any."""
        if self.process_alive is None or all(self.process_alive(p) for p in self.processes.values()):
            return False
        with self.transaction():
            return self._reclaim()

    def _forget(self, pod_uid: str) -> Pod:
        """Drop a pod and everything it holds, in memory (the caller's transaction writes it)."""
        pod = self.pods.pop(pod_uid)
        self.tm.remove_pod(pod)
        self.devices.remove_pod(pod.uid)
        self.records.pop(pod_uid, None)
        self.allocations.pop(pod_uid, None)
        self.processes.pop(pod_uid, None)
        return pod

    def _readmit(self, pod: Pod) -> DecisionRecord:
        self.devices.remove_pod(pod.uid)
        rec = self.tm.admit(pod)
        if rec.result.admit:
            self._started(pod)
        else:
            self.tm.remove_pod(pod)
        return rec

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Changes made inside are written at the end, all or none (see numalign.kubelet.nodestate). Nested
        transactions join the outer one. A failed write leaves `failure` set and this Node as the disk
        is; an exception inside discards the changes (the disk is read again)."""
        if self._tx is not None:
            yield self._tx
            return
        store = self.store
        tx = self._tx = Transaction()
        try:
            if store is None:  # nothing to lock, read again or write
                yield tx
                return
            with store.lock():
                if store.changed():
                    log.info("state %s: changed by another process; reading it again", store.name)
                    self._reload()
                try:
                    yield tx
                except BaseException:
                    self._reload()
                    raise
                if not store.read_only:
                    try:
                        store.commit(self.state())
                    except CheckpointError as e:
                        log.error("%s", e)
                        tx.failure = e
                        self._reload()
        finally:
            self._tx = None

    def save(self) -> None:
        """Write whatever differs from disk (retries a write that failed before). CheckpointError if not."""
        with self.transaction() as tx:
            pass
        if tx.failure is not None:
            raise tx.failure

    # ---- pods --------------------------------------------------------------------------------------
    # One path for every admission: decide takes the pod's resources and says which Allocate calls are
    # left; commit records the outcome. admit makes the calls at once, inside one transaction; the
    # agent and `numalign run` make them with the lock released (decide, Plan.make_calls, commit).

    def admit(self, pod: Pod) -> DecisionRecord:
        with self.transaction() as tx:
            plan = self._decide(pod, defer_calls=False)
        return tx.outcome([plan.record], self.pods)[0]

    def decide(self, pod: Pod) -> Plan:
        """Decide as `admit` does, leaving the device plugins' Allocate calls to the caller (Plan.make_calls,
        then commit), so they need not hold up other admissions. A plan with no call left is settled: an
        admitted pod is recorded already (and commit hands its record back)."""
        with self.transaction() as tx:
            plan = self._decide(pod, defer_calls=True)
        if tx.failure is not None:  # the write failed: the state is the disk's again, nothing is held
            self.reserved.pop(pod.uid, None)
            return replace(plan, record=tx.outcome([plan.record], self.pods)[0], calls=())
        return plan

    def commit(self, plan: Plan, responses: Sequence[Any] = (), error: str | None = None) -> DecisionRecord | None:
        """Settle a plan with its calls' outcome: one response per call made, and the first call's error
        (the calls stop there, as the kubelet's Allocate does). None when the plan is gone meanwhile
        (cancelled, or dropped by a reload of the state: decide again)."""
        pod, rec = plan.pod, plan.record
        if plan.settled:
            return rec
        if not rec.result.admit:
            # The kubelet made these calls before it rejected the pod: a failing one is the answer.
            return rec if error is None else replace(rec, result=AdmitResult.from_allocation_error(None, error))
        with self.transaction() as tx:
            # Checked under the lock: a process that wrote the directory since (the transaction read it
            # again) has dropped the plan, and may have given its resources to another pod.
            if self.reserved.get(pod.uid) is not plan or self.reloads != plan.reloads:
                return None
            del self.reserved[pod.uid]
            if error is not None:
                self._release(pod)
                return self._record(pod, rec.decisions, AdmitResult.from_allocation_error(None, error), {})
            for call, resp in zip(plan.calls, responses, strict=True):
                self.devices.answered(call, resp)
            self._keep(pod, rec)
        return tx.outcome([rec], self.pods)[0]

    def probe(self, pod: Pod) -> DecisionRecord:
        """Would this node admit the pod now? Decided as `admit` decides it, then released: no pod, record,
        metric or state write is left, and no device plugin is called."""
        tm_metrics, counters = self.tm.metrics, self._counters()
        self.tm.metrics = self.tm.scope.metrics = m.Metrics()
        self.devices.deferred = []
        try:
            decisions, result = self._verdict(pod)
            allocations: dict[str, ContainerAllocation] = {}
            if result.admit:
                self._started(pod)
                allocations = self._allocations(pod)
            self._release(pod)
        finally:
            self.devices.deferred = None
            self.tm.metrics = self.tm.scope.metrics = tm_metrics
            self._set_counters(counters)
        return DecisionRecord(pod.key, pod.uid, self.tm.policy_name, self.tm.scope_name, dict(self.tm.options),
                              decisions, result, allocations)

    def _decide(self, pod: Pod, *, defer_calls: bool) -> Plan:
        """The admission, in the caller's transaction: the verdict, the pod's resources taken, the record
        built once. Without calls left the pod is recorded at once; with some it is reserved."""
        self.devices.deferred = [] if defer_calls else None
        try:
            decisions, result = self._verdict(pod)
        finally:
            calls, self.devices.deferred = tuple(self.devices.deferred or ()), None
        self._sync_provider_metrics()
        if not result.admit:
            return Plan(pod, self._record(pod, decisions, result, {}), calls, self.reloads)
        self._started(pod)
        rec = self._record(pod, decisions, result, self._allocations(pod))
        plan = Plan(pod, rec, calls, self.reloads)
        if calls:
            # Taken but not recorded: a crash now leaves the pod unadmitted and its files reconciled.
            self.reserved[pod.uid] = plan
        else:
            self._keep(pod, rec)
        return plan

    def _verdict(self, pod: Pod) -> tuple[tuple[ContainerDecision, ...], AdmitResult]:
        """The kubelet's admit handlers in order, up to the first rejection; an admitted pod holds what the
        managers gave it, a rejected one nothing."""
        if pod.uid in self.pods or pod.uid in self.reserved:
            raise InvalidInputError(
                f"pod {pod.key} (uid {pod.uid}) is already admitted on this node; give the new pod another "
                "name or metadata.uid (Node.remove(uid) releases the old one; with `numalign admit "
                "--state-dir`, start from a fresh directory or use --dry-run to ask without keeping pods)"
            )
        if pod.has_pod_level_resources and not self.gates.get("PodLevelResources", False):
            # The kubelet's isPodLevelResourcesSupported admit handler; numalign checks it first (the
            # kubelet may run the Topology Manager's handler before it, with the same final verdict).
            return (), AdmitResult(False, "PodLevelResourcesNotSupported", "PodLevelResources feature gate is disabled")
        refuse_unmodelled(pod, self.gates, self.kubelet_version)  # KEP-5526: say so rather than guess
        early = self.handlers.before_topology(self, pod)
        if not early.admit:
            return (), early
        outcome = self.tm.decide(pod)
        result = outcome.result
        if result.admit:
            result = self.handlers.after_topology(self, pod)
        if not result.admit:
            self.tm.remove_pod(pod)
        return tuple(outcome.decisions), result

    def _record(self, pod: Pod, decisions: tuple[ContainerDecision, ...], result: AdmitResult,
                allocations: Mapping[str, ContainerAllocation]) -> DecisionRecord:
        """The admission's decision record; the one place a rejection is counted."""
        if not result.admit:
            self.metrics.inc(m.ADMISSION_REJECTIONS, reason=m.rejection_label(result.reason))
        return DecisionRecord(pod.key, pod.uid, self.tm.policy_name, self.tm.scope_name, dict(self.tm.options),
                              decisions, result, allocations)

    def _keep(self, pod: Pod, rec: DecisionRecord) -> None:
        """Record an admitted pod (the pod record's commit point is the caller's transaction)."""
        self.pods[pod.uid] = pod
        if self.store is not None:
            self.allocations[pod.uid] = recorded_allocation(pod, self.cpu, self.memory, self.devices)
        self.records[pod.uid] = rec

    def _release(self, pod: Pod) -> None:
        """Give back everything a pod not (or no longer) recorded holds."""
        self.tm.remove_pod(pod)
        self.devices.remove_pod(pod.uid)

    def _allocations(self, pod: Pod) -> dict[str, ContainerAllocation]:
        return {c.name: self.allocation(pod.uid, c.name) for c in pod.all_containers()}

    @property
    def reserved_pods(self) -> list[Pod]:
        return [plan.pod for plan in self.reserved.values()]

    def cancel(self, pod_uid: str) -> None:
        """Release a plan whose pod went away; its calls' outcome is then ignored (commit)."""
        plan = self.reserved.pop(pod_uid, None)
        if plan is not None:
            with self.transaction():
                self._release(plan.pod)

    def _started(self, pod: Pod) -> None:
        for c in pod.all_containers():
            self.tm.add_container(pod, c, f"{pod.uid}/{c.name}")
        # Containers start in order; starting one releases earlier regular init containers' memory
        # (upstream memory manager AddContainer).
        for c in pod.all_containers():
            self.memory.add_container(pod, c)

    def _counters(self) -> list[tuple[object, str, int]]:
        """The managers' counters, plain attributes of pure code (see _sync_provider_metrics)."""
        return [(p, name, int(getattr(p, name))) for p in (self.cpu, self.memory) for name in _COUNTERS
                if hasattr(p, name)]

    @staticmethod
    def _set_counters(saved: list[tuple[object, str, int]]) -> None:
        for provider, name, value in saved:
            setattr(provider, name, value)

    def _sync_provider_metrics(self) -> None:
        """Providers count pinning requests/errors as plain attributes (pure code); publish the deltas."""
        cpu, memory = self.cpu, self.memory
        counts = (int(getattr(cpu, "pinning_requests_total", 0)), int(getattr(cpu, "pinning_errors_total", 0)),
                  int(getattr(memory, "pinning_requests_total", 0)), int(getattr(memory, "pinning_errors_total", 0)))
        # A metric already reached the count it was synced with, and metrics never go down: only a count
        # that changed since can publish anything.
        before = self._synced_counts or (None,) * len(counts)
        self._synced_counts = counts
        for name, now, then in zip(_PINNING_METRICS, counts, before, strict=True):
            if now != then:
                delta = now - int(self.metrics.value(name))
                if delta > 0:
                    self.metrics.inc(name, float(delta))

    def remove(self, pod_uid: str) -> Pod:
        """Release a pod. CheckpointError when its removal could not be written (the pod is then still
        admitted, here and on disk: the caller retries); once the record is written it stays removed."""
        with self.transaction() as tx:
            if pod_uid not in self.pods:
                raise InvalidInputError(f"no pod with uid {pod_uid} on this node")
            pod = self._forget(pod_uid)
        if tx.failure is not None and pod_uid in self.pods:
            raise tx.failure
        return pod

    def replace_pod(self, pod: Pod) -> None:
        """Put the changed spec of an admitted pod in place (an in-place resize, kubelet/previews), with the
        allocation its record keeps taken again."""
        self.pods[pod.uid] = pod
        if self.store is not None:
            self.allocations[pod.uid] = recorded_allocation(pod, self.cpu, self.memory, self.devices)

    def allocation(self, pod_uid: str, container: str) -> ContainerAllocation:
        """What the container holds now. The CPU set's sorted ids and text are remembered per set: every
        container in the shared pool gets the same (large) set until an exclusive allocation changes it."""
        cpus = self.cpu.cpus_for_container(pod_uid, container)
        known = self._cpuset_texts.get(cpus)
        if known is None:
            if len(self._cpuset_texts) >= 64:
                self._cpuset_texts.clear()
            known = self._cpuset_texts[cpus] = (tuple(sorted(cpus)), format_cpuset(cpus))
        ids, text = known
        return ContainerAllocation(ids, self.cpu.get_cpu_set(pod_uid, container) is not None,
                                   self._memory_of(pod_uid, container), self._devices_of(pod_uid, container), text)

    def _memory_of(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        blocks = self.memory.get_memory(pod_uid, container) or []
        return tuple(MemoryBlock(b.type, b.size, tuple(b.numa_affinity)) for b in blocks)

    def _devices_of(self, pod_uid: str, container: str) -> dict[str, dict[str, tuple[int, ...] | None]]:
        devs = self.devices.get_container_devices(pod_uid, container) or {}
        return {
            res: {d: (None if dev.topology is None else tuple(dev.topology)) for d, dev in sorted(ids.items())}
            for res, ids in sorted(devs.items())
        }
