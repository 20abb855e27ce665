"""`numalign nrt`: a node's NodeResourceTopology v1alpha2 object, as the NFD topology-updater publishes it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from numalign.cli.commands.summaries import SUMMARIES


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "nrt",
        help=SUMMARIES["nrt"],
        description="Build the NodeResourceTopology object the NFD topology-updater (or the "
        "resource-topology-exporter) would publish for a node: one zone per NUMA node with capacity, "
        "allocatable and available per resource, costs from the NUMA distances, and the "
        "topologyManagerPolicy/Scope attributes. The node is a machine and kubelet configuration, "
        "optionally with pods admitted first (POD.yaml) and/or the state of --state-dir (read, never "
        "written). With --node SNAPSHOT holding a PodResources capture, the nodeTopologyPodsFingerprint "
        "signs the pods that capture lists (plus POD.yaml's), as NFD signs List. "
        "`numalign serve --nrt-file FILE` keeps the same object current for a running agent.",
    )
    p.add_argument("pods", nargs="*", metavar="POD.yaml",
                   help="pods to admit before the export (as `admit` takes them)")
    p.add_argument("--machine", metavar="FILE|NAME", help="machine file, sysfs dump, cadvisor JSON or a "
                   "built-in name (default: dual-socket)")
    p.add_argument("--state-dir", metavar="DIR", type=Path,
                   help="the node's kubelet state files (e.g. /var/lib/kubelet or `admit --state-dir`); read only")
    p.add_argument("--pod-resources-socket", metavar="PATH", type=Path,
                   help="read a running kubelet's (or `numalign serve`'s) PodResources socket, as the NFD "
                   "topology-updater does, instead of admitting pods here (give its --machine and config)")
    p.add_argument("--node-name", metavar="NAME", help="metadata.name (default: the machine's name); with a "
                   "cluster, the node to print (default: every node, as a List)")
    c = p.add_argument_group("a whole cluster instead of one machine (every node's object, as a List)")
    c.add_argument("--cluster", metavar="FILE|NAME", help="a cluster.yaml or a built-in cluster (example, bench)")
    c.add_argument("--nodes", metavar="FILE", type=Path, help="`kubectl get nodes -o json` (with --nrts)")
    c.add_argument("--nrts", metavar="FILE", type=Path, help="`kubectl get noderesourcetopologies -o json`")
    c.add_argument("--pods-dump", metavar="FILE", type=Path,
                   help="`kubectl get pods -A -o json`: running pods bound to their nodes first")
    from numalign.cli.options.podargs import add_replicas_arg

    add_replicas_arg(p)
    from numalign.cli.options.nodeargs import add_node_args

    add_node_args(p)
    from numalign.cli.output import add_output_arg

    add_output_arg(p, default="yaml", help="yaml (default) or json: the object itself; text: a table per zone")
    from numalign.cli.options.kubeletflags import add_kubelet_flags

    add_kubelet_flags(p, "a KubeletConfiguration file and the kubelet's own flags (flags win); without "
                      "--config the built-in example configuration of `numalign admit` is the base")
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p)


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.textfiles import load_pods
    from numalign.cluster.nrt_export import node_pods, node_resource_topology
    from numalign.kubelet.node import Node
    from numalign.machine.examples import DEFAULT_MACHINE

    if args.cluster or args.nodes or args.nrts or args.pods_dump:
        return _cluster(args)
    from numalign.cli.options.nodeargs import node_config, resolve_node

    notes: list[str] = []
    if args.state_dir is not None and not os.path.lexists(args.state_dir):
        from numalign.errors import InvalidInputError

        # As `admit --dry-run`: a directory that is not there is a wrong path, not an empty node.
        raise InvalidInputError(
            f"--state-dir {args.state_dir}: no such directory; expected the kubelet's root directory (its state "
            "files) or a directory `numalign admit --state-dir` wrote; check the path")
    if args.state_dir is not None and args.pod_resources_socket is None:
        from numalign.cli.options.noderecord import apply_record

        # The machine and kubelet configuration the directory was written with (numalign_node.json), as
        # pods, remove and resize read it: without them the CPU manager refused a numa-64 directory with
        # a "drain the node and remove the state file" fix that names the wrong cause.
        recorded = apply_record(args)
        notes += [recorded] if recorded else []
    machine, _ = resolve_node(args, DEFAULT_MACHINE)
    config = node_config(args, machine)
    from numalign.cli.options.versionargs import node_previews, node_version

    version, previews = node_version(args, notes), node_previews(args, notes)
    if args.pod_resources_socket is not None:
        from numalign.cluster.nrt_podresources import nrt_from_pod_resources
        from numalign.errors import InvalidInputError

        if args.pods or args.state_dir:
            raise InvalidInputError("--pod-resources-socket reads a running node's pods; POD.yaml and --state-dir "
                                    "cannot be added to it; drop them")
        _emit(nrt_from_pod_resources(args.pod_resources_socket, machine, config,
                                     args.node_name or machine.name).to_dict(), args.output, version)
        return 0
    from numalign.cli.options.podargs import expansion_notes
    from numalign.k8s.manifest import Expansion

    pods = []
    for f in args.pods:
        expansion = Expansion(args.replicas)
        found = load_pods(Path(f), expand_replicas=expansion,
                          warn=lambda m: print(f"numalign nrt: warning: {m}", file=sys.stderr))
        if not found:
            from numalign.adapters.textfiles import source_name
            from numalign.errors import InvalidInputError
            from numalign.k8s.manifest import SUPPORTED_KINDS

            # As `admit`: a file named to add pods that holds none is a wrong or truncated file; printing
            # the node as if it were empty answered a question the user did not ask, with exit 0.
            raise InvalidInputError(
                f"{source_name(f)}: no Pod (or workload with a pod template) found; expected a manifest of kind "
                f"{', '.join(SUPPORTED_KINDS)}; check that the input is the one you meant and is not empty "
                "(without POD.yaml, nrt exports the node as it is)")
        pods.extend(found)
        for line in expansion_notes(f, expansion):
            print(f"numalign nrt: {line}", file=sys.stderr)
    from numalign.adapters.statedir.directory import state_directory
    from numalign.cli.options.nodeargs import snapshot_errors
    from numalign.run.records import ended_runs  # ended `numalign run` processes hold nothing

    with snapshot_errors(args):
        store = state_directory(args.state_dir, read_only=True, kubelet_version=version)
        node = Node(machine, config, store=store, ended_pods=ended_runs(store, writing=False),
                    kubelet_version=version, previews=previews)
    rejected = []
    admitted: list[tuple[str, str]] = []
    for pod in pods:
        rec = node.admit(pod)
        if not rec.result.admit:
            rejected.append(f"{pod.key}: {rec.result.reason}")
        else:
            admitted.append((pod.namespace, pod.name))
    # A snapshot's PodResources capture is the List the topology-updater read on that node: its pods'
    # names are what NFD signed (numalign's own record may hold runs List leaves out, and a kubelet's
    # checkpoints know pods by UID only). The pods admitted here join them, as they would join List.
    captured = args.node_snapshot.listed_pod_names() if args.node_snapshot is not None else None
    signed = None if captured is None else [*captured, *admitted]
    listed = node_pods(node)
    nrt = node_resource_topology(node, args.node_name or machine.name, signed)
    for line in rejected:
        print(f"numalign nrt: note: pod {line} (not counted)", file=sys.stderr)
    unnamed = sum(1 for p in listed if p.name is None)
    if unnamed and signed is None:
        print(f"numalign nrt: note: no nodeTopologyPodsFingerprint attribute: {unnamed} pod(s) are known only by "
              "UID from the kubelet's checkpoints (the fingerprint signs namespace/name); `nrt "
              "--pod-resources-socket` reads the names from the running kubelet", file=sys.stderr)
    # The NFD topology-updater publishes no kubelet version attribute (the Node object carries it), so
    # the object stays as NFD writes it; the text form and stderr name the version decided with.
    for line in notes:
        print(f"numalign nrt: note: {line}", file=sys.stderr)
    _emit(nrt.to_dict(), args.output, version)
    return 0


def _emit(obj: dict[str, Any], output: str, version: Any = None) -> None:
    from numalign.cli.output import emit

    if output == "text":
        _print_text(obj, version)
    else:
        emit(obj, output)


def _cluster(args: argparse.Namespace) -> int:
    """Every node of a cluster (or the one --node-name names), after binding a dump's running pods."""
    from numalign.cli.options.clusterargs import ClusterSource, Progress, load_cluster_arg, running_pods
    from numalign.cluster.nrt_export import node_resource_topology
    from numalign.cluster.simulate import bind_preexisting
    from numalign.cluster.state import ClusterState
    from numalign.errors import InvalidInputError

    if args.pods or args.machine or args.state_dir:
        raise InvalidInputError("a cluster (--cluster, --nodes, --pods-dump) and one machine's options (POD.yaml, "
                                "--machine, --state-dir) both given; expected one or the other")
    args.cluster = args.cluster or "example"
    source = ClusterSource.from_args(args)
    cluster = load_cluster_arg(source)
    state = ClusterState(cluster)
    bind_preexisting(state, running_pods(source, cluster))
    names = [sn.name for sn in state.nodes]
    if args.node_name is not None and args.node_name not in names:
        raise InvalidInputError(f"--node-name {args.node_name!r}: no such node in cluster {cluster.name}; expected "
                                f"one of {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}")
    wanted = [sn for sn in state.nodes if args.node_name in (None, sn.name)]
    progress = Progress(f"nrt: {len(wanted)} node(s) of {cluster.name}")
    objs = []
    for sn in wanted:
        objs.append(node_resource_topology(sn.node(), sn.name).to_dict())
        progress.note(f"{len(objs)}/{len(wanted)} NodeResourceTopology objects")
    out: dict[str, Any] = objs[0] if args.node_name else {"apiVersion": "v1", "kind": "List", "items": objs}
    # Writing a thousand objects as YAML takes seconds too: say so, unless the output shares the terminal.
    if sys.stdout.isatty():
        progress.close()
    else:
        progress.step(f"writing {len(objs)} object(s) as {args.output}")
    if args.output != "text":
        from numalign.cli.output import emit

        emit(out, args.output)
    else:
        for sn, obj in zip(wanted, objs, strict=True):
            _print_text(obj, sn.pool.kubelet_version)
            print()
    sys.stdout.flush()
    progress.close()
    return 0


def _print_text(obj: dict[str, Any], version: Any = None) -> None:
    attrs = {a["name"]: a["value"] for a in obj.get("attributes", [])}
    print(f"NodeResourceTopology {obj['metadata']['name']}: topologyManagerPolicy "
          f"{attrs.get('topologyManagerPolicy')}, topologyManagerScope {attrs.get('topologyManagerScope')}"
          + (f" (kubelet {version})" if version is not None else ""))
    for z in obj["zones"]:
        costs = " ".join(f"{c['name']}={c['value']}" for c in z.get("costs", []))
        print(f"\nzone {z['name']} ({z['type']})" + (f"  costs: {costs}" if costs else ""))
        width = max((len(r["name"]) for r in z["resources"]), default=8)
        print(f"  {'RESOURCE':<{width}}  {'CAPACITY':>14}  {'ALLOCATABLE':>14}  {'AVAILABLE':>14}")
        for r in z["resources"]:
            print(f"  {r['name']:<{width}}  {r['capacity']:>14}  {r['allocatable']:>14}  {r['available']:>14}")
