"""Dynamic Resource Allocation on one node: the scheduler's structured allocator
(k8s.io/dynamic-resource-allocation/structured) and the typed entry point `allocate_claims`."""

from numalign.scheduler.dra.api import (
    AllocatedDevice,
    AllocationFailure,
    AllocationResult,
    ClaimAllocation,
    allocate_claims,
    allocate_pod_claims,
)

__all__ = [
    "AllocatedDevice",
    "AllocationFailure",
    "AllocationResult",
    "ClaimAllocation",
    "allocate_claims",
    "allocate_pod_claims",
]
