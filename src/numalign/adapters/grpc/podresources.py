"""The kubelet's PodResources v1 service (upstream pkg/kubelet/apis/podresources/server_v1.go), served
on a unix socket (kubelet default /var/lib/kubelet/pod-resources/kubelet.sock), with the older
v1alpha1 List (server_v1alpha1.go) beside it on the same socket, as the kubelet still serves it.

The server reads everything from a `PodResourcesSource` that returns plain dataclasses, so the node
agent decides where pods and allocations come from. Devices are reported as the kubelet reports them
(container_manager's containerDevicesFromResourceDeviceInstances): one ContainerDevices entry per
device per NUMA node, each with a single device id; a device without topology gets one entry with no
topology. Ordering is deterministic (resources sorted, devices in source order) where upstream
iterates Go maps.

Like the kubelet (pkg/kubelet/server ListenAndServePodResources), every call first passes one shared
rate limiter (100 requests/s, bursts of 10; over the limit: ResourceExhausted "rejected by rate
limit", counted in no metric), and Get answers only while the KubeletPodResourcesGet feature gate is
on (beta, on by default since 1.34). GetAllocatableResources has no gate any more (GA in 1.28, gate
removed in 1.30).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Protocol

import grpc

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pb
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.gen.podresources.v1alpha1 import api_pb2 as alpha_pb
from numalign.adapters.grpc.gen.podresources.v1alpha1 import api_pb2_grpc as alpha_pb_grpc
from numalign.adapters.grpc.sockets import resolve_group, start_unix_server
from numalign.paths import DEFAULT_POD_RESOURCES_SOCKET as DEFAULT_POD_RESOURCES_SOCKET  # re-export

log = logging.getLogger("numalign.grpc.podresources")

SERVER_API_VERSION = "v1"  # the server_api_version label of the kubelet's pod_resources metrics

# pkg/kubelet/apis/podresources constants.go: DefaultQPS, DefaultBurstTokens.
DEFAULT_QPS = 100
DEFAULT_BURST_TOKENS = 10
RATE_LIMIT_MESSAGE = "rejected by rate limit"  # pkg/kubelet/apis/grpc ErrorLimitExceeded

GATE_GET = "KubeletPodResourcesGet"
GET_DISABLED_MESSAGE = "PodResources API Get method disabled"


def get_enabled(feature_gates: Mapping[str, bool]) -> bool:
    """Whether the kubelet would serve Get: the KubeletPodResourcesGet gate, on by default (beta)
    since 1.34."""
    return feature_gates.get(GATE_GET, True)


class RateLimiter:
    """A token bucket with golang.org/x/time/rate's Allow semantics: it starts full (`burst` tokens)
    and refills at `qps` tokens per second, never above `burst`; each request takes one token or is
    refused. `clock` returns seconds (monotonic); tests pass their own."""

    def __init__(
        self, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST_TOKENS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock()

    def allow(self) -> bool:
        with self._lock:
            now = self._clock()
            elapsed = max(0.0, now - self._last)
            self._last = now
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """One memory block of a container (memory manager), or one allocatable (NUMA node, type) entry."""

    memory_type: str  # "memory" or "hugepages-<size>"
    size: int  # bytes
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AssignedDevices:
    """Devices of one resource assigned to a container on one NUMA node, as the device manager stores
    them (deviceIds per NUMA id). `numa_node` None is upstream's -1: the devices have no topology."""

    resource_name: str
    device_ids: tuple[str, ...]
    numa_node: int | None


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """One device a DRA claim holds for a container (ClaimResource): driver, pool, device, CDI ids."""

    driver_name: str
    pool_name: str
    device_name: str
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DynamicResource:
    """A ResourceClaim a container uses and its devices (KEP-3695, GA in 1.36)."""

    claim_name: str
    claim_namespace: str
    claim_resources: tuple[ClaimDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """What PodResources reports for one container. cpu_ids are exclusive CPUs only (empty for
    containers in the shared pool). `sidecar` marks a restartable init container: v1 reports it,
    v1alpha1 (which walks pod.Spec.Containers only) does not."""

    name: str
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[AssignedDevices, ...] = ()
    sidecar: bool = False
    dynamic_resources: tuple[DynamicResource, ...] = ()  # DRA claims (agent/dra.py)


@dataclass(frozen=True, slots=True)
class PodResources:
    """One active pod. `containers` lists restartable init containers (sidecars) first, then the app
    containers, in spec order: the order upstream reports them."""

    name: str
    namespace: str
    containers: tuple[ContainerResources, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatableDevice:
    """One healthy device. `numa_nodes` None means the plugin sent no topology (reported once, without
    topology); () means an empty TopologyInfo, which upstream's per-node loop reports not at all."""

    resource_name: str
    device_id: str
    numa_nodes: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class AllocatableResources:
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[AllocatableDevice, ...] = ()


class PodResourcesSource(Protocol):
    """Where the server reads pods and allocations from. Called from gRPC threads: be thread-safe.

    list_pods: the active pods (v1 List, upstream GetActivePods). get_pod and list_all_pods also see
    pods the node knows but did not admit (upstream's pod manager: GetPodByName, GetPods), reported
    with no resources.
    """

    def list_pods(self) -> Sequence[PodResources]: ...

    def list_all_pods(self) -> Sequence[PodResources]: ...

    def get_pod(self, namespace: str, name: str) -> PodResources | None: ...

    def allocatable(self) -> AllocatableResources: ...


class SnapshotPodResourcesSource:
    """A thread-safe PodResourcesSource holding the latest snapshot the agent pushed.

    The node agent calls `publish(pods, allocatable)` after every admission, release or device update;
    RPCs read the last published snapshot, so they never observe a half-applied change.
    """

    def __init__(
        self,
        pods: Sequence[PodResources] = (),
        allocatable: AllocatableResources | None = None,
        inactive: Sequence[PodResources] = (),
    ) -> None:
        self._lock = threading.Lock()
        self._pods: tuple[PodResources, ...] = tuple(pods)
        self._inactive: tuple[PodResources, ...] = tuple(inactive)
        self._allocatable = allocatable or AllocatableResources()

    def publish(
        self,
        pods: Sequence[PodResources] | None = None,
        allocatable: AllocatableResources | None = None,
        inactive: Sequence[PodResources] | None = None,
    ) -> None:
        """Replace the active pods, the allocatable resources and/or the known-but-inactive pods
        (rejected, or waiting for a plugin); None keeps the current value."""
        with self._lock:
            if pods is not None:
                self._pods = tuple(pods)
            if allocatable is not None:
                self._allocatable = allocatable
            if inactive is not None:
                self._inactive = tuple(inactive)

    def list_pods(self) -> Sequence[PodResources]:
        with self._lock:
            return self._pods

    def list_all_pods(self) -> Sequence[PodResources]:
        with self._lock:
            return tuple(sorted(self._pods + self._inactive, key=lambda p: (p.namespace, p.name)))

    def get_pod(self, namespace: str, name: str) -> PodResources | None:
        with self._lock:
            return next(
                (p for p in self._pods + self._inactive if p.namespace == namespace and p.name == name), None
            )

    def allocatable(self) -> AllocatableResources:
        with self._lock:
            return self._allocatable


# (method, failed) -> None; method is "list", "get_allocatable" or "get", as in the kubelet's metrics.
OnCall = Callable[[str, bool], None]
# A v1alpha1 List call: upstream counts it only in ..._requests_total{server_api_version="v1alpha1"}.
OnAlphaCall = Callable[[], None]


def _topology(nodes: Iterable[int]) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in nodes])


