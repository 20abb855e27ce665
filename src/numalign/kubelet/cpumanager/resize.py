"""The static policy's side of an in-place resize of a container with exclusive CPUs (KEP-5554, preview
`inplace-resize-exclusive-cpus`; gate InPlacePodVerticalScalingExclusiveCPUs, alpha targeted at 1.38).

Follows kubernetes/kubernetes PR #140629 (2026-07-20 review round, which carries the parts of #129719)
and the KEP text of kubernetes/enhancements PR #6330:
- the "baseline CPUs" are the container's cpuset when it was first admitted; every resized set is a
  superset of them (`baseline < resized_1 < resized_2 ...` while growing), and a shrink goes back
  towards the baseline, never below it;
- a grow keeps every CPU the container has and takes the difference from the shared pool (reserved CPUs
  never), aligned first to the NUMA affinity the Topology Manager merged for the resized container;
- the hints for the resized container only offer masks that contain the NUMA nodes of its current CPUs.

The refusal texts are those of the PR's policy_static.go (the revision the search index holds, which
still says "promised" where the KEP now says "baseline").
"""

from __future__ import annotations

from dataclasses import dataclass

from numalign.core.bitmask import mask_of
from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError
from numalign.k8s.cpuset import format_cpuset
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.take import allocate_cpus, not_enough_cpus, smt_alignment_error, take_by_topology

# Failure reasons (the PR's error Type() values, the PodResizePending condition's reason).
PROHIBITED_CPU_ALLOCATION = "prohibitedCPUAllocationError"
INCONSISTENT_CPU_ALLOCATION = "inconsistentCPUAllocationError"
RESIZE_ALLOCATE_CPUS = "resizeAllocateCPUsError"
# The allocation handler's text when the gate is off (pkg/kubelet/allocation/handlers.go, 1.33-1.37).
GATE_OFF_MESSAGE = 'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"'


class ResizeRefusedError(AllocationError):
    """A resize the static policy refuses; `reason` is the PR's error type."""


def prohibited(requested: str, allocated: str, baseline: int, guaranteed: int) -> ResizeRefusedError:
    return ResizeRefusedError(
        "prohibitedCPUAllocation Error: Skip resize, Not allowed to reduce container exclusively allocated pool "
        f"below promised, (requested CPUs = {requested}, allocated CPUs = {allocated}, promised CPUs = {baseline}, "
        f"guaranteed CPUs = {guaranteed})",
        reason=PROHIBITED_CPU_ALLOCATION,
    )


def inconsistent(requested: str, allocated: str, shared_to_exclusive: bool) -> ResizeRefusedError:
    if requested == allocated:
        text = (f"inconsistentCPUAllocation Error: Skip resize, nothing to be done, (requested CPUs = {requested} "
                f"equal to allocated CPUs = {allocated})")
    elif shared_to_exclusive:
        text = ("inconsistentCPUAllocation Error: Not allowed to move a container from shared pool to exclusively "
                f"allocated pool, (requested CPUs = {requested}, allocated CPUs = {allocated})")
    else:
        # upstream's text, its doubled space and repeated "not allowed" included
        text = ("inconsistentCPUAllocation Error: Not allowed to move a container from  exclusively allocated pool "
                f"to shared pool, not allowed (requested CPUs = {requested}, allocated CPUs = {allocated})")
    return ResizeRefusedError(text, reason=INCONSISTENT_CPU_ALLOCATION)


def numa_mask(policy: StaticPolicy, cpus: frozenset[int]) -> int:
    """The NUMA nodes a CPU set spans, as a mask."""
    nodes = {info.numa_node for c in cpus if (info := policy.topology.info(c)) is not None}
    return mask_of(nodes)


def baseline_of(policy: StaticPolicy, pod_uid: str, container: str) -> frozenset[int] | None:
    """The checkpointed baseline, else the current set: numalign changes a container's set only by a
    resize, which records the baseline first, so a set never resized is still its admission set."""
    recorded = policy.state.baselines.get(pod_uid, {}).get(container)
    return recorded if recorded is not None else policy.get_cpu_set(pod_uid, container)


