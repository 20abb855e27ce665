"""The CPU manager (static policy): topology, hints, take-by-topology, options, policy."""

from numalign.kubelet.cpumanager.manager import NonePolicy, new_cpu_manager_policy
from numalign.kubelet.cpumanager.options import StaticPolicyOptions, new_static_policy_options
from numalign.kubelet.cpumanager.policy_static import StaticPolicy, guaranteed_cpus, pod_guaranteed_cpus
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.cpumanager.topology import CPUDetails, CPUInfo, CPUTopology

__all__ = [
    "CPUDetails",
    "CPUInfo",
    "CPUManagerState",
    "CPUTopology",
    "NonePolicy",
    "StaticPolicy",
    "StaticPolicyOptions",
    "guaranteed_cpus",
    "new_cpu_manager_policy",
    "new_static_policy_options",
    "pod_guaranteed_cpus",
]
