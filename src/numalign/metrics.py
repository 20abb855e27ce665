"""The kubelet's resource-manager metrics, under the kubelet's exact names: a small thread-safe store.

Every admission updates it, so it stays free of prometheus_client (about 0.1 s to import, paid by every
`numalign admit` that never serves metrics); agent.exposition renders it where /metrics is served.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Final, NamedTuple

LabelKey = tuple[tuple[str, str], ...]


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor**i for i in range(count))


DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class _Family:
    name: str
    kind: str  # counter | gauge | histogram
    doc: str
    buckets: tuple[float, ...] = ()
    values: dict[LabelKey, float] = field(default_factory=dict)
    hist: dict[LabelKey, list[float]] = field(default_factory=dict)  # bucket counts..., sum, count


class Metrics:
    """Thread-safe metric values with exact kubelet names (all ALPHA upstream)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}
        for name, kind, doc, buckets in KUBELET_METRICS:
            fam = self._families[name] = _Family(name, kind, doc, buckets)
            if name not in LABELLED:
                # Metrics without labels exist (at zero) from the start, as client_golang exposes them.
                if kind == "histogram":
                    fam.hist[()] = [0.0] * (len(buckets) + 2)
                else:
                    fam.values[()] = 0.0

    def _fam(self, name: str, kind: str) -> _Family:
        fam = self._families.get(name)
        if fam is None or fam.kind != kind:
            raise KeyError(f"metric {name!r} is not a registered {kind}")
        return fam

    # `amount: float | int`, not `float`: mypyc 2.4 cannot write the signature text of a method whose
    # native float argument has a default beside **kwargs (the same values are accepted).
    def inc(self, name: str, amount: float | int = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items())) if labels else ()  # every admission counts: skip the empty sort
        self.inc_series(name, key, amount)

    # The updates every admission makes take the lock with acquire/release rather than `with`: the
    # compiled core runs a `with` as two looked-up method calls besides the lock's own, some 0.1 us each
    # time, and an admission updates several series.
    def inc_series(self, name: str, key: LabelKey, amount: float = 1.0) -> None:
        """inc, the series given by its label pairs already sorted (callers counting the same series at
        every admission keep its key)."""
        lock = self._lock
        lock.acquire()
        try:
            fam = self._families.get(name)
            if fam is None or fam.kind != "counter":
                raise KeyError(f"metric {name!r} is not a registered counter")
            values = fam.values
            values[key] = values.get(key, 0.0) + amount
        finally:
            lock.release()

    def catch_up(self, name: str, key: LabelKey, count: int) -> None:
        """Raise a counter series to `count` when it is below it (a counter kept elsewhere as a plain
        integer, published here): what inc(name, count - value) does when that is positive."""
        lock = self._lock
        lock.acquire()
        try:
            self._catch_up(name, key, count)
        finally:
            lock.release()

    def catch_up_all(self, counts: list[tuple[str, LabelKey, int]]) -> None:
        """catch_up of each (name, series, count), under one hold of the lock."""
        lock = self._lock
        lock.acquire()
        try:
            for name, key, count in counts:
                self._catch_up(name, key, count)
        finally:
            lock.release()

    def _catch_up(self, name: str, key: LabelKey, count: int) -> None:
        fam = self._families.get(name)
        if fam is None or fam.kind != "counter":
            raise KeyError(f"metric {name!r} is not a registered counter")
        values = fam.values
        now = values.get(key, 0.0)
        delta = count - int(now)
        if delta > 0:
            values[key] = now + float(delta)

    def init_series(self, name: str, **labels: str) -> None:
        """Create a zero-valued series (the kubelet pre-initialises some label sets)."""
        with self._lock:
            fam = self._families[name]
            fam.values.setdefault(tuple(sorted(labels.items())), 0.0)

    def set(self, name: str, value: float, **labels: str) -> None:
        self.set_all([(name, tuple(sorted(labels.items())) if labels else (), value)])

    def set_all(self, values: list[tuple[str, LabelKey, float]]) -> None:
        """set of each (gauge, series given by its sorted label pairs, value), under one hold of the lock
        (the CPU manager's gauges change together)."""
        lock = self._lock
        lock.acquire()
        try:
            for name, key, value in values:
                self._fam(name, "gauge").values[key] = value
        finally:
            lock.release()

    def add(self, name: str, amount: float, **labels: str) -> None:
        with self._lock:
            fam = self._fam(name, "gauge")
            key = tuple(sorted(labels.items()))
            fam.values[key] = fam.values.get(key, 0.0) + amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        self.observe_series(name, tuple(sorted(labels.items())) if labels else (), value)

    def observe_series(self, name: str, key: LabelKey, value: float) -> None:
        """observe, the series given by its sorted label pairs. A series keeps per bucket the observations
        that fall in it and not in a smaller one (one count to raise, found by bisection, not one per
        bucket at or above the value); `families` and `value` answer cumulative counts, as the
        exposition shows them."""
        lock = self._lock
        lock.acquire()
        try:
            fam = self._fam(name, "histogram")
            buckets = fam.buckets
            h = fam.hist.get(key)
            if h is None:
                h = fam.hist[key] = [0.0] * (len(buckets) + 2)
            i = bisect_left(buckets, value)  # the first bound >= value (len(buckets): only +Inf holds it)
            if i < len(buckets) and value <= buckets[i]:  # (NaN is in no bucket, as before)
                h[i] += 1
            h[-2] += value
            h[-1] += 1
        finally:
            lock.release()

    def value(self, name: str, **labels: str) -> float:
        """Current value of a counter/gauge series (0 when absent); histogram: its count."""
        with self._lock:
            fam = self._families[name]
            key = tuple(sorted(labels.items()))
            if fam.kind == "histogram":
                return fam.hist.get(key, [0.0])[-1]
            return fam.values.get(key, 0.0)

    def families(self) -> list[Family]:
        """A consistent copy of every family, for an exposition (agent.exposition renders it); a histogram's
        bucket counts cumulative (each bucket counts every observation at or below its bound)."""
        with self._lock:
            return [Family(f.name, f.kind, f.doc, f.buckets, dict(f.values),
                           {k: _cumulative(v) for k, v in f.hist.items()})
                    for f in self._families.values()]


