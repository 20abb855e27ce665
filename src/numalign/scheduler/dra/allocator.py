"""The structured allocator (k8s.io/dynamic-resource-allocation/structured, the incubating implementation
of 1.37, with the experimental one's list-type matchAttribute when DRAListTypeAttributes is on).

A depth-first search over claims, their requests (a firstAvailable request tries its subrequests in
order), and for each request the devices of the node's pools in pool, slice and device order, each
next device of a request taken after the previous one (combinations, from 1.36; permutations before). A device must
be selected by its class's and the request's CEL selectors, not be in use (unless admin access), fit
the claim's constraints, its counters (partitionable devices) and its consumable capacity. The first
complete assignment wins: the same search order as upstream gives the same first answer.

Fatal problems (a CEL error, an invalid request) raise AllocatorError with upstream's text: the
scheduler aborts the pod's scheduling with it. A node that cannot satisfy the claims returns None
("cannot allocate all claims") or raises NodeFailureError ("invalid resource pools were encountered").
"""

from __future__ import annotations

import bisect
import logging
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import not_
from typing import Any, Final, NamedTuple

from numalign.k8s.dra.cel import selector as cel
from numalign.k8s.dra.types import (
    ALLOCATION_RESULTS_MAX_SIZE,
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ResourceClaim,
    ResourceSlice,
)
from numalign.k8s.quantity import Quantity
from numalign.scheduler.dra.capacity import (
    CapacityNotDefinedError,
    CapacityRequestError,
    ConsumedCapacity,
    add_into,
    consumed_from_request,
    request_fits,
    subtract_from,
)
from numalign.scheduler.dra.constraints import (
    Constraint,
    DistinctAttributeConstraint,
    MatchAttributeConstraint,
    matches_request,
)
from numalign.scheduler.dra.features import Features
from numalign.scheduler.dra.pools import NodeInfo, Pool, derived, gather_pools, node_matches

# The CEL library logs a warning for every failing function call; the failure reaches us as an
# exception with the same text, which the allocator words as upstream does.
logging.getLogger("cel").setLevel(logging.CRITICAL)

DeviceID = tuple[str, str, str]  # driver, pool, device
# The search gives up after this many device checks (a device considered for a request, counted as
# upstream's device-by-device scan makes them), in place of the scheduler's 10 s filter timeout: counted,
# so the same input always gets the same answer on any machine. The real allocator makes about 2 million
# checks a second on the reference machine (docs/dra.md, the budget), so this is its 10 s there.
DEFAULT_SEARCH_BUDGET: Final = 20_000_000
# ... and after this much work of its own (Allocator.work: the devices its scans looked at, its steps, and
# what it read to recognise a part of the search that failed before), whatever is counted: what bounds
# numalign's time, at most about 3.2 us a unit in pure Python on the reference machine (docs/dra.md, the
# budget), so about the scheduler's own 10 s at worst. A search stopped by it gives upstream's timeout
# text too, with numalign's words saying which bound it was (upstream may have answered inside its 10 s).
DEFAULT_WORK_BOUND: Final = 3_000_000
# A device selector's evaluation is work too: its CEL cost (the cost units upstream's runtime limit counts,
# at most 1,000,000 an evaluation) is charged at one unit of work per CEL_COST_PER_WORK cost units. Pure
# Python spends about 0.3 us a cost unit on the costliest selectors the API server accepts (a nested
# comprehension near the limit: 991,201 units in 0.31 s) and at most about 3.2 us a unit of work, so the
# work bound keeps bounding the time however costly the selectors (docs/dra.md, the budget).
CEL_COST_PER_WORK: Final = 10
_SHARE_NAMESPACE: Final = uuid.UUID("2f0c51d6-0f3b-5d55-9a8e-6472612d6964")
_SHARE_PENDING: Final = "pending"  # a share whose ID is derived when the search has succeeded


_ALWAYS: Final = object()  # the group of positions every value shares (_group_positions)


class AllocatorError(Exception):
    """A fatal problem with a claim or class (the scheduler reports it and retries the pod)."""


class NodeFailureError(Exception):
    """ErrFailedAllocationOnNode: the claims cannot be allocated on this node, for this reason."""


class SearchTimeoutError(Exception):
    """The scheduler's filter timeout: the search used up its budget (upstream's text, per release);
    `by_work`: it was numalign's bound on its own work (DEFAULT_WORK_BOUND) that stopped it."""

    def __init__(self, message: str, by_work: bool = False) -> None:
        super().__init__(message)
        self.by_work = by_work


def _take_off_held(available: dict[str, dict[str, Quantity]], s: ResourceSlice,
                   held: Callable[[DeviceID], bool]) -> None:
    """Counters left in `available` (counter set -> counter -> quantity) once what the slice's devices that
    `held` names consume of them is taken off (a counter the set lacks is left alone)."""
    for d in s.devices:
        if not held((s.driver, s.pool.name, d.name)):
            continue
        for consumption in d.consumes_counters:
            counters = available.get(consumption.counter_set, {})
            for name, q in consumption.counters.items():
                if name in counters:
                    counters[name] = counters[name] - q


def device_id_text(device_id: DeviceID) -> str:
    return "/".join(device_id)


class AllocatedState:
    """What other claims already hold (schedulerapi.AllocatedState), kept per claim so a node's ledger
    adds and removes one claim at a time: the n-th claim costs its own devices, not the n-1 before it."""

    def __init__(self, claims: Iterable[ResourceClaim] = ()) -> None:
        self.devices: dict[DeviceID, int] = {}  # device -> how many claims hold it whole
        self.shares: dict[DeviceID, int] = {}  # device -> how many shares of it are held
        self.capacity: dict[DeviceID, ConsumedCapacity] = {}  # consumed by the shares
        self._claims: dict[str, tuple[DeviceRequestAllocationResult, ...]] = {}
        for claim in claims:
            self.add_claim(claim)

    def holds(self, device_id: DeviceID) -> bool:
        """IsDeviceAllocated."""
        return device_id in self.devices or device_id in self.capacity or device_id in self.shares

    def has_claim(self, key: str) -> bool:
        return key in self._claims

    def add_claim(self, claim: ResourceClaim) -> None:
        """A claim's status.allocation: admin-access devices are not held, shared ones by capacity. A claim
        already counted (by namespace/name) is counted once."""
        if claim.allocation is None or claim.key in self._claims:
            return
        results = tuple(r for r in claim.allocation.results if not r.admin_access)
        self._claims[claim.key] = results
        for r in results:
            if r.share_id:
                self.shares[r.device_id] = self.shares.get(r.device_id, 0) + 1
                add_into(self.capacity.setdefault(r.device_id, {}), r.consumed_capacity or {})
            else:
                self.devices[r.device_id] = self.devices.get(r.device_id, 0) + 1

    def remove_claim(self, key: str) -> None:
        """The claim is deallocated: its devices and capacity are free again."""
        for r in self._claims.pop(key, ()):
            if r.share_id:
                _decrement(self.shares, r.device_id)
                total = self.capacity.get(r.device_id)
                if total is not None:
                    subtract_from(total, r.consumed_capacity or {})
                    if r.device_id not in self.shares:
                        del self.capacity[r.device_id]
            else:
                _decrement(self.devices, r.device_id)


def _decrement(counts: dict[DeviceID, int], device_id: DeviceID) -> None:
    left = counts.get(device_id, 0) - 1
    if left > 0:
        counts[device_id] = left
    else:
        counts.pop(device_id, None)


class Candidate(NamedTuple):  # made for every device the search looks at: a tuple is the cheapest
    device_id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: Pool