def _device_entries(
    resource: str, device_id: str, nodes: tuple[int, ...] | None
) -> list[pb.ContainerDevices]:
    if nodes is None:
        return [pb.ContainerDevices(resource_name=resource, device_ids=[device_id])]
    return [
        pb.ContainerDevices(resource_name=resource, device_ids=[device_id], topology=_topology([n]))
        for n in nodes
    ]


def container_devices_to_pb(groups: Iterable[AssignedDevices]) -> list[pb.ContainerDevices]:
    """Flatten per-NUMA device groups the way the kubelet does for List/Get.

    A device listed under several NUMA nodes is reported once per node; a device under "no topology"
    is reported once without topology.
    """
    per_resource: dict[str, dict[str, tuple[int, ...] | None]] = {}
    for g in groups:
        devs = per_resource.setdefault(g.resource_name, {})
        for dev_id in g.device_ids:
            if g.numa_node is None:
                devs[dev_id] = None
            else:
                prev = devs.get(dev_id) or ()
                devs[dev_id] = tuple(sorted({*prev, g.numa_node}))
    out: list[pb.ContainerDevices] = []
    for resource in sorted(per_resource):
        for dev_id, nodes in per_resource[resource].items():
            out.extend(_device_entries(resource, dev_id, nodes))
    return out


