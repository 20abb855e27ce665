"""`numalign simulate`: schedulers x kubelet policies on a whole cluster, side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES
from numalign.cli.options.clusterargs import add_cluster_args, load_cluster_arg, load_workload_args

if TYPE_CHECKING:
    from numalign.cli.commands.simulate_request import SimulateRequest
    from numalign.cluster.model import Cluster
    from numalign.cluster.result import RunResult, SimulationResult


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help=SUMMARIES["simulate"],
        description="Play a workload on a cluster, once per combination of scheduler (default: "
        "kube-scheduler's NodeResourcesFit, topology-unaware; nrt: scheduler-plugins' "
        "NodeResourceTopologyMatch; exact: numalign's admission as a filter) and kubelet settings. Every "
        "chosen node's kubelet (numalign) admits or rejects; a rejected pod is recreated by its controller "
        "up to --max-retries times. With no files: the built-in example cluster and workload. Same seed, "
        "same result, wherever the runs execute (--jobs, --dask).",
    )
    add_cluster_args(p)
    g = p.add_argument_group("the sweep (every combination runs; axes not given keep each pool's own setting)")
    g.add_argument("--scheduler", action="append", choices=("default", "nrt", "exact"),
                   help="scheduler to compare (repeat; default: all of them)")
    g.add_argument("--scoring", action="append", default=[], metavar="SCHEDULER=STRATEGY",
                   help="scoring strategy: default/exact LeastAllocated (default), MostAllocated, "
                   "RequestedToCapacityRatio; exact also LeastNUMANodes; nrt LeastAllocated, MostAllocated, "
                   "BalancedAllocation, LeastNUMANodes")
    g.add_argument("--policy", "--topology-manager-policy", dest="policies", action="append", default=[],
                   metavar="POLICY", help="Topology Manager policy axis (repeat for several)")
    g.add_argument("--scope", "--topology-manager-scope", dest="scopes", action="append", default=[],
                   metavar="SCOPE", help="Topology Manager scope axis: container, pod (repeat)")
    g.add_argument("--policy-options", dest="tm_options", action="append", default=[], metavar="K=V[,K=V]",
                   help="one set of Topology Manager policy options per use; '' for none (repeat)")
    g.add_argument("--cpu-manager-policy", dest="cpu_policies", action="append", default=[], metavar="POLICY",
                   help="CPU manager policy axis: none, static (repeat)")
    g.add_argument("--cpu-manager-policy-options", dest="cpu_options", action="append", default=[],
                   metavar="K=V[,K=V]", help="one set of CPU manager policy options per use (repeat)")
    g.add_argument("--memory-manager-policy", dest="memory_policies", action="append", default=[],
                   metavar="POLICY", help="memory manager policy axis: None, Static (repeat)")
    g.add_argument("--sweep", metavar="FILE", type=Path, help="the axes in a sweep file (kind: Sweep)")
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p, axis=True)
    r = p.add_argument_group("running")
    r.add_argument("--max-retries", type=int, default=3, metavar="N",
                   help="times a rejected pod is recreated and scheduled again (default 3)")
    r.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                   help="local worker processes for the runs (default: one per CPU, at most one per run)")
    r.add_argument("--dask", metavar="ADDRESS", help="run the sweep on this Dask scheduler (tcp://host:8786); needs "
                   "the Dask extra: pip install 'numalign[dask]'")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, "csv", help="text table (default), json or yaml (the result document), or csv (one row per run)")
    from numalign.cli.options.reportargs import add_report_arg

    add_report_arg(p, "the runs side by side (placed, kubelet rejections by reason, unschedulable, NUMA "
                   "alignment, stranded capacity), NUMA occupancy per node pool as heat maps and the outcome "
                   "along each swept axis")


def run(args: argparse.Namespace) -> int:
    from numalign.cli.commands.simulate_request import SimulateRequest

    return simulate(SimulateRequest.from_args(args))


def simulate(request: SimulateRequest) -> int:
    import os

    from numalign.cli.options.clusterargs import Progress, dump, running_pods, version_notes
    from numalign.cluster.result import SimulationResult
    from numalign.cluster.sweep import check_dask_installed, load_sweep, run_sweep, specs_from_args

    if request.dask is not None:
        check_dask_installed()
    from numalign.cluster.simulate import collector_paused

    cluster = load_cluster_arg(request.cluster)
    # Generating 200,000 pods grows the heap by every pod, and each full collection meanwhile walked all
    # of it again (7 of them, 0.5 s): deferred as in the runs (collector_paused).
    with collector_paused():
        workload = load_workload_args(request.workload)
    workload.bound = running_pods(request.cluster, cluster)
    if request.sweep is not None:
        sweep = load_sweep(request.sweep)
        sweep.check_against(cluster, str(request.sweep))
        specs = sweep.specs(str(request.sweep))
    else:
        specs = specs_from_args(request.schedulers or _default_schedulers(), request.scoring, request.axes)
    jobs = request.jobs or min(len(specs), os.cpu_count() or 1)
    progress = Progress(f"simulate: {len(specs)} run(s) on {cluster.node_count} nodes, {workload.pod_count()} pods")
    total = workload.pod_count()
    active: dict[int, int] = {}  # run -> pods placed so far, for the runs under way
    ended: set[int] = set()

    def placed(i: int, n: int) -> None:
        if i not in ended:  # a worker's last message may arrive after its result
            started = i not in active
            active[i] = n
            progress.note("; ".join(f"run {j + 1}/{len(specs)}: {m}/{total} pods placed"
                                    for j, m in sorted(active.items())), force=started)

    def done(i: int, r: RunResult) -> None:
        ended.add(i)
        active.pop(i, None)
        progress.step(f"{r.config.label}: {r.placed} placed, {r.rejections} kubelet rejections")

    seed = request.workload.seed
    results = run_sweep(cluster, workload, specs, seed, request.max_retries, jobs=jobs, dask=request.dask,
                        done=done, placed=placed if progress.on else None)
    progress.close()
    from numalign.cluster.model import pool_documents

    notes = version_notes(cluster, list(request.kubelet_versions))
    sim = SimulationResult(cluster.name, cluster.node_count, workload.source, workload.pod_count(), seed,
                           request.max_retries, tuple(results), tuple(pool_documents(cluster.pools)),
                           tuple(notes))
    if request.report is not None:
        from numalign.cli.options.reportargs import write_report
        from numalign.report.simulation import simulation_report

        write_report(request.report, simulation_report(sim.to_dict()))
    if request.output == "csv":
        _csv(sim)
    elif request.output in ("json", "yaml"):
        dump(sim.to_dict(), request.output)
    else:
        for line in notes:
            print(f"# {line}")
        _table(sim, cluster)
    return 0


def _default_schedulers() -> list[str]:
    from numalign.cluster.simulate import SCHEDULERS

    return list(SCHEDULERS)


def _rows(sim: SimulationResult) -> list[tuple[str, list[str]]]:
    from numalign.report.charts import percent

    runs = sim.runs
    deleted = any(r.deleted for r in runs)
    rows: list[tuple[str, list[str]]] = [
        ("kubelet version", [r.config.kubelet_version for r in runs]),
        *([("running before (dump)", [str(r.preexisting) for r in runs])] if any(r.preexisting for r in runs) else []),
        # pods = placed + unschedulable + failed after retries (+ deleted by the timeline): the lines add up.
        ("pods", [str(r.pods) for r in runs]),
        ("  placed", [str(r.placed) for r in runs]),
        ("  unschedulable", [str(r.unschedulable) for r in runs]),
        ("  failed after retries", [str(r.failed) for r in runs]),
        *([("  deleted (timeline)", [str(r.deleted) for r in runs])] if deleted else []),
        ("kubelet rejections", [str(r.rejections) for r in runs]),
    ]
    reasons = sorted({k for r in runs for k in r.kubelet_rejections})
    rows += [(f"  {k}", [str(r.kubelet_rejections.get(k, 0)) for r in runs]) for k in reasons]
    rows += [
        ("pods rejected", [str(r.rejected_pods) for r in runs]),
        ("retries", [str(r.retries) for r in runs]),
        ("Guaranteed on 1 NUMA node", [percent(r.alignment.share) for r in runs]),
        ("Guaranteed on fewest possible", [percent(r.alignment.fewest_share) for r in runs]),
    ]
    if any(r.dra is not None for r in runs):  # pods with ResourceClaims (cluster/dra.py)
        rows += [
            ("DRA pods placed", [f"{r.dra.placed}/{r.dra.pods}" if r.dra else "-" for r in runs]),
            ("DRA pods unschedulable", [str(sum(r.dra.unschedulable.values())) if r.dra else "-" for r in runs]),
            ("DRA devices with CPUs+memory", [percent(r.dra.aligned_share) if r.dra else "-" for r in runs]),
        ]
    # cpu, memory and whatever the workload asked for (resources nobody requests stay out of the table).
    names = sorted({k for r in runs for k, f in r.resources.items() if f.requested or k in ("cpu", "memory")},
                   key=_resource_order)
    for k in names:
        rows.append((f"{k} used", [_pct(r, k) for r in runs]))
    for k in names:
        rows.append((f"{k} stranded", [_stranded(r, k) for r in runs]))
    return rows


def _resource_order(name: str) -> tuple[int, str]:
    return ({"cpu": 0, "memory": 1}.get(name, 2 if "/" in name else 3), name)


def _pct(r: RunResult, k: str) -> str:
    from numalign.report.charts import percent

    f = r.resources.get(k)
    return "-" if f is None else percent(f.utilisation)


def _csv_share(share: float | None) -> str:
    return "" if share is None else f"{share:.6f}"  # an empty cell: a share of nothing


def _stranded(r: RunResult, k: str) -> str:
    from numalign.cli.options.clusterargs import human

    f = r.resources.get(k)
    return "-" if f is None else human(k, f.stranded)


TABLE_WIDTH = 120  # when stdout is not a terminal; a terminal's own width otherwise


def _table(sim: SimulationResult, cluster: Cluster) -> None:
    import shutil
    import textwrap

    from numalign.cli.options.clusterargs import pool_lines

    # A generated workload's source already names its pod count and seed (the run's seed, as given).
    said = f"seed {sim.seed}," in sim.workload and f"{sim.pods} pods" in sim.workload
    tail = "" if said else f" ({sim.pods} pods); seed {sim.seed}"
    limit = shutil.get_terminal_size((TABLE_WIDTH, 24)).columns if sys.stdout.isatty() else TABLE_WIDTH
    limit = max(limit, 60)
    nodes = f"{sim.nodes} node{'s' if sim.nodes != 1 else ''}"
    print(textwrap.fill(f"cluster {sim.cluster} ({nodes}); workload {sim.workload}{tail}", limit,
                        subsequent_indent="  ", break_on_hyphens=False))
    print()
    for line in pool_lines(cluster):
        print(line)
    common, headers = _headers(sim)
    if common:
        print(f"\nevery run: {' '.join(common)}")
    for line in table_lines(headers, _rows(sim), limit):
        print(line)
    unsched = {k for r in sim.runs for k in r.unschedulable_reasons}
    if unsched:
        print("\nunschedulable, by the scheduler's reasons:")
        for r in sim.runs:
            if r.unschedulable_reasons:
                print(f"  {r.config.label}:")
            for reason, n in r.unschedulable_reasons.items():
                print(f"    {n} pod(s): {reason}")
            for why, n in (r.dra.why if r.dra is not None else {}).items():
                print(f"      why (DRA), {n} pod(s): {why}")
    if any(r.rejection_examples for r in sim.runs):
        # the reason's words, so a scheduler's author need not re-run `admit` on the node to learn why
        print("\nkubelet rejections, the most frequent message of each reason (with the node and pod that gave it "
              "first):")
        for r in sim.runs:
            if r.rejection_examples:
                print(f"  {r.config.label}:")
            for reason, ex in r.rejection_examples.items():
                total = ex.rejections + ex.other
                share = f"{ex.rejections}" if not ex.other else f"{ex.rejections} of {total}"
                print(f"    {reason} ({share}), node {ex.node}, pod {ex.pod}: {ex.message}")
    for r in sim.runs:
        if r.dra is not None and r.dra.map_order_pods:
            print(f"\ndra map order ({r.config.label}): {r.dra.map_order_pods} placed pod(s) got devices another "
                  f"pool order would change; e.g. {r.dra.map_order_example}")
    if any(r.config.scheduler == "exact" for r in sim.runs):
        print("\nexact sends a pod only to a node whose kubelet admits it: 0 kubelet rejections by construction.")


def _headers(sim: SimulationResult) -> tuple[list[str], list[list[str]]]:
    """The label parts every run shares (said once), and each run's own parts, one per header line."""
    parts = [r.config.label.split(" ") for r in sim.runs]
    common = [p for p in parts[0][1:] if all(p in q[1:] for q in parts)] if len(parts) > 1 else []
    return common, [[q[0], *(p for p in q[1:] if p not in common)] for q in parts]


