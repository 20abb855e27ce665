"""One line per command, as `numalign --help` lists it. Each command's register() and the top-level
parser read the same text here, so `numalign --help` lists every command without importing them."""

from __future__ import annotations

from typing import Final

SUMMARIES: Final[dict[str, str]] = {
    "admit": "admit pods on a machine with the kubelet's resource managers; explain every rejection",
    "discover": "show the machine's NUMA topology (this machine, a sysfs dump, a machine file or a built-in)",
    "replay": "replay recorded scenarios (oracle vector format), optionally checking the results",
    "serve": "run the node agent: device-plugin registration, static-pod manifests, PodResources, metrics",
    "plugin": "run a device plugin exposing devices with NUMA topology (YAML list or sysfs PCI)",
    "pods": "list the pods of a node agent, a state directory or a snapshot, with their allocations",
    "remove": "remove pods (by namespace/name, name or UID) from a state directory written by admit",
    "resize": "PREVIEW (KEP-5554): resize a container's exclusive CPUs in place in a state directory",
    "snapshot": "collect this node (topology, kubelet config, state files, PodResources) into one tarball",
    "nrt": "print a node's NodeResourceTopology (v1alpha2) as the NFD topology-updater publishes it",
    "simulate": (
        "schedule a workload on a cluster with each scheduler and kubelet policy; count placements, "
        "kubelet rejections, NUMA alignment and stranded capacity"
    ),
    "capacity": (
        "how many more copies of a pod fit on the cluster, NUMA-exact, per node pool, beside the "
        "topology-unaware count from a sum of requests"
    ),
    "run": "run a command pinned where the kubelet's managers would place it (CPUs, memory, devices)",
}
