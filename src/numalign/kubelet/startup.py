"""The kubelet's start-up checks, before any manager is built: the configuration validated, the
release's feature gates and behaviours, and the NUMA information the Topology Manager starts from.

Upstream: cmd/kubelet/app/server.go (the configuration and feature gates refused before the kubelet
runs) and cm/container_manager_linux.go's NUMAInfo from cadvisor. A library caller building a Node gets
the same refusals as the CLI (which validated already, and pays no second pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from numalign.core.numa import NUMAInfo
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.previews import RESTRICT_TO_CPU_NUMA_NODES, Previews
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.previews.cpu_numa_nodes import effective_machine
from numalign.kubelet.versions import (
    Behaviours,
    behaviours,
    check_feature_gates,
    check_option_gates,
    effective_gates,
    refuse_unmodelled_preview,
)
from numalign.machine.topology import Machine


def numa_info_for(machine: Machine) -> NUMAInfo:
    """The kubelet's NUMAInfo: node ids in cadvisor order, each node's distance row as the kubelet
    keeps it (cadvisor's raw row, indexed by node id: Machine.kubelet_distances)."""
    order = machine.cadvisor_numa_order()
    rows = machine.kubelet_distances()
    return NUMAInfo.create(order) if rows is None else NUMAInfo.create(order, rows)


@dataclass(frozen=True)
class Startup:
    """What a kubelet that accepted its configuration starts with."""

    machine: Machine  # as the managers see it (a preview may narrow it)
    behaviours: Behaviours  # the release decided as
    gates: dict[str, bool]  # its gate defaults under the configuration's gates
    numa: NUMAInfo


def start(machine: Machine, config: KubeletConfig, kubelet_version: KubeletVersion, previews: Previews) -> Startup:
    """The kubelet's refusals in its order (ConfigError), then what it starts with.

    Kept per (machine, configuration, version, previews) object, all four frozen: a simulated pool builds
    its 1,000 (10,000) kubelets from the same four, and this was a tenth of building one. The kubelets
    then share one Startup (its gates dict is read, never written, by the managers). Only an accepted
    start is kept: a refused one raises again each time."""
    key = (id(machine), id(config), id(kubelet_version), id(previews))
    known = _STARTED.get(key)
    if known is not None and known[0] is machine and known[1] is config and known[2] is kubelet_version \
            and known[3] is previews:
        return known[4]
    started = _start(machine, config, kubelet_version, previews)
    if len(_STARTED) >= _STARTED_KEPT:
        _STARTED.clear()
    _STARTED[key] = (machine, config, kubelet_version, previews, started)  # held, so their ids stay theirs
    return started


_STARTED: dict[tuple[int, int, int, int], tuple[Machine, KubeletConfig, KubeletVersion, Previews, Startup]] = {}
_STARTED_KEPT: Final = 64


def _start(machine: Machine, config: KubeletConfig, kubelet_version: KubeletVersion, previews: Previews) -> Startup:
    config.validate()
    # Previews of open proposals (kubelet/previews), off unless asked for: a node built with one
    # decides as that proposal says, never as a released kubelet.
    if previews.on(RESTRICT_TO_CPU_NUMA_NODES):
        machine = effective_machine(machine)
    known = behaviours(kubelet_version)
    check_feature_gates(config.feature_gates, kubelet_version, "featureGates (--feature-gates)")
    gates = effective_gates(config.feature_gates, kubelet_version)
    check_option_gates(config.topology_manager_policy_options, gates)
    refuse_unmodelled_preview(config.cpu_manager_policy_options, kubelet_version)
    return Startup(machine, known, gates, numa_info_for(machine))
