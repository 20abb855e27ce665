"""Reading KubeletConfiguration files into a KubeletConfig (pure: text in); the kubelet's flags over
one are kubeletconfig_flags'.

File keys are the v1beta1 camelCase names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, Final

from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.kubeletconfig import (
    API_VERSION,
    FEATURE_GATE_DEFAULTS,
    KIND,
    KubeletConfig,
    ReservedMemory,
    go_quote,
    load_yaml_mapping,
    parse_eviction_threshold,
    parse_resource_list,
)
from numalign.k8s.quantity import Quantity

# ---- Go value parsers -------------------------------------------------------------------------------

_DURATION_UNITS: Final = {
    "ns": Decimal("1e-9"), "us": Decimal("1e-6"), "µs": Decimal("1e-6"), "μs": Decimal("1e-6"),
    "ms": Decimal("1e-3"), "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600),
}
_DURATION_PART: Final = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """time.ParseDuration -> seconds ("10s", "1m30s", "500ms", "0"); ValueError when malformed."""
    s = text
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"time: invalid duration {go_quote(text)}")
    total = Decimal(0)
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(f"time: invalid duration {go_quote(text)}")
        total += Decimal(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return float(sign * total)


_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool:
    """strconv.ParseBool."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax")


# ---- file ---------------------------------------------------------------------------------------------


def config_from_yaml(text: str, source: str = "<kubelet config>") -> KubeletConfig:
    """Read a KubeletConfiguration file (YAML or JSON)."""
    return config_from_dict(load_yaml_mapping(text, source), source)


def config_from_dict(obj: Mapping[str, Any], source: str = "<kubelet config>") -> KubeletConfig:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise ConfigError(
            f"{source}: not a KubeletConfiguration: got apiVersion {api_version!r}, kind {kind!r}; "
            f"expected apiVersion: {API_VERSION} and kind: {KIND}; pass the kubelet's config file "
            "(on a node usually /var/lib/kubelet/config.yaml; on OpenShift "
            "/etc/kubernetes/kubelet.conf, which KubeletConfigs and PerformanceProfiles are rendered into)"
        )
    changes: dict[str, Any] = {}
    for key, (attr, reader) in _FILE_FIELDS.items():
        value = obj.get(key)
        if value is not None:  # JSON null leaves the default, as in Go
            changes[attr] = reader(value, f"{source}: {key}")
    defaults = KubeletConfig()
    for attr in _DEFAULTED_WHEN_ZERO:
        # SetDefaults_KubeletConfiguration (v1beta1 defaults.go) cannot tell an omitted field from its
        # zero value: "" (and a zero duration) is replaced by the default, just as a missing key is.
        if attr in changes and not changes[attr]:
            changes[attr] = getattr(defaults, attr)
    return replace(defaults, **changes)


def _type_error(where: str, expected: str, value: object) -> ConfigError:
    hint = ""
    if expected.startswith("a string") and isinstance(value, int | float) and not isinstance(value, bool):
        hint = f' (quote it: "{value}"; the kubelet rejects unquoted numbers here)'
    return ConfigError(f"{where}: expected {expected}, got {type(value).__name__} {value!r}{hint}")


def _read_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _type_error(where, "a string", value)
    return value


def _read_bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise _type_error(where, "true or false", value)
    return value


def _read_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(where, "a whole number", value)
    return value


def _read_str_map(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _type_error(where, "a mapping of strings", value)
    out: dict[str, str] = {}
    for k, v in value.items():
        key = _read_str(k, where)
        out[key] = _read_str(v, f"{where}.{key}") if v is not None else ""
    return out


def _read_bool_map(value: object, where: str) -> dict[str, bool]:
    if not isinstance(value, Mapping):
        raise _type_error(where, "a mapping of names to true/false", value)
    return {_read_str(k, where): _read_bool(v, f"{where}.{k}") for k, v in value.items()}


def _read_str_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _type_error(where, "a list of strings", value)
    return tuple(_read_str(v, f"{where}[{i}]") for i, v in enumerate(value))


def _read_duration(value: object, where: str) -> float:
    try:
        return parse_go_duration(_read_str(value, where))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}; expected a duration such as \"10s\" or \"1m30s\"") from None


def _read_reserved(flag: str) -> Callable[[object, str], dict[str, Quantity]]:
    def read(value: object, where: str) -> dict[str, Quantity]:
        try:
            return parse_resource_list(_read_str_map(value, where), flag)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    return read


def _read_eviction(value: object, where: str) -> dict[str, str]:
    values = _read_str_map(value, where)
    for signal, text in values.items():
        try:
            parse_eviction_threshold(signal, text)
        except InvalidInputError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return values


