"""numalign: the kubelet's Topology Manager and its hint providers, as a library.

The names below are the public API; everything else is reachable under its module but may move.
They are imported on first use (PEP 562 `__getattr__`), so `import numalign` and `numalign --help`
stay cheap: asking for `numalign.Node` loads the node and its providers, asking for
`numalign.make_policy` only the pure core.

    from numalign import NUMAInfo, PolicyOptions, TopologyHint, make_policy

    numa = NUMAInfo.create([0, 1], {0: [10, 11], 1: [11, 10]})
    policy = make_policy("restricted", numa, PolicyOptions())
    result = policy.merge([{"cpu": [TopologyHint.of([0], True)]}])
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from numalign import _compiled

# First, before any submodule is imported: the compiled core, where built and exact (numalign._compiled).
_compiled.install()

# The layers, lowest first: a module may import its own package and packages of a lower layer, never
# one of its own layer or above (tests/unit/test_architecture.py walks every import against this;
# docs/architecture.md draws it). The same rule holds between the subpackages of kubelet/, laid out as
# upstream's pkg/kubelet/cm: the managers build on the Topology Manager's provider contract, the admit
# handlers and the node on the managers.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_compiled", "errors", "paths", "metrics"),
    ("core", "limits"),
    ("validation", "k8s"),
    ("machine",),
    ("kubelet", "scheduler"),
    ("adapters", "report", "replay"),
    ("answer",),
    ("deviceplugin", "run"),
    ("cluster",),
    ("agent",),
    ("cli",),
    ("__main__",),  # `python -m numalign`: the command line, nothing else
)
KUBELET_LAYERS: tuple[tuple[str, ...], ...] = (
    ("versions",),
    ("checkpointmanager",),
    ("topologymanager",),
    ("cpumanager", "memorymanager", "devicemanager", "dramanager"),
    ("state", "plan"),
    ("admission", "nodestate", "previews"),
    ("startup",),
    ("containermanager",),
    ("podadmission",),
    ("node",),
)

# public name -> the module that defines it
_EXPORTS = {
    # the Topology Manager's core: hints, NUMA information, policies and their merge
    "TopologyHint": "numalign.core.hint",
    "ProviderHints": "numalign.core.hint",
    "NUMAInfo": "numalign.core.numa",
    "BitMask": "numalign.core.bitmask",
    "ImplicitHints": "numalign.core.implicit.hints",
    "ProviderAnswer": "numalign.core.implicit.hints",
    "Policy": "numalign.core.policies",
    "PolicyName": "numalign.core.policies",
    "PolicyOptions": "numalign.core.policies",
    "MergeResult": "numalign.core.policies",
    "make_policy": "numalign.core.policies",
    "AdmitResult": "numalign.core.decision",
    "DecisionRecord": "numalign.core.decision",
    # Kubernetes objects: pods and the kubelet's configuration
    "Pod": "numalign.k8s.pod",
    "Container": "numalign.k8s.pod",
    "Quantity": "numalign.k8s.quantity",
    "pod_from_dict": "numalign.k8s.manifest",
    "pods_from_yaml": "numalign.k8s.manifest",
    "KubeletConfig": "numalign.k8s.kubeletconfig",
    # Dynamic Resource Allocation: DRA objects read beside pods, and claims allocated as the scheduler does
    "pods_and_dra_from_yaml": "numalign.k8s.dra.documents",
    "allocate_claims": "numalign.scheduler.dra.api",
    "allocate_pod_claims": "numalign.scheduler.dra.api",
    "config_from_yaml": "numalign.k8s.kubeletconfig_read",
    "parse_cpuset": "numalign.k8s.cpuset",
    "format_cpuset": "numalign.k8s.cpuset",
    # machines: the model, the built-in examples, and loading a file or this host's sysfs
    "Machine": "numalign.machine.topology",
    "example": "numalign.machine.examples",
    "machine_from_dict": "numalign.machine.fileformat",
    "load_machine": "numalign.adapters.sysfs",
    # one node's kubelet side, and the Topology Manager alone
    "Node": "numalign.kubelet.node",
    "NodeState": "numalign.kubelet.state",
    "Plan": "numalign.kubelet.plan",
    "state_directory": "numalign.adapters.statedir.directory",
    "StateDirectory": "numalign.adapters.statedir.directory",
    # admitting pods in order with the answers beside each decision (`numalign admit` as a call)
    "admit_pods": "numalign.answer.admit",
    "AdmitDocument": "numalign.answer.present.admit",
    "PodAnswer": "numalign.answer.present.admit",
    "TopologyManager": "numalign.kubelet.topologymanager.manager",
    "HintProvider": "numalign.kubelet.topologymanager.provider",
    # errors: every one is a NumalignError; bad input is also a ValueError
    "NumalignError": "numalign.errors",
    "InvalidInputError": "numalign.errors",
    "ConfigError": "numalign.errors",
    "DiscoveryError": "numalign.errors",
    "CheckpointError": "numalign.errors",
    "AllocationError": "numalign.errors",
    "PluginError": "numalign.errors",
}

# the same names as _EXPORTS (tests/unit/test_public_api.py keeps the two equal)
__all__ = [
    "AdmitDocument",
    "AdmitResult",
    "AllocationError",
    "BitMask",
    "CheckpointError",
    "ConfigError",
    "Container",
    "DecisionRecord",
    "DiscoveryError",
    "HintProvider",
    "ImplicitHints",
    "InvalidInputError",
    "KubeletConfig",
    "Machine",
    "MergeResult",
    "NUMAInfo",
    "Node",
    "NodeState",
    "NumalignError",
    "Plan",
    "PluginError",
    "Pod",
    "PodAnswer",
    "Policy",
    "PolicyName",
    "PolicyOptions",
    "ProviderAnswer",
    "ProviderHints",
    "Quantity",
    "StateDirectory",
    "TopologyHint",
    "TopologyManager",
    "admit_pods",
    "allocate_claims",
    "allocate_pod_claims",
    "config_from_yaml",
    "example",
    "format_cpuset",
    "load_machine",
    "machine_from_dict",
    "make_policy",
    "parse_cpuset",
    "pod_from_dict",
    "pods_and_dra_from_yaml",
    "pods_from_yaml",
    "state_directory",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'numalign' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names for type checkers and editors
    from numalign.adapters.statedir.directory import StateDirectory, state_directory
    from numalign.adapters.sysfs import load_machine
    from numalign.answer.admit import admit_pods
    from numalign.answer.present.admit import AdmitDocument, PodAnswer
    from numalign.core.bitmask import BitMask
    from numalign.core.decision import AdmitResult, DecisionRecord
    from numalign.core.hint import ProviderHints, TopologyHint
    from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer
    from numalign.core.numa import NUMAInfo
    from numalign.core.policies import MergeResult, Policy, PolicyName, PolicyOptions, make_policy
    from numalign.errors import (
        AllocationError,
        CheckpointError,
        ConfigError,
        DiscoveryError,
        InvalidInputError,
        NumalignError,
        PluginError,
    )
    from numalign.k8s.cpuset import format_cpuset, parse_cpuset
    from numalign.k8s.dra.documents import pods_and_dra_from_yaml
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.kubeletconfig_read import config_from_yaml
    from numalign.k8s.manifest import pod_from_dict, pods_from_yaml
    from numalign.k8s.pod import Container, Pod
    from numalign.k8s.quantity import Quantity
    from numalign.kubelet.node import Node
    from numalign.kubelet.plan import Plan
    from numalign.kubelet.state import NodeState
    from numalign.kubelet.topologymanager.manager import TopologyManager
    from numalign.kubelet.topologymanager.provider import HintProvider
    from numalign.machine.examples import example
    from numalign.machine.topology import Machine
    from numalign.scheduler.dra.api import allocate_claims, allocate_pod_claims
