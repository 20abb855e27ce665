"""allocate_claims: a pod's ResourceClaims allocated on one node as the scheduler's DynamicResources
plugin does (PreFilter's class check, then Filter's structured allocation), at a Kubernetes version.

    result = allocate_claims(claims, slices, classes, node="node-a", version="1.37")
    if isinstance(result, AllocationFailure):
        print(result.line())          # FILE: ResourceClaim default/gpus: cannot allocate all claims
    else:
        for d in result.devices:      # driver/pool/device, its numaNode, pcieRoot, pciBusID
            ...

A claim that is already allocated (status.allocation) keeps its devices; its devices and those of
`allocated` (claims held by other pods) are in use for the others, except admin-access ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

from numalign.errors import InvalidInputError
from numalign.k8s.dra.podclaims import claims_for_pod
from numalign.k8s.dra.types import (
    ATTRIBUTE_NUMA_NODE,
    ATTRIBUTE_PCI_BUS_ID,
    ATTRIBUTE_PCIE_ROOT,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceClass,
    DeviceRequestAllocationResult,
    DRAObjects,
    ResourceClaim,
    ResourceSlice,
)
from numalign.k8s.pod import Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.scheduler.dra.allocator import (
    DEFAULT_SEARCH_BUDGET,
    DEFAULT_WORK_BOUND,
    AllocatedState,
    Allocator,
    AllocatorError,
    DeviceResult,
    NodeFailureError,
    SearchTimeoutError,
)
from numalign.scheduler.dra.features import DEFAULT_VERSION, Features, dra_enabled, features_for
from numalign.scheduler.dra.pools import NodeInfo

CANNOT_ALLOCATE = "cannot allocate all claims"


@dataclass(frozen=True)
class AllocatedDevice:
    """One device a claim holds, with what alignment needs of it."""

    claim: str  # namespace/name
    request: str
    driver: str
    pool: str
    device: str
    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    admin_access: bool | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None
    preallocated: bool = False

    def __init__(
        self, claim: str, request: str, driver: str, pool: str, device: str,
        attributes: Mapping[str, DeviceAttribute] | None = None, capacity: Mapping[str, Quantity] | None = None,
        admin_access: bool | None = None, share_id: str | None = None,
        consumed_capacity: Mapping[str, Quantity] | None = None, preallocated: bool = False,
    ) -> None:
        # Written out: the dataclass decorator's __init__ runs as interpreted Python even in the compiled
        # core (object.__setattr__ field by field, about 3 us); mypyc makes these stores native. An answer
        # of 64 devices makes 64 of them.
        object.__setattr__(self, "claim", claim)
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "driver", driver)
        object.__setattr__(self, "pool", pool)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "attributes", {} if attributes is None else attributes)
        object.__setattr__(self, "capacity", {} if capacity is None else capacity)
        object.__setattr__(self, "admin_access", admin_access)
        object.__setattr__(self, "share_id", share_id)
        object.__setattr__(self, "consumed_capacity", consumed_capacity)
        object.__setattr__(self, "preallocated", preallocated)

    def __reduce__(self) -> tuple[type[AllocatedDevice], tuple[object, ...]]:
        # Pickled as a constructor call: mypyc's compiled class is otherwise restored field by field
        # through the frozen __setattr__, which refuses.
        return AllocatedDevice, (self.claim, self.request, self.driver, self.pool, self.device, self.attributes,
                                 self.capacity, self.admin_access, self.share_id, self.consumed_capacity,
                                 self.preallocated)

    @property
    def device_id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        """resource.kubernetes.io/numaNode: one node, or (KEP-6072's list form) the device's node first,
        then the nodes nearest it."""
        attr = self.attributes.get(ATTRIBUTE_NUMA_NODE)
        if attr is None or attr.kind != "int":
            return ()
        return tuple(int(v) for v in attr.values)

    @property
    def numa_node(self) -> int | None:
        nodes = self.numa_nodes
        return nodes[0] if nodes else None

    @property
    def pcie_root(self) -> str | None:
        return _string(self.attributes.get(ATTRIBUTE_PCIE_ROOT))

    @property
    def pci_bus_id(self) -> str | None:
        return _string(self.attributes.get(ATTRIBUTE_PCI_BUS_ID))


def _string(attr: DeviceAttribute | None) -> str | None:
    if attr is None or attr.kind != "string" or not attr.values:
        return None
    return str(attr.values[0])


@dataclass(frozen=True)
class ClaimAllocation:
    claim: ResourceClaim
    allocation: DeviceAllocationResult
    devices: tuple[AllocatedDevice, ...]
    preallocated: bool = False

    def __init__(self, claim: ResourceClaim, allocation: DeviceAllocationResult, devices: tuple[AllocatedDevice, ...],
                 preallocated: bool = False) -> None:
        # Written out, as AllocatedDevice's (one a claim allocated).
        object.__setattr__(self, "claim", claim)
        object.__setattr__(self, "allocation", allocation)
        object.__setattr__(self, "devices", devices)
        object.__setattr__(self, "preallocated", preallocated)

    def __reduce__(self) -> tuple[type[ClaimAllocation], tuple[object, ...]]:
        return ClaimAllocation, (self.claim, self.allocation, self.devices, self.preallocated)

    def allocated_claim(self) -> ResourceClaim:
        """The claim with status.allocation set, as the scheduler writes it."""
        return replace(self.claim, allocation=self.allocation)


@dataclass(frozen=True)
class AllocationResult:
    """Every claim allocated (or kept) on `node`."""

    node: str
    version: str
    implementation: str
    claims: tuple[ClaimAllocation, ...]
    # Where the release searches pools in Go map order (1.34, 1.35) and another order gives another answer:
    # what that order gives (map_order_note). Empty: no other order was found to change it.
    map_order: str = ""

    def __init__(self, node: str, version: str, implementation: str, claims: tuple[ClaimAllocation, ...],
                 map_order: str = "") -> None:
        # Written out, as AllocatedDevice's (one an Allocate that succeeds).
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "implementation", implementation)
        object.__setattr__(self, "claims", claims)
        object.__setattr__(self, "map_order", map_order)

    def __reduce__(self) -> tuple[type[AllocationResult], tuple[object, ...]]:
        return AllocationResult, (self.node, self.version, self.implementation, self.claims, self.map_order)

    @property
    def devices(self) -> tuple[AllocatedDevice, ...]:
        return tuple(d for c in self.claims for d in c.devices)


@dataclass(frozen=True)
class AllocationFailure:
    """Why the claims do not fit on `node`. `unschedulable` is the scheduler's verdict for this node
    (another node may do); otherwise the claim or class is broken and scheduling the pod aborts."""

    node: str
    version: str
    implementation: str
    message: str  # upstream's text
    kind: Literal["unschedulable", "error"]
    where: str = ""  # the file and object the message is about
    detail: str = ""  # numalign's own words before upstream's text (why the search stopped)
    map_order: str = ""  # as AllocationResult.map_order
    # Which of numalign's bounds stopped the search (a timeout): "checks" (the budget standing for the
    # scheduler's 10 s) or "work" (the devices numalign looks at itself); "" for any other answer.
    stopped_by: Literal["", "checks", "work"] = ""

    @property
    def unschedulable(self) -> bool:
        return self.kind == "unschedulable"

    def line(self) -> str:
        """One line: a CEL compile error's source excerpt (` | ...` lines under upstream's message, which
        `message` keeps) is left out, its errors joined by "; "."""
        lines = [part for part in self.message.splitlines() if not part.startswith(" | ")]
        message = "; ".join(lines)
        text = f"{self.detail}: {message}" if self.detail else message
        return f"{self.where}: {text}" if self.where else text


def allocate_claims(
    claims: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    classes: Mapping[str, DeviceClass] | Iterable[DeviceClass],
    *,
    node: str | None = None,
    node_labels: Mapping[str, str] | None = None,
    allocated: Iterable[ResourceClaim] | AllocatedState = (),
    version: str | KubeletVersion = DEFAULT_VERSION,
    gates: Mapping[str, bool] | None = None,
    budget: int = DEFAULT_SEARCH_BUDGET,
    work_bound: int = DEFAULT_WORK_BOUND,
) -> AllocationResult | AllocationFailure:
    """Allocate `claims` (a pod's, in spec.resourceClaims order) on one node. `allocated`: the claims other
    pods hold, or a ledger's AllocatedState kept up to date claim by claim (NodeDRA keeps one). `budget`:
    the device checks (as upstream's scan makes them) standing for the scheduler's 10 s filter timeout;
    `work_bound`: the devices numalign looks at itself at most (docs/dra.md, the budget)."""
    features = features_for(version, gates)
    class_map = dict(classes) if isinstance(classes, Mapping) else {c.name: c for c in classes}
    node_name = node if node is not None else _only_node(slices)
    info = NodeInfo(node_name, dict(node_labels or {}))
    version = str(version)

    def fail(
        message: str, kind: Literal["unschedulable", "error"], where: str = "", detail: str = "", map_order: str = "",
        stopped_by: Literal["", "checks", "work"] = "",
    ) -> AllocationFailure:
        return AllocationFailure(node_name, version, features.implementation, message, kind, where, detail, map_order,
                                 stopped_by)

    if not dra_enabled(version, gates):
        return fail(f"the DynamicResourceAllocation feature gate is off (its default in {version}); the API "
                    "server drops a pod's resourceClaims and the scheduler allocates no devices", "error")
    # A ledger's state is used as it is (the claims it holds are not re-read); the pod's own allocated
    # claims join it for this call only.
    state = allocated if isinstance(allocated, AllocatedState) else AllocatedState(allocated)
    joined = [c.key for c in claims if c.allocation is not None and not state.has_claim(c.key)]
    try:
        return _allocate(claims, slices, class_map, info, state, features, _Bounds(budget, work_bound), fail,
                         version)
    finally:
        if state is allocated:
            for key in joined:
                state.remove_claim(key)


def _allocate(
    claims: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    class_map: Mapping[str, DeviceClass],
    info: NodeInfo,
    state: AllocatedState,
    features: Features,
    budget: _Bounds,
    fail: Callable[..., AllocationFailure],
    version: str,
) -> AllocationResult | AllocationFailure:
    pending: list[ResourceClaim] = []
    for claim in claims:
        if claim.allocation is not None:
            state.add_claim(claim)
            continue
        missing = _missing_class(claim, class_map, features.prioritized_list)
        if missing:
            return fail(missing, "unschedulable", _where(claim))
        pending.append(claim)
    allocator = Allocator(features, state, class_map, slices, info, budget.checks, budget.work)
    # The map-order witness's searches (1.34, 1.35) get what the main search left of the work bound, so the
    # whole call stays inside it; the checks budget each starts afresh, as one scheduling attempt would.
    try:
        results = allocator.allocate(pending) if pending else []
    except (AllocatorError, NodeFailureError, SearchTimeoutError) as exc:
        witness = _Bounds(budget.checks, budget.work - allocator.work)
        return _failed(exc, pending, class_map, features, budget, fail,
                       map_order_note(pending, slices, class_map, info, state, features, witness, ("fail", str(exc))))
    witness = _Bounds(budget.checks, budget.work - allocator.work)
    if results is None:
        note = map_order_note(pending, slices, class_map, info, state, features, witness, ("fail", CANNOT_ALLOCATE))
        return fail(CANNOT_ALLOCATE, "unschedulable", _where_all(pending), "", note)
    by_claim = dict(zip((c.key for c in pending), results, strict=True))
    out = []
    for claim in claims:
        if claim.allocation is not None:
            out.append(_kept(claim, slices))
        else:
            out.append(_allocated(claim, by_claim[claim.key]))
    # (the answer's devices named only where the release ranges over a map of pools)
    note = "" if features.generation.sorts_pools else map_order_note(pending, slices, class_map, info, state,
                                                                      features, witness, _chosen(results))
    return AllocationResult(info.name, version, features.implementation, tuple(out), note)


def _failed(
    exc: Exception,
    pending: Sequence[ResourceClaim],
    class_map: Mapping[str, DeviceClass],
    features: Features,
    budget: _Bounds,
    fail: Callable[..., AllocationFailure],
    note: str,
) -> AllocationFailure:
    if isinstance(exc, AllocatorError):
        return fail(str(exc), "error", _where_for_message(str(exc), pending, class_map), "", note)
    if isinstance(exc, NodeFailureError):
        return fail(str(exc), "unschedulable", _where_all(pending), "", note)
    kind: Literal["unschedulable", "error"] = "error" if features.release.timeout_is_error else "unschedulable"
    by_work = isinstance(exc, SearchTimeoutError) and exc.by_work
    if by_work:
        further = (f"to its 10 s filter timeout, about {budget.checks} device checks on the reference machine"
                   if features.release.has_filter_timeout else
                   f"to its end (kube-scheduler 1.{features.minor} has no filter timeout; this text is numalign's)")
        detail = (f"numalign stopped the search at its bound on its own work ({budget.work} units: devices looked "
                  f"at, search steps; the scheduler searches on {further}, and may answer otherwise)")
    else:
        detail = (f"numalign stopped the search after {budget.checks} device checks (its bound in place of the "
                  "scheduler's 10 s filter timeout)")
    return fail(str(exc), kind, _where_all(pending), detail, note, "work" if by_work else "checks")


class _Bounds(NamedTuple):  # (a tuple: made for every allocation)
    """The search's two bounds (allocate_claims' `budget` and `work_bound`)."""

    checks: int
    work: int


# How many other pool orders map_order_note tries at most (each pool first once, up to this many).
MAP_ORDER_TRIES = 7


def _chosen(results: Sequence[Sequence[DeviceResult]]) -> tuple[Any, ...]:
    return ("ok", tuple(tuple((r.request_name, r.device_id) for r in claim) for claim in results))


def map_order_note(
    pending: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    class_map: Mapping[str, DeviceClass],
    info: NodeInfo,
    state: AllocatedState,
    features: Features,
    budget: _Bounds,
    answer: tuple[Any, ...],
) -> str:
    """Where the release ranges over a Go map of pools (1.34, 1.35: the generation does not sort them), whether
    another pool order gives another answer, and which. The criterion (docs/dra.md): the search is run again
    with each other pool of the node first (the sorted order rotated; up to MAP_ORDER_TRIES), and the first
    that changes the devices or the verdict is named. Only an order found to differ is reported, so the
    note is a witness, never a guess; no note does not prove that no order differs. The extra searches
    share one budget and one work bound, the main search's, and a search stopped by either ends the check
    without a note."""
    if features.generation.sorts_pools or not pending or budget.work <= 0:
        return ""
    first = Allocator(features, state, class_map, slices, info, budget.checks, budget.work)
    if len(first.pools) < 2:
        return ""
    left, work_left = budget.checks, budget.work
    for shift in range(1, min(len(first.pools), MAP_ORDER_TRIES + 1)):
        alt = Allocator(features, state, class_map, slices, info, left, work_left)
        alt.pools = alt.pools[shift:] + alt.pools[:shift]
        try:
            results = alt.allocate(pending)
            other = _chosen(results) if results is not None else ("fail", CANNOT_ALLOCATE)
        except SearchTimeoutError:
            return ""
        except (AllocatorError, NodeFailureError) as exc:
            other = ("fail", str(exc))
        left -= alt.checks
        work_left -= alt.work
        if other != answer:
            return _map_order_text(features, alt.pools[0].pool_id, other)
        if left <= 0 or work_left <= 0:
            return ""
    return ""


def _map_order_text(features: Features, pool: str, other: tuple[Any, ...]) -> str:
    if other[0] == "ok":
        devices = ", ".join(f"{driver}/{p}/{device}" for claim in other[1] for _, (driver, p, device) in claim)
        gives = f"it allocates {devices}"
    else:
        gives = f"it answers {other[1]!r}"
    return (f"the scheduler of this release ({features.implementation} allocator) searches the node's resource "
            f"pools in Go map order, which changes from one scheduling attempt to the next: with pool {pool} "
            f"first {gives}")



def allocate_pod_claims(
    pod: Pod,
    objects: DRAObjects,
    *,
    node: str | None = None,
    node_labels: Mapping[str, str] | None = None,
    allocated: Iterable[ResourceClaim] = (),
    version: str | KubeletVersion = DEFAULT_VERSION,
    gates: Mapping[str, bool] | None = None,
) -> AllocationResult | AllocationFailure:
    """A pod's claims (`claims_for_pod`) allocated with the slices and classes read beside it. The
    other allocated claims among `objects` hold their devices too, as the cluster's do."""
    claims = claims_for_pod(pod, objects)
    mine = {c.key for c in claims}
    others = [c for c in objects.claims.values() if c.allocation is not None and c.key not in mine]
    return allocate_claims(claims, objects.slices, objects.classes, node=node, node_labels=node_labels,
                           allocated=[*others, *allocated], version=version, gates=gates)


def _only_node(slices: Sequence[ResourceSlice]) -> str:
    names = sorted({s.node_name for s in slices if s.node_name})
    if len(names) == 1:
        return names[0]
    if not names:
        return ""
    raise InvalidInputError(
        f"the ResourceSlices name {len(names)} nodes ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}); "
        "say which node to allocate on"
    )


def _missing_class(claim: ResourceClaim, classes: Mapping[str, DeviceClass], prioritized_list: bool) -> str:
    """PreFilter's checks, request by request: validateDeviceClass, and a request with subrequests needs
    DRAPrioritizedList (the pod is unschedulable before the allocator sees the claim)."""
    for request in claim.spec.requests:
        if request.exactly is None and request.first_available and not prioritized_list:
            return (f"resource claim {claim.key}, request {request.name}: has subrequests, but the "
                    "DRAPrioritizedList feature is disabled")
        subs = [(request.name, request.exactly)] if request.exactly is not None else [
            (f"{request.name}/{s.name}", s) for s in request.first_available]
        for name, sub in subs:
            if sub is not None and sub.device_class_name not in classes:
                return f"request {name}: device class {sub.device_class_name} does not exist"
    return ""


def _where(claim: ResourceClaim) -> str:
    return claim.source or f"ResourceClaim {claim.key}"


def _where_all(claims: Sequence[ResourceClaim]) -> str:
    if len(claims) == 1:
        return _where(claims[0])
    sources = sorted({c.source.split(": ")[0] for c in claims if c.source})
    names = ", ".join(c.key for c in claims)
    return f"{', '.join(sources) + ': ' if sources else ''}ResourceClaims {names}"


def _where_for_message(message: str, claims: Sequence[ResourceClaim], classes: Mapping[str, DeviceClass]) -> str:
    for claim in claims:
        if message.startswith(f"claim {claim.key}"):
            return _where(claim)
    for cls in classes.values():
        if message.startswith(f"class {cls.name}:"):
            return f"{cls.source}" if cls.source else f"DeviceClass {cls.name}"
    return _where_all(claims)


def _allocated(claim: ResourceClaim, results: list[DeviceResult]) -> ClaimAllocation:
    # Both built by their written-out __init__ (here and in k8s/dra/types.py), positionally: an answer of 64
    # devices makes 128.
    api_results = []
    devices = []
    key = claim.key
    for r in results:
        driver, pool, device = r.device_id
        name = r.request_name
        admin_access = r.admin_access
        share_id = r.share_id
        consumed = r.consumed_capacity
        api_results.append(DeviceRequestAllocationResult(name, driver, pool, device, admin_access, share_id, consumed))
        d = r.device
        capacity = d.capacity
        devices.append(AllocatedDevice(key, name, driver, pool, device, d.attributes,
                                       {k: v.value for k, v in capacity.items()} if capacity else {},
                                       admin_access, share_id, consumed, False))
    return ClaimAllocation(claim, DeviceAllocationResult(tuple(api_results)), tuple(devices))


def _kept(claim: ResourceClaim, slices: Sequence[ResourceSlice]) -> ClaimAllocation:
    """An allocated claim's devices, described from the slices that publish them (when they do)."""
    assert claim.allocation is not None
    published = {(s.driver, s.pool.name, d.name): d for s in slices for d in s.devices}
    devices = []
    for r in claim.allocation.results:
        d = published.get(r.device_id)
        devices.append(AllocatedDevice(
            claim.key, r.request, r.driver, r.pool, r.device, attributes=d.attributes if d else {},
            capacity={k: v.value for k, v in d.capacity.items()} if d else {}, admin_access=r.admin_access,
            share_id=r.share_id, consumed_capacity=r.consumed_capacity, preallocated=True))
    return ClaimAllocation(claim, claim.allocation, tuple(devices), preallocated=True)
