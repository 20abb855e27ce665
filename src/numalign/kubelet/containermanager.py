"""The container manager: the Topology Manager and the device, CPU and memory managers of one node,
built and registered in the kubelet's order, and what a container holds once they have allocated.

Upstream's cm/container_manager_linux.go (NewContainerManager) builds the managers,
cm/internal_container_lifecycle.go hands each starting container to the CPU and memory managers, and
GetCPUs / GetMemory / GetDevices answer what a container holds; here `ContainerManager`, `start_pod` and
`allocation`. The pinning counters the managers keep as plain attributes (pure code) are published as
metrics here too, as upstream's managers publish theirs.
"""

from __future__ import annotations

from numalign import metrics as m
from numalign.core.decision import ContainerAllocation, MemoryBlock
from numalign.core.numa import NUMAInfo
from numalign.core.policies.startup import refuse_node_minus_one
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.deviceplugin import Device
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod
from numalign.k8s.previews import NUMA_ALLOCATION_STRATEGY, Previews
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.resources import RESOURCE_CPU, RESOURCE_MEMORY
from numalign.kubelet.cpumanager.manager import new_cpu_manager_policy
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.devicemanager.manager import DeviceManager
from numalign.kubelet.dramanager.manager import DRAManager
from numalign.kubelet.memorymanager.manager import new_memory_manager
from numalign.kubelet.memorymanager.reserved import MemoryReservation
from numalign.kubelet.previews.numa_allocation import node_scorer, scored_policy
from numalign.kubelet.startup import Startup
from numalign.kubelet.topologymanager.manager import TopologyManager
from numalign.machine.topology import Machine

# The providers' counters as ContainerManager.sync_metrics publishes them: the metric, its series' labels,
# the provider and its attribute. The static CPU policy counts an aligned allocation per boundary (physical
# CPUs under full-pcpus-only, an uncore cache) into the series the Topology Manager counts NUMA alignment in.
_PHYSICAL_CPU = (("boundary", "physical_cpu"), ("scope", "container"))
_UNCORE_CACHE = (("boundary", "uncore_cache"), ("scope", "container"))
_PUBLISHED: tuple[tuple[str, tuple[tuple[str, str], ...], str, str], ...] = (
    (m.CPU_PINNING_REQUESTS, (), "cpu", "pinning_requests_total"),
    (m.CPU_PINNING_ERRORS, (), "cpu", "pinning_errors_total"),
    (m.MEM_PINNING_REQUESTS, (), "memory", "pinning_requests_total"),
    (m.MEM_PINNING_ERRORS, (), "memory", "pinning_errors_total"),
    (m.ALIGNED_COUNT, _PHYSICAL_CPU, "cpu", "aligned_physical_cpu_total"),
    (m.ALIGNED_FAILURE, _PHYSICAL_CPU, "cpu", "aligned_physical_cpu_failures_total"),
    (m.ALIGNED_COUNT, _UNCORE_CACHE, "cpu", "aligned_uncore_cache_total"),
)
# The CPU_PER_NUMA series of each NUMA node, made once (sync_metrics sets them whenever CPUs are pinned).
_NUMA_NODE_SERIES: dict[int, m.LabelKey] = {}


def _numa_node_series(node: int) -> m.LabelKey:
    key = _NUMA_NODE_SERIES.get(node)
    if key is None:
        key = _NUMA_NODE_SERIES[node] = (("numa_node", str(node)),)
    return key


# The managers' counters and gauges an admission moves (a probe puts them back).
_COUNTERS = ("pinning_requests_total", "pinning_errors_total", "aligned_physical_cpu_total",
             "aligned_physical_cpu_failures_total", "aligned_uncore_cache_total", "shared_pool_size_millicores",
             "exclusive_cpu_allocation_count", "exclusive_allocations_total", "exclusive_blocks_total")
