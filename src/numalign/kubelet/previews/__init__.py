"""Previews: open upstream proposals, modelled as their current PR or KEP text says, opt-in only.

The catalogue (names, values, the revision each follows) and the parsing are numalign.k8s.previews;
the behaviours are the modules here. A preview is never part of a kubelet version: no
`--kubelet-version` and no KubeletConfiguration turns one on, only `--preview NAME[=VALUE]` (or the
preview axis of simulate, capacity and sweep files), so numalign's default decisions never change.
Each preview names the revision of the proposal it follows (`Preview.follows`); output that a preview
changed says "preview: NAME=VALUE".

    numa-allocation-strategy   KEP-6007: break ties between equally fit NUMA masks by how allocated
                               their NUMA nodes are (numa_allocation.py)
    restrict-to-cpu-numa-nodes k/k PR #138172: hints only over NUMA nodes with CPUs, devices projected
                               onto the nearest of them (cpu_numa_nodes.py)
"""

from __future__ import annotations

from numalign.k8s.previews import (
    NO_PREVIEWS,
    NUMA_ALLOCATION_STRATEGY,
    NUMA_SCORE_WEIGHTS,
    PREVIEWS,
    RESTRICT_TO_CPU_NUMA_NODES,
    Preview,
    Previews,
    preview_help,
)

__all__ = ["NO_PREVIEWS", "NUMA_ALLOCATION_STRATEGY", "NUMA_SCORE_WEIGHTS", "PREVIEWS",
           "RESTRICT_TO_CPU_NUMA_NODES", "Preview", "Previews", "preview_help"]
