"""What the structured allocator does differently from one release to the next, as named records.

Upstream keeps its allocator in generations (structured/internal/{stable,incubating,experimental}):
NewAllocator picks, most stable first, the first generation whose supported features cover every
enabled one. A change lands in experimental, and moves to incubating and stable as it matures, so one
release can search in two ways depending on the gates. `Generation` is one generation of one release
(what it supports and how it searches); `Release` is what the scheduler around it does (how it wires
the gates, how it words a timeout). The allocator reads these records, never version numbers.
The facts come from k8s.io/dynamic-resource-allocation v0.33.13, v0.34.5, v0.35.2, v0.36.2, v0.37.0 and
kube-scheduler's DynamicResources plugin of the same releases (docs/dra.md, "Versions").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final


@dataclass(frozen=True)
class Generation:
    """One allocator implementation of one release (internal/<name>/allocator_<name>.go)."""

    name: str
    # structured.Features this generation accepts (SupportedFeatures); a superset of the enabled ones wins.
    supported: frozenset[str]
    # The next device of a request is searched after the previous one (combinations); before 1.36, and in
    # stable still, from the start again (permutations: the same first answer, more steps).
    searches_combinations: bool = False
    # Pools sorted by driver and pool name, slices by name. Without it upstream ranges over a Go map: the
    # order, and with more than one pool to choose from possibly the answer, changes from run to run.
    sorts_pools: bool = False
    # 1.35 and 1.36 (not stable): a slice with sharedCounters is gathered for every node, whatever node it
    # names, so its pool is seen (possibly incomplete or invalid) on nodes that have none of its devices.
    counter_slices_for_every_node: bool = False
    # 1.34: an invalid pool met by the search fails the allocation ("pool P is invalid: ...").
    invalid_pool_aborts: bool = False
    # 1.35+ (checkSlicesInPool): a pool is complete when its slices of the newest generation, for every
    # node, number resourceSliceCount (a newer generation elsewhere makes it obsolete), and an incomplete
    # pool offers no device. 1.34 counts only the slices that apply to this node, so a pool spread over
    # nodes is incomplete there, and searches an incomplete pool's devices (allocationMode All refuses it).
    counts_pool_on_every_node: bool = True
    # 1.35+: distinctAttribute compares attribute values. 1.34 compares their pointers, so two devices never
    # share a value (only a device allocated twice, through shared allocations, repeats its own).
    distinct_compares_values: bool = True
    # 1.37: distinctAttribute compares a device with every device added before it (a list of their
    # attributes). 1.34-1.36 keep one attribute per request name, the request's last device's, so a device
    # is compared with each request's last device only, and removing one forgets the request's value.
    distinct_keeps_every_device: bool = False
    # 1.36+: after a device of an `All` subrequest the search goes on with the same subrequest. 1.34 and 1.35
    # drop the subrequest's index there (allocateOne(deviceIndices{claim, request, device + 1})), so the
    # rest is searched as the request's first subrequest: with a first subrequest of one device, an `All`
    # subrequest gets only its first device.
    all_mode_keeps_subrequest: bool = True
    # Up to 1.35 a request's subrequest i (i >= 1) is validated under subrequest i-1's key (the key's
    # subRequestIndex is set after validateDeviceRequest; 1.36 sets it before), and isSelectable caches
    # its verdicts per device and key: an `All` subrequest reads the verdicts subrequest i-1's own `All`
    # list left there (its own selectors never evaluated on those devices), and writes its own verdicts
    # under i-1's key where none were, which subrequest i-1's search then reads as its own.
    validates_under_previous_key: bool = False
    # 1.35+: invalid pools are skipped; when nothing fits, "invalid resource pools were encountered".
    reports_invalid_pools: bool = False
    # 1.36.3+, 1.37: a device rejected after its counters were reserved (taint, constraint, capacity) gives
    # them back, and a rejected or undone share keeps an earlier share's mark; until then the reservation
    # leaks for the rest of the search.
    rolls_back_rejected_devices: bool = False
    # The generation's code knows consumable capacity: it refuses capacity requests while
    # DRAConsumableCapacity is off and applies distinctAttribute (whatever the gate). One that does not
    # (stable; incubating before 1.36) ignores capacity requests and calls distinctAttribute an empty
    # constraint.
    knows_consumable_capacity: bool = False
    # 1.34's experimental generation, taking a device, checks the capacity of the device at the request's
    # device index in that device's slice (CmpRequestOverCapacity(request, slice, r.deviceIndex)), not of
    # the device; its scan before checked the device itself. (Past the slice's end it panics.)
    capacity_check_at_request_index: bool = False
    # 1.34's experimental generation names the request, not the subrequest, when a subrequest asks for
    # capacity with DRAConsumableCapacity off.
    capacity_error_names_subrequest: bool = True
    # 1.36+ (incubating, experimental): the node's own slices are gathered first, then those for any node;
    # before (and in stable) every slice in the order given.
    node_slices_first: bool = False
    # 1.36.2+: the counters that allocated devices consume include shared (consumable-capacity) allocations
    # (IsDeviceAllocated); 1.36.0 and 1.36.1 counted only devices allocated whole.
    counters_see_shared_allocations: bool = True
    # 1.37.1+: a claim over 32 devices is refused at the request that crosses the limit ("claim C, request R:
    # adding N devices exceeds the claim limit of 32, with M already accounted for").
    claim_limit_per_request: bool = False
    # 1.37: the devices listed for an `All` request are those whose capacity fits the request with nothing
    # consumed; a device others' shares have used up stays listed, and taking it fails. Before, the list
    # left out devices without enough capacity left.
    all_mode_static_capacity: bool = False
    # 1.37: shared counters are kept per driver and pool (PoolID); before, per pool name, so pools of one name
    # from two drivers drew on one set of counters (the first pool's the search met).
    counters_by_pool_id: bool = False
    # 1.33, 1.34 (and 1.35's stable generation): a device draws on the counter sets published in its own slice,
    # beside its devices, kept per slice (by the slice's name), and only that slice's allocated devices count
    # against them. A slice with sharedCounters is an ordinary device slice: no pool-wide counter sets, no
    # check that a device's counter set exists (one its slice lacks is never checked: the device fits).
    # 1.35 on (incubating, experimental): counter sets in slices of their own, kept per pool.
    counters_per_slice: bool = False
    # 1.33: a device's counters are checked where it is taken, not reserved: each counter it consumes must be in
    # its slice's counter set, with at least as much left as it asks, less what the slice's devices allocated
    # and being allocated (marked: admin access marks none) consume; nothing is taken, so nothing given back.
    counters_checked_in_place: bool = False
    # Without DRAPartitionableDevices a slice with sharedCounters is not gathered (1.33; 1.35+ but 1.35's
    # stable generation). 1.34 gathers it (and the devices published beside the counters) all the same.
    counter_slices_need_partitionable: bool = True
    # Without DRAPartitionableDevices a device that consumes counters cannot be taken (1.34+). 1.33 only leaves
    # the counters unchecked.
    counters_off_rejects_device: bool = True
    # 1.35+: a shared device (consumable capacity) some of whose capacity is already in use takes no counters
    # again. 1.34 takes its counters at every share (and, as it never gives a share's counters back, keeps them
    # for the rest of the search).
    shares_skip_counters: bool = True
    # 1.37: a request rounded up to a validRange step keeps the step's form ("3G"), not binary SI.
    rounds_in_step_format: bool = False
    # 1.37: a capacity request that cannot be represented (past int64; not whole thousandths on
    # DRAFractionalCapacityRange's path) or a negative consumed capacity aborts the allocation ("claim C,
    # request R: checking capacity for device D: capacity "c": ..."); before, it passed or skipped the device.
    capacity_errors_abort: bool = False
    # 1.37: a CEL runtime error names the device ("selector #0 on device D/P/N: ...") and, for a missing
    # key, suggests optional chaining.
    cel_error_names_device: bool = False
    # 1.34+: a device an admin-access request takes is marked as being allocated for its claim, so the
    # claim's other admin-access requests and every request without admin access (of any claim) pass over
    # it. 1.33 marks nothing and checks no mark for admin access: such a request may take a device the same
    # search took already, and a device it took stays free for the others.
    admin_access_marks_devices: bool = True
    # 1.34+: a device of an `All` request is given back when the rest of the search after it fails. 1.33
    # keeps it: its mark, its place in the claim's constraints and its result stay (the result until an
    # earlier device of the claim is given back), so the rest of the search finds it in use.
    all_mode_gives_back: bool = True


@dataclass(frozen=True)
class Release:
    """One minor release's allocator generations and the scheduler plugin around them."""

    minor: int
    generations: tuple[Generation, ...]
    # The scheduler passes DRAListTypeAttributes to the allocator (matchAttribute, distinctAttribute over
    # list values). 1.36 gives it to CEL only, so its constraints compare scalars even with the gate on.
    list_types_in_constraints: bool = False
    # 1.36+: the 10 s filter timeout is an error naming the node ("node N: timed out trying to allocate
    # devices"), retried with backoff; before, an unschedulable "timed out trying to allocate devices".
    timeout_is_error: bool = False
    # 1.34: DRAResourceClaimDeviceStatus was an allocator feature of its own (experimental only).
    device_status_is_feature: bool = False
    # 1.34+: Filter bounds the allocation by a timeout (10 s by default). 1.33's has none: the search runs to
    # its end, and only numalign's bound on its own work stops it.
    has_filter_timeout: bool = True

    def generation(self, enabled: frozenset[str], allowed: frozenset[str] = frozenset()) -> Generation:
        """NewAllocator: the most stable generation that supports every enabled feature, among the
        `allowed` ones when given (upstream's EnableAllocators, which its tests use)."""
        for generation in self.generations:
            if allowed and generation.name not in allowed and len(self.generations) > 1:
                continue
            if enabled <= generation.supported:
                return generation
        return Generation("none", frozenset())

    def timeout_message(self, node: str) -> str:
        return f"node {node}: timed out trying to allocate devices" if self.timeout_is_error else (
            "timed out trying to allocate devices")