def _cumulative(counts: list[float]) -> list[float]:
    """A histogram series as kept (per bucket, the observations in it alone; then sum and count) with
    its bucket counts made cumulative."""
    out = list(counts)
    running = 0.0
    for i in range(len(out) - 2):
        running += out[i]
        out[i] = running
    return out


class UnreadMetrics(Metrics):
    """Metrics nobody reads (the cluster simulator's kubelets): every update is dropped, every value is 0
    (so sync_metrics publishes nothing). Here, not beside its user: a class interpreted Python defines
    cannot derive from the compiled Metrics."""

    def __init__(self) -> None:  # no families: nothing is kept
        pass

    def inc(self, name: str, amount: float | int = 1.0, **labels: str) -> None:
        pass

    def inc_series(self, name: str, key: LabelKey, amount: float = 1.0) -> None:
        pass

    def catch_up(self, name: str, key: LabelKey, count: int) -> None:
        pass

    def catch_up_all(self, counts: list[tuple[str, LabelKey, int]]) -> None:
        pass

    def init_series(self, name: str, **labels: str) -> None:
        pass

    def set(self, name: str, value: float, **labels: str) -> None:
        pass

    def set_all(self, values: list[tuple[str, LabelKey, float]]) -> None:
        pass

    def add(self, name: str, amount: float, **labels: str) -> None:
        pass

    def observe(self, name: str, value: float, **labels: str) -> None:
        pass

    def observe_series(self, name: str, key: LabelKey, value: float) -> None:
        pass

    def value(self, name: str, **labels: str) -> float:
        return 0.0

    def families(self) -> list[Family]:
        return []


class Family(NamedTuple):
    """One metric family's values at one moment: series by sorted label pairs; a histogram's series are
    its bucket counts, then sum, then count."""

    name: str
    kind: str  # counter | gauge | histogram
    doc: str
    buckets: tuple[float, ...]
    values: dict[LabelKey, float]
    hist: dict[LabelKey, list[float]]


