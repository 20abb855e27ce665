"""The device manager (upstream pkg/kubelet/cm/devicemanager ManagerImpl), as a hint provider.

Pure: no clock, no I/O. Times (plugin stop, capacity queries) are passed in by the caller, in
seconds on any monotonic scale. The checkpoint file is the state layer's business: it reads
`snapshot()` whenever `checkpoint_hook` fires (where upstream calls writeCheckpoint).

Determinism: where upstream iterates a Go map or set, we iterate sorted (resources by name, devices in
natural id order), so that the same state always yields the same allocation. See affinity.py for
the order within filterByAffinity. GetPreferredAllocation answers are taken in the plugin's order.

Pod garbage collection (UpdateAllocatedDevices) needs the set of active pods. Without an
`active_pods` callable nothing is collected and the owner calls `remove_pod` when a pod goes away.
Upstream has no per-container release; `remove_container` exists for the admission layer (the
kubelet frees a pod's devices only once the pod is no longer active).

Not thread-safe: a caller with several threads (plugin streams, admission) serializes all calls,
as upstream does with its mutex. GetPreferredAllocation and PreStartContainer go through the Endpoint
while the caller's lock is held; they carry their own deadlines.

One allocation path, the kubelet's: `allocate_steps` is upstream's Allocate as a generator that yields
each plugin Allocate call where the kubelet makes it (after the resource's devices, GetPreferredAllocation
included, and before the next resource's) and takes the plugin's answer back, or the PluginError it
raised, which ends the allocation as upstream's does. The admission drives it (making the calls at once,
or pausing with its lock released: numalign.kubelet.podadmission); `allocate` makes them at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError, EmptyAllocateError, PluginError
from numalign.k8s.deviceplugin import HEALTHY, ContainerAllocateResponse, Device
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import pod_limits
from numalign.kubelet.devicemanager.allocation import AllocationRequest, devices_to_allocate
from numalign.kubelet.devicemanager.allocresp import AllocRespError, decode_allocate_response, encode_allocate_response
from numalign.kubelet.devicemanager.endpoint import Endpoint, EndpointInfo, StaticEndpoint
from numalign.kubelet.devicemanager.hints import resource_topology_hints
from numalign.kubelet.devicemanager.implicit_hints import resource_topology_hints_implicit
from numalign.kubelet.devicemanager.pod_devices import (
    NODE_WITHOUT_TOPOLOGY,
    DevicesPerNUMA,
    PodDevices,
    RunContainerOptions,
    sorted_ids,
)
from numalign.kubelet.devicemanager.prestart import call_pre_start_if_needed, pre_start_call
from numalign.kubelet.devicemanager.state import DeviceManagerState, PodDevicesEntry
from numalign.kubelet.topologymanager.provider import (
    DEFAULT_IMPLICIT_FROM_NODES,
    AffinityStore,
    HintProvider,
    ImplicitHintProvider,
    ListOrImplicit,
    SteppedProvider,
    make_calls_now,
)
from numalign.kubelet.versions import DEFAULT_BEHAVIOURS, Behaviours
from numalign.paths import ENDPOINT_STOP_GRACE_PERIOD as ENDPOINT_STOP_GRACE_PERIOD  # re-export

_D_co = TypeVar("_D_co", bound=ListOrImplicit, covariant=True)
_D = TypeVar("_D", bound=ListOrImplicit)


class _Gen(Protocol[_D_co]):
    """A hint generator with resource_topology_hints' signature (explicit or implicit lists)."""

    def __call__(
        self,
        numa_nodes: Sequence[int],
        all_devices: Mapping[str, Device],
        *,
        allocated: Collection[str] | None,
        available: Collection[str],
        reusable: Collection[str],
        request: int,
        over_device_nodes: bool = False,
    ) -> _D_co | None: ...