# 1.36 on, with the alpha gate PodLevelResourceManagers: the resource_manager_* series of node-level
# allocations (a pod's containers each given their own; numalign models no pod-level pool): the family, its
# labels, the provider and its attribute, under 1.37's names (1.36's: metrics.RM_136_NAMES).
_RESOURCE_MANAGERS: tuple[tuple[str, tuple[tuple[str, str], ...], str, str], ...] = (
    (m.RM_ALLOCATIONS, (("resource_name", "cpu"), ("source", "node")), "cpu", "exclusive_allocations_total"),
    (m.RM_ALLOCATIONS, (("resource_name", "memory"), ("source", "node")), "memory", "exclusive_blocks_total"),
    (m.RM_ALLOCATION_ERRORS, (("resource_name", "cpu"), ("source", "node")), "cpu", "pinning_errors_total"),
    (m.RM_ALLOCATION_ERRORS, (("resource_name", "memory"), ("source", "node")), "memory", "pinning_errors_total"),
    (m.RM_ASSIGNMENTS, (("assignment_type", "node_exclusive"), ("resource_name", "cpu")), "cpu",
     "exclusive_allocations_total"),
    (m.RM_ASSIGNMENTS, (("assignment_type", "node_exclusive"), ("resource_name", "memory")), "memory",
     "exclusive_allocations_total"),
)

Counters = list[tuple[object, str, int | dict[int, int]]]


