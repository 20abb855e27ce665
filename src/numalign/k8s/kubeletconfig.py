"""The slice of KubeletConfiguration (kubelet.config.k8s.io/v1beta1) the resource managers read.

Sources, in kubelet precedence: defaults < config file (kubeletconfig_read.config_from_yaml) <
command-line flags (kubeletconfig_flags.apply_flags); the reading lives there so that this model never
imports its reader. `validate()` reproduces the relevant part of ValidateKubeletConfiguration with the
kubelet's own messages, aggregated the way utilerrors.NewAggregate prints them.

Reading follows the kubelet's decoder: unknown keys are ignored (the kubelet only warns about them),
but a known key with the wrong type is an error, as it is for the kubelet's JSON decoder (e.g. an
unquoted number where a string map is expected: `kubeReserved: {cpu: 1}` must be `cpu: "1"`).
Flag values are parsed like the kubelet's pflag types (MapStringString, NoSplit maps, the "<"-
separated eviction map, ReservedMemoryVar, MapStringBool); the first use of a map flag replaces the
file's map, except feature gates, which the kubelet merges (flags win per gate).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.cpuset import parse_go_cpuset
from numalign.k8s.documents import parse_documents
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.resources import (
    RESOURCE_CPU,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_MEMORY,
    RESOURCE_PIDS,
    is_hugepage_resource_name,
)
from numalign.limits import flat

API_VERSION: Final = "kubelet.config.k8s.io/v1beta1"
KIND: Final = "KubeletConfiguration"
EXPECTED_CONFIG: Final = f"a KubeletConfiguration (apiVersion: {API_VERSION}, kind: {KIND}) in YAML or JSON"

TOPOLOGY_MANAGER_POLICIES: Final = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES: Final = ("container", "pod")
DEFAULT_EVICTION_HARD: Final[Mapping[str, str]] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "imagefs.available": "15%",
    "nodefs.inodesFree": "5%",
}
# enforceNodeAllocatable keys (pkg/kubelet/types).
NODE_ALLOCATABLE_ENFORCEMENT_KEY: Final = "pods"
SYSTEM_RESERVED_ENFORCEMENT_KEY: Final = "system-reserved"
SYSTEM_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY: Final = "system-reserved-compressible"
KUBE_RESERVED_ENFORCEMENT_KEY: Final = "kube-reserved"
KUBE_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY: Final = "kube-reserved-compressible"
NODE_ALLOCATABLE_NONE_KEY: Final = "none"
# Eviction signals the kubelet accepts (pkg/kubelet/eviction/api).
EVICTION_SIGNALS: Final = frozenset({
    "memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree",
    "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree",
    "pid.available",
})
# Resources kubeReserved/systemReserved may name (kubelet parseResourceList).
RESERVABLE_RESOURCES: Final = (RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_PIDS)


# The feature gates numalign models, with their defaults in kubelet 1.35 (pkg/features/
# kube_features.go): policy-option gates alpha off / beta on; KubeletPodResourcesGet and
# PodLevelResources beta, on by default since 1.34.
FEATURE_GATE_DEFAULTS: Final[Mapping[str, bool]] = {
    "CPUManagerPolicyAlphaOptions": False,
    "CPUManagerPolicyBetaOptions": True,
    "TopologyManagerPolicyAlphaOptions": False,
    "TopologyManagerPolicyBetaOptions": True,
    "KubeletPodResourcesGet": True,
    "PodLevelResources": True,
}

# Added after the kubelet's own parse error, which names neither the form nor an example.
RESERVED_CPUS_EXPECTED: Final = "expected a CPU list like 0-1,64 (ranges and ids, comma-separated, no spaces)"


class ReservedMemory(NamedTuple):
    """One reservedMemory entry: memory reserved on a NUMA node, per memory or hugepages resource."""

    numa_node: int
    limits: Mapping[str, Quantity]


class EvictionThreshold(NamedTuple):
    """A parsed hard-eviction threshold: a quantity, or a fraction of capacity (float32, as upstream)."""

    signal: str
    quantity: Quantity | None
    percentage: float | None


def go_quote(text: str) -> str:
    """Go's %q for the plain strings found in configs."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class KubeletConfig:
    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    cpu_manager_reconcile_period: float = 10.0  # seconds
    memory_manager_policy: str = "None"
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    reserved_system_cpus: str = ""
    reserved_memory: tuple[ReservedMemory, ...] = ()
    kube_reserved: Mapping[str, Quantity] = field(default_factory=dict)
    system_reserved: Mapping[str, Quantity] = field(default_factory=dict)
    kube_reserved_cgroup: str = ""
    system_reserved_cgroup: str = ""
    eviction_hard: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_EVICTION_HARD))
    enforce_node_allocatable: tuple[str, ...] = (NODE_ALLOCATABLE_ENFORCEMENT_KEY,)
    cgroups_per_qos: bool = True
    # The pods limit the predicate admit handler checks (node status capacity "pods"): maxPods, or
    # podsPerCore x the CPU count when that is smaller and podsPerCore > 0.
    max_pods: int = 110
    pods_per_core: int = 0
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    # Set once validate() has passed, so the CLI (which validates to add its fix hints) and the Node it
    # then builds do not validate the same config twice. Not an init field: replace() and apply_flags()
    # build a fresh, unvalidated config.
    _validated: bool = field(default=False, init=False, compare=False, repr=False)

    def feature_gate_enabled(self, name: str) -> bool:
        """The gate as set in featureGates / --feature-gates, else its kubelet 1.35 default."""
        return self.feature_gates.get(name, FEATURE_GATE_DEFAULTS.get(name, False))

    # ---- validation ----------------------------------------------------------------------------------

    def validation_errors(self) -> list[str]:
        """ValidateKubeletConfiguration, for the fields modelled here, in upstream order."""
        errors: list[str] = []
        if self.topology_manager_policy not in TOPOLOGY_MANAGER_POLICIES:
            errors.append(
                f"invalid configuration: topologyManagerPolicy (--topology-manager-policy) "
                f"{go_quote(self.topology_manager_policy)} must be one of: "
                f"[{' '.join(go_quote(p) for p in TOPOLOGY_MANAGER_POLICIES)}]"
            )
        if self.topology_manager_scope not in TOPOLOGY_MANAGER_SCOPES:
            errors.append(
                f"invalid configuration: topologyManagerScope (--topology-manager-scope) "
                f"{go_quote(self.topology_manager_scope)} must be one of: \"container\", or \"pod\""
            )
        errors.extend(self._enforce_node_allocatable_errors())
        if self.max_pods < 0:
            errors.append(f"invalid configuration: maxPods (--max-pods) {self.max_pods} must not be a negative number")
        if self.pods_per_core < 0:
            errors.append(
                f"invalid configuration: podsPerCore (--pods-per-core) {self.pods_per_core} "
                "must not be a negative number"
            )
        if self.reserved_system_cpus != "":
            if self.system_reserved_cgroup != "" or self.kube_reserved_cgroup != "":
                errors.append(
                    "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with "
                    "systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup "
                    "(--kube-reserved-cgroup)"
                )
            try:
                parse_go_cpuset(self.reserved_system_cpus)
            except ValueError as exc:
                errors.append(
                    f"invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) "
                    f"{flat(self.reserved_system_cpus)}, error: {exc}"
                )
        errors.extend(self._reserved_memory_errors())
        return errors

    def validate(self) -> None:
        """Raise KubeletConfigValidationError (a ConfigError) when the kubelet would refuse to start."""
        if self._validated:
            return
        errors = self.validation_errors()
        if errors:
            raise KubeletConfigValidationError(errors)
        object.__setattr__(self, "_validated", True)  # frozen: a cache, not a change of value

    def _enforce_node_allocatable_errors(self) -> list[str]:
        errors: list[str] = []
        keys = set(self.enforce_node_allocatable)
        for plain, compressible in (
            (SYSTEM_RESERVED_ENFORCEMENT_KEY, SYSTEM_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY),
            (KUBE_RESERVED_ENFORCEMENT_KEY, KUBE_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY),
        ):
            if plain in keys and compressible in keys:
                errors.append(
                    f"invalid configuration: both {go_quote(plain)} and {go_quote(compressible)} cannot be "
                    "specified together in enforceNodeAllocatable (--enforce-node-allocatable)"
                )
        seen: set[str] = set()
        flag = "in enforceNodeAllocatable (--enforce-node-allocatable)"
        for val in self.enforce_node_allocatable:
            if val in seen:
                errors.append(f"invalid configuration: duplicated enforcements {go_quote(val)} {flag}")
                continue
            seen.add(val)
            if val == NODE_ALLOCATABLE_ENFORCEMENT_KEY:
                pass
            elif val in (SYSTEM_RESERVED_ENFORCEMENT_KEY, SYSTEM_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY):
                if self.system_reserved_cgroup == "":
                    errors.append(
                        "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be "
                        f"specified when {go_quote(SYSTEM_RESERVED_ENFORCEMENT_KEY)} or "
                        f"{go_quote(SYSTEM_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY)} included {flag}"
                    )
            elif val in (KUBE_RESERVED_ENFORCEMENT_KEY, KUBE_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY):
                if self.kube_reserved_cgroup == "":
                    errors.append(
                        "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be "
                        f"specified when {go_quote(KUBE_RESERVED_ENFORCEMENT_KEY)} or "
                        f"{go_quote(KUBE_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY)} included {flag}"
                    )
            elif val == NODE_ALLOCATABLE_NONE_KEY:
                if len(self.enforce_node_allocatable) > 1:
                    errors.append(
                        "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not "
                        f"contain additional enforcements when {go_quote(NODE_ALLOCATABLE_NONE_KEY)} is specified"
                    )
                continue
            else:
                valid = ", ".join(go_quote(k) for k in (
                    NODE_ALLOCATABLE_ENFORCEMENT_KEY, SYSTEM_RESERVED_ENFORCEMENT_KEY,
                    SYSTEM_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY, KUBE_RESERVED_ENFORCEMENT_KEY,
                    KUBE_RESERVED_COMPRESSIBLE_ENFORCEMENT_KEY,
                ))
                errors.append(
                    f"invalid configuration: option {go_quote(val)} specified for enforceNodeAllocatable "
                    f"(--enforce-node-allocatable). Valid options are {valid} or "
                    f"{go_quote(NODE_ALLOCATABLE_NONE_KEY)}"
                )
                continue
            if not self.cgroups_per_qos:
                errors.append(
                    "invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when "
                    f"{go_quote(val)} contained {flag}"
                )
        return errors

    def _reserved_memory_errors(self) -> list[str]:
        """validateReservedMemoryConfiguration."""
        errors: list[str] = []
        seen: dict[int, set[str]] = {}
        for entry in self.reserved_memory:
            node = entry.numa_node
            types = seen.setdefault(node, set())
            for resource, quantity in entry.limits.items():
                if not (resource == RESOURCE_MEMORY or is_hugepage_resource_name(resource)):
                    errors.append(
                        f"invalid configuration: the limit type {go_quote(resource)} for NUMA node {node} is "
                        "not supported, only [memory hugepages-<HugePageSize>] is accepted"
                    )
                if quantity.is_zero():
                    errors.append(
                        f"invalid configuration: reserved memory may not be zero for NUMA node {node} and "
                        f"resource {go_quote(resource)}"
                    )
                if resource in types:
                    errors.append(
                        f"invalid configuration: the reserved memory has a duplicate value for NUMA node "
                        f"{node} and resource {go_quote(resource)}"
                    )
                types.add(resource)
        return errors

    # ---- derived values ------------------------------------------------------------------------------

    def reserved_cpus(self) -> frozenset[int]:
        """reservedSystemCPUs as a set of CPU ids (ConfigError when it is not a cpuset)."""
        try:
            return parse_go_cpuset(self.reserved_system_cpus)
        except ValueError as exc:
            raise ConfigError(
                f"unable to parse reservedSystemCPUs (--reserved-cpus) {flat(self.reserved_system_cpus)}, "
                f"error: {exc}; {RESERVED_CPUS_EXPECTED}"
            ) from None

    def hard_eviction_thresholds(self) -> list[EvictionThreshold]:
        """evictionHard parsed like eviction.ParseThresholdConfig (0% and 100% mean "disabled")."""
        out = []
        for signal, value in sorted(self.eviction_hard.items()):
            threshold = parse_eviction_threshold(signal, value)
            if threshold is not None:
                out.append(threshold)
        return out

    def node_allocatable_reservation(
        self, capacity: Mapping[str, Quantity] | None = None
    ) -> dict[str, Quantity]:
        """GetNodeAllocatableReservation: kubeReserved + systemReserved + the hard-eviction threshold
        (memory.available -> memory, nodefs.available -> ephemeral-storage), for each capacity
        resource; zero entries are left out.

        Without `capacity`, cpu and memory are computed (what the CPU and memory managers compare),
        and a percentage memory threshold is an error because it needs the node's memory capacity.
        """
        eviction = self._hard_eviction_reservation(capacity)
        names = list(capacity) if capacity is not None else [RESOURCE_CPU, RESOURCE_MEMORY]
        result: dict[str, Quantity] = {}
        for name in names:
            value = Quantity(0)
            for part in (self.system_reserved, self.kube_reserved, eviction):
                if name in part:
                    value = value + part[name]
            if not value.is_zero():
                result[name] = value
        return result

    def _hard_eviction_reservation(self, capacity: Mapping[str, Quantity] | None) -> dict[str, Quantity]:
        out: dict[str, Quantity] = {}
        for threshold in self.hard_eviction_thresholds():
            if threshold.signal == "memory.available":
                resource = RESOURCE_MEMORY
            elif threshold.signal == "nodefs.available":
                resource = RESOURCE_EPHEMERAL_STORAGE
            else:
                continue
            if threshold.quantity is not None:
                out[resource] = threshold.quantity
                continue
            assert threshold.percentage is not None
            if capacity is None:
                if resource != RESOURCE_MEMORY:
                    continue
                raise ConfigError(
                    f"evictionHard {threshold.signal}: a percentage threshold needs the node's {resource} "
                    "capacity; pass the machine capacity, or give the threshold as a quantity (e.g. 100Mi)"
                )
            total = capacity.get(resource, Quantity(0)).value()
            # GetThresholdQuantity: int64(float64(capacity.Value()) * float64(percentage)), BinarySI.
            out[resource] = Quantity.from_int(int(float(total) * threshold.percentage), QuantityFormat.BINARY_SI)
        return out


