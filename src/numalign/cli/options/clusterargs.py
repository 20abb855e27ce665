"""Options shared by the cluster commands (simulate, capacity): the cluster, the workload, the seed, and
the small output helpers (structured dumps, a progress line on a terminal)."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.errors import InvalidInputError

if TYPE_CHECKING:
    from numalign.cluster.model import Cluster
    from numalign.cluster.workload import Workload
    from numalign.k8s.pod import Pod


def add_cluster_args(p: argparse.ArgumentParser, workload: bool = True) -> None:
    from numalign.cluster.catalog import DESCRIPTIONS

    g = p.add_argument_group("the cluster")
    # default None, read as "example" by ClusterSource: --machine must know whether --cluster was given
    g.add_argument("--cluster", metavar="FILE|NAME", default=None,
                   help="a cluster.yaml (docs/cluster-format.md) or a built-in: "
                   + "; ".join(f"{k}: {v}" for k, v in DESCRIPTIONS.items()) + " (default: example)")
    g.add_argument("--machine", metavar="FILE|NAME",
                   help="a cluster of one node of this machine (anything `admit --machine` takes), with the kubelet "
                   "configuration `admit` uses without --config; another configuration, or several nodes: a "
                   "cluster.yaml (a pool's machine, count, kubeletConfig)")
    g.add_argument("--nodes", metavar="FILE", type=Path,
                   help="build the cluster from `kubectl get nodes -o json` (or -o yaml) instead (with --nrts for "
                   "NUMA zones); allocatable is each Node's status.allocatable")
    g.add_argument("--nrts", metavar="FILE", type=Path,
                   help="`kubectl get noderesourcetopologies -o json` (or -o yaml; v1alpha2 or v1alpha1): the nodes' "
                   "NUMA zones (with --nodes)")
    g.add_argument("--pods-dump", metavar="FILE", type=Path,
                   help="`kubectl get pods -A -o json` (or -o yaml): pods running now, bound to their nodes first")
    if not workload:
        return
    w = p.add_argument_group("the workload (default: the built-in mix of pod shapes)")
    w.add_argument("workload", nargs="*", metavar="WORKLOAD.yaml", type=Path,
                   help="Pod and workload manifests as `numalign admit` takes them (replicas expanded)")
    w.add_argument("--timeline", metavar="FILE", type=Path,
                   help="JSON lines or CSV (time, op create|delete, name) creating and deleting workloads")
    w.add_argument("--generate", metavar="N", type=int, help="N pods drawn from --mix (or the built-in mix)")
    w.add_argument("--mix", metavar="FILE", type=Path, help="weighted pod shapes (kind: Mix) for --generate")
    w.add_argument("--seed", type=int, default=1, help="seed of the generator and the schedulers' tie-breaks")
    from numalign.cli.options.podargs import add_replicas_arg

    add_replicas_arg(w)


@dataclass(frozen=True)
class ClusterSource:
    """Where the cluster comes from (add_cluster_args' flags): a cluster.yaml or a built-in name, or
    `kubectl get` dumps of Nodes (and NRTs), and the pods running on it. `overridden`: a kubelet version
    was given on the command line, so dumps of unsupported minors are decided at it."""

    cluster: str = "example"
    nodes: Path | None = None
    nrts: Path | None = None
    pods_dump: Path | None = None
    overridden: bool = False
    machine: str | None = None
    cluster_given: bool = False  # --cluster on the command line (its default is "example")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterSource:
        overridden = bool(getattr(args, "kubelet_versions", None) or getattr(args, "kubelet_version", None))
        return cls(args.cluster or "example", args.nodes, args.nrts, args.pods_dump, overridden,
                   getattr(args, "machine", None), args.cluster is not None)


@dataclass(frozen=True)
class WorkloadSource:
    """The workload's pods (add_cluster_args' workload flags): manifests (with a timeline), or pods drawn
    from a mix."""

    manifests: tuple[Path, ...] = ()
    timeline: Path | None = None
    generate: int | None = None
    mix: Path | None = None
    seed: int = 1
    replicas: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WorkloadSource:
        return cls(tuple(args.workload), args.timeline, args.generate, args.mix, args.seed, args.replicas)


def load_cluster_arg(source: ClusterSource) -> Cluster:
    from numalign.cluster.examples import CLUSTERS, example_cluster
    from numalign.cluster.model import load_cluster

    if source.machine is not None:
        return _one_machine(source)
    if source.nodes is not None:
        from numalign.cluster.dumps import cluster_from_dumps

        cluster = cluster_from_dumps(source.nodes, source.nrts, overridden=source.overridden)
        for line in cluster.notes:
            print(f"note: {line}", file=sys.stderr)
        return cluster
    if source.nrts is not None:
        raise InvalidInputError("--nrts given without --nodes; expected both (`kubectl get nodes -o json` and "
                                "`kubectl get noderesourcetopologies -o json`)")
    if source.cluster in CLUSTERS:
        return example_cluster(source.cluster)
    path = Path(source.cluster)
    if not path.exists():
        return example_cluster(source.cluster)  # names the built-ins in its error
    return load_cluster(path)


def _one_machine(source: ClusterSource) -> Cluster:
    """`--machine M`: the cluster of one pool of one node of M, as a cluster.yaml with `machine: M` builds it
    (the pool's kubelet configuration is admit's built-in example, fitted to the machine)."""
    import re

    from numalign.adapters.sysfs import load_machine
    from numalign.cluster.model import cluster_from_dict

    if source.nodes is not None or source.nrts is not None or source.cluster_given:
        given = "--nodes" if source.nodes is not None else "--nrts" if source.nrts is not None else "--cluster"
        raise InvalidInputError(f"--machine {source.machine} and {given}: both say what the cluster is; give one (a "
                                "cluster.yaml pool names its machine with `machine:`)")
    spec = str(source.machine)
    machine = load_machine(spec)  # its errors name --machine, as admit's do
    name = str(machine.name)
    pool = name if len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) else "machine"
    return cluster_from_dict({"kind": "Cluster", "name": f"--machine {spec}",
                              "pools": [{"name": pool, "count": 1, "machine": spec}]}, Path("--machine"))


def version_notes(cluster: Cluster, versions: list[str]) -> list[str]:
    """What the cluster's own kubelet versions are, and a note when a --kubelet-version axis overrides them."""
    from numalign.adapters.kubeletversion import resolve_noted as resolve

    own = cluster.versions()
    notes = [f"kubelet version{'s' if len(own) > 1 else ''} of the cluster: "
             + ", ".join(f"{v} ({n} node{'s' if n > 1 else ''})" for v, n in own.items())]
    asked = [str(resolve(v, "--kubelet-version")) for v in versions]
    if asked and set(asked) != set(own):
        notes.append(f"--kubelet-version {', '.join(asked)} overrides the cluster's own for every pool")
    return notes


