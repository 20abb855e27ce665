"""One node's NodeResourceTopology kept current as pods come and go (the `nrt` scheduler exports a
node again after every change to it).

The object is what nrt_export.node_resource_topology builds, computed from parts that do not change
between exports: GetAllocatableResources is read once (allocatable CPUs, memory and devices are fixed
for a simulated node), and each admitted pod's scanned contribution and fingerprint hash once per
admission. An export then subtracts the pods, in the node's order, from the allocatable table.

It holds for a Node whose held resources all belong to pods it admitted: a Node without a state
directory, driven by admit, remove and probe (a probe releases all it took), as the simulator's are.
A kubelet's own directory may hold pods only its checkpoints know; nrt_export reads those.
"""

from __future__ import annotations

from collections.abc import Sequence

from numalign.cluster.nrt import NodeResourceTopology
from numalign.cluster.nrt_export import (
    AllocatableTable,
    ContainerView,
    allocatable_table,
    available_zones,
    listed_pod,
    node_allocatable_resources,
    published,
    scan,
)
from numalign.cluster.podfingerprint import fingerprint_of_hashes, pod_hash
from numalign.core.decision import DecisionRecord
from numalign.kubelet.node import Node


class NodeExporter:
    """node_resource_topology(node, name), kept per node and brought up to date on each export."""

    def __init__(self, node: Node, name: str) -> None:
        if node.store is not None:
            raise ValueError("NodeExporter follows a Node without a state directory")
        self.node = node
        self.name = name
        self.allocatable: AllocatableTable = allocatable_table(node.machine, *node_allocatable_resources(node))
        # Per pod uid: the admission's record (a pod admitted again under its uid has a new one), what
        # the scanner counts of the pod, and its fingerprint hash.
        self._pods: dict[str, tuple[DecisionRecord | None, Sequence[Sequence[ContainerView]], int]] = {}

    def export(self) -> NodeResourceTopology:
        node = self.node
        pods = node.pods
        known = self._pods
        if len(known) > len(pods):
            for uid in [u for u in known if u not in pods]:
                del known[uid]
        scanned: list[Sequence[ContainerView]] = []
        hashes: list[int] = []
        for uid, pod in pods.items():
            record = node.records.get(uid)
            entry = known.get(uid)
            if entry is None or record is None or entry[0] is not record:
                entry = (record, scan([listed_pod(node, pod)]), pod_hash(pod.namespace, pod.name))
                if record is not None:  # a pod restored from a state has none: read it each time
                    known[uid] = entry
            scanned.extend(entry[1])
            hashes.append(entry[2])
        zones = available_zones(self.allocatable, scanned)
        config = node.config
        return published(self.name, config.topology_manager_policy, config.topology_manager_scope, zones,
                         fingerprint_of_hashes(hashes) if hashes else None)
