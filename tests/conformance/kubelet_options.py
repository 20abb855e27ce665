"""The kubelet configuration's option names that more than one area generates cases with (one list, so
that a new upstream option reaches every area at once)."""

from __future__ import annotations

# The CPU manager static policy's options, as pkg/kubelet/cm/cpumanager/policy_options.go names them
# (the same six in 1.33-1.37), in its order: the generators draw per option in this order, so the order
# is part of each seed's cases.
CPU_MANAGER_POLICY_OPTIONS = (
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
)