class ContainerManager:
    """One node's Topology Manager and resource managers, from a configuration the kubelet accepted
    (numalign.kubelet.startup)."""

    def __init__(self, config: KubeletConfig, startup: Startup, *, metrics: m.Metrics,
                 static_devices: bool, implicit_from_nodes: int, adapt_memory_to_host: bool,
                 previews: Previews) -> None:
        # implicit_from_nodes: the NUMA-node count from which providers describe hints implicitly.
        self.machine: Machine = startup.machine
        machine = startup.machine
        self.metrics = metrics
        self.numa: NUMAInfo = startup.numa
        self.tm = TopologyManager(
            self.numa,
            config.topology_manager_policy,
            config.topology_manager_scope,
            config.topology_manager_policy_options,
            startup.gates,
            metrics,
            option_maturity=startup.behaviours.topology_option_maturity,
            release=startup.behaviours.version.minor_key,
        )
        # GetNodeAllocatableReservation against the node's capacity (cadvisor's NumCores and
        # MemoryCapacity), so percentage eviction thresholds resolve.
        capacity = {
            RESOURCE_CPU: Quantity.from_int(machine.capacity_cpus()),
            RESOURCE_MEMORY: Quantity.from_int(machine.capacity_memory(), QuantityFormat.BINARY_SI),
        }
        reservation = config.node_allocatable_reservation(capacity)
        self.cpu = new_cpu_manager_policy(
            config.cpu_manager_policy,
            CPUTopology.from_machine(machine),
            reserved_cpu=reservation.get("cpu"),
            reserved_system_cpus=config.reserved_cpus(),
            policy_options=config.cpu_manager_policy_options,
            feature_gates=startup.gates,
            topology_manager_policy=config.topology_manager_policy,
            affinity=self.tm,
            shared_cpus=machine.online_cpus(),
            implicit_from_nodes=implicit_from_nodes,
            option_maturity=startup.behaviours.cpu_option_maturity,
            behaviours=startup.behaviours,
        )
        if self.cpu.policy_name == "static":
            # The static policy's Start makes its alignment series exist at zero (initializeMetrics, every
            # release 1.33-1.37): a node that pinned nothing still exposes them.
            for name, labels in ((m.ALIGNED_FAILURE, _PHYSICAL_CPU), (m.ALIGNED_COUNT, _PHYSICAL_CPU),
                                 (m.ALIGNED_COUNT, _UNCORE_CACHE)):
                metrics.init_series(name, **dict(labels))
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
        # Started, but certain to panic at an admission on node -1: refused here, after the start errors.
        refuse_node_minus_one(self.numa.nodes, config.topology_manager_policy)
        self.devices = DeviceManager(machine.numa_ids(), self.tm, implicit_from_nodes=implicit_from_nodes,
                                     behaviours=startup.behaviours)
        self.static_devices = static_devices
        if static_devices:
            self.register_static_plugins()
        # The DRA manager gives no Topology Manager hints (no kubelet release registers it as a provider);
        # it keeps which claims the node's pods reserve.
        self.dra = DRAManager()
        # The kubelet's container manager registers the device manager, then the CPU manager, then the
        # memory manager (container_manager_linux.go); hints are listed and Allocate is called in
        # that order, so a device failure stops admission before any CPU or memory is pinned.
        for provider in (self.devices, self.cpu, self.memory):
            self.tm.add_hint_provider(provider)
        if previews.on(NUMA_ALLOCATION_STRATEGY):
            self.tm.scope.policy = scored_policy(self.tm.scope.policy, self.numa, previews,
                                                 node_scorer(self.cpu, self.memory, self.devices),
                                                 self.tm.opts.prefer_closest_numa)
        self._cpuset_texts: dict[frozenset[int], tuple[tuple[int, ...], str]] = {}  # see allocation()
        # The providers' pinning counters at the last sync_metrics (metrics only grow).
        self._synced_counts: tuple[int, ...] = ()  # in _PUBLISHED order
        # The static CPU policy's gauges at the last sync_metrics (shared pool, exclusive, per NUMA node).
        self._synced_gauges: tuple[int, int, dict[int, int]] | None = None
        self._synced_registrations: dict[str, int] = {}  # the device manager's, at the last sync_metrics
        # What this kubelet publishes of the resource_manager_* families (none before 1.36 or without the gate).
        release = startup.behaviours.version.minor_key
        self._resource_managers: tuple[tuple[str, tuple[tuple[str, str], ...], str, str], ...] = ()
        if release >= (1, 36) and startup.gates.get("PodLevelResourceManagers", False):
            self._resource_managers = tuple((name if release >= (1, 37) else m.RM_136_NAMES[name], labels, p, attr)
                                            for name, labels, p, attr in _RESOURCE_MANAGERS)

    def register_static_plugins(self) -> None:
        """The machine's devices, served by in-process plugins that register at once."""
        for resource, devs in sorted(self.machine.devices_by_resource().items()):
            self.devices.add_static_plugin(resource, [Device(d.id, d.health, d.numa_nodes) for d in devs])

    # ---- container lifecycle -----------------------------------------------------------------------
    def start_pod(self, pod: Pod) -> None:
        """The admitted pod's containers start: each keeps what the scope allocated to it (in the kubelet's
        order, Pod.all_containers', walked as one tuple: cheaper than its generator, every admission)."""
        for c in pod.init_containers + pod.containers:
            self.tm.add_container(pod, c, f"{pod.uid}/{c.name}")
        # Containers start in order; starting one releases earlier regular init containers' memory
        # (upstream memory manager AddContainer).
        for c in pod.init_containers + pod.containers:
            self.memory.add_container(pod, c)

    def release_pod(self, pod: Pod) -> None:
        """Give back everything the pod holds."""
        self.tm.remove_pod(pod)
        self.devices.remove_pod(pod.uid)

    # ---- what a container holds --------------------------------------------------------------------
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

    def allocations(self, pod: Pod) -> dict[str, ContainerAllocation]:
        return {c.name: self.allocation(pod.uid, c.name) for c in pod.init_containers + pod.containers}

    def _memory_of(self, pod_uid: str, container: str) -> tuple[MemoryBlock, ...]:
        blocks = self.memory.get_memory(pod_uid, container) or []
        return tuple(MemoryBlock(b.type, b.size, tuple(b.numa_affinity)) for b in blocks)

    def _devices_of(self, pod_uid: str, container: str) -> dict[str, dict[str, tuple[int, ...] | None]]:
        devs = self.devices.get_container_devices(pod_uid, container) or {}
        return {
            res: {d: (None if dev.topology is None else tuple(dev.topology)) for d, dev in sorted(ids.items())}
            for res, ids in sorted(devs.items())
        }

    # ---- the managers' counters --------------------------------------------------------------------
    def counters(self) -> Counters:
        """The managers' counters and gauges, plain attributes of pure code (see sync_metrics)."""
        saved: Counters = [(p, name, int(getattr(p, name))) for p in (self.cpu, self.memory) for name in _COUNTERS
                           if hasattr(p, name)]
        per_numa = getattr(self.cpu, "allocation_per_numa", None)
        if per_numa is not None:  # the per-NUMA gauge's series: a probe may add a node's
            saved.append((self.cpu, "allocation_per_numa", dict(per_numa)))
        return saved

    @staticmethod
    def set_counters(saved: Counters) -> None:
        for provider, name, value in saved:
            setattr(provider, name, value)

    def sync_metrics(self) -> None:
        """Providers count pinning and alignment as plain attributes (pure code); publish the deltas, and
        the static CPU policy's gauges and the device manager's registrations and Allocate calls."""
        self._sync_device_metrics()
        cpu, memory = self.cpu, self.memory
        if isinstance(cpu, StaticPolicy):
            # The kubelet's none policy never sets them: they stay at zero.
            pool, exclusive, per_numa = (cpu.shared_pool_size_millicores, cpu.exclusive_cpu_allocation_count,
                                         cpu.allocation_per_numa)
            synced = self._synced_gauges
            # Compared as they are (a dict compares without the sort), sorted only to publish a change.
            if synced is None or pool != synced[0] or exclusive != synced[1] or per_numa != synced[2]:
                self._synced_gauges = (pool, exclusive, dict(per_numa))
                gauges: list[tuple[str, m.LabelKey, float]] = [(m.CPU_SHARED_POOL, (), float(pool)),
                                                               (m.CPU_EXCLUSIVE, (), float(exclusive))]
                # Only the NUMA nodes whose count changed since the last sync (an allocation moves one or
                # two): the others' series hold their count already. New ones come in node order, as before.
                last = None if synced is None else synced[2]
                for node, count in sorted(per_numa.items()):
                    if last is None or node not in last or last[node] != count:
                        gauges.append((m.CPU_PER_NUMA, _numa_node_series(node), float(count)))
                self.metrics.set_all(gauges)  # one hold of the metrics' lock for all of them
        # In _PUBLISHED order; read as attributes (every admission syncs; most change nothing). The static
        # policy's read as its own (native reads in the compiled core), any other's looked up by name.
        if isinstance(cpu, StaticPolicy):
            physical, physical_failures, uncore = (cpu.aligned_physical_cpu_total,
                                                   cpu.aligned_physical_cpu_failures_total,
                                                   cpu.aligned_uncore_cache_total)
        else:
            physical, physical_failures, uncore = (int(getattr(cpu, "aligned_physical_cpu_total", 0)),
                                                   int(getattr(cpu, "aligned_physical_cpu_failures_total", 0)),
                                                   int(getattr(cpu, "aligned_uncore_cache_total", 0)))
        counts = (int(cpu.pinning_requests_total), int(cpu.pinning_errors_total),
                  int(memory.pinning_requests_total), int(memory.pinning_errors_total),
                  physical, physical_failures, uncore)
        before = self._synced_counts
        if counts != before:
            # A metric already reached the count it was synced with, and metrics never go down: only a
            # count that changed since can publish anything.
            self._synced_counts = counts
            changed: list[tuple[str, m.LabelKey, int]] = []
            for i, (name, labels, _, _) in enumerate(_PUBLISHED):
                now = counts[i]
                if not before or now != before[i]:
                    changed.append((name, labels, now))
            self.metrics.catch_up_all(changed)
        if self._resource_managers:
            # a series exists from its first count (upstream makes none at zero)
            self.metrics.catch_up_all([(name, labels, int(getattr(cpu if p == "cpu" else memory, attr, 0)))
                                       for name, labels, p, attr in self._resource_managers])

    def _sync_device_metrics(self) -> None:
        devices = self.devices
        if devices.registrations_total != self._synced_registrations:  # a plugin (re)registered since
            self._synced_registrations = dict(devices.registrations_total)
            for resource, count in devices.registrations_total.items():
                delta = count - int(self.metrics.value(m.DP_REGISTRATION, resource_name=resource))
                if delta > 0:
                    self.metrics.inc(m.DP_REGISTRATION, float(delta), resource_name=resource)
        durations = devices.allocate_durations
        if durations:
            # Calls made on another thread append while this drains: take what is there now, in order.
            taken = durations[:len(durations)]
            del durations[:len(taken)]
            for resource, seconds in taken:
                self.metrics.observe_series(m.DP_ALLOC_DURATION, (("resource_name", resource),), seconds)
