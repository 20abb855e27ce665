"""CPU manager construction (upstream NewManager, spec §1.2): pick the policy, work out the reservation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.core.hint import ProviderHints
from numalign.core.policies.options import Maturity
from numalign.errors import ConfigError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.options import StaticPolicyOptions, check_none_policy_options
from numalign.kubelet.cpumanager.policy import CPUPolicy
from numalign.kubelet.cpumanager.policy_static import StaticPolicy, num_reserved_cpus
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUTopology
from numalign.kubelet.topologymanager.provider import DEFAULT_IMPLICIT_FROM_NODES, AffinityStore
from numalign.kubelet.versions import DEFAULT_BEHAVIOURS, Behaviours


class NonePolicy:
    """The `none` policy: every container runs on the shared pool (`shared_cpus`, the machine's CPUs);
    no hints, no allocation. A null CPUPolicy: a Node and the views treat both policies alike; its
    checkpoint holds only its name and an empty default set, as the kubelet's none policy leaves."""

    name = "cpu"
    policy_name = "none"
    pins = False
    reserved_cpus: frozenset[int] = frozenset()
    pinning_requests_total = 0  # the kubelet counts pinning under static only
    pinning_errors_total = 0

    def __init__(self, topology: CPUTopology, shared_cpus: frozenset[int]) -> None:
        self.topology = topology  # the CPU manager knows the machine whatever its policy
        self.shared_cpus = shared_cpus
        self.options = StaticPolicyOptions()

    def start(self, state: CPUManagerState | None = None) -> None:
        return None  # the kubelet's none policy Start: nothing to validate or adopt

    def restore(self, state: CPUManagerState) -> None:
        return None

    def snapshot(self) -> CPUManagerState:
        return CPUManagerState(self.policy_name, frozenset(), {})

    def get_cpu_set(self, pod_uid: str, container_name: str) -> frozenset[int] | None:
        return None

    def cpus_for_container(self, pod_uid: str, container_name: str) -> frozenset[int]:
        return self.shared_cpus

    def get_allocatable_cpus(self) -> frozenset[int]:
        # Upstream's nonePolicy.GetAllocatableCPUs: no CPU can be exclusively allocated, so PodResources
        # and the NodeResourceTopology exporters report none (not the shared pool).
        return frozenset()

    def get_available_cpus(self) -> frozenset[int]:
        return frozenset()  # as get_allocatable_cpus: none can be given exclusively

    def get_default_cpu_set(self) -> frozenset[int]:
        return frozenset()  # the checkpoint's defaultCpuSet under none: "" (the state is never used)

    def get_exclusive_cpus(self, pod_uid: str, container_name: str) -> frozenset[int]:
        return frozenset()  # upstream's GetExclusiveCPUs under none: nothing is ever assigned

    def allocated_per_numa(self) -> dict[int, int]:
        return {}

    def remove_stale_state(
        self, active_pods: Iterable[Pod], pending_pod: Pod | None = None
    ) -> list[tuple[str, str]]:
        return []

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return None

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return None

    def allocate(self, pod: Pod, container: Container) -> None:
        return None

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        return None


def new_cpu_manager_policy(
    policy_name: str,
    topology: CPUTopology,
    *,
    reserved_cpu: Quantity | None = None,
    reserved_system_cpus: Iterable[int] = (),
    policy_options: Mapping[str, str] | None = None,
    feature_gates: Mapping[str, bool] | None = None,
    topology_manager_policy: str = "none",
    affinity: AffinityStore | None = None,
    shared_cpus: frozenset[int] | None = None,
    implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
    option_maturity: Mapping[str, Maturity] | None = None,
    behaviours: Behaviours = DEFAULT_BEHAVIOURS,
) -> CPUPolicy:
    """NewManager's policy choice.

    `reserved_cpu` is kubeReserved.cpu + systemReserved.cpu. When `reserved_system_cpus` is given,
    the kubelet replaces that reservation by the size of the set, and the set itself is reserved.
    """
    options = dict(policy_options or {})
    if policy_name == "none":
        check_none_policy_options(options)
        return NonePolicy(topology, topology.details.cpus() if shared_cpus is None else shared_cpus)
    if policy_name != "static":
        raise ConfigError(f'unknown policy: "{policy_name}" (expected cpuManagerPolicy none or static)')
    if topology.num_cpus == 0:
        # topology.Discover, before the static policy exists: cadvisor found no CPU it could read.
        raise ConfigError(
            "could not detect number of cpus; cadvisor found no online CPU with a readable core_id and "
            "physical_package_id under the machine's NUMA nodes, so the kubelet's static CPU manager cannot "
            "start (cpuManagerPolicy none can)"
        )
    explicit = frozenset(reserved_system_cpus)
    if explicit:
        reserved_cpu = Quantity.from_int(len(explicit))
    count = num_reserved_cpus(reserved_cpu)
    try:
        return StaticPolicy(
            topology,
            count,
            reserved_cpus=explicit,
            affinity=affinity,
            options=options,
            feature_gates=feature_gates,
            topology_manager_policy=topology_manager_policy,
            implicit_from_nodes=implicit_from_nodes,
            option_maturity=option_maturity,
            behaviours=behaviours,
        )
    except ConfigError as e:
        text = f"new static policy error: {e}"
        if not explicit and count > topology.num_cpus:
            # upstream's words end there (an empty set: takeByTopology refused); say what fits and the fix
            text += (f"; kubeReserved.cpu + systemReserved.cpu ({reserved_cpu}) round up to {count} CPUs, more than "
                     f"this machine's {topology.num_cpus}: reserve at most {topology.num_cpus} (lower kubeReserved or "
                     "systemReserved cpu), or name the CPUs to reserve with reservedSystemCPUs")
        raise ConfigError(text) from None


# upstream: var _ Policy = &nonePolicy{} (and &staticPolicy{})
_conforms: tuple[type[CPUPolicy], ...] = (NonePolicy, StaticPolicy)