def running_pods(source: ClusterSource, cluster: Cluster) -> list[tuple[str, Pod]]:
    """The pods of --pods-dump bound to their nodes; what the dump's NRTs say that the simulation does not
    start from is said on stderr (cluster/dumpcheck.py)."""
    import logging

    from numalign.cluster.dumpcheck import dump_warnings

    running = []
    if source.pods_dump is not None:
        from numalign.cluster.dumpread import Notes
        from numalign.cluster.dumps import bound_pods

        notes = Notes()
        running = bound_pods(source.pods_dump, {n for p in cluster.pools for n in p.node_names()}, notes)
        for line in notes.lines():
            print(f"note: {line}", file=sys.stderr)
    for line in dump_warnings(cluster, running):
        logging.getLogger("numalign.cluster").warning("%s", line)
    return running


MAX_NOTES = 10


def print_notes(notes: list[str]) -> None:
    """Notes on stderr, at most MAX_NOTES of them (a workload of thousands of Deployments is not a
    screen of notes)."""
    for line in notes[:MAX_NOTES]:
        print(f"note: {line}", file=sys.stderr)
    if len(notes) > MAX_NOTES:
        print(f"note: ... and {len(notes) - MAX_NOTES} more like these", file=sys.stderr)


def load_workload_args(source: WorkloadSource) -> Workload:
    from numalign.cluster.examples import example_shapes
    from numalign.cluster.workload import generate, load_mix, load_timeline, load_workload

    if source.manifests and (source.generate or source.mix):
        raise InvalidInputError("workload manifests and --generate/--mix both given; expected one source of pods")
    if source.manifests:
        notes: list[str] = []
        wl = load_workload(source.manifests, source.replicas, notes)
        print_notes(notes)
        if source.timeline is not None:
            wl.events = load_timeline(source.timeline, wl)
        return wl
    if source.timeline is not None:
        raise InvalidInputError("--timeline names workloads of manifests; give WORKLOAD.yaml files with it")
    if source.replicas is not None:
        raise InvalidInputError(f"--replicas {source.replicas} sets the pods of each workload manifest; give "
                                "WORKLOAD.yaml files with it (--generate N sets the count of drawn pods)")
    if source.generate is not None and source.generate < 1:
        raise InvalidInputError(f"--generate {source.generate}: expected a number of pods >= 1")
    if source.mix is not None:
        shapes, count = load_mix(source.mix)
    else:
        shapes, count = example_shapes()
    return generate(shapes, source.generate or count or 100, source.seed)