@dataclass(slots=True)  # one for every device the search takes: slots make it quicker to build
class DeviceResult:
    """One allocated device (internalDeviceResult)."""

    request: str
    parent_request: str
    device_id: DeviceID
    device: Device
    slice: ResourceSlice
    admin_access: bool | None = None
    share_id: str | None = None
    consumed_capacity: ConsumedCapacity | None = None

    # Written out: the decorator's generated __init__ runs as interpreted Python even where this module is
    # compiled (scripts/compiled-modules), several times slower than a native one; the decorator keeps it.
    def __init__(self, request: str, parent_request: str, device_id: DeviceID, device: Device,
                 slice: ResourceSlice, admin_access: bool | None = None, share_id: str | None = None,
                 consumed_capacity: ConsumedCapacity | None = None) -> None:
        self.request = request
        self.parent_request = parent_request
        self.device_id = device_id
        self.device = device
        self.slice = slice
        self.admin_access = admin_access
        self.share_id = share_id
        self.consumed_capacity = consumed_capacity

    @property
    def request_name(self) -> str:
        return f"{self.parent_request}/{self.request}" if self.parent_request else self.request


class _BySelection:
    """What requests of one class and selectors share (_RequestData.selection): each device's selection,
    the answers by what the selectors read of a device, the devices they fail on per pool, those paths."""

    def __init__(self) -> None:
        self.matches: dict[DeviceID, bool] = {}
        self.memo: dict[tuple[object, ...], bool] = {}
        self.failing: dict[int, list[tuple[int, int]]] = {}
        self.paths_known = False
        self.paths: tuple[cel.Path, ...] | None = None


class _BySignature:
    """What requests alike in everything the scan's static checks read share (_RequestData.signature): each
    device's static check and capacity fit, and the pools' scans (by pool, and for a restricted scan the
    attribute and its value)."""

    def __init__(self) -> None:
        self.checks: dict[DeviceID, bool | None] = {}
        self.fits: dict[DeviceID, bool] = {}
        self.full: dict[int, _Plan] = {}
        self.restricted: dict[tuple[int, str, object], _Plan] = {}
        self.capacity_failing: dict[int, list[tuple[int, int]]] = {}


@dataclass
class _RequestData:
    request: DeviceSubRequest
    parent: str | None  # the parent request's name when this is a subrequest
    cls: DeviceClass | None
    num_devices: int = 0
    all_devices: list[Candidate] = field(default_factory=list)
    selected_sub: int = 0
    # What a device's selection depends on (its class and selectors), and beyond that what the scan's
    # static checks depend on: requests alike (the same in every claim of a pod, say) share their work.
    selection: tuple[object, ...] = ()
    signature: tuple[object, ...] = ()
    restricting: list[MatchAttributeConstraint] | None = None  # (_restriction)
    # (kept per Allocate by those two, so a lookup by device is keyed by the device alone)
    by_selection: _BySelection = field(default_factory=_BySelection)
    by_signature: _BySignature = field(default_factory=_BySignature)

    def __init__(self, request: DeviceSubRequest, parent: str | None, cls: DeviceClass | None,
                 selection: tuple[object, ...], signature: tuple[object, ...], by_selection: _BySelection,
                 by_signature: _BySignature) -> None:
        # Written out, as every class made per Allocate here: the dataclass decorator's generated __init__
        # runs as interpreted Python even in the compiled core, some 2-3 us each.
        self.request = request
        self.parent = parent
        self.cls = cls
        self.num_devices = 0
        self.all_devices = []
        self.selected_sub = 0
        self.selection = selection
        self.signature = signature
        self.restricting = None
        self.by_selection = by_selection
        self.by_signature = by_signature

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


Key = tuple[int, int, int]  # claim, request, subrequest
# What giving a taken device back needs (Allocator._undo): the claim, the device, the request's and the
# subrequest's names, the claim's constraints, whether it is a share, the capacity it consumed, whether
# it took counters, whether the device had shares before, and the claim's device count before it.
_Undo = tuple[int, Candidate, str, str, list[Constraint], bool, ConsumedCapacity | None, bool, bool, int]


@dataclass
class _Plan:
    """A pool's scan for one request: the positions in search order, and the indexes of those to look at."""

    positions: list[tuple[int, int]]
    at: Sequence[int]
    filtered: bool = False
    # per index in `at`: the device is known to be selected and its capacity to fit (only its being in use
    # and the claim's constraints and counters are left to check)
    known: Sequence[bool] = ()
    candidates: Sequence[Candidate] = ()  # per index in `at`
    ids: Sequence[DeviceID] = ()  # the candidates' device IDs

    def __init__(self, positions: list[tuple[int, int]], at: Sequence[int], filtered: bool, known: Sequence[bool],
                 candidates: Sequence[Candidate], ids: Sequence[DeviceID]) -> None:
        # Written out, as _RequestData's.
        self.positions = positions
        self.at = at
        self.filtered = filtered
        self.known = known
        self.candidates = candidates
        self.ids = ids