TM_ADMISSION_REQUESTS: Final = "kubelet_topology_manager_admission_requests_total"
TM_ADMISSION_ERRORS: Final = "kubelet_topology_manager_admission_errors_total"
TM_ADMISSION_DURATION: Final = "kubelet_topology_manager_admission_duration_ms"
ALIGNED_COUNT: Final = "kubelet_container_aligned_compute_resources_count"
ALIGNED_FAILURE: Final = "kubelet_container_aligned_compute_resources_failure_count"
CPU_PINNING_REQUESTS: Final = "kubelet_cpu_manager_pinning_requests_total"
CPU_PINNING_ERRORS: Final = "kubelet_cpu_manager_pinning_errors_total"
CPU_SHARED_POOL: Final = "kubelet_cpu_manager_shared_pool_size_millicores"
CPU_EXCLUSIVE: Final = "kubelet_cpu_manager_exclusive_cpu_allocation_count"
CPU_PER_NUMA: Final = "kubelet_cpu_manager_allocation_per_numa"
MEM_PINNING_REQUESTS: Final = "kubelet_memory_manager_pinning_requests_total"
MEM_PINNING_ERRORS: Final = "kubelet_memory_manager_pinning_errors_total"
DP_REGISTRATION: Final = "kubelet_device_plugin_registration_total"
DP_ALLOC_DURATION: Final = "kubelet_device_plugin_alloc_duration_seconds"
ADMISSION_REJECTIONS: Final = "kubelet_admission_rejections_total"
# 1.37 on, registered only while PodLevelResources is on (beta, on by default since 1.34): kubelet.go counts
# each pod it admits, labelled config_mode (pod_and_container_level, pod_level, container_level, or "" when
# neither sets a resource) and qos_class (its QoS class in lower case).
POD_LEVEL_ADMISSIONS: Final = "kubelet_pod_level_resources_admission_total"
# 1.36 on, registered only with the gate PodLevelResourceManagers on. Labels: resource_name (cpu, memory) and
# source (node, pod) or assignment_type (node_exclusive, pod_exclusive, pod_shared). 1.36 names them without
# the kubelet_ prefix (no subsystem) and the assignments family without _total; 1.37 with both.
RM_ALLOCATIONS: Final = "kubelet_resource_manager_allocations_total"
RM_ALLOCATION_ERRORS: Final = "kubelet_resource_manager_allocation_errors_total"
RM_ASSIGNMENTS: Final = "kubelet_resource_manager_container_assignments_total"
RM_ALLOCATIONS_136: Final = "resource_manager_allocations_total"
RM_ALLOCATION_ERRORS_136: Final = "resource_manager_allocation_errors_total"
RM_ASSIGNMENTS_136: Final = "resource_manager_container_assignments"
_RM_ALLOCATIONS_DOC = "Number of exclusive resource allocations performed by a resource manager."
_RM_ERRORS_DOC = "Number of errors encountered during exclusive resource allocation."
_RM_ASSIGNMENTS_DOC = "Number of containers with a specific type of resource assignment."
RM_136_NAMES = {RM_ALLOCATIONS: RM_ALLOCATIONS_136, RM_ALLOCATION_ERRORS: RM_ALLOCATION_ERRORS_136,
                RM_ASSIGNMENTS: RM_ASSIGNMENTS_136}
PR_REQUESTS: Final = "kubelet_pod_resources_endpoint_requests_total"
PR_REQUESTS_LIST: Final = "kubelet_pod_resources_endpoint_requests_list"
PR_REQUESTS_ALLOCATABLE: Final = "kubelet_pod_resources_endpoint_requests_get_allocatable"
PR_REQUESTS_GET: Final = "kubelet_pod_resources_endpoint_requests_get"
PR_ERRORS_LIST: Final = "kubelet_pod_resources_endpoint_errors_list"
PR_ERRORS_ALLOCATABLE: Final = "kubelet_pod_resources_endpoint_errors_get_allocatable"
PR_ERRORS_GET: Final = "kubelet_pod_resources_endpoint_errors_get"

# The rejection reasons kubelet.go's recordAdmissionRejection labels by name (its admissionRejectionReasons),
# per release: any other OutOf<resource> counts as OutOfExtendedResources, anything else as Other (e.g. the
# CPU manager's SMTAlignmentError, which no release lists).
_NAMED_REJECTIONS = frozenset({
    "AppArmor", "PodOSSelectorNodeLabelDoesNotMatch", "PodOSNotSupported", "InvalidNodeInfo",
    "InitContainerRestartPolicyForbidden", "SupplementalGroupsPolicyNotSupported", "UnexpectedAdmissionError",
    "UnknownReason", "UnexpectedPredicateFailureType", "OutOfcpu", "OutOfmemory", "OutOfephemeral-storage",
    "OutOfpods", "node(s) had taints that the pod didn't tolerate", "Evicted", "SysctlForbidden",
    "TopologyAffinityError", "NodeShutdown",
})
# Reasons a later release added to the list, by the release that added them.
_NAMED_REJECTIONS_SINCE: tuple[tuple[tuple[int, int], frozenset[str]], ...] = (
    ((1, 34), frozenset({"PodLevelResourcesNotSupported", "VolumeAttachmentLimitExceeded"})),
    ((1, 35), frozenset({"PodFeatureUnsupported"})),
)
NEWEST_RELEASE = (1, 37)


def rejection_label(reason: str, release: tuple[int, int] = NEWEST_RELEASE) -> str:
    """The `reason` label of ADMISSION_REJECTIONS for a rejection's reason at kubelet `release` (major, minor)."""
    if reason in _NAMED_REJECTIONS or any(release >= since and reason in named
                                          for since, named in _NAMED_REJECTIONS_SINCE):
        return reason
    return "OutOfExtendedResources" if reason.startswith("OutOf") else "Other"