MAX_POOL_LINES = 20


def pool_lines(cluster: Cluster) -> list[str]:
    """One line per node pool: its machine and what its kubelets run with (options beside each manager)."""
    from numalign.cluster.model import pool_settings

    def opts(options: dict[str, str]) -> str:
        return "".join(f" {k}={v}" for k, v in options.items())

    rows = [("POOL", "NODES", "MACHINE", "KUBELET", "TOPOLOGY MANAGER", "CPU MANAGER", "MEMORY MANAGER", "MAX PODS")]
    for pool in cluster.pools:
        s = pool_settings(pool)
        reserved = f" reserved {s['reservedSystemCPUs']}" if s["reservedSystemCPUs"] else ""
        if reserved and "reservedSystemCPUs" in s.get("reconstructed", ()):
            reserved += " (ids reconstructed)"
        rows.append((s["name"], str(s["nodes"]), s["machine"], s["kubeletVersion"],
                     f"{s['topologyManagerPolicy']}/{s['topologyManagerScope']}{opts(s['topologyManagerPolicyOptions'])}",
                     f"{s['cpuManagerPolicy']}{reserved}{opts(s['cpuManagerPolicyOptions'])}",
                     s["memoryManagerPolicy"], str(s["maxPods"])))
    shown = rows[:1 + MAX_POOL_LINES]
    widths = [max(len(r[i]) for r in shown) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in shown]
    if len(rows) > len(shown):
        out.append(f"... and {len(rows) - len(shown)} more pool(s) (-o json lists every pool)")
    return out


def dump(obj: Any, fmt: str) -> None:
    from numalign.cli.output import emit

    emit(obj, fmt)


def human(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value / 1000:g}"
    if resource == "memory" or resource.startswith("hugepages-"):
        return f"{value / (1 << 30):.0f}Gi"
    return str(value)


class Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, title: str) -> None:
        self.on = sys.stderr.isatty()
        self.title = title
        self.count = 0
        self.t0 = time.monotonic()
        self.last = 0.0
        if self.on:
            sys.stderr.write(f"{title}\r")
            sys.stderr.flush()

    def step(self, what: str) -> None:
        self.count += 1
        if self.on:
            line = f"{self.title}: {self.count} done ({time.monotonic() - self.t0:.0f}s); {what}"
            sys.stderr.write("\x1b[2K" + line[:200] + "\r")
            sys.stderr.flush()

    def note(self, what: str, force: bool = False) -> None:
        """Within a step: redrawn at most ten times a second, unless `force` (something new began)."""
        now = time.monotonic()
        if self.on and (force or now - self.last >= 0.1):
            self.last = now
            line = f"{self.title}: {what} ({now - self.t0:.0f}s)"
            sys.stderr.write("\x1b[2K" + line[:200] + "\r")
            sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\x1b[2K")
            sys.stderr.flush()
