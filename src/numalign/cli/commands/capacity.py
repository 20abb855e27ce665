"""`numalign capacity POD.yaml`: how many more copies of a pod fit, NUMA-exact, per node pool."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES
from numalign.cli.options.clusterargs import ClusterSource, add_cluster_args, load_cluster_arg

if TYPE_CHECKING:
    from numalign.cluster.workload import Placement
    from numalign.core.policies.startup import StartupError
    from numalign.k8s.pod import Pod


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "capacity",
        help=SUMMARIES["capacity"],
        description="Count, per node pool, how many more copies of the pod each node's kubelet (numalign, with "
        "the pool's Topology Manager, CPU, memory and device managers) would admit one after another, and "
        "beside it the count a topology-unaware sum of requests gives (what cluster-capacity and the "
        "default scheduler see). With no pod: the built-in example training pod; with no cluster: the "
        "built-in example cluster.",
    )
    p.add_argument("pod", nargs="?", metavar="POD.yaml", type=Path,
                   help="one Pod or workload manifest; its (first) pod is copied, and for a workload the "
                   "answer says whether all its pods fit")
    from numalign.cli.options.podargs import add_replicas_arg

    add_replicas_arg(p)
    add_cluster_args(p, workload=False)
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p, axis=True)
    from numalign.cli.output import add_output_arg

    add_output_arg(p)


@dataclass(frozen=True)
class CapacityRequest:
    """What `numalign capacity` was asked, read from its flags once: the pod (None: the built-in example
    training pod) and its --replicas, the cluster, the kubelet version and preview axes, the output."""

    pod: Path | None
    replicas: int | None
    cluster: ClusterSource
    kubelet_versions: tuple[str, ...]
    preview_sets: tuple[str, ...]
    output: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CapacityRequest:
        from numalign.cli.options.versionargs import preview_sets

        return cls(args.pod, args.replicas, ClusterSource.from_args(args), tuple(args.kubelet_versions),
                   tuple(preview_sets(args)), args.output)


def run(args: argparse.Namespace) -> int:
    return answer(CapacityRequest.from_args(args))


def answer(request: CapacityRequest) -> int:
    from numalign.cli.options.clusterargs import dump, pool_lines, running_pods, version_notes
    from numalign.cluster.capacity import count_capacity
    from numalign.cluster.capacity_document import CapacityDocument, CapacityRun
    from numalign.cluster.model import pool_documents
    from numalign.cluster.simulate import RunSpec
    from numalign.core.policies.startup import StartupError

    cluster = load_cluster_arg(request.cluster)
    pod, placement, source, wanted, dra_objects = _pod(request)
    running = running_pods(request.cluster, cluster)
    # The axes: each version x each preview set (none given: the cluster as it is, one run).
    versions: list[str | None] = list(request.kubelet_versions) or [None]
    sets: list[str | None] = list(request.preview_sets) or [None]
    combos = [RunSpec("default", kubelet_version=v, previews=p) for v in versions for p in sets]
    try:
        counts = [(spec, count_capacity(spec.cluster(cluster), pod, placement, running, dra_objects))
                  for spec in combos]
    except StartupError as exc:
        raise _in_the_cluster_file(exc, cluster) from None
    runs = tuple(CapacityRun(spec.kubelet_version, spec.previews, tuple(c.pools), c.shared) for spec, c in counts)
    notes = version_notes(cluster, list(request.kubelet_versions))
    doc = CapacityDocument(cluster.name, cluster.node_count, source, notes,
                           tuple(pool_documents(cluster.pools)), runs, wanted)
    if request.output != "text":
        dump(doc.to_dict(), request.output)
    else:
        print("\n".join(doc.text_lines(pool_lines(cluster))))
    return 0


def _in_the_cluster_file(exc: StartupError, cluster: Any) -> StartupError:
    """A pool's kubelet would not start. Its fix named `--policy-option`, which capacity does not take:
    the pool's settings are in the cluster file, so say which pool and what to write there."""
    import re

    from numalign.core.policies.startup import StartupError

    limit = re.search(r"this machine has (\d+); ", exc.fix)
    if limit is None or "max-allowable-numa-nodes" not in exc.fix:
        return exc
    nodes = int(limit.group(1))
    pools = [p.name for p in cluster.pools if len(p.machine.numa_nodes) == nodes]
    which = f"pool {pools[0]}" if len(pools) == 1 else "the pool"
    return StartupError(exc.kubelet_message, (
        f"{which} (machine of {nodes} NUMA nodes) needs the topology manager policy option "
        f"max-allowable-numa-nodes={nodes}: in the cluster file, under the pool, write `kubelet: "
        f'{{topologyManagerPolicyOptions: {{max-allowable-numa-nodes: "{nodes}"}}}}` (docs/cluster-format.md)'))


def _pod(request: CapacityRequest) -> tuple[Pod, Placement, str, int | None, Any]:
    """The pod copied, its placement, how the answer names it, the workload's pod count (does all of it
    fit? None for a bare pod) and the DRA objects beside it (classes and claim templates)."""
    import sys

    from numalign.cluster.examples import example_shapes
    from numalign.cluster.workload import load_workload

    if request.pod is None:
        shapes, _ = example_shapes()
        shape = next(s for s in shapes if s.name == "training")
        return shape.pod, shape.placement, "built-in example pod ml/training", None, None
    read_notes: list[str] = []
    workload = load_workload([request.pod], request.replicas, read_notes)
    for line in read_notes:
        print(f"note: {line}", file=sys.stderr)
    group = workload.groups[0]
    pod = group.pods[0]
    wanted = len(group.pods) if group.name != pod.name else None  # a workload (a bare pod's group is the pod)
    return pod, group.placement, f"{request.pod} ({pod.key})", wanted, workload.dra