LABELLED = frozenset({
    ALIGNED_COUNT, ALIGNED_FAILURE, CPU_PER_NUMA, DP_REGISTRATION, DP_ALLOC_DURATION, ADMISSION_REJECTIONS,
    POD_LEVEL_ADMISSIONS, RM_ALLOCATIONS, RM_ALLOCATION_ERRORS, RM_ASSIGNMENTS, RM_ALLOCATIONS_136,
    RM_ALLOCATION_ERRORS_136, RM_ASSIGNMENTS_136,
    PR_REQUESTS, PR_REQUESTS_LIST, PR_REQUESTS_ALLOCATABLE, PR_REQUESTS_GET, PR_ERRORS_LIST,
    PR_ERRORS_ALLOCATABLE, PR_ERRORS_GET,
})

KUBELET_METRICS: tuple[tuple[str, str, str, tuple[float, ...]], ...] = (
    (TM_ADMISSION_REQUESTS, "counter", "Number of admission requests where resources have to be aligned.", ()),
    (TM_ADMISSION_ERRORS, "counter", "Number of admission request failures where resources could not be aligned.",
     ()),
    (TM_ADMISSION_DURATION, "histogram", "Duration in milliseconds to serve a pod admission request.",
     exponential_buckets(0.05, 2, 15)),
    (ALIGNED_COUNT, "counter", "Cumulative number of aligned compute resources allocated to containers by "
     "alignment type.", ()),
    (ALIGNED_FAILURE, "counter", "Cumulative number of failures to allocate aligned compute resources to "
     "containers by alignment type.", ()),
    (CPU_PINNING_REQUESTS, "counter", "The number of cpu core allocations which required pinning.", ()),
    (CPU_PINNING_ERRORS, "counter", "The number of cpu core allocations which required pinning failed.", ()),
    (CPU_SHARED_POOL, "gauge", "The size of the shared CPU pool for non-guaranteed QoS pods, in millicores.", ()),
    (CPU_EXCLUSIVE, "gauge", "The total number of CPUs exclusively allocated to containers running on this node",
     ()),
    (CPU_PER_NUMA, "gauge", "Number of CPUs allocated per NUMA node", ()),
    (MEM_PINNING_REQUESTS, "counter", "The number of memory pages allocations which required pinning.", ()),
    (MEM_PINNING_ERRORS, "counter", "The number of memory pages allocations which required pinning failed.", ()),
    (DP_REGISTRATION, "counter", "Cumulative number of device plugin registrations. Broken down by resource name.",
     ()),
    (DP_ALLOC_DURATION, "histogram", "Duration in seconds to serve a device plugin Allocation request. Broken down "
     "by resource name.", DEFAULT_BUCKETS),
    (ADMISSION_REJECTIONS, "counter", "Cumulative number pod admission rejections by the Kubelet.", ()),
    (POD_LEVEL_ADMISSIONS, "counter", "Number of pods admitted by the kubelet, by how their resources are set "
     "(pod_and_container_level, pod_level, container_level, or empty) and their QoS class.", ()),
    (RM_ALLOCATIONS, "counter", _RM_ALLOCATIONS_DOC, ()),
    (RM_ALLOCATIONS_136, "counter", _RM_ALLOCATIONS_DOC, ()),
    (RM_ALLOCATION_ERRORS, "counter", _RM_ERRORS_DOC, ()),
    (RM_ALLOCATION_ERRORS_136, "counter", _RM_ERRORS_DOC, ()),
    (RM_ASSIGNMENTS, "counter", _RM_ASSIGNMENTS_DOC, ()),
    (RM_ASSIGNMENTS_136, "counter", _RM_ASSIGNMENTS_DOC, ()),
    (PR_REQUESTS, "counter", "Cumulative number of requests to the PodResource endpoint. Broken down by server "
     "api version.", ()),
    (PR_REQUESTS_LIST, "counter", "Number of requests to the PodResource List endpoint.", ()),
    (PR_REQUESTS_ALLOCATABLE, "counter", "Number of requests to the PodResource GetAllocatableResources endpoint.",
     ()),
    (PR_REQUESTS_GET, "counter", "Number of requests to the PodResource Get endpoint.", ()),
    (PR_ERRORS_LIST, "counter", "Number of requests to the PodResource List endpoint which returned error.", ()),
    (PR_ERRORS_ALLOCATABLE, "counter", "Number of requests to the PodResource GetAllocatableResources endpoint "
     "which returned error.", ()),
    (PR_ERRORS_GET, "counter", "Number of requests to the PodResource Get endpoint which returned error.", ()),
)
