"""The CPU manager with the `static` policy, as a Topology Manager hint provider named "cpu".

Upstream staticPolicy (spec §1.2-§1.5) plus the manager's removeStaleState, over an in-memory
CPUManagerState. Persistence is the caller's: snapshot()/restore() hand over the plain data that
the `cpu_manager_state` codec writes. Counters mirror the kubelet metrics the policy updates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from numalign.core.hint import TopologyHint
from numalign.core.policies.options import Maturity
from numalign.errors import AllocationError, CheckpointError, ConfigError
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import get_pod_qos
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import container_requests
from numalign.kubelet.cpumanager.distributed import KUBELET_HANGS
from numalign.kubelet.cpumanager.hints import cpu_hints_of_masks
from numalign.kubelet.cpumanager.implicit_hints import cpu_topology_hints
from numalign.kubelet.cpumanager.options import (
    StaticPolicyOptions,
    new_static_policy_options,
    validate_static_policy_options,
)
from numalign.kubelet.cpumanager.state import CPUManagerState, validate_state
from numalign.kubelet.cpumanager.take import TakeOptions, allocate_cpus_kept, smt_alignment_error, take_by_topology
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.topologymanager.provider import (
    DEFAULT_IMPLICIT_FROM_NODES,
    AffinityStore,
    HintProvider,
    ImplicitHintProvider,
    ListOrImplicit,
)
from numalign.kubelet.versions import DEFAULT_BEHAVIOURS, Behaviours

POLICY_NAME = "static"
RESOURCE_CPU = "cpu"
_NO_AFFINITY = TopologyHint(None, False)
_NONE: frozenset[int] = frozenset()

CPUHints = dict[str, list[TopologyHint]]


def num_reserved_cpus(reserved_cpu: Quantity | None) -> int:
    """NewManager: ceil(kubeReserved.cpu + systemReserved.cpu), which must be present and > 0."""
    if reserved_cpu is None:
        raise ConfigError(
            "[cpumanager] unable to determine reserved CPU resources for static policy "
            "(set kubeReserved.cpu and/or systemReserved.cpu, or reservedSystemCPUs)"
        )
    if reserved_cpu.is_zero():
        raise ConfigError(
            "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be "
            "greater than zero"
        )
    return math.ceil(reserved_cpu.milli_value() / 1000)


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Upstream guaranteedCPUs: the integer CPU request of a container of a Guaranteed pod, else 0.

    Also 0 for a pod with pod-level resources: with PodLevelResources on (the default since 1.34) the
    static policy skips such pods in GetTopologyHints, GetPodTopologyHints and Allocate alike.
    """
    if get_pod_qos(pod) != "Guaranteed" or pod.has_pod_level_resources:
        return 0
    # container_requests' cpu without its copy of every request (asked twice per container admitted)
    q = container.requests.get(RESOURCE_CPU)
    if q is None:
        q = container.limits.get(RESOURCE_CPU)
        if q is None:
            return 0
    if q.value() * 1000 != q.milli_value():
        return 0
    return q.value()


def pod_guaranteed_cpus(pod: Pod) -> int:
    """Upstream podGuaranteedCPUs: max(init peak, apps + sidecars), containers without a cpu key skipped."""
    init_peak = 0
    sidecars = 0
    for c in pod.init_containers:
        if RESOURCE_CPU not in container_requests(c):
            continue
        n = guaranteed_cpus(pod, c)
        if c.restart_policy == "Always":
            sidecars += n
        elif sidecars + n > init_peak:
            init_peak = sidecars + n
    apps = sum(
        guaranteed_cpus(pod, c) for c in pod.containers if RESOURCE_CPU in container_requests(c)
    )
    return max(init_peak, apps + sidecars)