_BASIC: Final = frozenset({"AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints"})
_MORE: Final = _BASIC | {"DeviceBindingAndStatus", "ConsumableCapacity"}
_ALL: Final = _MORE | {"ListTypeAttributes", "DeviceStatus"}

_G34: Final = Generation("", frozenset(), invalid_pool_aborts=True, counts_pool_on_every_node=False,
                         distinct_compares_values=False, all_mode_keeps_subrequest=False,
                         validates_under_previous_key=True, counters_per_slice=True,
                         counter_slices_need_partitionable=False, counters_see_shared_allocations=False,
                         shares_skip_counters=False)
_G35: Final = Generation("", frozenset(), reports_invalid_pools=True, counters_see_shared_allocations=False)
_G35_NEW: Final = replace(_G35, counter_slices_for_every_node=True)
_G36_NEW: Final = replace(_G35_NEW, searches_combinations=True, sorts_pools=True, knows_consumable_capacity=True,
                          node_slices_first=True)
_G37: Final = Generation("", frozenset(), reports_invalid_pools=True, rolls_back_rejected_devices=True,
                         cel_error_names_device=True, rounds_in_step_format=True, distinct_keeps_every_device=True,
                         all_mode_static_capacity=True, counters_by_pool_id=True, capacity_errors_abort=True)