def _read_reserved_memory(value: object, where: str) -> tuple[ReservedMemory, ...]:
    if not isinstance(value, list):
        raise _type_error(where, "a list of {numaNode, limits} entries", value)
    out = []
    for i, entry in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(entry, Mapping):
            raise _type_error(here, "a mapping {numaNode: <int>, limits: {memory: <quantity>}}", entry)
        node = entry.get("numaNode", 0)
        if isinstance(node, bool) or not isinstance(node, int) or not -(2**31) <= node < 2**31:
            raise _type_error(f"{here}.numaNode", "an integer NUMA node id", node)
        limits_obj = entry.get("limits") or {}
        if not isinstance(limits_obj, Mapping):
            raise _type_error(f"{here}.limits", "a mapping of resource name to quantity", limits_obj)
        try:
            limits = {
                _read_str(k, f"{here}.limits"): Quantity.parse(v, where=f"{here}.limits.{k}")
                for k, v in limits_obj.items()
            }
        except ConfigError:
            raise
        except InvalidInputError as exc:
            raise ConfigError(str(exc)) from None
        out.append(ReservedMemory(node, limits))
    return tuple(out)


_Reader = Callable[[object, str], Any]
_FILE_FIELDS: Final[Mapping[str, tuple[str, _Reader]]] = {
    "cpuManagerPolicy": ("cpu_manager_policy", _read_str),
    "cpuManagerPolicyOptions": ("cpu_manager_policy_options", _read_str_map),
    "cpuManagerReconcilePeriod": ("cpu_manager_reconcile_period", _read_duration),
    "memoryManagerPolicy": ("memory_manager_policy", _read_str),
    "topologyManagerPolicy": ("topology_manager_policy", _read_str),
    "topologyManagerScope": ("topology_manager_scope", _read_str),
    "topologyManagerPolicyOptions": ("topology_manager_policy_options", _read_str_map),
    "reservedSystemCPUs": ("reserved_system_cpus", _read_str),
    "reservedMemory": ("reserved_memory", _read_reserved_memory),
    "kubeReserved": ("kube_reserved", _read_reserved("--kube-reserved")),
    "systemReserved": ("system_reserved", _read_reserved("--system-reserved")),
    "kubeReservedCgroup": ("kube_reserved_cgroup", _read_str),
    "systemReservedCgroup": ("system_reserved_cgroup", _read_str),
    "evictionHard": ("eviction_hard", _read_eviction),
    "enforceNodeAllocatable": ("enforce_node_allocatable", _read_str_list),
    "cgroupsPerQOS": ("cgroups_per_qos", _read_bool),
    "maxPods": ("max_pods", _read_int),
    "podsPerCore": ("pods_per_core", _read_int),
    "featureGates": ("feature_gates", _read_bool_map),
}

# Fields numalign reads that SetDefaults_KubeletConfiguration defaults when they hold Go's zero value
# ("" or a zero duration: `if obj.CPUManagerPolicy == "" {...}`). The other fields read here keep an
# explicit zero value: the kubelet defaults them only when absent (nil), or their default is the zero.
_DEFAULTED_WHEN_ZERO: Final = (
    "cpu_manager_policy", "cpu_manager_reconcile_period", "memory_manager_policy",
    "topology_manager_policy", "topology_manager_scope", "max_pods",
)