@dataclass(frozen=True)
class DeviceCapacity:
    """GetCapacity's three results: capacity and allocatable counts per resource, and the resources
    dropped in this call (node status removes them)."""

    capacity: dict[str, int]
    allocatable: dict[str, int]
    deleted: list[str]


@dataclass(frozen=True)
class AllocateCall:
    """One plugin Allocate call, where the kubelet makes it (DeviceManager.allocate_steps yields it): the
    devices are taken; the caller makes the call and sends the plugin's answer back, or throws the
    PluginError it raised."""

    pod_uid: str
    container_name: str
    resource: str
    endpoint: Endpoint
    device_ids: tuple[str, ...]
    per_numa: DevicesPerNUMA
    # Where the call's duration goes, (resource, seconds): the device manager's allocate_durations.
    durations: list[tuple[str, float]] = field(compare=False, repr=False)

    def __init__(self, pod_uid: str, container_name: str, resource: str, endpoint: Endpoint,
                 device_ids: tuple[str, ...], per_numa: DevicesPerNUMA, durations: list[tuple[str, float]]) -> None:
        # Written out, as AllocationRequest's (one call per device resource per admission).
        object.__setattr__(self, "pod_uid", pod_uid)
        object.__setattr__(self, "container_name", container_name)
        object.__setattr__(self, "resource", resource)
        object.__setattr__(self, "endpoint", endpoint)
        object.__setattr__(self, "device_ids", device_ids)
        object.__setattr__(self, "per_numa", per_numa)
        object.__setattr__(self, "durations", durations)

    def make(self) -> ContainerAllocateResponse:
        """The plugin's Allocate (raises PluginError), timed as the kubelet times it, answered or not."""
        start = time.monotonic()
        try:
            return self.endpoint.allocate(list(self.device_ids))
        finally:
            self.durations.append((self.resource, time.monotonic() - start))


# An allocation's steps: the Allocate calls it yields, each answered with the plugin's response.
AllocateSteps = Generator[AllocateCall, ContainerAllocateResponse, None]


def _count(limits: Mapping[str, Quantity], resource: str) -> int:
    """int(quantity.Value()): rounded up to an integer."""
    return limits[resource].value()