_G37_NEW: Final = replace(_G37, searches_combinations=True, sorts_pools=True, knows_consumable_capacity=True,
                          node_slices_first=True)

RELEASES: Final[Mapping[int, Release]] = {
    # 1.33 has a single implementation; DRA is beta and off by default there (k8s.io/dynamic-resource-allocation
    # v0.33.13, kube-scheduler 1.33.13).
    33: Release(33, (replace(_G34, name="structured (1.33 has a single implementation)", supported=_ALL,
                             admin_access_marks_devices=False, all_mode_gives_back=False,
                             counters_checked_in_place=True, counter_slices_need_partitionable=True,
                             counters_off_rejects_device=False),),
                has_filter_timeout=False),
    34: Release(34, (replace(_G34, name="stable"), replace(_G34, name="incubating", supported=_BASIC),
                     replace(_G34, name="experimental", supported=_MORE | {"DeviceStatus"},
                             knows_consumable_capacity=True, capacity_error_names_subrequest=False,
                             capacity_check_at_request_index=True)),
                device_status_is_feature=True),
    35: Release(35, (replace(_G35, name="stable", all_mode_keeps_subrequest=False,
                             validates_under_previous_key=True, counters_per_slice=True,
                             counter_slices_need_partitionable=False),
                     replace(_G35_NEW, name="incubating", supported=_BASIC, all_mode_keeps_subrequest=False,
                             validates_under_previous_key=True),
                     replace(_G35_NEW, name="experimental", supported=_MORE, knows_consumable_capacity=True,
                             all_mode_keeps_subrequest=False, validates_under_previous_key=True))),
    36: Release(36, (replace(_G35, name="stable", supported=_BASIC),
                     replace(_G36_NEW, name="incubating", supported=_MORE),
                     replace(_G36_NEW, name="experimental", supported=_MORE | {"ListTypeAttributes"})),
                timeout_is_error=True),
    37: Release(37, (replace(_G37, name="stable", supported=_BASIC),
                     replace(_G37_NEW, name="incubating", supported=_MORE | {"FractionalCapacityRange"}),
                     replace(_G37_NEW, name="experimental",
                             supported=_MORE | {"FractionalCapacityRange", "ListTypeAttributes"})),
                list_types_in_constraints=True, timeout_is_error=True),
}


# Patch releases that changed the allocator: (minor, first patch) -> what every generation does from then.
_PATCHES: Final[Mapping[tuple[int, int], Mapping[str, bool]]] = {
    (36, 0): {"counters_see_shared_allocations": False},
    (36, 2): {"counters_see_shared_allocations": True},
    (36, 3): {"rolls_back_rejected_devices": True},
    (37, 1): {"claim_limit_per_request": True},
}


@functools.lru_cache(maxsize=64)  # asked for at every check of a search; records are immutable
def release(minor: int, patch: int | None = None) -> Release:
    """The release's record; `patch` None is its newest modelled patch."""
    base = RELEASES[min(max(minor, 33), 37)]
    changes: dict[str, bool] = {}
    for (m, p), change in sorted(_PATCHES.items()):
        if m == base.minor and (patch is None or patch >= p):
            changes.update(change)
    if not changes:
        return base
    return replace(base, generations=tuple(replace(g, **changes) for g in base.generations))  # type: ignore[arg-type]