def _memory_to_pb(blocks: Iterable[MemoryBlock]) -> list[pb.ContainerMemory]:
    return [
        pb.ContainerMemory(memory_type=b.memory_type, size=b.size, topology=_topology(b.numa_nodes))
        for b in blocks
    ]


def pod_to_pb(pod: PodResources) -> pb.PodResources:
    return pb.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=[
            pb.ContainerResources(
                name=c.name,
                devices=container_devices_to_pb(c.devices),
                cpu_ids=list(c.cpu_ids),
                memory=_memory_to_pb(c.memory),
                dynamic_resources=_dynamic_to_pb(c.dynamic_resources),
            )
            for c in pod.containers
        ],
    )


def _dynamic_to_pb(resources: Iterable[DynamicResource]) -> list[pb.DynamicResource]:
    return [
        pb.DynamicResource(
            claim_name=r.claim_name, claim_namespace=r.claim_namespace,
            claim_resources=[pb.ClaimResource(driver_name=d.driver_name, pool_name=d.pool_name,
                                              device_name=d.device_name,
                                              cdi_devices=[pb.CDIDevice(name=n) for n in d.cdi_devices])
                             for d in r.claim_resources])
        for r in resources
    ]


def pod_to_alpha_pb(pod: PodResources) -> alpha_pb.PodResources:
    """server_v1alpha1.go List: app containers only, each v1 device entry without its topology
    (v1DevicesToAlphaV1), so a device on two NUMA nodes appears twice, as upstream sends it."""
    return alpha_pb.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=[
            alpha_pb.ContainerResources(
                name=c.name,
                devices=[
                    alpha_pb.ContainerDevices(resource_name=d.resource_name, device_ids=list(d.device_ids))
                    for d in container_devices_to_pb(c.devices)
                ],
            )
            for c in pod.containers
            if not c.sidecar
        ],
    )


def allocatable_to_pb(res: AllocatableResources) -> pb.AllocatableResourcesResponse:
    devices: list[pb.ContainerDevices] = []
    for resource in sorted({d.resource_name for d in res.devices}):
        for d in res.devices:
            if d.resource_name == resource:
                devices.extend(_device_entries(resource, d.device_id, d.numa_nodes))
    return pb.AllocatableResourcesResponse(
        devices=devices, cpu_ids=list(res.cpu_ids), memory=_memory_to_pb(res.memory)
    )