class StaticPolicy:
    """CPU manager, static policy. `reserved_cpus` (reservedSystemCPUs) wins over the count."""

    name = "cpu"
    policy_name = POLICY_NAME
    pins = True

    def __init__(
        self,
        topology: CPUTopology,
        num_reserved: int,
        *,
        reserved_cpus: Iterable[int] = (),
        affinity: AffinityStore | None = None,
        options: StaticPolicyOptions | Mapping[str, str] | None = None,
        feature_gates: Mapping[str, bool] | None = None,
        topology_manager_policy: str = "none",
        implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
        option_maturity: Mapping[str, Maturity] | None = None,
        behaviours: Behaviours = DEFAULT_BEHAVIOURS,
    ) -> None:
        # hints are implicit on machines with at least this many NUMA nodes (providers/implicit)
        self.implicit_from_nodes = implicit_from_nodes
        if options is None or isinstance(options, StaticPolicyOptions):
            opts = options or StaticPolicyOptions()
        else:
            opts = new_static_policy_options(options, feature_gates, option_maturity)
        validate_static_policy_options(
            opts, topology.num_sockets, topology.num_numa_nodes, topology_manager_policy
        )
        self.topology = topology
        self.options = opts
        self.affinity = affinity
        self.behaviours = behaviours
        self._take = opts.take_options(behaviours)
        all_cpus = topology.details.cpus()
        explicit = frozenset(reserved_cpus)
        if explicit:
            reserved = explicit
        else:
            try:
                reserved = take_by_topology(topology, all_cpus, num_reserved, self._take)
            except AllocationError as e:
                if e.reason == KUBELET_HANGS:
                    raise ConfigError(f"{self._hang_text(e)}; the kubelet does not start (taking the reserved "
                                      "CPUs); reserve them with reservedSystemCPUs instead") from None
                reserved = frozenset()
        if len(reserved) != num_reserved:
            raise ConfigError(
                "[cpumanager] unable to reserve the required amount of CPUs (size of "
                f"{format_cpuset(reserved)} did not equal {num_reserved})"
            )
        physical: set[int] = set()
        for cpu in reserved:
            info = topology.info(cpu)
            if info is None:
                raise ConfigError(
                    "[cpumanager] unable to build the reserved physical CPUs from the reserved set: "
                    f"unknown CPU ID: {cpu} (reservedSystemCPUs must name CPUs of this machine)"
                )
            physical |= topology.details.cpus_in_cores(info.core)
        self.reserved_cpus: frozenset[int] = reserved
        self.reserved_physical_cpus: frozenset[int] = frozenset(physical)
        self.state = CPUManagerState(POLICY_NAME, frozenset(), {})
        # The pools as CPU masks (CPUTopology.mask_of), read from the state's default set when it is another
        # object than the one they were read from (start, restore, a resize or a test replace it): an
        # allocation or a release moves a few CPUs, as integer operations, and the free sets' hints and
        # allocations are kept per mask.
        self._reserved_mask = topology.mask_of(reserved)
        self._reserved_physical_mask = topology.mask_of(self.reserved_physical_cpus)
        self._default_from: frozenset[int] | None = None
        self._default_mask = 0
        self._available_mask = 0
        self._available: frozenset[int] | None = None  # made from _available_mask when asked for
        self.cpus_to_reuse: dict[str, frozenset[int]] = {}
        # Kubelet metrics this policy updates (see spec §8).
        self.pinning_requests_total = 0
        self.pinning_errors_total = 0
        self.aligned_physical_cpu_total = 0
        self.aligned_physical_cpu_failures_total = 0
        self.aligned_uncore_cache_total = 0
        # The CPU manager's gauges as the kubelet moves them: set at Start from the state, then moved by each
        # allocation and release (so an app container reusing an init container's CPUs counts them twice,
        # as upstream's updateMetricsOnAllocate does). allocation_per_numa is the per-NUMA gauge's series:
        # every update sets the nodes holding exclusive CPUs now and leaves a node that holds none at the
        # count it last had (upstream's updateAllocationPerNUMAMetric); _held_per_numa is what each node holds.
        self.shared_pool_size_millicores = 0
        self.exclusive_cpu_allocation_count = 0
        self.allocation_per_numa: dict[int, int] = {}
        self._held_per_numa: dict[int, int] = {}
        # Containers given exclusive CPUs (not those found in the state already): 1.36's resource_manager_*
        # counters of node-level allocations and exclusive assignments.
        self.exclusive_allocations_total = 0

    # ---- state lifecycle ------------------------------------------------------------------------

    def start(self, state: CPUManagerState | None = None) -> None:
        """Policy Start: validate (or initialize) the state, then adopt it (CheckpointError if bad)."""
        st = state if state is not None else CPUManagerState(POLICY_NAME, frozenset(), {})
        self.state = validate_state(
            st, self.topology.details.cpus(), self.reserved_cpus, self.options.strict_cpu_reservation
        )
        self.state.policy_name = POLICY_NAME
        self.cpus_to_reuse = {}
        self.shared_pool_size_millicores = len(self.get_available_cpus()) * 1000
        self.recount_exclusive()
        self.exclusive_cpu_allocation_count = sum(self._held_per_numa.values())

    def recount_exclusive(self) -> None:
        """What each NUMA node holds exclusively (the CPUs assigned, each once), from the state; the
        per-NUMA gauge updated as the kubelet's initializeMetrics does it (the policy's Start)."""
        held: frozenset[int] = frozenset().union(*(c for ctrs in self.state.entries.values() for c in ctrs.values()))
        self._held_per_numa = {}
        self._count_held(held, 1)

    def _count_held(self, cpus: Iterable[int], step: int) -> None:
        """Move what the NUMA nodes of `cpus` hold by `step` each, then set the per-NUMA gauge's nodes
        that hold any (a CPU the topology lacks, which a validated state never holds, under node -1 as
        upstream's CPUNUMANodeID answers)."""
        held = self._held_per_numa
        for cpu in cpus:
            info = self.topology.info(cpu)
            node = info.numa_node if info is not None else -1
            held[node] = held.get(node, 0) + step
        for node, count in held.items():
            if count > 0:
                self.allocation_per_numa[node] = count

    def snapshot(self) -> CPUManagerState:
        return self.state.copy()

    @property
    def take_options(self) -> TakeOptions:
        """The options takeByTopology runs with (for the resize preview, cpumanager/resize.py)."""
        return self._take

    def restore(self, state: CPUManagerState) -> None:
        if state.policy_name != POLICY_NAME:
            raise CheckpointError(
                f'configured policy "{POLICY_NAME}" differs from state checkpoint policy '
                f'"{state.policy_name}" (drain the node and delete cpu_manager_state to switch policies)'
            )
        self.start(state)

    # ---- pools ----------------------------------------------------------------------------------

    def _sync_masks(self) -> None:
        """Read the masks from the state's default set if it was replaced since they were read."""
        default = self.state.default_cpu_set
        if default is not self._default_from:
            self._set_default(default, self.topology.mask_of(default))

    def _set_default(self, default: frozenset[int], mask: int) -> None:
        """The default set is `default`, whose mask is `mask`."""
        self.state.default_cpu_set = default
        self._default_from = default
        self._default_mask = mask
        self._available_mask = mask & ~self._reserved_mask
        self._available = None

    def _move_default(self, mask: int) -> None:
        """The default set becomes the CPUs of `mask` (one set object per mask, CPUTopology.cpus_of)."""
        self._set_default(self.topology.cpus_of(mask), mask)

    def get_available_cpus(self) -> frozenset[int]:
        """defaultCpuSet minus reserved: what exclusive allocations can take."""
        self._sync_masks()
        available = self._available
        if available is None:
            available = self._available = self.topology.cpus_of(self._available_mask)
        return available

    def get_allocatable_cpus(self) -> frozenset[int]:
        return self.topology.details.cpus() - self.reserved_cpus

    def get_default_cpu_set(self) -> frozenset[int]:
        return self.state.default_cpu_set

    def get_cpu_set(self, pod_uid: str, container_name: str) -> frozenset[int] | None:
        return self.state.entries.get(pod_uid, {}).get(container_name)

    def get_exclusive_cpus(self, pod_uid: str, container_name: str) -> frozenset[int]:
        """Manager GetExclusiveCPUs (PodResources cpu_ids): the exclusive set, or empty."""
        return self.get_cpu_set(pod_uid, container_name) or frozenset()

    def cpus_for_container(self, pod_uid: str, container_name: str) -> frozenset[int]:
        """Manager GetCPUAffinity, what the reconcile loop writes: the exclusive set, or the shared pool."""
        own = self.get_cpu_set(pod_uid, container_name)
        return own if own is not None else self.state.default_cpu_set

    def allocated_per_numa(self) -> dict[int, int]:
        """kubelet_cpu_manager_allocation_per_numa: exclusive CPUs per NUMA node (every node listed)."""
        out = dict.fromkeys(sorted(self.topology.details.numa_nodes()), 0)
        for ctrs in self.state.entries.values():
            for cset in ctrs.values():
                for cpu in cset:
                    info = self.topology.info(cpu)
                    if info is not None:
                        out[info.numa_node] += 1
        return out

    # ---- hints ----------------------------------------------------------------------------------

    def _hints(self, available: int, reusable: int, request: int) -> list[TopologyHint]:
        """upstream generateCPUTopologyHints of the CPU masks `available` and `reusable`."""
        return cpu_hints_of_masks(self.topology, available, reusable, request, self.options.align_by_socket)

    def _implicit_hints(self, available: int, reusable: int, request: int) -> ListOrImplicit:
        """The same hints, implicit on machines with many NUMA nodes (see topologymanager/provider.py)."""
        topo = self.topology
        if len(topo.numa_masks) < self.implicit_from_nodes:
            return self._hints(available, reusable, request)
        return cpu_topology_hints(topo, topo.cpus_of(available), topo.cpus_of(reusable), request,
                                  self.options.align_by_socket)

    def get_topology_hints(self, pod: Pod, container: Container) -> CPUHints | None:
        asked = self._container_masks(pod, container)
        if asked is None:
            return None
        request, available, reusable = asked
        return {RESOURCE_CPU: [] if request < 0 else self._hints(available, reusable, request)}

    def implicit_topology_hints(self, pod: Pod, container: Container) -> dict[str, ListOrImplicit] | None:
        asked = self._container_masks(pod, container)
        if asked is None:
            return None
        request, available, reusable = asked
        return {RESOURCE_CPU: [] if request < 0 else self._implicit_hints(available, reusable, request)}

    def get_pod_topology_hints(self, pod: Pod) -> CPUHints | None:
        asked = self._pod_masks(pod)
        if asked is None:
            return None
        request, available, reusable = asked
        return {RESOURCE_CPU: [] if request < 0 else self._hints(available, reusable, request)}

    def implicit_pod_topology_hints(self, pod: Pod) -> dict[str, ListOrImplicit] | None:
        asked = self._pod_masks(pod)
        if asked is None:
            return None
        request, available, reusable = asked
        return {RESOURCE_CPU: [] if request < 0 else self._implicit_hints(available, reusable, request)}

    def _reusable_mask(self, pod_uid: str) -> int:
        reusable = self.cpus_to_reuse.get(pod_uid)
        return 0 if not reusable else self.topology.mask_of(reusable)

    def _container_masks(self, pod: Pod, container: Container) -> tuple[int, int, int] | None:
        """What the container's hints are generated from: (request, available CPUs, reusable CPUs), the CPUs as
        masks; None without a guaranteed CPU request (no hint), a request of -1 when the container holds a set
        of another size (no mask fits: an empty list)."""
        requested = guaranteed_cpus(pod, container)
        if requested == 0:
            return None
        allocated = self.get_cpu_set(pod.uid, container.name)
        if allocated is not None:
            if len(allocated) != requested:
                return -1, 0, 0
            return requested, self.topology.mask_of(allocated), 0
        self._sync_masks()
        return requested, self._available_mask, self._reusable_mask(pod.uid)

    def _pod_masks(self, pod: Pod) -> tuple[int, int, int] | None:
        """_container_masks for the pod scope."""
        requested = pod_guaranteed_cpus(pod)
        if requested == 0:
            return None
        topo = self.topology
        assigned = 0
        for c in pod.all_containers():
            allocated = self.get_cpu_set(pod.uid, c.name)
            if allocated is None:
                continue
            if len(allocated) != guaranteed_cpus(pod, c):
                return -1, 0, 0
            assigned |= topo.mask_of(allocated)
        if assigned.bit_count() == requested:
            return requested, assigned, 0
        self._sync_masks()
        return requested, self._available_mask, self._reusable_mask(pod.uid) | assigned

    # ---- allocation -----------------------------------------------------------------------------

    def allocate(self, pod: Pod, container: Container) -> None:
        num_cpus = guaranteed_cpus(pod, container)
        if num_cpus == 0:
            return  # shared pool: nothing to do
        self.pinning_requests_total += 1
        try:
            self._allocate(pod, container, num_cpus)
        except AllocationError as e:
            if e.reason == KUBELET_HANGS:
                # no pinning error either: the kubelet never returns from this Allocate
                raise AllocationError(self._hang_text(e), reason=KUBELET_HANGS) from None
            self.pinning_errors_total += 1
            if self.options.full_pcpus_only:
                self.aligned_physical_cpu_failures_total += 1
            raise
        if self.options.full_pcpus_only:
            self.aligned_physical_cpu_total += 1

    def _allocate(self, pod: Pod, container: Container, num_cpus: int) -> None:
        self._sync_masks()
        if self.options.full_pcpus_only:
            free_physical = (self._default_mask & ~self._reserved_physical_mask).bit_count()
            err = smt_alignment_error(self.topology, num_cpus, free_physical)
            if err is not None:
                raise err
        existing = self.get_cpu_set(pod.uid, container.name)
        if existing is not None:
            self._update_cpus_to_reuse(pod, container, existing)
            return
        hint = self.affinity.get_affinity(pod.uid, container.name) if self.affinity else _NO_AFFINITY
        got = allocate_cpus_kept(
            self.topology, num_cpus, hint.mask, self._available_mask, self._reusable_mask(pod.uid), self._take
        )
        result = got.cpus
        self._move_default(self._default_mask & ~got.mask)
        siblings = self.state.entries.setdefault(pod.uid, {})
        # CPUs reused from an init container of the pod are held already; another pod's never are.
        new = result.difference(*siblings.values()) if siblings else result
        siblings[container.name] = result
        self._update_cpus_to_reuse(pod, container, result)
        self.exclusive_cpu_allocation_count += len(result)
        self.shared_pool_size_millicores -= len(result) * 1000
        self._count_held(new, 1)
        self.exclusive_allocations_total += 1
        if got.uncore_aligned:
            self.aligned_uncore_cache_total += 1

    def _hang_text(self, e: AllocationError) -> str:
        return (f"the kubelet {self.behaviours.version} hangs here (k/k #140730, fixed in 1.38): {e}; with "
                "distribute-cpus-across-numa and full-pcpus-only its Allocate never returns and holds the CPU "
                "manager's lock, so this node admits nothing more until the kubelet restarts")

    def _update_cpus_to_reuse(self, pod: Pod, container: Container, cset: frozenset[int]) -> None:
        # Only the pod being admitted is tracked.
        reuse = self.cpus_to_reuse
        uid = pod.uid
        if len(reuse) > 1 or (reuse and uid not in reuse):
            for other in [u for u in reuse if u != uid]:
                del reuse[other]
        current = reuse.get(uid)
        for init in pod.init_containers:
            if init.name == container.name:
                if init.restart_policy != "Always":
                    # A regular init container finishes before the next starts: its CPUs are reusable.
                    reuse[uid] = cset if not current else current | cset
                    return
                break
        reuse[uid] = _NONE if not current else current - cset

    # ---- release --------------------------------------------------------------------------------

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        containers = self.state.entries.get(pod_uid)
        if containers is None or container_name not in containers:
            return
        topo = self.topology
        in_use = 0
        for name, cset in containers.items():
            if name != container_name:
                in_use |= topo.mask_of(cset)
        held = containers.pop(container_name)
        held_mask = topo.mask_of(held)
        released_mask = held_mask & ~in_use
        released = held if released_mask == held_mask else topo.cpus_of(released_mask)
        if not containers:
            del self.state.entries[pod_uid]
        baselines = self.state.baselines.get(pod_uid)
        if baselines is not None:  # a resized container's baseline goes with it (KEP-5554 preview)
            baselines.pop(container_name, None)
            if not baselines:
                del self.state.baselines[pod_uid]
        self._sync_masks()
        self._move_default(self._default_mask | released_mask)
        self.exclusive_cpu_allocation_count -= len(released)
        self.shared_pool_size_millicores += len(released) * 1000
        self._count_held(released, -1)

    def remove_stale_state(
        self, active_pods: Iterable[Pod], pending_pod: Pod | None = None
    ) -> list[tuple[str, str]]:
        """Manager removeStaleState: drop assignments of containers no active (or pending) pod has."""
        pods = list(active_pods) + ([pending_pod] if pending_pod is not None else [])
        active = {(p.uid, c.name) for p in pods for c in p.all_containers()}
        stale = [
            (uid, name)
            for uid in sorted(self.state.entries)
            for name in sorted(self.state.entries[uid])
            if (uid, name) not in active
        ]
        for uid, name in stale:
            self.remove_container(uid, name)
        return stale


# upstream: var _ Policy = &staticPolicy{} (checked by mypy, free at run time)
_conforms: type[HintProvider] = StaticPolicy
_conforms_implicit: type[ImplicitHintProvider] = StaticPolicy