class KubeletConfigValidationError(ConfigError):
    """ValidateKubeletConfiguration failed; `messages` holds each error, str() the kubelet's text."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = tuple(messages)
        super().__init__(aggregate_errors(self.messages))


def aggregate_errors(messages: Sequence[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message alone, else "[a, b]" without repeats."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def parse_eviction_threshold(signal: str, value: str) -> EvictionThreshold | None:
    """parseThresholdStatement; None for the "0%"/"100%" thresholds the kubelet ignores."""
    if signal not in EVICTION_SIGNALS:
        raise ConfigError(
            f"evictionHard (--eviction-hard): unsupported eviction signal {signal}; expected one of "
            f"{', '.join(sorted(EVICTION_SIGNALS))}"
        )
    if value.endswith("%"):
        if value in ("0%", "100%"):
            return None
        try:
            number = float(value.rstrip("%"))
        except ValueError:
            raise ConfigError(
                f"evictionHard (--eviction-hard) {signal}: invalid percentage {value!r}; expected e.g. \"10%\""
            ) from None
        percentage = _float32(_float32(number) / 100)
        if percentage < 0:
            raise ConfigError(f"eviction percentage threshold {signal} must be >= 0%: {value}")
        if percentage > 1:
            raise ConfigError(f"eviction percentage threshold {signal} must be <= 100%: {value}")
        return EvictionThreshold(signal, None, percentage)
    try:
        quantity = Quantity.parse(value, where=f"evictionHard (--eviction-hard) {signal}")
    except InvalidInputError as exc:
        raise ConfigError(str(exc)) from None
    if quantity.sign() <= 0:
        raise ConfigError(f"eviction threshold {signal} must be positive: {quantity}")
    return EvictionThreshold(signal, quantity, None)


def parse_resource_list(values: Mapping[str, str], flag: str) -> dict[str, Quantity]:
    """The kubelet's parseResourceList for kubeReserved/systemReserved (messages kept)."""
    out: dict[str, Quantity] = {}
    for name, text in values.items():
        if name not in RESERVABLE_RESOURCES:
            raise ConfigError(
                f"{flag} value failed to parse: cannot reserve {go_quote(name)} resource "
                f"(only {', '.join(RESERVABLE_RESOURCES)} can be reserved)"
            )
        try:
            quantity = Quantity.parse(text, where=f"{flag} {name}")
        except InvalidInputError as exc:
            raise ConfigError(
                f"{flag} value failed to parse: failed to parse quantity {go_quote(text)} for "
                f"{go_quote(name)} resource: {exc}"
            ) from None
        if quantity.sign() < 0:
            raise ConfigError(
                f"{flag} value failed to parse: resource quantity for {go_quote(name)} cannot be negative: {text}"
            )
        out[name] = quantity
    return out


def load_yaml_mapping(text: str, source: str) -> Mapping[str, Any]:
    """Decode one YAML/JSON document into a mapping, with ConfigError naming the source."""
    docs = [d for d in parse_documents(text, source, EXPECTED_CONFIG, ConfigError) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], Mapping):
        raise ConfigError(
            f"{source}: expected one KubeletConfiguration mapping (apiVersion: {API_VERSION}, kind: {KIND}), "
            f"got {len(docs)} document(s)" + ("" if len(docs) != 1 else f" of type {type(docs[0]).__name__}")
        )
    return docs[0]