class _Servicer(pb_grpc.PodResourcesListerServicer):
    def __init__(
        self, source: PodResourcesSource, on_call: OnCall | None, limiter: RateLimiter, get_enabled: bool
    ) -> None:
        self._source = source
        self._on_call = on_call
        self._limiter = limiter
        self._get_enabled = get_enabled

    def _count(self, method: str, failed: bool) -> None:
        if self._on_call is not None:
            try:
                self._on_call(method, failed)
            except Exception:
                log.exception("PodResources on_call callback failed")

    def _internal(self, method: str, context: grpc.ServicerContext, e: Exception) -> NoReturn:
        log.exception("PodResources %s failed", method)
        self._count(method, True)
        context.abort(grpc.StatusCode.UNKNOWN, f"PodResources {method} failed: {e}")

    def _limit(self, context: grpc.ServicerContext) -> None:
        # The kubelet's interceptor refuses the call before the handler runs, so no metric counts it.
        if not self._limiter.allow():
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMIT_MESSAGE)

    def List(
        self, request: pb.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> pb.ListPodResourcesResponse:
        self._limit(context)
        try:
            resp = pb.ListPodResourcesResponse(pod_resources=[pod_to_pb(p) for p in self._source.list_pods()])
        except Exception as e:
            self._internal("list", context, e)
        self._count("list", False)
        return resp

    def GetAllocatableResources(
        self, request: pb.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> pb.AllocatableResourcesResponse:
        self._limit(context)
        try:
            resp = allocatable_to_pb(self._source.allocatable())
        except Exception as e:
            self._internal("get_allocatable", context, e)
        self._count("get_allocatable", False)
        return resp

    def Get(
        self, request: pb.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> pb.GetPodResourcesResponse:
        self._limit(context)
        if not self._get_enabled:
            # Upstream returns a plain Go error (gRPC code Unknown) and counts it as a Get error.
            self._count("get", True)
            context.abort(grpc.StatusCode.UNKNOWN, GET_DISABLED_MESSAGE)
        try:
            pod = self._source.get_pod(request.pod_namespace, request.pod_name)
        except Exception as e:
            self._internal("get", context, e)
        if pod is None:
            self._count("get", True)
            # Upstream returns a plain Go error here, which gRPC sends as code Unknown.
            context.abort(
                grpc.StatusCode.UNKNOWN,
                f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
            )
        try:
            resp = pb.GetPodResourcesResponse(pod_resources=pod_to_pb(pod))
        except Exception as e:
            self._internal("get", context, e)
        self._count("get", False)
        return resp


class _AlphaServicer(alpha_pb_grpc.PodResourcesListerServicer):
    def __init__(self, source: PodResourcesSource, on_call: OnAlphaCall | None, limiter: RateLimiter) -> None:
        self._source = source
        self._on_call = on_call
        self._limiter = limiter

    def List(
        self, request: alpha_pb.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> alpha_pb.ListPodResourcesResponse:
        if not self._limiter.allow():  # one limiter for the whole socket, as upstream's interceptor
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMIT_MESSAGE)
        if self._on_call is not None:
            try:
                self._on_call()
            except Exception:
                log.exception("PodResources on_alpha_call callback failed")
        try:
            return alpha_pb.ListPodResourcesResponse(
                # upstream's v1alpha1 List reads GetPods(): every pod the node knows, admitted or not
                pod_resources=[pod_to_alpha_pb(p) for p in self._source.list_all_pods()]
            )
        except Exception as e:
            log.exception("PodResources v1alpha1 list failed")
            context.abort(grpc.StatusCode.UNKNOWN, f"PodResources v1alpha1 list failed: {e}")


class PodResourcesServer:
    """Serves v1.PodResourcesLister and v1alpha1.PodResourcesLister on a unix socket (0600, or 0660
    with `socket_group`).

    `on_call(method, failed)` is called once per v1 RPC that passed the rate limiter (method "list",
    "get_allocatable" or "get"), `on_alpha_call()` once per v1alpha1 List, for the
    kubelet_pod_resources_endpoint_* metrics. `limiter` defaults
    to the kubelet's (100 QPS, burst 10). `get_enabled` is the KubeletPodResourcesGet gate (see
    `get_enabled()`).
    """

    def __init__(
        self,
        source: PodResourcesSource,
        socket_path: Path = DEFAULT_POD_RESOURCES_SOCKET,
        *,
        socket_group: str | int | None = None,
        on_call: OnCall | None = None,
        on_alpha_call: OnAlphaCall | None = None,
        max_workers: int = 4,
        limiter: RateLimiter | None = None,
        get_enabled: bool = True,
    ) -> None:
        self.source = source
        self.socket_path = Path(socket_path).absolute()
        self._gid = resolve_group(socket_group)
        self._on_call = on_call
        self._on_alpha_call = on_alpha_call
        self._max_workers = max_workers
        self._limiter = limiter if limiter is not None else RateLimiter()
        self._get_enabled = get_enabled
        self._server: grpc.Server | None = None

    def start(self) -> None:
        if self._server is not None:
            return
        servicer = _Servicer(self.source, self._on_call, self._limiter, self._get_enabled)
        alpha = _AlphaServicer(self.source, self._on_alpha_call, self._limiter)

        def register(server: grpc.Server) -> None:
            # Both API versions on one socket, as pkg/kubelet/server ListenAndServePodResources does.
            alpha_pb_grpc.add_PodResourcesListerServicer_to_server(alpha, server)
            pb_grpc.add_PodResourcesListerServicer_to_server(servicer, server)

        self._server = start_unix_server(
            self.socket_path,
            register,
            gid=self._gid,
            max_workers=self._max_workers,
            what="PodResources",
        )

    def stop(self, grace: float = 1.0) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.stop(grace).wait(grace + 5)
        self.socket_path.unlink(missing_ok=True)
        log.info("stopped PodResources server on %s", self.socket_path)

    def __enter__(self) -> PodResourcesServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