# Every top-level field of KubeletConfiguration v1beta1 (staging/src/k8s.io/kubelet/config/v1beta1/
# types.go, json names). numalign reads only _FILE_FIELDS; the others are valid kubelet settings that
# do not touch resource management, so only a key outside this list earns a warning.
KUBELET_CONFIGURATION_FIELDS: Final = frozenset({
    "apiVersion", "kind",
    "enableServer", "staticPodPath", "podLogsDir", "syncFrequency", "fileCheckFrequency", "httpCheckFrequency",
    "staticPodURL", "staticPodURLHeader", "address", "port", "readOnlyPort", "tlsCertFile", "tlsPrivateKeyFile",
    "tlsCipherSuites", "tlsCurvePreferences", "tlsMinVersion", "rotateCertificates", "serverTLSBootstrap",
    "authentication", "authorization", "registryPullQPS", "registryBurst",
    "imagePullCredentialsVerificationPolicy", "preloadedImagesVerificationAllowlist", "eventRecordQPS",
    "eventBurst", "enableDebuggingHandlers", "enableContentionProfiling", "healthzPort", "healthzBindAddress",
    "oomScoreAdj", "clusterDomain", "clusterDNS", "streamingConnectionIdleTimeout", "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency", "nodeLeaseDurationSeconds", "imageMinimumGCAge", "imageMaximumGCAge",
    "imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "volumeStatsAggPeriod", "kubeletCgroups",
    "systemCgroups", "cgroupRoot", "cgroupsPerQOS", "cgroupDriver", "cpuManagerPolicy", "singleProcessOOMKill",
    "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod", "draManagerReconcilePeriod", "memoryManagerPolicy",
    "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions", "qosReserved",
    "runtimeRequestTimeout", "hairpinMode", "maxPods", "podCIDR", "podPidsLimit", "resolvConf", "runOnce",
    "cpuCFSQuota", "cpuCFSQuotaPeriod", "nodeStatusMaxImages", "maxOpenFiles", "contentType", "kubeAPIQPS",
    "kubeAPIBurst", "serializeImagePulls", "maxParallelImagePulls", "evictionHard", "evictionSoft",
    "evictionSoftGracePeriod", "evictionPressureTransitionPeriod", "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim", "mergeDefaultEvictionSettings", "podsPerCore", "enableControllerAttachDetach",
    "protectKernelDefaults", "makeIPTablesUtilChains", "iptablesMasqueradeBit", "iptablesDropBit",
    "featureGates", "failSwapOn", "memorySwap", "containerLogMaxSize", "containerLogMaxFiles",
    "containerLogMaxWorkers", "containerLogMonitorInterval", "configMapAndSecretChangeDetectionStrategy",
    "systemReserved", "kubeReserved", "reservedSystemCPUs", "showHiddenMetricsForVersion",
    "systemReservedCgroup", "kubeReservedCgroup", "enforceNodeAllocatable", "allowedUnsafeSysctls",
    "volumePluginDir", "providerID", "kernelMemcgNotification", "logging", "enableSystemLogHandler",
    "enableSystemLogQuery", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods",
    "shutdownGracePeriodByPodPriority", "crashLoopBackOff", "reservedMemory", "enableProfilingHandler",
    "enableDebugFlagsHandler", "seccompDefault", "memoryThrottlingFactor", "memoryReservationPolicy",
    "registerWithTaints", "registerNode", "tracing", "localStorageCapacityIsolation",
    "containerRuntimeEndpoint", "imageServiceEndpoint", "failCgroupV1", "userNamespaces",
})

# The feature gates numalign models: the ones its managers read (the CPU manager's and Topology Manager's
# policy-option gates, the PodResources Get endpoint's, pod-level resources). Any other gate has no
# effect on what numalign decides. Defaults: FEATURE_GATE_DEFAULTS (kubelet 1.35).
KNOWN_FEATURE_GATES: Final = tuple(FEATURE_GATE_DEFAULTS)


def unknown_field_warnings(obj: Mapping[str, Any], source: str) -> list[str]:
    """The kubelet decodes its config file leniently but logs each strict-decoding error (an unknown
    field) as a warning and carries on; numalign says the same, with the key most likely meant."""
    out = []
    by_lower = {f.lower(): f for f in KUBELET_CONFIGURATION_FIELDS}
    for key in obj:
        name = str(key)
        if name in KUBELET_CONFIGURATION_FIELDS:
            continue
        guess = by_lower.get(name.lower()) or next(
            iter(difflib.get_close_matches(name, sorted(KUBELET_CONFIGURATION_FIELDS), n=1, cutoff=0.75)), None
        )
        hint = f"; did you mean {go_quote(guess)}?" if guess else ""
        out.append(
            f"{source}: unknown field {go_quote(name)} in the KubeletConfiguration (the kubelet ignores it "
            f"with a strict-decoding warning, so it has no effect){hint}"
        )
    return out


def unknown_gate_warnings(
    gates: Mapping[str, bool], where: str, known: Sequence[str] = KNOWN_FEATURE_GATES
) -> list[str]:
    """Gates numalign does not model are accepted with a warning. numalign holds no list of every
    kubelet gate, so it says only what it knows: the gate changes nothing here (a near-miss of a
    modelled gate is named, since a misspelt gate leaves that gate at its default). `known`: the
    modelled gates (numalign.kubelet.versions.KNOWN_GATES, which the CLI passes).

    The gates that are no near-miss share one warning: an OpenShift kubelet.conf carries the cluster's
    whole gate set (dozens), which one line each, repeating the modelled list, buried the answer."""
    out = []
    unmodelled = []
    for name in gates:
        if name in known:
            continue
        guess = next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.85)), None)
        if guess is None:
            unmodelled.append(go_quote(name))
            continue
        out.append(
            f"{where}: feature gate {go_quote(name)} is not modelled by numalign and has no effect here "
            f"(numalign models {', '.join(known)}); did you mean {go_quote(guess)}?"
        )
    if unmodelled:
        names = unmodelled[0] if len(unmodelled) == 1 else f"{', '.join(unmodelled[:-1])} and {unmodelled[-1]}"
        subject = "feature gate" if len(unmodelled) == 1 else f"{len(unmodelled)} feature gates"
        verb = "is" if len(unmodelled) == 1 else "are"
        has = "has" if len(unmodelled) == 1 else "have"
        out.insert(0, f"{where}: {subject} {names} {verb} not modelled by numalign and {has} no effect here "
                      f"(numalign models {', '.join(known)})")
    return out
