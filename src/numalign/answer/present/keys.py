"""One key style for every command's JSON/YAML document: Kubernetes API camelCase (acronyms upper case,
as `reservedSystemCPUs` and `podUID`). The internal dictionaries (decision records, the agent's status
file, pod records) keep their snake_case; a document renames them on the way out, with this one table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The document's own field names in Kubernetes API style (camelCase, acronyms upper case: podUID, CPUs,
# DRA). Only these are renamed: keys that are data (resource, container, device and claim names) stay
# as they are, and may hold underscores.
CAMEL_KEYS: Mapping[str, str] = {
    "allocation_error": "allocationError",
    "cpus_and_memory_through_dra": "cpusAndMemoryThroughDRA",
    "cpus_numa_nodes": "cpusNumaNodes",
    "devices_numa_nodes": "devicesNumaNodes",
    "exclusive_cpus": "exclusiveCPUs",
    "fewest_numa_nodes": "fewestNumaNodes",
    "held_by": "heldBy",
    "kubelet_config": "kubeletConfig",
    "memory_numa_nodes": "memoryNumaNodes",
    "narrowest_count": "narrowestCount",
    "numa_from": "numaFrom",
    "numa_node": "numaNode",
    "numa_nodes": "numaNodes",
    "pod_uid": "podUID",
    "preferred_counts": "preferredCounts",
    "short_of": "shortOf",
    "would_be_aligned_if": "wouldBeAlignedIf",
    "would_fit_if": "wouldFitIf",
    # pods and run: the agent's pod entries, their runtime options (CRI's field names) and processes
    "cdi_devices": "cdiDevices",
    "container_errors": "containerErrors",
    "container_order": "containerOrder",
    "container_path": "containerPath",
    "host_path": "hostPath",
    "not_applied": "notApplied",
    "numalign_pid": "numalignPID",
    "read_only": "readOnly",
    "released_ended_runs": "releasedEndedRuns",
    "start_attempts": "startAttempts",
    "start_time": "startTime",
}


def camel_keys(value: Any) -> Any:
    """`value` with the document's field names of CAMEL_KEYS renamed at every level."""
    if isinstance(value, dict):
        return {CAMEL_KEYS.get(k, k): camel_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [camel_keys(v) for v in value]
    return value
