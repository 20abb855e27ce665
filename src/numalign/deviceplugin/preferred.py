"""NUMA-aware GetPreferredAllocation for `numalign plugin`.

Preference order, always keeping every must_include device:
1. the fewest NUMA nodes touched by the whole allocation;
2. then PCIe locality: the fewest PCI root complexes, then devices as close as possible in the bridge
   tree (sharing a switch beats sharing only a root port);
3. then device id order, so the answer is deterministic.
Devices without topology are used only when the request cannot be met otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from numalign.deviceplugin.inventory import PluginDevice

# Enumerating NUMA-node subsets is exponential; past this many nodes only subsets up to this size are tried.
MAX_EXHAUSTIVE_NODES = 12


def _closeness(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _greedy_local(pool: list[PluginDevice], chosen: list[PluginDevice], need: int) -> list[PluginDevice]:
    """Pick `need` devices from `pool`, each time the one closest (PCIe) to what is already chosen."""
    picked: list[PluginDevice] = []
    rest = sorted(pool, key=lambda d: d.id)
    while len(picked) < need and rest:
        base = chosen + picked
        if base:
            best = max(
                rest, key=lambda d: (sum(_closeness(d.pci_path, c.pci_path) for c in base), -rest.index(d))
            )
        else:
            # Best fit: start in the smallest PCIe group (same bridge chain) that holds all we need, so
            # larger groups stay whole for larger requests; if none is big enough, the largest group.
            sizes = {d.pci_path: sum(1 for o in rest if o.pci_path == d.pci_path) for d in rest}
            fitting = [d for d in rest if sizes[d.pci_path] >= need]
            if fitting:
                best = min(fitting, key=lambda d: (sizes[d.pci_path], rest.index(d)))
            else:
                best = max(rest, key=lambda d: (sizes[d.pci_path], -rest.index(d)))
        picked.append(best)
        rest.remove(best)
    return picked


def _score(sel: list[PluginDevice]) -> tuple[int, int, int, list[str]]:
    nodes = {n for d in sel for n in (d.device.topology or ())}
    roots = {d.pci_path[0] for d in sel if d.pci_path}
    spread = -sum(_closeness(a.pci_path, b.pci_path) for i, a in enumerate(sel) for b in sel[i + 1 :])
    return (len(nodes), len(roots), spread, sorted(d.id for d in sel))


def preferred_allocation(
    devices: Mapping[str, PluginDevice], available: Sequence[str], must_include: Sequence[str], size: int
) -> list[str]:
    """The preferred `size` device ids from `available`, always containing `must_include`.

    Unknown ids are ignored (the kubelet only takes ids it offered anyway).
    """
    must = [devices[i] for i in dict.fromkeys(must_include) if i in devices]
    if size <= len(must):
        return [d.id for d in must]
    must_ids = {d.id for d in must}
    cands = [devices[i] for i in dict.fromkeys(available) if i in devices and i not in must_ids]
    need = size - len(must)
    if need >= len(cands):
        return [d.id for d in must] + sorted(d.id for d in cands)

    with_topo = [d for d in cands if d.device.topology]
    required_nodes = {n for d in must for n in (d.device.topology or ())}
    all_nodes = sorted(required_nodes | {n for d in with_topo for n in d.device.topology or ()})
    others = [n for n in all_nodes if n not in required_nodes]
    best: list[PluginDevice] | None = None
    max_extra = len(others) if len(all_nodes) <= MAX_EXHAUSTIVE_NODES else min(len(others), 2)
    for k in range(max_extra + 1):
        for extra in combinations(others, k):
            allowed = required_nodes | set(extra)
            pool = [d for d in with_topo if set(d.device.topology or ()) <= allowed]
            if len(pool) < need:
                continue
            sel = must + _greedy_local(pool, must, need)
            if best is None or _score(sel) < _score(best):
                best = sel
        if best is not None:
            break
    if best is None:
        # Not enough devices with topology: take them all (closest first), then devices without topology.
        topo_sel = _greedy_local(with_topo, must, min(need, len(with_topo)))
        no_topo = [d for d in cands if not d.device.topology]
        best = must + topo_sel + _greedy_local(no_topo, must + topo_sel, need - len(topo_sel))
    return [d.id for d in must] + sorted(d.id for d in best[len(must) :])
