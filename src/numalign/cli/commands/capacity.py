"""`numalign capacity POD.yaml`: how many more copies of a pod fit, NUMA-exact, per node pool."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES
from numalign.cli.options.clusterargs import add_cluster_args, load_cluster_arg

if TYPE_CHECKING:
    from numalign.cluster.capacity import PoolCapacity
    from numalign.cluster.model import Cluster


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


def run(args: argparse.Namespace) -> int:
    import sys

    from numalign.cli.options.clusterargs import dump
    from numalign.cluster.capacity import capacity
    from numalign.cluster.examples import example_shapes
    from numalign.cluster.workload import load_workload

    cluster = load_cluster_arg(args)
    dra_objects = None
    wanted: int | None = None  # the workload's pods: does all of it fit?
    if args.pod is None:
        shapes, _ = example_shapes()
        shape = next(s for s in shapes if s.name == "training")
        pod, placement, source = shape.pod, shape.placement, "built-in example pod ml/training"
    else:
        read_notes: list[str] = []
        workload = load_workload([args.pod], args.replicas, read_notes)
        for line in read_notes:
            print(f"note: {line}", file=sys.stderr)
        group, dra_objects = workload.groups[0], workload.dra  # DRA: classes and claim templates beside it
        pod, placement, source = group.pods[0], group.placement, f"{args.pod} ({group.pods[0].key})"
        if group.name != pod.name:  # a workload (a bare pod's group is the pod)
            wanted = len(group.pods)
    from numalign.cli.options.clusterargs import running_pods, version_notes
    from numalign.cli.options.versionargs import preview_sets
    from numalign.cluster.simulate import RunSpec

    running = running_pods(args, cluster)
    # The axes: each version x each preview set (none given: the cluster as it is, one run).
    versions: list[str | None] = list(args.kubelet_versions) or [None]
    sets: list[str | None] = list(preview_sets(args)) or [None]
    combos = [RunSpec("default", kubelet_version=v, previews=p) for v in versions for p in sets]
    runs = [(spec, capacity(spec.cluster(cluster), pod, placement, running, dra_objects)) for spec in combos]
    notes = version_notes(cluster, args.kubelet_versions)
    if args.output != "text":
        from numalign.cluster.model import pool_settings

        settings = {p.name: pool_settings(p) for p in cluster.pools}
        docs = [{"kubeletVersion": " + ".join(dict.fromkeys(p.kubelet_version for p in pools)),
                 "previews": spec.previews or "",
                 "pools": [{**p.to_dict(), "configuration": settings[p.pool]} for p in pools],
                 "exact": sum(p.exact for p in pools), "by_requests": sum(p.by_requests for p in pools)}
                for spec, pools in runs]
        head = {"cluster": cluster.name, "pod": source, "notes": notes,
                **({"workloadPods": wanted} if wanted is not None else {})}
        dump({**head, **docs[0]} if len(docs) == 1 else {**head, "runs": docs}, args.output)
        return 0
    from numalign.cli.options.clusterargs import pool_lines

    print(f"cluster {cluster.name} ({cluster.node_count} nodes); pod {source}")
    for line in notes:
        print(f"# {line}")
    print()
    for line in pool_lines(cluster):
        print(line)
    for spec, pools in runs:
        if len(runs) > 1:
            what = [f"kubelet {spec.kubelet_version}" if spec.kubelet_version else "each pool's kubelet version",
                    *([f"preview: {p}" for p in (spec.previews or "").split(";") if p] or
                      (["no previews"] if spec.previews is not None else []))]
            print(f"\n== {'; '.join(what)}")
        _print_pools(cluster, pools)
        if wanted is not None:
            fit = sum(p.exact for p in pools)
            print(f"\nthe workload's {wanted} pod(s): {'fit' if fit >= wanted else 'do not fit'} "
                  f"({fit} cop{'y' if fit == 1 else 'ies'} fit NUMA-exact)")
    return 0


def _print_pools(cluster: Cluster, pools: list[PoolCapacity]) -> None:
    print()
    rows = [(p.pool, p.kubelet_version, str(p.nodes), str(p.exact), str(p.by_requests),
             ", ".join(f"{k} ({v})" for k, v in p.limited_by.items())) for p in pools]
    rows.append(("total", "", str(cluster.node_count), str(sum(p.exact for p in pools)),
                 str(sum(p.by_requests for p in pools)), ""))
    head = ("POOL", "KUBELET", "NODES", "FIT (NUMA-EXACT)", "FIT (SUM OF REQUESTS)", "LIMITED BY (NODES)")
    widths = [max(len(r[i]) for r in [*rows, head]) for i in range(6)]
    for r in (head, *rows):
        cells = [c.ljust(w) if i in (0, 1, 5) else c.rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        print("  ".join(cells).rstrip())