def table_lines(headers: list[list[str]], rows: list[tuple[str, list[str]]], limit: int) -> list[str]:
    """Runs as columns, headers stacked one part per line; when the columns are wider than `limit`,
    they continue in blocks below, each repeating the row names."""
    name_width = max(len(n) for n, _ in rows)
    widths = [max(*(len(p) for p in h), *(len(v[i]) for _, v in rows)) for i, h in enumerate(headers)]
    blocks: list[list[int]] = [[]]
    used = name_width
    for i, w in enumerate(widths):
        if blocks[-1] and used + 2 + w > limit:
            blocks.append([])
            used = name_width
        blocks[-1].append(i)
        used += 2 + w
    out: list[str] = []
    for block in blocks:
        out.append("")
        for depth in range(max(len(headers[i]) for i in block)):
            cells = [(headers[i][depth] if depth < len(headers[i]) else "").rjust(widths[i]) for i in block]
            out.append((" " * name_width + "  " + "  ".join(cells)).rstrip())
        for name, values in rows:
            out.append(name.ljust(name_width) + "  " + "  ".join(values[i].rjust(widths[i]) for i in block))
    return out


def _csv(sim: SimulationResult) -> None:
    import csv

    w = csv.writer(sys.stdout)
    names = sorted({k for r in sim.runs for k in r.resources}, key=_resource_order)
    reasons = sorted({k for r in sim.runs for k in r.kubelet_rejections})
    w.writerow(["scheduler", "scoring", "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
                "cpuManagerPolicy", "cpuManagerPolicyOptions", "memoryManagerPolicy", "pods", "placed",
                "unschedulable", "kubeletRejections", *[f"rejections:{k}" for k in reasons], "rejectedPods",
                "retries", "failed", "numaAlignedShare", "numaFewestShare", *[f"utilisation:{k}" for k in names],
                *[f"stranded:{k}" for k in names], "kubeletVersion", "previews"])
    for r in sim.runs:
        c = r.config
        previews = ";".join(f"{k}={v}" for k, v in sorted(c.previews.items()))
        w.writerow([c.scheduler, c.scoring, c.topology_manager_policy, c.topology_manager_scope,
                    ",".join(f"{k}={v}" for k, v in sorted(c.topology_manager_policy_options.items())),
                    c.cpu_manager_policy, ",".join(f"{k}={v}" for k, v in sorted(c.cpu_manager_policy_options.items())),
                    c.memory_manager_policy, r.pods, r.placed, r.unschedulable, r.rejections,
                    *[r.kubelet_rejections.get(k, 0) for k in reasons], r.rejected_pods, r.retries, r.failed,
                    _csv_share(r.alignment.share), _csv_share(r.alignment.fewest_share),
                    *[_csv_share(r.resources[k].utilisation) if k in r.resources else "" for k in names],
                    *[r.resources[k].stranded if k in r.resources else "" for k in names], c.kubelet_version, previews])
