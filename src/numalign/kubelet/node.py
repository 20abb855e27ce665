"""A node: the machine, the kubelet configuration, the container manager (the Topology Manager and its
three providers), the admit handlers, and the kubelet's state files. This is what `numalign admit` and
`numalign serve` drive.

The composition root, in the kubelet's order: the start-up checks (numalign.kubelet.startup), the
container manager (numalign.kubelet.containermanager), the admit handlers (numalign.kubelet.admission),
then the state read back. Admission (decide, commit, probe) is a part the Node holds, its PodAdmission
(numalign.kubelet.podadmission), to which its admit, decide, commit and probe hand over.

Providers are registered in the order devices, CPU, memory; the order changes only the decision
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
from typing import Any

from numalign import metrics as m
from numalign.core.decision import ContainerAllocation, DecisionRecord
from numalign.errors import CheckpointError, InvalidInputError, PluginError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod
from numalign.k8s.previews import NO_PREVIEWS, Previews
from numalign.k8s.version import DEFAULT as DEFAULT_KUBELET_VERSION
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.admission.eviction import NodeCondition
from numalign.kubelet.admission.handlers import AdmitHandlers
from numalign.kubelet.containermanager import ContainerManager
from numalign.kubelet.devicemanager.state import DeviceManagerState
from numalign.kubelet.nodestate import NodeStore, Transaction, reconcile, recorded_allocation
from numalign.kubelet.plan import Plan
from numalign.kubelet.podadmission import PodAdmission
from numalign.kubelet.startup import start
from numalign.kubelet.state import AdmittedPod, AllocationRecord, NodeState
from numalign.kubelet.topologymanager.provider import DEFAULT_IMPLICIT_FROM_NODES
from numalign.machine.topology import Machine

log = logging.getLogger("numalign.kubelet.node")


class Node:
    """One node's kubelet side: built in the kubelet's order, admitting pods (decide, commit, probe:
    PodAdmission), its state a NodeState value that a store, when given, keeps between processes."""

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
        ended_pods: Callable[[Mapping[str, Pod]], Sequence[str]] | None = None,
        kubelet_version: KubeletVersion = DEFAULT_KUBELET_VERSION,
        adapt_memory_to_host: bool = False,
        previews: Previews = NO_PREVIEWS,
        state: NodeState | None = None,
    ) -> None:
        # implicit_from_nodes: the NUMA-node count from which providers describe hints implicitly
        # (providers/implicit). state: start from this state, as a kubelet restarted with `config` would
        # (a node with a store reads its own instead). ended_pods: see _adopt.
        startup = start(machine, config, kubelet_version, previews)
        self.previews = previews
        self.machine = startup.machine
        self.config = config
        # The kubelet release decided as: its gate defaults under the config's gates, and its behaviours.
        self.kubelet_version = kubelet_version
        self.behaviours = startup.behaviours
        self.gates = startup.gates
        self.implicit_from_nodes = implicit_from_nodes
        self.metrics = metrics or m.Metrics()
        self.cm = ContainerManager(config, startup, metrics=self.metrics, static_devices=static_devices,
                                   implicit_from_nodes=implicit_from_nodes,
                                   adapt_memory_to_host=adapt_memory_to_host, previews=previews)
        # The container manager's parts, by the names every reader of a node uses.
        self.numa, self.tm, self.cpu, self.memory, self.devices, self.dra = (
            self.cm.numa, self.cm.tm, self.cm.cpu, self.cm.memory, self.cm.devices, self.cm.dra)
        self.static_devices = static_devices
        self.pods: dict[str, Pod] = {}
        self.records: dict[str, DecisionRecord] = {}
        # The kubelet's other admit handlers, run before and after the Topology Manager's.
        self.handlers = AdmitHandlers(self.machine, config, node_conditions)
        # Admission (decide, commit, probe): the container manager and the handlers, keeping its pods here.
        self.admission = PodAdmission(self, self.cm, self.handlers, self.metrics, self.gates, kubelet_version)
        # Per pod, what numalign's pod record keeps beside the manifest: the allocation the kubelet
        # files must hold (None when not recorded).
        self.allocations: dict[str, AllocationRecord | None] = {}
        # Pods that ended where the kubelet does not look (`numalign run`'s processes, run/records.py),
        # asked after every load (I/O, given by the composition).
        self.ended_pods = ended_pods
        self.reloads = 0
        self.store = store
        self._tx: Transaction | None = None
        self.cpu.start()
        self.memory.start()
        if store is not None:
            with store.lock():
                self._reload()
                if not store.read_only:
                    store.commit(self.state())  # the repairs, and fresh files where none were (as the kubelet starts)
        elif state is not None:
            self._adopt(state)

    # ---- admission (numalign.kubelet.podadmission) -----------------------------------------------------
    def admit(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Decide and commit at once (PodAdmission.admit)."""
        return self.admission.admit(pod, allocations=allocations)

    def decide(self, pod: Pod) -> Plan:
        """Decide, leaving the device plugins' Allocate calls to the caller (PodAdmission.decide)."""
        return self.admission.decide(pod)

    def commit(self, plan: Plan, responses: Sequence[Any] = (),
               error: PluginError | str | None = None) -> DecisionRecord | Plan | None:
        """Hand a plan's call outcome back: the next plan, or the record (PodAdmission.commit)."""
        return self.admission.commit(plan, responses, error)

    def probe(self, pod: Pod, *, allocations: bool = True) -> DecisionRecord:
        """Would this node admit the pod now? Decided, then released (PodAdmission.probe)."""
        return self.admission.probe(pod, allocations=allocations)

    def cancel(self, pod_uid: str) -> None:
        """Release a plan whose pod went away (PodAdmission.cancel)."""
        self.admission.cancel(pod_uid)

    @property
    def reserved(self) -> dict[str, Plan]:
        """Admitted pods whose plugin Allocate calls are in flight, by uid (not recorded yet)."""
        return self.admission.reserved

    @property
    def reserved_pods(self) -> list[Pod]:
        return self.admission.reserved_pods

    @property
    def probe_metrics(self) -> m.Metrics:
        """What probes count (read by nobody; a simulator shares one sink across its nodes)."""
        return self.admission.probe_metrics

    @probe_metrics.setter
    def probe_metrics(self, metrics: m.Metrics) -> None:
        self.admission.probe_metrics = metrics

    # ---- state -----------------------------------------------------------------------------------
    @property
    def _where(self) -> str:
        return "" if self.store is None else self.store.name

    def state(self) -> NodeState:
        """This node's state as a value: what its store commits, and what a restart starts from."""
        pods = tuple(AdmittedPod(p, self.allocations.get(uid)) for uid, p in self.pods.items())
        return NodeState(pods, self.cpu.snapshot(), self.memory.snapshot(), self.devices.snapshot(),
                         claims=self.dra.snapshot())

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
        then the pods with their recorded allocation. `reload`: this Node ran before, so the
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
            self.cm.register_static_plugins()
        self.pods = {a.pod.uid: a.pod for a in state.pods}
        self.allocations = {a.pod.uid: a.allocation for a in state.pods}
        self.dra.restore(state.claims)
        self.records = {uid: r for uid, r in self.records.items() if uid in self.pods}

    def _reload(self) -> None:
        """Read the store into this Node and reconcile the kubelet files with the pod record."""
        assert self.store is not None
        self.reloads += 1
        self.admission.reserved.clear()
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
        for line in self.dra.reconcile(self.pods):
            log.warning("state %s: %s", self._where, line)
        if self.ended_pods is not None:
            # As the kubelet's HandlePodCleanups releases pods that terminated: part of the load, under
            # the store's lock, so the commit that follows writes the release.
            for uid in self.ended_pods(self.pods):
                self._forget(uid)

    def _forget(self, pod_uid: str) -> Pod:
        """Drop a pod and everything it holds, in memory (the caller's transaction writes it)."""
        pod = self.pods.pop(pod_uid)
        self.cm.release_pod(pod)
        self.dra.release(pod_uid)  # its claims' reservations end with it (committed with the pod record)
        self.records.pop(pod_uid, None)
        self.allocations.pop(pod_uid, None)
        return pod

    def _readmit(self, pod: Pod) -> DecisionRecord:
        self.devices.remove_pod(pod.uid)
        # The re-admission's plugin Allocate calls are made where the kubelet makes them (TopologyManager
        # admit), their answers recorded: without them the pod's devices would stay out of the device
        # checkpoint a remove, resize or rejected admit then writes. A failing call rejects the pod, which
        # is dropped and reported as a rejected re-admission is.
        rec = self.tm.admit(pod)
        if rec.result.admit:
            self.cm.start_pod(pod)
        else:
            self.tm.remove_pod(pod)
        return rec

    def transaction(self) -> contextlib.AbstractContextManager[Transaction]:
        """Changes made inside are written at the end, all or none (see numalign.kubelet.nodestate). Nested
        transactions join the outer one. A failed write leaves `failure` set and this Node as the disk
        is; an exception inside discards the changes (the disk is read again)."""
        if self._tx is not None:
            return _Joined(self._tx)
        if self.store is None:  # nothing to lock, read again or write: every admission of a simulated node
            return _InMemory(self)
        return self._stored_transaction()

    @contextlib.contextmanager
    def _stored_transaction(self) -> Iterator[Transaction]:
        store = self.store
        assert store is not None
        tx = self._tx = Transaction()
        try:
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
        """What the container holds now (GetCPUs, GetMemory, GetDevices)."""
        return self.cm.allocation(pod_uid, container)


class _Joined:
    """A transaction inside another: it joins the outer one (which writes at its end)."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx

    def __enter__(self) -> Transaction:
        return self.tx

    def __exit__(self, *exc: object) -> None:
        return None


class _InMemory:
    """The transaction of a node without a store: nothing to lock, read again or write, only the node's
    current transaction set for its length (a class, not a generator: every admission and removal of an
    in-memory node opens one)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def __enter__(self) -> Transaction:
        tx = self.node._tx = Transaction()
        return tx

    def __exit__(self, *exc: object) -> None:
        self.node._tx = None