class DeviceManager:
    """HintProvider "devices": inventory, plugin endpoints, hints, allocation and checkpoint data."""

    name = "devices"

    def __init__(
        self,
        numa_nodes: Sequence[int],
        affinity: AffinityStore,
        *,
        endpoint_stop_grace_period: float = ENDPOINT_STOP_GRACE_PERIOD,
        active_pods: Callable[[], Iterable[str]] | None = None,
        sources_ready: Callable[[], bool] = lambda: True,
        running_containers: Collection[tuple[str, str]] = (),
        checkpoint_hook: Callable[[], None] | None = None,
        implicit_from_nodes: int = DEFAULT_IMPLICIT_FROM_NODES,
        behaviours: Behaviours = DEFAULT_BEHAVIOURS,
    ) -> None:
        self.numa_nodes = list(numa_nodes)
        # what the kubelet release modelled does differently (numalign.kubelet.versions)
        self.behaviours = behaviours
        # hints are implicit on machines with at least this many NUMA nodes (providers/implicit)
        self.implicit_from_nodes = implicit_from_nodes
        self.affinity = affinity
        self.endpoint_stop_grace_period = endpoint_stop_grace_period
        self.active_pods = active_pods
        self.sources_ready = sources_ready
        # (pod UID, container) reported running by the runtime at start (containerMap + running set).
        self.running_containers = set(running_containers)
        self.checkpoint_hook = checkpoint_hook

        self.endpoints: dict[str, EndpointInfo] = {}
        self.all_devices: dict[str, dict[str, Device]] = {}
        self.healthy: dict[str, set[str]] = {}
        self.unhealthy: dict[str, set[str]] = {}
        self.allocated: dict[str, set[str]] = {}
        self.pod_devices = PodDevices()
        self.devices_to_reuse: dict[str, dict[str, set[str]]] = {}
        # The kubelet's device plugin metrics, published by ContainerManager.sync_metrics: registrations
        # per resource, and each Allocate call's duration not yet published (a probe makes no call).
        self.registrations_total: dict[str, int] = {}
        self.allocate_durations: list[tuple[str, float]] = []

    # -- plugins and inventory -------------------------------------------------------------------

    def register_endpoint(self, resource: str, endpoint: Endpoint) -> None:
        """PluginConnected: the latest registration replaces any endpoint of the resource."""
        self.endpoints[resource] = EndpointInfo(endpoint)

    def add_static_plugin(
        self, resource: str, devices: Sequence[Device], **endpoint_options: Any
    ) -> StaticEndpoint:
        """Register an in-process plugin and feed it one ListAndWatch update (CLI, simulation).
        `endpoint_options` go to StaticEndpoint (options, preferred_fn, allocate_fn)."""
        endpoint = StaticEndpoint(resource, devices, **endpoint_options)
        self.registrations_total[resource] = self.registrations_total.get(resource, 0) + 1
        self.register_endpoint(resource, endpoint)
        self.update_devices(resource, devices)
        return endpoint

    def plugin_disconnected(self, resource: str, now: float, endpoint: Endpoint | None = None) -> None:
        """PluginDisconnected: every device of the resource becomes unhealthy and the endpoint is
        stopped at `now`. Passing `endpoint` ignores the call when a newer plugin has replaced it
        (upstream does not check, and races on re-registration)."""
        info = self.endpoints.get(resource)
        if info is None or (endpoint is not None and info.endpoint is not endpoint):
            return
        self._mark_resource_unhealthy(resource)
        info.stop_time = now

    def _mark_resource_unhealthy(self, resource: str) -> None:
        moved = self.healthy.get(resource, set())
        if resource in self.healthy:
            self.healthy[resource] = set()
        self.unhealthy[resource] = self.unhealthy.get(resource, set()) | moved

    def update_devices(self, resource: str, devices: Sequence[Device]) -> list[str]:
        """A ListAndWatch response: REPLACES the resource's devices. Health "Healthy" is healthy,
        any other value unhealthy. Returns the pods holding a device whose health changed or that
        reappeared (what the ResourceHealthStatus gate would update), sorted."""
        old = self.all_devices.get(resource, {})
        changed: set[str] = set()
        self.healthy[resource] = set()
        self.unhealthy[resource] = set()
        self.all_devices[resource] = {}
        for dev in devices:
            prev = old.get(dev.id)
            if prev is None or prev.health != dev.health:
                owner = self.pod_devices.pod_and_container_for_device(resource, dev.id)
                if owner is not None:
                    changed.add(owner[0])
            self.all_devices[resource][dev.id] = dev
            (self.healthy if dev.health == HEALTHY else self.unhealthy)[resource].add(dev.id)
        self._checkpoint()
        return sorted(changed)

    def is_device_plugin_resource(self, resource: str) -> bool:
        return resource in self.healthy or resource in self.allocated

    def _asks_for_devices(self, container: Container) -> bool:
        """The container limits a device plugin resource (Allocate and the hints look at those only). A
        plain loop: the compiled core runs it natively, where any() over a generator builds one per call."""
        for resource in container.limits:  # noqa: SIM110
            if resource in self.healthy or resource in self.allocated:
                return True
        return False

    def get_capacity(self, now: float) -> DeviceCapacity:
        """GetCapacity: drops resources whose endpoint is missing or stopped for longer than the
        grace period (their inventory maps and endpoint), and reports them as deleted."""
        capacity: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        deleted: set[str] = set()
        for table, counts_allocatable in ((self.healthy, True), (self.unhealthy, False)):
            for resource in sorted(table):
                info = self.endpoints.get(resource)
                if info is None or self._grace_expired(info, now):
                    self.endpoints.pop(resource, None)
                    del table[resource]
                    deleted.add(resource)
                    continue
                n = len(table[resource])
                capacity[resource] = capacity.get(resource, 0) + n
                if counts_allocatable:
                    allocatable[resource] = n
        if deleted:
            self._checkpoint()
        return DeviceCapacity(capacity, allocatable, sorted(deleted))

    def _grace_expired(self, info: EndpointInfo, now: float) -> bool:
        return info.stop_time is not None and now - info.stop_time > self.endpoint_stop_grace_period

    def get_allocatable_devices(self) -> dict[str, dict[str, Device]]:
        """GetAllocatableDevices: all devices restricted to the healthy ones (PodResources)."""
        return {
            r: {d: dev for d, dev in self.all_devices[r].items() if d in ids}
            for r, ids in sorted(self.healthy.items())
            if r in self.all_devices
        }

    def get_container_devices(self, pod_uid: str, container_name: str) -> dict[str, dict[str, Device]] | None:
        """GetDevices: a container's devices per resource, each with the NUMA nodes it was recorded
        under (topology None for node -1). None when the container holds nothing."""
        return self.pod_devices.get_container_devices(pod_uid, container_name)

    def get_container_device_ids(self, pod_uid: str, container_name: str) -> dict[str, set[str]] | None:
        """get_container_devices' ids alone, per resource (no Device record an id)."""
        return self.pod_devices.container_device_ids(pod_uid, container_name)

    # -- hints -------------------------------------------------------------------------------------

    def update_allocated_devices(self) -> None:
        """UpdateAllocatedDevices: forget pods that are no longer active (once sources are ready)."""
        if self.active_pods is None:
            return
        active = set(self.active_pods())
        if not self.sources_ready():
            return
        stale = self.pod_devices.pods() - active
        if not stale:
            return
        self.pod_devices.delete(stale)
        self.allocated = self.pod_devices.devices()

    def _available(self, resource: str) -> set[str]:
        return self.healthy.get(resource, set()) - self.allocated.get(resource, set())

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint] | None]:
        return self._container_hints(pod, container, resource_topology_hints)

    def implicit_topology_hints(self, pod: Pod, container: Container) -> dict[str, ListOrImplicit | None]:
        return self._container_hints(pod, container, self._implicit_hints)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint] | None]:
        return self._pod_hints(pod, resource_topology_hints)

    def implicit_pod_topology_hints(self, pod: Pod) -> dict[str, ListOrImplicit | None]:
        return self._pod_hints(pod, self._implicit_hints)

    def _implicit_hints(
        self,
        numa_nodes: Sequence[int],
        all_devices: Mapping[str, Device],
        *,
        allocated: Collection[str] | None,
        available: Collection[str],
        reusable: Collection[str],
        request: int,
        over_device_nodes: bool = False,
    ) -> ListOrImplicit | None:
        """resource_topology_hints, implicit on machines with many NUMA nodes."""
        # Each called by name (a native call in the compiled core, where a chosen function held in a
        # variable is called generically, keywords and all): this runs per device resource per admission.
        if len(numa_nodes) >= self.implicit_from_nodes:
            return resource_topology_hints_implicit(numa_nodes, all_devices, allocated=allocated, available=available,
                                                    reusable=reusable, request=request,
                                                    over_device_nodes=over_device_nodes)
        return resource_topology_hints(numa_nodes, all_devices, allocated=allocated, available=available,
                                       reusable=reusable, request=request, over_device_nodes=over_device_nodes)

    def _container_hints(self, pod: Pod, container: Container, gen: _Gen[_D]) -> dict[str, _D | None]:
        self.update_allocated_devices()
        hints: dict[str, _D | None] = {}
        for resource in sorted(container.limits):
            if not self.is_device_plugin_resource(resource):
                continue
            hints[resource] = gen(
                self.numa_nodes,
                self.all_devices.get(resource, {}),
                allocated=self.pod_devices.container_devices(pod.uid, container.name, resource),
                available=self._available(resource),
                reusable=self.devices_to_reuse.get(pod.uid, {}).get(resource, set()),
                request=_count(container.limits, resource),
                over_device_nodes=self.behaviours.device_hints_over_device_numa_nodes,
            )
        return hints

    def _pod_hints(self, pod: Pod, gen: _Gen[_D]) -> dict[str, _D | None]:
        self.update_allocated_devices()
        limits = {r: q.value() for r, q in pod_limits(pod, exclude_overhead=True).items()}
        # Upstream PodLimits keeps keys whose value is 0 (numalign's drops them); a device limit of
        # 0 still gets hints (every mask fits), so put those keys back.
        for c in pod.all_containers():
            for r in c.limits:
                limits.setdefault(r, 0)
        hints: dict[str, _D | None] = {}
        for resource in sorted(limits):
            if not self.is_device_plugin_resource(resource):
                continue
            hints[resource] = gen(
                self.numa_nodes,
                self.all_devices.get(resource, {}),
                allocated=self.pod_devices.pod_devices(pod.uid, resource),
                available=self._available(resource),
                reusable=(),
                request=int(limits[resource]),
                over_device_nodes=self.behaviours.device_hints_over_device_numa_nodes,
            )
        return hints

    # -- allocation ------------------------------------------------------------------------------

    def allocate(self, pod: Pod, container: Container) -> None:
        """Allocate, its plugin calls made at once (the HintProvider contract; a container re-allocated at
        start, callers driving the device manager alone). A failing call raises AllocationError."""
        make_calls_now(self.allocate_steps(pod, container))

    def allocate_now(self, pod: Pod, container: Container) -> None:
        """`allocate` under the name callers re-allocating a container at start use. A method, not a
        class-level alias: mypyc (the compiled core) cannot build a class holding one."""
        self.allocate(pod, container)

    def allocate_steps(self, pod: Pod, container: Container) -> AllocateSteps:
        """Allocate: init containers first (the caller's order), reusing a pod's init-container
        devices; a regular init container's devices become reusable, a sidecar's do not. Each plugin
        Allocate call is yielded where the kubelet makes it, for the caller to make (see the module)."""
        reuse = self.devices_to_reuse.setdefault(pod.uid, {})
        if len(self.devices_to_reuse) > 1:
            for uid in [u for u in self.devices_to_reuse if u != pod.uid]:
                del self.devices_to_reuse[uid]
        if not self._asks_for_devices(container) and container.name not in self.pod_devices.devs.get(pod.uid, {}):
            # Most containers: no device plugin resource and nothing held, so nothing is allocated and the
            # reuse bookkeeping below (what podDevices holds for the container) has nothing to move.
            return
        for init in pod.init_containers:
            if init.name == container.name:
                yield from self._allocate_container_resources(pod, container, reuse)
                if init.restart_policy != "Always":
                    self.pod_devices.add_container_allocated_resources(pod.uid, container.name, reuse)
                else:
                    self.pod_devices.remove_container_allocated_resources(pod.uid, container.name, reuse)
                return
        yield from self._allocate_container_resources(pod, container, reuse)
        self.pod_devices.remove_container_allocated_resources(pod.uid, container.name, reuse)

    def _allocate_container_resources(
        self, pod: Pod, container: Container, reuse: Mapping[str, set[str]]
    ) -> AllocateSteps:
        """Upstream's allocateContainerResources: per resource, the devices (GetPreferredAllocation
        included), then the plugin's Allocate call, whose answer is recorded before the next resource is
        looked at; one checkpoint write once every call of the container is answered."""
        updated = False
        write = False
        for resource in sorted(container.limits):
            if not self.is_device_plugin_resource(resource):
                continue
            if not updated:
                self.update_allocated_devices()
                updated = True
            request = AllocationRequest(
                pod.uid, container.name, resource, _count(container.limits, resource), reuse.get(resource, set())
            )
            picked = devices_to_allocate(self, request)
            if not picked:
                continue
            write = True
            info = self.endpoints.get(resource)
            if info is None:
                self.allocated = self.pod_devices.devices()
                raise AllocationError(f"unknown Device Plugin {resource}")
            if info.endpoint is None or info.stopped:
                # Upstream's endpoint refuses the call at once (it prints the endpoint struct with %v; we
                # name the resource), and allocatedDevices is rolled back to what podDevices records. The
                # refused call is timed all the same.
                self.allocate_durations.append((resource, 0.0))
                self.allocated = self.pod_devices.devices()
                raise AllocationError(f"endpoint {resource} has been stopped")
            devs = sorted_ids(picked)
            per_numa = self._per_numa(resource, devs)
            # Held while the call is out, answer-less (so out of the checkpoint): an admission paused there
            # (podadmission) must not see them free when a pass rebuilds allocatedDevices from podDevices.
            self.pod_devices.insert(pod.uid, container.name, resource, per_numa, None)
            try:
                resp = yield AllocateCall(pod.uid, container.name, resource, info.endpoint, tuple(devs), per_numa,
                                          self.allocate_durations)
            except EmptyAllocateError as e:
                # Upstream returns without rolling allocatedDevices back: the devices stay taken until an
                # UpdateAllocatedDevices finds a pod to forget (the rejected one, if it holds any others).
                self.pod_devices.delete_entry(pod.uid, container.name, resource)
                raise AllocationError(f"no containers return in allocation response {self._empty_response()}") from e
            except PluginError as e:
                self.pod_devices.delete_entry(pod.uid, container.name, resource)
                self.allocated = self.pod_devices.devices()
                raise AllocationError(str(e)) from e
            self.pod_devices.insert(pod.uid, container.name, resource, per_numa, resp)
        if write:
            self._checkpoint()

    def _empty_response(self) -> str:
        """Go's %v of the AllocateResponse that had no container response (it has no other field): the text
        its generated String gives (gogo's struct text up to 1.33, protoc-gen-go's text format from 1.34)."""
        if self.behaviours.gogo_api_text:
            return "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}"
        return ""

    def _per_numa(self, resource: str, devs: Iterable[str]) -> DevicesPerNUMA:
        out: DevicesPerNUMA = {}
        for d in devs:
            dev = self.all_devices.get(resource, {}).get(d)
            if dev is None or not dev.topology:
                out.setdefault(NODE_WITHOUT_TOPOLOGY, []).append(d)
                continue
            for node in dev.topology:
                out.setdefault(node, []).append(d)
        return out

    def remove_container(self, pod_uid: str, container_name: str) -> None:
        """Release one container's devices (and stop offering them for reuse)."""
        reuse = self.devices_to_reuse.get(pod_uid)
        if reuse is not None:
            self.pod_devices.remove_container_allocated_resources(pod_uid, container_name, reuse)
        if container_name in self.pod_devices.devs.get(pod_uid, {}):
            # allocatedDevices is rebuilt only when podDevices forgets something, as upstream's pass does
            self.pod_devices.delete_container(pod_uid, container_name)
            self.allocated = self.pod_devices.devices()
        self._checkpoint()

    def remove_pod(self, pod_uid: str) -> None:
        """Release every device of a pod, as UpdateAllocatedDevices does for an inactive pod: a pod
        podDevices does not hold leaves allocatedDevices as it is (devices a plugin's empty Allocate answer
        left taken stay so until a pass forgets some pod, as upstream's do; so in remove_container)."""
        self.devices_to_reuse.pop(pod_uid, None)
        if self.pod_devices.has_pod(pod_uid):
            self.pod_devices.delete([pod_uid])
            self.allocated = self.pod_devices.devices()
        self._checkpoint()

    # -- container start -------------------------------------------------------------------------

    def pre_start_calls(self, pod: Pod, container: Container) -> list[tuple[Endpoint, list[str]]]:
        """The PreStartContainer calls GetDeviceRunContainerOptions would make for `container`, in its
        order, for a caller that makes them outside its own lock (then passes pre_start=False)."""
        calls = []
        for resource in sorted(container.limits):
            if not self.is_device_plugin_resource(resource) or _count(container.limits, resource) == 0:
                continue
            call = pre_start_call(self, pod.uid, container.name, resource)
            if call is not None:
                calls.append(call)
        return calls

    def get_device_run_container_options(
        self, pod: Pod, container: Container, *, pre_start: bool = True
    ) -> RunContainerOptions | None:
        """GetDeviceRunContainerOptions: PreStartContainer where the plugin requires it (unless the
        caller made those calls itself: pre_start=False), re-Allocate a still-active pod's container
        that has no devices recorded, then the merged CRI options.
        Raises PluginError (pre-start) or AllocationError (re-allocation)."""
        needs_reallocate = False
        for resource in sorted(container.limits):
            if not self.is_device_plugin_resource(resource) or _count(container.limits, resource) == 0:
                continue
            if pre_start:
                call_pre_start_if_needed(self, pod.uid, container.name, resource)
            if self.active_pods is not None and pod.uid not in set(self.active_pods()):
                continue
            if self.pod_devices.container_devices(pod.uid, container.name, resource) is None:
                needs_reallocate = True
        if needs_reallocate:
            self.allocate_now(pod, container)
        return self.pod_devices.run_container_options(pod.uid, container.name)

    # -- checkpoint --------------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        if self.checkpoint_hook is not None:
            self.checkpoint_hook()

    def snapshot(self) -> DeviceManagerState:
        """writeCheckpoint's content (podDevices.toCheckpointData): entries sorted (Go writes map order),
        those without an AllocateResponse left out; the healthy devices of each resource."""
        entries = []
        for pod_uid, container, resource, info in self.pod_devices.entries():
            if info.alloc_resp is None:
                continue
            if info.raw is None:
                info.raw = encode_allocate_response(info.alloc_resp)
            per_numa = {n: list(info.device_ids[n]) for n in sorted(info.device_ids)}
            entries.append(PodDevicesEntry(pod_uid, container, resource, per_numa, info.raw))
        registered = {r: sorted_ids(self.healthy[r]) for r in sorted(self.healthy)}
        return DeviceManagerState(tuple(entries), registered)

    def restore(self, state: DeviceManagerState, now: float, *, keep_endpoints: bool = False) -> None:
        """readCheckpoint: restore podDevices and allocatedDevices; every registered resource comes
        back with empty healthy/unhealthy sets and an endpoint stopped at `now`, so capacity reads 0
        until the plugin re-registers and the resource is dropped after the grace period.

        keep_endpoints: a reload of a state another process changed: only the allocations are
        replaced; the plugins registered with this process, and their devices, stay."""
        self.pod_devices = PodDevices()
        self.devices_to_reuse = {}
        for e in state.pod_device_entries:
            try:
                resp = decode_allocate_response(e.alloc_resp)
            except AllocRespError:
                continue  # upstream: "Can't unmarshal allocResp", entry skipped
            per_numa = {n: list(ids) for n, ids in e.device_ids.items()}
            self.pod_devices.insert(e.pod_uid, e.container_name, e.resource_name, per_numa, resp, e.alloc_resp)
        self.allocated = self.pod_devices.devices()
        if keep_endpoints:
            return
        for resource in state.registered_devices:
            self.healthy[resource] = set()
            self.unhealthy[resource] = set()
            self.endpoints[resource] = EndpointInfo(None, stop_time=now)


# upstream: var _ Manager = &ManagerImpl{} (checked by mypy, free at run time)
_conforms: type[HintProvider] = DeviceManager
_conforms_implicit: type[ImplicitHintProvider] = DeviceManager
_conforms_stepped: type[SteppedProvider] = DeviceManager