def resize_hints(policy: StaticPolicy, current: frozenset[int], requested: int) -> list[TopologyHint]:
    """GetTopologyHints for a container growing to `requested` CPUs: the masks that can hold them with
    the current CPUs kept (so every mask holds the current CPUs' NUMA nodes); `preferred` as at admission
    (the narrowest mask that could hold the request on the machine)."""
    must = numa_mask(policy, current)
    hints = generate_cpu_topology_hints(
        policy.topology, policy.get_available_cpus() | current, (), requested, policy.options.align_by_socket)
    return [h for h in hints if h.mask is not None and h.mask & must == must]


@dataclass(frozen=True)
class ResizedCPUs:
    before: frozenset[int]
    after: frozenset[int]
    baseline: frozenset[int]

    @property
    def added(self) -> frozenset[int]:
        return self.after - self.before

    @property
    def released(self) -> frozenset[int]:
        return self.before - self.after


def check_resize(policy: StaticPolicy, pod_uid: str, container: str, requested: int | None,
                 requested_text: str) -> tuple[frozenset[int], frozenset[int]]:
    """The feasibility checks of the PR, before any hint: returns (current, baseline).

    `requested` is the new integral CPU count, None when the new value is not a whole number of CPUs.
    """
    current = policy.get_cpu_set(pod_uid, container)
    if current is None:
        allocated = "0"  # the container runs in the shared pool
        raise inconsistent(requested_text, allocated, shared_to_exclusive=True)
    allocated = str(len(current))
    if requested is None:
        raise inconsistent(requested_text, allocated, shared_to_exclusive=False)
    if requested == len(current):
        raise inconsistent(requested_text, allocated, shared_to_exclusive=False)
    baseline = baseline_of(policy, pod_uid, container) or current
    if requested < len(baseline):
        raise prohibited(requested_text, allocated, len(baseline), requested)
    return current, baseline


def apply_resize(policy: StaticPolicy, pod_uid: str, container: str, requested: int,
                 affinity: int | None) -> ResizedCPUs:
    """Take or release CPUs for the resize and update the state (baseline recorded on the first resize).

    Grow: the current CPUs stay, the difference comes from the shared pool minus reserved CPUs, aligned
    first to `affinity` (the merged NUMA mask). Shrink: the baseline stays, and of the CPUs added since,
    the ones takeByTopology picks stay; the others go back to the shared pool.
    """
    current = policy.get_cpu_set(pod_uid, container)
    assert current is not None, "check_resize first"
    baseline = baseline_of(policy, pod_uid, container) or current
    if requested > len(current):
        needed = requested - len(current)
        available = policy.get_available_cpus()
        if policy.options.full_pcpus_only:
            err = smt_alignment_error(
                policy.topology, needed, len(policy.state.default_cpu_set - policy.reserved_physical_cpus))
            if err is not None:
                raise ResizeRefusedError(str(err), reason=err.reason)
        if needed > len(available):
            raise ResizeRefusedError(str(not_enough_cpus(needed, len(available))), reason=RESIZE_ALLOCATE_CPUS)
        added = allocate_cpus(policy.topology, needed, affinity, available, (), policy.take_options)
        after = current | added
        policy.state.default_cpu_set = policy.state.default_cpu_set - added
    else:
        extra = current - baseline
        kept = take_by_topology(policy.topology, extra, requested - len(baseline), policy.take_options)
        after = baseline | kept
        policy.state.default_cpu_set = policy.state.default_cpu_set | (current - after)
    policy.state.baselines.setdefault(pod_uid, {}).setdefault(container, baseline)
    policy.state.entries[pod_uid][container] = after
    delta = len(after) - len(current)
    policy.exclusive_cpu_allocation_count += delta
    policy.shared_pool_size_millicores -= delta * 1000
    policy.recount_exclusive()
    return ResizedCPUs(current, after, baseline)


def describe(cpus: frozenset[int]) -> str:
    return format_cpuset(cpus) or "none"


def nodes_of(policy: StaticPolicy, cpus: frozenset[int]) -> list[int]:
    """The NUMA nodes a CPU set spans, ascending; node -1 (no node directory) included, which no mask holds."""
    return sorted({info.numa_node for c in cpus if (info := policy.topology.info(c)) is not None})