class Allocator:
    """One Allocate call: claims to allocate on one node, against the cluster's slices and classes."""

    def __init__(
        self,
        features: Features,
        allocated: AllocatedState,
        classes: Mapping[str, DeviceClass],
        slices: Sequence[ResourceSlice],
        node: NodeInfo,
        budget: int = DEFAULT_SEARCH_BUDGET,
        work_bound: int = DEFAULT_WORK_BOUND,
    ) -> None:
        self.features = features
        self.generation = features.generation
        self._capacity_rules = features.capacity_rules
        # read for every device the search takes: kept here rather than looked up through the generation
        self._searches_combinations = self.generation.searches_combinations
        self._invalid_pool_aborts = self.generation.invalid_pool_aborts
        self._admin_marks = self.generation.admin_access_marks_devices
        self._all_gives_back = self.generation.all_mode_gives_back
        self._counters_per_slice = self.generation.counters_per_slice
        self._counters_in_place = self.generation.counters_checked_in_place
        self.allocated = allocated
        self.classes = classes
        self.node = node
        # (a release without a filter timeout, 1.33, searches on: only the work bound stops it)
        self.budget = budget if features.release.has_filter_timeout else sys.maxsize
        self.steps = 0  # allocateOne invocations, as upstream counts them
        self._cel_features = features.cel
        self._cel_compile_features = features.cel_compile
        self._compiled: dict[str, cel.CompiledSelector] = {}
        self.checks = 0  # devices considered: what the budget bounds
        self.work_bound = work_bound
        # numalign's own work (`work`, what the work bound bounds) beyond its steps: each device its scans
        # looked at, and the devices and constraints read to recognise a part of the search that failed before;
        # and the steps a remembered failure added to `steps` without taking them
        self._looked = 0
        self._replayed = 0
        self._cel_cost = 0  # CEL cost not yet charged as work (less than CEL_COST_PER_WORK)
        # slicesForNode: the node's own slices, then those for any node (with sharedCounters too, where
        # that generation gathers them for every node), each in the order given.
        everywhere = self.generation.counter_slices_for_every_node and features.partitionable_devices
        if self.generation.node_slices_first:
            on_node = [s for s in slices if s.node_name == node.name and not (everywhere and s.shared_counters)]
            shared = [s for s in slices if not s.node_name or (everywhere and s.shared_counters)]
            gathered = [*on_node, *shared]
        else:
            gathered = [s for s in slices if s.node_name == node.name or not s.node_name
                        or (everywhere and s.shared_counters)]
        self.pools = gather_pools(gathered, node, features, slices)
        self._by_selection: dict[tuple[object, ...], _BySelection] = {}
        self._by_signature: dict[tuple[object, ...], _BySignature] = {}
        self._cel_results: dict[tuple[str, DeviceID], bool] = {}
        self._cel_devices: dict[DeviceID, dict[str, Any]] = {}
        self._available_counters: dict[str, dict[str, dict[str, Quantity]]] = {}
        self._consumed_counters: dict[str, dict[str, dict[str, Quantity]]] = {}
        self._allocating: dict[DeviceID, set[int]] = {}
        self._position_index: dict[tuple[int, str], dict[object, list[tuple[int, int]]]] = {}
        self._visits: dict[tuple[int, int], int] = {}
        self._failed: dict[tuple[object, ...], tuple[bool, int, int]] = {}
        self._reachable_cache: dict[tuple[int, int], tuple[frozenset[DeviceID], frozenset[str]]] = {}
        self._allocating_capacity: dict[DeviceID, ConsumedCapacity] = {}

    # ---- Allocate ------------------------------------------------------------------------------------

    def allocate(self, claims: Sequence[ResourceClaim]) -> list[list[DeviceResult]] | None:
        self.claims = list(claims)
        self.requests: dict[Key, _RequestData] = {}
        self.constraints: list[list[Constraint]] = []
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        f = self.features
        under_previous = self.generation.validates_under_previous_key
        # upstream's verdicts per device and request key while it validates (it starts the search with
        # none): kept only where a release validates under another request's key (_selectable_under)
        self._keyed: dict[tuple[DeviceID, Key], bool] = {}
        for ci, claim in enumerate(claims):
            min_devices = 0
            for ri, request in enumerate(claim.spec.requests):
                if request.first_available and not f.prioritized_list:
                    raise AllocatorError(f"claim {claim.key}, request {request.name}: has subrequests, but the "
                                         "DRAPrioritizedList feature is disabled")
                if not f.consumable_capacity and self.generation.knows_consumable_capacity:
                    if request.exactly is not None and request.exactly.capacity is not None:
                        raise AllocatorError(f"claim {claim.key}, request {request.name}: has capacity requests, "
                                             "but the DRAConsumableCapacity feature is disabled")
                    for sub in request.first_available:
                        if sub.capacity is not None:
                            named = (f"subrequest {sub.name}" if self.generation.capacity_error_names_subrequest
                                     else f"request {request.name}")
                            raise AllocatorError(f"claim {claim.key}, {named}: has capacity requests, "
                                                 "but the DRAConsumableCapacity feature is disabled")
                if request.first_available:
                    fewest = sys.maxsize
                    for si, sub in enumerate(request.first_available):
                        under = (ci, ri, si - 1) if under_previous and si > 0 else None
                        data = self._validate(claim, (ci, ri, si), sub, request.name, under)
                        self.requests[(ci, ri, si)] = data
                        fewest = min(fewest, data.num_devices)
                else:
                    assert request.exactly is not None
                    data = self._validate(claim, (ci, ri, 0), request.exactly, None)
                    self.requests[(ci, ri, 0)] = data
                    fewest = data.num_devices
                if self.generation.claim_limit_per_request and fewest > ALLOCATION_RESULTS_MAX_SIZE - min_devices:
                    raise AllocatorError(f"claim {claim.key}, request {request.name}: adding {fewest} devices exceeds "
                                         f"the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_devices} "
                                         "already accounted for")
                min_devices += fewest
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocatorError(f"claim {claim.key}: number of requested devices {min_devices} exceeds the "
                                     f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")
            constraints: list[Constraint] = []
            for i, c in enumerate(claim.spec.constraints):
                if c.match_attribute is not None:
                    constraints.append(MatchAttributeConstraint(frozenset(c.requests), c.match_attribute,
                                                                list_types=f.list_types_in_constraints))
                elif c.distinct_attribute is not None and self.generation.knows_consumable_capacity:
                    constraints.append(DistinctAttributeConstraint(
                        frozenset(c.requests), c.distinct_attribute, list_types=f.list_types_in_constraints,
                        by_identity=not self.generation.distinct_compares_values,
                        every_device=self.generation.distinct_keeps_every_device))
                else:
                    raise AllocatorError(f"claim {claim.key}, constraint #{i}: empty constraint (unsupported "
                                         "constraint type?)")
            self.constraints.append(constraints)
        self._keyed = {}  # upstream empties its cache before the search (deviceMatchesRequest = make(...))
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20_000))
        try:
            done = self._allocate_one(0, 0, 0, 0, False, (0, 0, 0))
        except _MaxSizeExceededError:
            raise AllocatorError("allocation max size exceeded") from None
        finally:
            sys.setrecursionlimit(limit)
        if not done:
            if self.generation.reports_invalid_pools and any(p.is_invalid for p in self.pools):
                raise NodeFailureError("invalid resource pools were encountered")
            return None
        self._name_shares()
        return self.results

    def _name_shares(self) -> None:
        """Each share's ID, from the claim, the request, the device and the share's place among the claim's
        devices (upstream draws a random UUID; numalign's repeat from run to run)."""
        for claim, results in zip(self.claims, self.results, strict=True):
            for i, r in enumerate(results):
                if r.share_id == _SHARE_PENDING:
                    r.share_id = str(uuid.uuid5(_SHARE_NAMESPACE,
                                                f"{claim.key}/{r.request_name}/{device_id_text(r.device_id)}/{i}"))

    def _validate(self, claim: ResourceClaim, key: Key, sub: DeviceSubRequest, parent: str | None,
                  under: Key | None = None) -> _RequestData:
        """validateDeviceRequest; `under` is the key a release that validates subrequests under the previous
        one's key (Generation.validates_under_previous_key) checks an `All` subrequest's devices under."""
        keyed = self.generation.validates_under_previous_key
        name = sub.name
        for i, selector in enumerate(sub.selectors):
            if not selector.expression:
                raise AllocatorError(f"claim {claim.key}, request {name}, selector #{i}: CEL expression empty "
                                     "(unsupported selector type?)")
        if sub.admin_access is not None and not self.features.admin_access:
            raise AllocatorError(f"claim {claim.key}, request {name}: admin access is requested, but the feature "
                                 "is disabled")
        if not sub.device_class_name:
            raise AllocatorError(f"claim {claim.key}, request {name}: missing device class name (unsupported "
                                 "request type?)")
        cls = self.classes.get(sub.device_class_name)
        if cls is None:
            raise AllocatorError(
                f"claim {claim.key}, request {name}: could not retrieve device class {sub.device_class_name}: "
                f'deviceclass.resource.k8s.io "{sub.device_class_name}" not found')
        selection = (cls.name, tuple(s.expression for s in sub.selectors))
        signature = (selection, bool(sub.admin_access), sub.tolerations,
                     tuple(sorted(sub.capacity.requests.items())) if sub.capacity else None)
        by_selection = self._by_selection.get(selection)
        if by_selection is None:
            by_selection = self._by_selection[selection] = _BySelection()
        by_signature = self._by_signature.get(signature)
        if by_signature is None:
            by_signature = self._by_signature[signature] = _BySignature()
        data = _RequestData(sub, parent, cls, selection, signature, by_selection, by_signature)
        if sub.allocation_mode == "ExactCount":
            data.num_devices = sub.count
            return data
        if sub.allocation_mode != "All":
            raise AllocatorError(f"claim {claim.key}, request {name}: unsupported count mode {sub.allocation_mode}")
        for pool in self.pools:
            if pool.is_incomplete or pool.missing_slices:
                raise AllocatorError(f"claim {claim.key}, request {name}: asks for all devices, but resource pool "
                                     f"{pool.pool_id} is currently being updated")
            if pool.is_invalid:
                raise AllocatorError(f"claim {claim.key}, request {name}: asks for all devices, but resource pool "
                                     f"{pool.pool_id} is currently invalid")
            for s in pool.slices:
                for device in s.devices:
                    candidate = Candidate((s.driver, s.pool.name, device.name), device, s, pool)
                    if keyed:
                        if not self._selectable_under(under or key, key, data, candidate):
                            continue
                    elif not self._selectable(key, data, candidate):
                        continue
                    if self.features.consumable_capacity:
                        try:
                            if not (self._fits_when_free(sub, candidate) if self.generation.all_mode_static_capacity
                                    else self._capacity_fits(sub, candidate)):
                                continue
                        except CapacityRequestError as e:  # 1.37 names the device without its driver and pool
                            raise AllocatorError(f"claim {claim.key}, request {name}: checking capacity for device "
                                                 f"{device.name}: {e}") from None
                    data.all_devices.append(candidate)
        data.num_devices = len(data.all_devices)
        return data

    # ---- the search ------------------------------------------------------------------------------------

    def _allocate_one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]) -> bool:
        self.steps += 1
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.spec.requests):
            try:
                return self._next_request(ci + 1, 0)
            except _MaxSizeExceededError:
                return False
        key = (ci, ri, si)
        data = self.requests[key]
        if not in_sub and data.parent is not None:
            all_exceeded = True
            for sub_index in range(len(claim.spec.requests[ri].first_available)):
                try:
                    ok = self._allocate_one(ci, ri, sub_index, di, True, (0, 0, 0))
                except _MaxSizeExceededError:
                    continue
                all_exceeded = False
                if ok:
                    self.requests[(ci, ri, 0)].selected_sub = sub_index
                    return True
            if all_exceeded:
                raise _MaxSizeExceededError
            return False
        request = data.request
        all_mode = request.allocation_mode == "All"
        if all_mode and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._next_request(ci, ri + 1)
        if len(self.results[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceededError
        if all_mode:
            undo = self._allocate_device(ci, ri, si, data.all_devices[di], must=True, di=di)
            if undo is None:
                return False
            next_si = si if self.generation.all_mode_keeps_subrequest else 0
            if not self._all_gives_back:  # 1.33: the device stays taken whatever follows
                return self._allocate_one(ci, ri, next_si, di + 1, in_sub, (0, 0, 0))
            return self._descend(undo, ci, ri, next_si, di + 1, in_sub, (0, 0, 0))
        admin = bool(request.admin_access)
        restriction = self._restriction(ci, data)
        budget = self.budget
        work_bound = self.work_bound
        combinations = self._searches_combinations
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.is_invalid and self._invalid_pool_aborts:
                raise AllocatorError(f"pool {pool.pool} is invalid: {pool.invalid_reason}")
            if pool.is_incomplete or pool.is_invalid:
                continue
            where = start if pi == start[0] else (pi, 0, 0)
            plan = self._plan(pi, pool, restriction, key, data)
            # Every position of the scan counts as a check, also those the plan passes over (they would be
            # rejected with no other effect): the budget runs out where it would with a device-by-device scan.
            done = bisect.bisect_left(plan.positions, (where[1], where[2]))
            known = plan.known
            candidates = plan.candidates
            allocating = self._allocating
            held = self.allocated.devices
            first = bisect.bisect_left(plan.at, done)
            visit: Iterable[int] = range(first, len(plan.at))
            if not admin and held:
                # Devices other pods hold are passed over in C (a node with 1,500 claims has 1,500 of them
                # before its last free device); each still counts as a check where the next one looked at
                # or the scan's end adds the positions up to it, and nothing else happens in between.
                visit = compress(visit, map(not_, map(held.__contains__, islice(plan.ids, first, None))))
            at = first - 1
            for at in visit:
                index = plan.at[at]
                self.checks += index - done + 1
                done = index + 1
                if self.checks > budget:
                    raise self._timeout()
                candidate = candidates[at]
                device_id = candidate.device_id
                if admin:
                    if self._admin_marks and ci in allocating.get(device_id, ()):
                        continue
                elif device_id in held or allocating.get(device_id):  # _in_use
                    continue
                if not known[at]:
                    if not self._selectable(key, data, candidate):
                        continue
                    if self.features.consumable_capacity and not self._scan_fits(ci, request, candidate):
                        continue
                undo = self._allocate_device(ci, ri, si, candidate, must=False, data=data, free=True, di=di)
                if undo is None:
                    continue
                if combinations:
                    sli, dvi = plan.positions[index]
                    after = (pi, sli, dvi + 1)
                else:
                    after = (0, 0, 0)
                # _descend, inline: one call less for every device the search takes
                try:
                    if self._allocate_one(ci, ri, si, di + 1, in_sub, after):
                        return True
                except _MaxSizeExceededError:
                    self._undo(undo)
                    raise
                self._undo(undo)
            # the devices this scan looked at, as work (added once the scan ends: a scan is at most a pool
            # long, and the steps it descends into end in scans of their own)
            self._looked += at - first + 1
            self.checks += len(plan.positions) - done
            if self.checks > budget or self.steps - self._replayed + self._looked > work_bound:
                raise self._timeout()
        return False

    @property
    def work(self) -> int:
        """numalign's own work, in devices' worth: the steps it took, the devices its scans looked at,
        what it read to recognise a failed part of the search, and its selectors' CEL cost (_charge_cel).
        Checked where a scan ends, where a failed part is recognised and after a selector's evaluation, so
        a failing search stops exactly when its work passes the bound."""
        return self.steps - self._replayed + self._looked

    def _timeout(self) -> SearchTimeoutError:
        """Upstream's timeout, once the checks are over the budget (the budget wins where both are over) or
        the devices looked at over the work bound."""
        return SearchTimeoutError(self.features.release.timeout_message(self.node.name),
                                  by_work=self.checks <= self.budget)

    def _next_request(self, ci: int, ri: int) -> bool:
        """The search from the first device of request ri of claim ci on. Where the search comes back to
        this point with everything that part of the search reads as it was when that part failed before,
        it fails again, with the same checks: the failure is remembered, and the checks it took are counted
        again (so the budget runs out as it would), without searching."""
        if ci >= len(self.claims) or ri >= len(self.claims[ci].spec.requests):
            return self._allocate_one(ci, ri, 0, 0, False, (0, 0, 0))
        visits = self._visits.get((ci, ri), 0) + 1
        self._visits[(ci, ri)] = visits
        # (where `All` devices stay taken, 1.33, a failed part of the search changed the state: it is searched)
        if visits < 2 or not self._all_gives_back:
            return self._allocate_one(ci, ri, 0, 0, False, (0, 0, 0))
        state = self._search_state(ci, ri)
        failed = self._failed.get(state)
        if failed is not None:
            max_size, checks, steps = failed
            self.checks += checks
            self.steps += steps
            self._replayed += steps
            if self.checks > self.budget:
                raise self._timeout()
            if max_size:
                raise _MaxSizeExceededError
            return False
        checks, steps = self.checks, self.steps
        try:
            done = self._allocate_one(ci, ri, 0, 0, False, (0, 0, 0))
        except _MaxSizeExceededError:
            if self._search_state(ci, ri) == state:
                self._failed[state] = (True, self.checks - checks, self.steps - steps)
            raise
        if not done and self._search_state(ci, ri) == state:
            self._failed[state] = (False, self.checks - checks, self.steps - steps)
        return done

    def _search_state(self, ci: int, ri: int) -> tuple[object, ...]:
        """What the search from request ri of claim ci on reads that earlier choices change: who is
        allocating the devices it could take (and their shares and counters), the constraints of this claim
        and the later ones, and how many devices this claim already has."""
        devices, counter_pools = self._reachable(ci, ri)
        allocating = self._allocating
        holders = frozenset((d, frozenset(h)) for d, h in allocating.items() if h and d in devices) if len(
            allocating) < len(devices) else frozenset((d, frozenset(h)) for d in devices if (h := allocating.get(d)))
        # (1.34 checks the capacity of a device it may not take itself: every share counts there)
        every_share = self.generation.capacity_check_at_request_index
        shares = frozenset((d, frozenset(c.items())) for d, c in self._allocating_capacity.items()
                           if every_share or d in devices) if self._allocating_capacity else frozenset()
        counters = frozenset(
            (pool, name, frozenset((n, q) for n, q in used.items() if not q.is_zero()))
            for pool, sets in self._consumed_counters.items() if pool in counter_pools
            for name, used in sets.items()) if counter_pools else frozenset()
        constraints = tuple(_constraint_state(c) for claim in self.constraints[ci:] for c in claim)
        # what it went through, in devices' worth: a search that comes back here often spends its time here
        self._looked += min(len(allocating), len(devices)) + len(self._allocating_capacity) + len(constraints)
        if self.work > self.work_bound:
            raise self._timeout()
        return ci, ri, len(self.results[ci]), holders, shares, counters, constraints

    def _reachable(self, ci: int, ri: int) -> tuple[frozenset[DeviceID], frozenset[str]]:
        """The devices the search from request ri of claim ci on may look at beyond their static checks
        (those its scans do not pass over, and those of its All requests), and the pools or slices (as the
        counters are kept, _counters_key) whose counters such devices consume."""
        found = self._reachable_cache.get((ci, ri))
        if found is not None:
            return found
        devices: set[DeviceID] = set()
        counter_pools: set[str] = set()
        for key, data in self.requests.items():
            if key[:2] < (ci, ri):
                continue
            for c in data.all_devices:
                devices.add(c.device_id)
                if c.device.consumes_counters:
                    counter_pools.add(self._counters_key(c.pool, c.slice))
            for pi, pool in enumerate(self.pools):
                if pool.is_incomplete or pool.is_invalid:
                    continue
                plans = data.by_signature.full
                plan = plans.get(pi)
                if plan is None or not plan.filtered:
                    plan = self._filtered(pi, self._positions(pi, pool, None, key, data), pool, key, data)
                    plans[pi] = plan
                for index in plan.at:
                    sli, dvi = plan.positions[index]
                    d = pool.slices[sli].devices[dvi]
                    devices.add((pool.driver, pool.pool, d.name))
                    if d.consumes_counters:
                        counter_pools.add(self._counters_key(pool, pool.slices[sli]))
        found = frozenset(devices), frozenset(counter_pools)
        self._reachable_cache[(ci, ri)] = found
        return found

    def _restriction(self, ci: int, data: _RequestData) -> MatchAttributeConstraint | None:
        """A matchAttribute constraint of the claim that already holds a value for this request's devices:
        only devices with that value can be added, so the search visits only those (the same devices in
        the same order as upstream's scan; the others would fail the constraint with no other effect)."""
        restricting = data.restricting
        if restricting is None:  # the claim's scalar matchAttribute constraints naming this request
            base, sub = (data.parent, data.request.name) if data.parent else (data.request.name, "")
            restricting = data.restricting = [
                c for c in self.constraints[ci] if isinstance(c, MatchAttributeConstraint) and not c.list_types
                and matches_request(c.requests, base, sub)]
        for c in restricting:
            if c.count > 0 and c.first is not None:
                return c  # (its attribute, and the value its first device brought)
        return None

    def _plan(self, pi: int, pool: Pool, restricting: MatchAttributeConstraint | None, key: Key,
              data: _RequestData) -> _Plan:
        """The scan of a pool for a request: its positions, and which of them need a look. The first scan
        looks at every position; from the second on (the search backtracks), the positions whose device
        the request could never take are passed over (counted, not looked at). Kept per request kind
        (data.by_signature), by pool and, restricted, by the attribute and its value."""
        restriction = None
        if restricting is None:
            plans: dict[Any, _Plan] = data.by_signature.full
            plan_key: object = pi
        else:
            value = restricting.first
            assert value is not None
            restriction = (restricting.attribute, value)
            plans = data.by_signature.restricted
            plan_key = (pi, restricting.attribute, None if value.is_list else (value.kind, value.values))
        plan = plans.get(plan_key)
        if plan is None:
            positions = self._positions(pi, pool, restriction, key, data)
            if restriction is None:  # every position: the same candidates for every request, once per pool
                kept = derived(pool)
                candidates = kept.get("flat")
                if candidates is None:
                    candidates = kept["flat"] = [c for in_slice in self._candidates(pi, pool) for c in in_slice]
                    kept["flat_ids"] = [c.device_id for c in candidates]
                ids = kept["flat_ids"]
            else:
                by_slice = self._candidates(pi, pool)
                candidates = [by_slice[sli][dvi] for sli, dvi in positions]
                ids = [c.device_id for c in candidates]
            plan = _Plan(positions, range(len(positions)), False, [False] * len(positions), candidates, ids)
            plans[plan_key] = plan
        elif not plan.filtered:
            plan = self._filtered(pi, plan.positions, pool, key, data)
            plans[plan_key] = plan
        return plan

    def _candidates(self, pi: int, pool: Pool) -> list[list[Candidate]]:
        """A pool's candidates by slice and device position, made once per pool (pools.derived)."""
        kept = derived(pool)
        found: list[list[Candidate]] | None = kept.get("candidates")
        if found is None:
            driver, name = pool.driver, pool.pool
            found = [[Candidate((driver, name, d.name), d, s, pool) for d in s.devices] for s in pool.slices]
            kept["candidates"] = found
        return found

    def _filtered(self, pi: int, positions: list[tuple[int, int]], pool: Pool, key: Key,
                  data: _RequestData) -> _Plan:
        at: list[int] = []
        known: list[bool] = []
        candidates: list[Candidate] = []
        by_slice = self._candidates(pi, pool)
        checks = data.by_signature.checks
        for i, (sli, dvi) in enumerate(positions):
            candidate = by_slice[sli][dvi]
            # The same for every scan of this request's kind (the allocator's other state is not read):
            # the restricted scans of a pool look again at devices its full scan already checked.
            device_id = candidate.device_id
            if device_id in checks:
                look = checks[device_id]
            else:
                look = checks[device_id] = self._static_check(key, data, candidate)
            if look is not None:
                at.append(i)
                known.append(look)
                candidates.append(candidate)
        return _Plan(positions, at, True, known, candidates, [c.device_id for c in candidates])

    def _static_check(self, key: Key, data: _RequestData, candidate: Candidate) -> bool | None:
        """None where the scan rejects this device for this request whatever the search has allocated, with
        no effect beyond the check: held by another pod, not selected, its capacity too small for the
        request (a device without multiple allocations: only other pods' shares count), its counters off,
        or a taint the request does not tolerate (where trying it takes no counters that stay taken).
        Else whether the device is known to be selected and to fit (False: the scan looks at it)."""
        request = data.request
        device = candidate.device
        if not request.admin_access and candidate.device_id in self.allocated.devices:
            return None
        try:
            if not self._selectable(key, data, candidate):
                return None
        except AllocatorError:
            return False  # the scan reports it when it gets there, unless the device is in use by then
        f = self.features
        multiple = f.consumable_capacity and bool(device.allow_multiple_allocations)
        try:
            if f.consumable_capacity and not multiple and not self._capacity_fits(request, candidate):
                return None
        except CapacityRequestError:
            return False  # the scan reports it when it gets there, as for a selector's error
        if not f.partitionable_devices and device.consumes_counters and self.generation.counters_off_rejects_device:
            return None
        if (f.device_taints and device.taints and _taint_prevents(device, request)
                and (not device.consumes_counters or self.generation.rolls_back_rejected_devices)):
            return None
        return not multiple

    def _positions(
        self,
        pi: int,
        pool: Pool,
        restriction: tuple[str, DeviceAttribute] | None,
        key: Key,
        data: _RequestData,
    ) -> list[tuple[int, int]]:
        """The (slice, device) positions of a pool in search order: all of them, or with a restriction those
        whose attribute has its value (and, where a rejected device keeps the counters it took, every device
        that consumes counters, since trying it has that effect)."""
        if restriction is None:
            kept = derived(pool)
            every: list[tuple[int, int]] | None = kept.get("positions")
            if every is None:
                every = kept["positions"] = [(sli, dvi) for sli, s in enumerate(pool.slices)
                                                     for dvi in range(len(s.devices))]
            return every
        name, value = restriction
        groups = self._position_index.get((pi, name))
        if groups is None:
            groups = self._group_positions(pool, name)
            self._position_index[(pi, name)] = groups
        wanted = None if value.is_list else (value.kind, value.values)
        positions = groups.get(wanted)
        if positions is None:
            positions = groups[_ALWAYS]
        failing = self._failing_positions(key, pi, pool, data)
        if self.features.consumable_capacity and self._capacity_rules.strict:
            failing = failing + self._capacity_failing_positions(key, pi, pool, data)
        if failing:
            # A selector that fails on a device, or (1.37) a capacity check that aborts, fails the allocation
            # when the scan reaches that device, whatever its attribute: those devices stay on the way.
            positions = sorted(set(positions) | set(failing))
        return positions

    def _capacity_failing_positions(self, key: Key, pi: int, pool: Pool, data: _RequestData) -> list[tuple[int, int]]:
        """The devices of a pool that the request selects and whose capacity check aborts the allocation (1.37:
        a request that cannot be represented, a negative capacity), once per request kind and pool: upstream's
        scan checks every selected device's capacity, also one of another matchAttribute value. The check reads
        nothing the search changes (what is consumed only decides a fit, after the abort's checks)."""
        failing = data.by_signature.capacity_failing
        found = failing.get(pi)
        if found is None:
            found = []
            request = data.request
            for sli, in_slice in enumerate(self._candidates(pi, pool)):
                for dvi, candidate in enumerate(in_slice):
                    if not candidate.device.capacity:
                        continue  # nothing to check: no error
                    try:
                        if not self._selectable(key, data, candidate):
                            continue
                        self._fits(request, candidate.device_id, candidate.device)
                    except AllocatorError:
                        continue  # a selector's error: _failing_positions has it
                    except CapacityRequestError:
                        found.append((sli, dvi))
            failing[pi] = found
        return found

    def _failing_positions(self, key: Key, pi: int, pool: Pool, data: _RequestData) -> list[tuple[int, int]]:
        """The devices of a pool on which the request's or its class's selectors fail (a CEL runtime error),
        once per request and pool; every other device's selection is cached by the same pass."""
        failing = data.by_selection.failing
        found = failing.get(pi)
        if found is None:
            found = []
            matches = data.by_selection.matches
            for sli, in_slice in enumerate(self._candidates(pi, pool)):
                for dvi, candidate in enumerate(in_slice):
                    if candidate.device_id in matches:
                        continue  # selected or not already, without an error (an error is never kept)
                    try:
                        self._selectable(key, data, candidate)
                    except AllocatorError:
                        found.append((sli, dvi))
            failing[pi] = found
        return found

    def _group_positions(self, pool: Pool, name: str) -> dict[object, list[tuple[int, int]]]:
        """A pool's device positions grouped by the value of one attribute, once per Allocate. Where a
        rejected device keeps the counters it took, every device that consumes counters is in every group
        (trying it has that effect), and in the group _ALWAYS that a value no device has gets."""
        leaks = not self.generation.rolls_back_rejected_devices
        groups: dict[object, list[tuple[int, int]]] = {_ALWAYS: []}
        for sli, s in enumerate(pool.slices):
            for dvi, d in enumerate(s.devices):
                if leaks and d.consumes_counters:
                    for positions in groups.values():
                        positions.append((sli, dvi))
                    continue
                attr = d.attribute(s.driver, name)
                if attr is None or attr.is_list:
                    continue
                key = (attr.kind, attr.values)
                if key not in groups:
                    groups[key] = list(groups[_ALWAYS])
                groups[key].append((sli, dvi))
        return groups

    def _descend(
        self, undo: _Undo, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]
    ) -> bool:
        """The next device after one was allocated; the device is given back unless that succeeds."""
        try:
            done = self._allocate_one(ci, ri, si, di, in_sub, start)
        except _MaxSizeExceededError:
            self._undo(undo)
            raise
        if not done:
            self._undo(undo)
        return done

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.allocated.devices or bool(self._allocating.get(device_id))

    def _fits_statically(self, data: _RequestData, c: Candidate) -> bool:
        """_capacity_fits for a device without multiple allocations: only other pods' shares count, so the
        answer is the same all through the search."""
        fits = data.by_signature.fits
        found = fits.get(c.device_id)
        if found is None:
            found = fits[c.device_id] = self._capacity_fits(data.request, c)
        return found

    def _capacity_fits(self, request: DeviceSubRequest, c: Candidate) -> bool:
        return self._fits(request, c.device_id, c.device)

    def _scan_fits(self, ci: int, request: DeviceSubRequest, c: Candidate) -> bool:
        """_capacity_fits where the scan looks at a device: 1.37's capacity errors abort there."""
        try:
            return self._fits(request, c.device_id, c.device)
        except CapacityRequestError as e:
            raise AllocatorError(f"claim {self.claims[ci].key}, request {request.name}: checking capacity for "
                                 f"device {device_id_text(c.device_id)}: {e}") from None

    def _fits(self, request: DeviceSubRequest, device_id: DeviceID, device: Device) -> bool:
        if not device.capacity:  # nothing to consume: only a request naming a capacity (not defined) fails
            return not (request.capacity and request.capacity.requests)
        consumed = self.allocated.capacity.get(device_id, {})
        try:
            return request_fits(consumed, request.capacity.requests if request.capacity else None,
                                device.capacity, self._allocating_capacity.get(device_id), self._capacity_rules)
        except CapacityNotDefinedError:
            return False

    def _fits_when_free(self, request: DeviceSubRequest, c: Candidate) -> bool:
        """Whether the request fits the device's capacity with nothing of it consumed (1.37's list of a
        request's `All` devices: a device whose capacity others use up stays in the list, and taking it
        then fails)."""
        if not c.device.capacity:
            return not (request.capacity and request.capacity.requests)
        try:
            return request_fits({}, request.capacity.requests if request.capacity else None, c.device.capacity,
                                None, self._capacity_rules)
        except CapacityNotDefinedError:
            return False

    def _fits_at_request_index(self, request: DeviceSubRequest, c: Candidate, di: int) -> bool:
        """1.34's capacity check when it takes a device: the device at the request's device index in the
        taken device's slice is checked (its capacity, and what other claims and this search consume of
        it), not the device itself. Past the slice's end kube-scheduler panics (the named difference
        dra-134-capacity-index); numalign checks the device itself there."""
        devices = c.slice.devices
        if di >= len(devices):
            return self._capacity_fits(request, c)
        other = devices[di]
        return self._fits(request, (c.slice.driver, c.slice.pool.name, other.name), other)

    # ---- selection -------------------------------------------------------------------------------------

    def _selectable(self, key: Key, data: _RequestData, c: Candidate) -> bool:
        """isSelectable, cached per device and class and selectors (a selector that fails is not cached:
        it fails again, in the words of the claim that asks)."""
        if not self.features.device_binding_and_status and c.device.binding_conditions:
            return False
        by_selection = data.by_selection
        matches = by_selection.matches
        found = matches.get(c.device_id)
        if found is not None:
            return found
        claim = self.claims[key[0]]
        result = True
        paths = self._paths_of(data)
        memo_key = None
        if paths is not None:
            d = c.device
            memo_key = cel.device_key(paths, c.slice.driver, d.attributes, d.capacity, d.allow_multiple_allocations)
        selected = None if memo_key is None else by_selection.memo.get(memo_key)
        if selected is None:
            selected = ((data.cls is None or self._selectors_match(claim, c, data.cls, data.cls.selectors))
                        and self._selectors_match(claim, c, None, data.request.selectors))
            if memo_key is not None:
                by_selection.memo[memo_key] = selected
        if not selected:
            result = False
        elif c.slice.per_device_node_selection:
            result = node_matches(self.node, c.device.node_name, c.device.all_nodes, c.device.node_selector)
        matches[c.device_id] = result
        return result

    def _selectable_under(self, under: Key, key: Key, data: _RequestData, c: Candidate) -> bool:
        """isSelectable as releases up to 1.35 call it while validating: cached per device and request key,
        where `under` may be the previous subrequest's key (Generation.validates_under_previous_key). A
        verdict found there wins (a second `All` subrequest gets the first one's devices, its own selectors
        never evaluated on them); one computed here is kept under `under`. Only validation reads these:
        upstream's search starts with an empty cache."""
        if not self.features.device_binding_and_status and c.device.binding_conditions:
            return False  # decided before upstream's cache is read, and not kept in it
        found = self._keyed.get((c.device_id, under))
        if found is not None:
            return found
        result = self._selectable(key, data, c)  # a selector's error propagates, nothing kept (as upstream)
        self._keyed[(c.device_id, under)] = result
        return result

    def _paths_of(self, data: _RequestData) -> tuple[cel.Path, ...] | None:
        """What of a device the class's and the request's selectors read, where each reads fixed paths
        and compiles: devices alike in those share one answer (a selector's error is not shared: its
        message names the device)."""
        by_selection = data.by_selection
        if by_selection.paths_known:
            return by_selection.paths
        selectors = [*(data.cls.selectors if data.cls is not None else ()), *data.request.selectors]
        paths: set[cel.Path] | None = set()
        for selector in selectors:
            compiled = self._compile(selector.expression)
            if compiled.error is not None or compiled.paths is None:
                paths = None
                break
            assert paths is not None
            paths.update(compiled.paths)
        found = None if paths is None else tuple(sorted(paths))
        by_selection.paths = found
        by_selection.paths_known = True
        return found

    def _compile(self, expression: str) -> cel.CompiledSelector:
        compiled = self._compiled.get(expression)
        if compiled is None:
            compiled = cel.compile_selector(expression, self._cel_compile_features)
            self._compiled[expression] = compiled
        return compiled

    def _selectors_match(self, claim: ResourceClaim, c: Candidate, cls: DeviceClass | None, selectors: Any) -> bool:
        for i, selector in enumerate(selectors):
            compiled = self._compile(selector.expression)
            if compiled.error is not None:
                raise AllocatorError(f"{_owner(claim, cls)}: selector #{i}: CEL compile error: {compiled.error}")
            cache_key = (selector.expression, c.device_id)
            matched = self._cel_results.get(cache_key)
            if matched is None:
                matched = self._evaluate(compiled, c, _owner(claim, cls), i)
                self._cel_results[cache_key] = matched
            if not matched:
                return False
        return True

    def _evaluate(self, compiled: cel.CompiledSelector, c: Candidate, owner: str, index: int) -> bool:
        variables = self._cel_devices.get(c.device_id)
        if variables is None:
            d = c.device
            variables = cel.device_variables(c.slice.driver, d.attributes, d.capacity, d.allow_multiple_allocations,
                                             self._cel_features)
            self._cel_devices[c.device_id] = variables
        try:
            matched, cost = cel.matches_costed(compiled, variables)
        except cel.CELRuntimeError as exc:
            self._cel_cost += exc.cost  # the search ends with this error: nothing left to bound
            message = str(exc)
            if self.generation.cel_error_names_device:
                if "no such key:" in message:
                    message += (". consider using CEL optional chaining (.? followed by orValue()) or guarding the "
                                "check with has() for optional fields")
                raise AllocatorError(f"{owner}: selector #{index} on device {device_id_text(c.device_id)}: CEL "
                                     f"runtime error: {message}") from None
            raise AllocatorError(f"{owner}: selector #{index}: CEL runtime error: {message}") from None
        self._charge_cel(cost)
        return matched

    def _charge_cel(self, cost: int) -> None:
        """Charge a selector's evaluation to the work bound (CEL_COST_PER_WORK), stopping the search once
        its work is over the bound, as a scan's end does."""
        self._cel_cost += cost
        if self._cel_cost >= CEL_COST_PER_WORK:
            units, self._cel_cost = divmod(self._cel_cost, CEL_COST_PER_WORK)
            self._looked += units
            if self.work > self.work_bound:
                raise self._timeout()

    # ---- allocating one device -------------------------------------------------------------------------

    def _allocate_device(
        self, ci: int, ri: int, si: int, c: Candidate, *, must: bool, data: _RequestData | None = None,
        free: bool = False, di: int = 0,
    ) -> _Undo | None:
        """The device taken for the request, and what `_undo` needs to give it back; None where it cannot be
        taken. `data`: the request's, where the caller has it; `free`: the caller's scan found the device
        not in use (its test is the same as, or for admin access stricter than, the one here); `di`: how
        many devices the request has taken before this one."""
        if data is None:
            data = self.requests[(ci, ri, si)]
        request = data.request
        admin = bool(request.admin_access)
        f = self.features
        device = c.device
        device_id = c.device_id
        multiple = f.consumable_capacity and bool(device.allow_multiple_allocations)
        if free:
            pass
        elif admin:
            if self._admin_marks and not multiple and ci in self._allocating.get(device_id, ()):
                return None
        elif device_id in self.allocated.devices or self._allocating.get(device_id):  # _in_use
            return None
        took_counters = False
        if device.consumes_counters:
            if not f.partitionable_devices:
                if self.generation.counters_off_rejects_device:
                    return None
            elif self._counters_in_place:  # 1.33: checked, nothing taken
                if not self._counters_fit_in_place(c):
                    return None
            else:
                in_use_by_share = self.generation.shares_skip_counters and (
                    device_id in self.allocated.capacity or device_id in self._allocating_capacity)
                if not (multiple and in_use_by_share):
                    if not self._take_counters(c):
                        return None
                    took_counters = True
        # Where the generation rolls back a rejected device (1.36.3, 1.37), each rejection below gives back
        # what this call took; before, the counters (and on a capacity misfit the constraints and the
        # device's mark) stayed taken for the rest of the search.
        rollback = self.generation.rolls_back_rejected_devices
        base, sub = (data.parent, request.name) if data.parent else (request.name, "")
        if f.device_taints and device.taints and _taint_prevents(device, request):
            if rollback and took_counters:
                self._give_back_counters(c)
            return None
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(base, sub, c.slice.driver, c.device):
                if must:
                    raise AllocatorError(f"claim {self.claims[ci].key}, request {request.name}: cannot add device "
                                         f"{device_id_text(c.device_id)} because a claim constraint would not be "
                                         "satisfied")
                for earlier in constraints[:i]:
                    earlier.remove(base, sub)
                if rollback and took_counters:
                    self._give_back_counters(c)
                return None
        holders = self._allocating.get(device_id)
        if holders is None:
            holders = self._allocating[device_id] = set()
        if not multiple and (self._admin_marks or not admin):
            holders.add(ci)
            if self._counters_in_place and device.consumes_counters and f.partitionable_devices:
                self._mark_counters(c, add_into)  # what 1.33's next checks in this slice subtract
        consumed: ConsumedCapacity | None = None
        share_id: str | None = None
        shared_before = c.device_id in self._allocating_capacity
        if f.consumable_capacity:
            if self.generation.capacity_check_at_request_index:
                fits = self._fits_at_request_index(request, c, di)
            else:
                try:  # where a device known to be selectable skipped the scan's own check (_known)
                    fits = self._fits_statically(data, c) if not multiple else self._capacity_fits(request, c)
                except CapacityRequestError as e:
                    raise AllocatorError(f"claim {self.claims[ci].key}, request {request.name}: checking capacity "
                                         f"for device {device_id_text(c.device_id)}: {e}") from None
            if not fits:
                if rollback:
                    holders.discard(ci)
                    for constraint in constraints:
                        constraint.remove(base, sub)
                    if took_counters:
                        self._give_back_counters(c)
                return None
            if multiple:
                consumed = consumed_from_request(request.capacity.requests if request.capacity else None,
                                                 c.device.capacity, self._capacity_rules)
                share_id = _SHARE_PENDING  # named once the search has succeeded (`_name_shares`)
                add_into(self._allocating_capacity.setdefault(c.device_id, {}), consumed)
        result = DeviceResult(request.name, base if sub else "", c.device_id, c.device, c.slice,
                              True if admin else None, share_id, consumed or None)  # (positional: faster)
        before = len(self.results[ci])
        self.results[ci].append(result)

        # a tuple rather than a closure: made for every device the search takes
        return ci, c, base, sub, constraints, multiple, consumed, took_counters, shared_before, before

    def _undo(self, undo: _Undo) -> None:
        """Give back a device `_allocate_device` took."""
        ci, c, base, sub, constraints, multiple, consumed, took_counters, shared_before, before = undo
        for constraint in constraints:
            constraint.remove(base, sub)
        if self._admin_marks or not self.results[ci][before].admin_access:  # (1.33 marks no admin access)
            self._allocating[c.device_id].discard(ci)
            if self._counters_in_place and c.device.consumes_counters and self.features.partitionable_devices:
                self._mark_counters(c, subtract_from)
        if multiple:
            rollback = self.generation.rolls_back_rejected_devices
            if consumed:
                total = self._allocating_capacity.get(c.device_id)
                if total is not None:
                    subtract_from(total, consumed)
                    if all(q.is_zero() for q in total.values()):
                        del self._allocating_capacity[c.device_id]
                        if rollback and shared_before:
                            # An earlier share of the device still holds it.
                            self._allocating_capacity[c.device_id] = {}
            if rollback and took_counters:
                self._give_back_counters(c)
        elif took_counters:
            self._give_back_counters(c)
        del self.results[ci][before:]

    def _take_counters(self, c: Candidate) -> bool:
        """checkAvailableCounters: consume the device's counters if every counter set still has them."""
        pool = c.pool
        key = self._counters_key(pool, c.slice)
        available = self._available_counters.get(key)
        if available is None:
            sources: Sequence[ResourceSlice]
            if self._counters_per_slice:  # its own slice's counter sets, less its own slice's devices' use
                available = {cs.name: dict(cs.counters) for cs in c.slice.shared_counters}
                sources = (c.slice,)
            else:
                available = {name: dict(cs.counters) for name, cs in pool.counter_sets.items()}
                sources = [*pool.slices, *pool.slices_not_targeting_node]
            held = (self.allocated.holds if self.generation.counters_see_shared_allocations
                    else self.allocated.devices.__contains__)
            for s in sources:
                _take_off_held(available, s, held)
            self._available_counters[key] = available
        consumed = self._consumed_counters.setdefault(key, {})
        for consumption in c.device.consumes_counters:
            add_into(consumed.setdefault(consumption.counter_set, {}), consumption.counters)
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, q in counters.items():
                if q < used.get(name, Quantity(0)):
                    self._give_back_counters(c)
                    return False
        return True

    def _counters_key(self, pool: Pool, s: ResourceSlice) -> str:
        """How the counters available and consumed are kept: by slice name in 1.33 and 1.34 (each slice
        publishes its own), by pool name in 1.35 and 1.36 (two drivers' pools of one name share the counters
        of the first one the search met), by driver and pool from 1.37."""
        if self._counters_per_slice:
            return s.name
        return f"{pool.driver}/{pool.pool}" if self.generation.counters_by_pool_id else pool.pool

    def _counters_fit_in_place(self, c: Candidate) -> bool:
        """1.33's checkAvailableCapacity: every counter the device consumes is in its own slice's counter set
        (a set or counter the slice lacks: the device does not fit), with at least as much left as the device
        asks once the slice's devices that others hold or this search marked are taken off. Each consumption
        is checked by itself, as upstream does; nothing is reserved."""
        key = c.slice.name
        available = self._available_counters.get(key)
        if available is None:
            s = c.slice
            available = {cs.name: dict(cs.counters) for cs in s.shared_counters}
            _take_off_held(available, s, self.allocated.devices.__contains__)
            self._available_counters[key] = available
        marked = self._consumed_counters.get(key, {})
        for consumption in c.device.consumes_counters:
            counters = available.get(consumption.counter_set, {})
            used = marked.get(consumption.counter_set, {})
            for name, q in consumption.counters.items():
                have = counters.get(name)
                if have is None:
                    return False
                if name in used:
                    have = have - used[name]
                if have < q:
                    return False
        return True

    def _mark_counters(self, c: Candidate, how: Any) -> None:
        """1.33: what a device this search marked consumes of its slice's counter sets, added or taken off."""
        marked = self._consumed_counters.setdefault(c.slice.name, {})
        for consumption in c.device.consumes_counters:
            how(marked.setdefault(consumption.counter_set, {}), consumption.counters)

    def _give_back_counters(self, c: Candidate) -> None:
        consumed = self._consumed_counters.get(self._counters_key(c.pool, c.slice), {})
        for consumption in c.device.consumes_counters:
            subtract_from(consumed.setdefault(consumption.counter_set, {}), consumption.counters)


def _owner(claim: ResourceClaim, cls: DeviceClass | None) -> str:
    return f"class {cls.name}" if cls is not None else f"claim {claim.key}"


def _constraint_state(c: Constraint) -> object:
    """What a constraint's next checks depend on (a matchAttribute's value is set anew by its next first
    device)."""
    if isinstance(c, MatchAttributeConstraint):
        if c.count == 0:
            return 0
        return c.count, c.first if not c.list_types else c.intersection
    return c.count, tuple(c.added) if c.every_device else frozenset(c.seen.items())


class _MaxSizeExceededError(Exception):
    """errAllocationResultMaxSizeExceeded: this alternative would put more than 32 devices in a claim."""


def _taint_prevents(device: Device, request: DeviceSubRequest) -> bool:
    for taint in device.taints:
        if taint.effect in ("NoExecute", "NoSchedule") and not any(t.tolerates(taint) for t in request.tolerations):
            return True
    return False
