"""What a cluster dump says that the simulation does not start from, said once on stderr.

A `kubectl get noderesourcetopologies` dump tells, per node and NUMA zone, how much is `available`;
the pods holding the rest come from `kubectl get pods -A` (`--pods-dump`), which says nothing of NUMA
nodes. Two gaps follow, and numalign names them rather than let them pass silently:

* NRTs showing resources in use without a pods dump: the simulation starts those nodes empty.
* With a pods dump, its running pods are admitted again in the dump's order (the kubelet admitted
  them in their own order, long ago, with pods since gone): they can land on other NUMA nodes than
  the NRT says. After binding them, each node's NodeResourceTopology (as numalign publishes it) is
  compared with the dump's, zone by zone, on what is in use (allocatable - available, so a rebuilt
  configuration's rounding of allocatable is not a difference); nodes that differ are named.

Pods cannot be pinned where the NRT says: it gives per-zone sums, not which pod holds what.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from numalign.cluster.model import Cluster
from numalign.cluster.nrt import NodeResourceTopology
from numalign.k8s.pod import Pod

SHOWN: Final = 5  # nodes named one line each; the rest summarised


def _used(nrt: NodeResourceTopology) -> dict[tuple[str, str], int]:
    return {(z.name, r.name): r.allocatable - r.available for z in nrt.zones for r in z.resources}


def dump_warnings(cluster: Cluster, running: Sequence[tuple[str, Pod]]) -> list[str]:
    """Warning lines (empty when the dump's state is reproduced)."""
    observed = {nrt.name: nrt for nrt in cluster.observed}
    if not observed:
        return []
    if not running:
        busy = sorted((name, zone, res, used) for name, nrt in observed.items()
                      for (zone, res), used in _used(nrt).items() if used > 0)
        if not busy:
            return []
        nodes = len({b[0] for b in busy})
        name, zone, res, used = busy[0]
        return [f"{nodes} node(s) have resources in use in their NodeResourceTopology (e.g. {name} {zone}: {used} "
                f"{res} in use) but no --pods-dump says which pods hold them: they start empty here; pass "
                "--pods-dump (`kubectl get pods -A -o json`) to start from what runs"]
    from numalign.cluster.nrt_export import node_resource_topology
    from numalign.cluster.simulate import bind_preexisting
    from numalign.cluster.state import ClusterState

    state = ClusterState(cluster)
    bind_preexisting(state, list(running))
    differ: list[str] = []
    for sn in state.nodes:
        theirs = observed.get(sn.name)
        if theirs is None:
            continue
        mine = _used(node_resource_topology(sn.node(), sn.name))
        for key, used in sorted(_used(theirs).items()):
            if key in mine and mine[key] != used:
                differ.append(f"{sn.name} {key[0]}: {mine[key]} {key[1]} in use here, {used} in its "
                              "NodeResourceTopology")
                break
    if not differ:
        return []
    lines = [f"{len(differ)} node(s) differ from their NodeResourceTopology after the --pods-dump pods were "
             "admitted again in the dump's order (the kubelet placed them in its own order; the NRT gives "
             "sums per NUMA zone, not which pod holds what): NUMA-level answers there are approximate"]
    lines += [f"  {line}" for line in differ[:SHOWN]]
    if len(differ) > SHOWN:
        lines.append(f"  ... and {len(differ) - SHOWN} more node(s)")
    return lines
