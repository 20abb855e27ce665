"""The simulation report: `numalign simulate --report`. Reads SimulationResult.to_dict() (schema 2,
documented in numalign.cluster.result), so `simulate -o json` output plots the same way.

Sections: the runs side by side (pods placed, unschedulable and given up; kubelet rejections by reason;
Guaranteed pods on one NUMA node; stranded capacity), NUMA occupancy per node pool as heat maps (one
per run), and the outcome along each swept axis (the mean over the runs that share a value)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from numalign.report import colors
from numalign.report.charts import Row, Segment, bar_chart, percent
from numalign.report.dra import dra_sections
from numalign.report.heatmap import heatmap
from numalign.report.page import html_page

PLACED, UNSCHEDULABLE, FAILED = "#59a14f", "#f28e2b", "#e15759"
# (the run config's key, the element id's part, as the pages have always named them)
AXES = (("scheduler", "scheduler"), ("scoring", "scoring"),
        ("topologyManagerPolicy", "topology-manager-policy"),
        ("topologyManagerScope", "topology-manager-scope"),
        ("topologyManagerPolicyOptions", "topology-manager-policy-options"),
        ("cpuManagerPolicy", "cpu-manager-policy"), ("cpuManagerPolicyOptions", "cpu-manager-policy-options"),
        ("memoryManagerPolicy", "memory-manager-policy"))


def _axis_value(config: Mapping[str, Any], key: str) -> str:
    v = config.get(key)
    if isinstance(v, Mapping):
        return ",".join(f"{k}={x}" for k, x in sorted(v.items())) or "(none)"
    return str(v)


def _label(run: Mapping[str, Any]) -> str:
    return str(run["config"].get("label") or run["config"]["scheduler"])


def _outcome(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = [Row(_label(r), (Segment("placed", r["placed"], PLACED), Segment("unschedulable", r["unschedulable"],
                                                                          UNSCHEDULABLE),
                            Segment("failed after retries", r["failed"], FAILED)),
                f"{r['placed']}/{r['pods']} placed") for r in runs]
    return bar_chart(rows, max((r["pods"] for r in runs), default=1) or 1, ident="runs-outcome",
                     caption="Pods: placed, unschedulable, given up after kubelet rejections",
                     keys=(("placed", PLACED), ("unschedulable", UNSCHEDULABLE), ("failed after retries", FAILED)))


def _rejections(runs: Sequence[Mapping[str, Any]]) -> str:
    reasons = sorted({k for r in runs for k in r["kubeletRejections"]})
    palette = {k: colors.owner_colour(3 + i) for i, k in enumerate(reasons)}
    rows = [Row(_label(r), tuple(Segment(k, r["kubeletRejections"].get(k, 0), palette[k]) for k in reasons),
                f"{sum(r['kubeletRejections'].values())} rejections, {r['rejectedPods']} pods")
            for r in runs]
    top = max((sum(r["kubeletRejections"].values()) for r in runs), default=0)
    return bar_chart(rows, top or 1, ident="runs-rejections", caption="Kubelet rejections by reason",
                     keys=tuple(palette.items()))


def _alignment(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = [Row(_label(r), (Segment("on one NUMA node", r["alignment"]["share"] or 0.0, colors.owner_colour(0)),),
                f"{percent(r['alignment']['share'])} of {r['alignment']['guaranteed']} Guaranteed pods; fewest "
                f"possible {percent(r['alignment']['fewestShare'])}") for r in runs]
    return bar_chart(rows, 1.0, ident="runs-alignment", caption="Guaranteed pods on one NUMA node")


def _resource_order(name: str) -> tuple[int, str]:
    return ({"cpu": 0, "memory": 1}.get(name, 2 if "/" in name else 3), name)


def _stranded(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One chart per resource the workload asks for (cpu and memory always), the runs as rows."""
    names = sorted({k for r in runs for k, f in r["resources"].items() if f["requested"] or k in ("cpu", "memory")},
                   key=_resource_order)
    out = []
    for k in names:
        rows = []
        for r in runs:
            f = r["resources"].get(k)
            share = f["stranded"] / f["allocatable"] if f and f["allocatable"] else 0.0
            rows.append(Row(_label(r), (Segment("stranded", share, FAILED),), f"{share:.1%}"))
        out.append(bar_chart(rows, 1.0, ident=f"stranded-{k.replace('/', '-').replace('.', '-')}",
                             css_class="chart stranded", caption=f"{k} stranded (share of allocatable)"))
    return out


def _occupancy(run: Mapping[str, Any], i: int) -> str:
    occ: Mapping[str, Mapping[str, float]] = run.get("numaOccupancy") or {}
    if not occ:
        return f"<p class=\"detail\">{escape(_label(run))}: no pool pins CPUs (cpuManagerPolicy none)</p>"
    pools = sorted(occ)
    ids = sorted({int(k) for per in occ.values() for k in per})
    values = [[occ[p].get(str(n)) for n in ids] for p in pools]
    shade = [[-1.0 if v is None else v for v in row] for row in values]
    tips = [[f"pool {p}, NUMA node {n}: " + ("no such node" if v is None else f"{v:.0%} of its CPUs held exclusively")
             for n, v in zip(ids, row, strict=True)] for p, row in zip(pools, values, strict=True)]
    return heatmap(pools, [str(n) for n in ids], values, shade, tips, ident=f"occupancy-{i}",
                   caption=_label(run), fmt="{:.0%}")


def _axes(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for key, ident in AXES:
        name = "scoring strategy" if key == "scoring" else key
        values: dict[str, list[Mapping[str, Any]]] = {}
        for r in runs:
            values.setdefault(_axis_value(r["config"], key), []).append(r)
        if len(values) < 2:
            continue
        rows = []
        top = max(r["pods"] for r in runs) or 1
        for v, group_runs in values.items():
            n = len(group_runs)
            placed = sum(r["placed"] for r in group_runs) / n
            rejected = sum(sum(r["kubeletRejections"].values()) for r in group_runs) / n
            shares = [r["alignment"]["share"] for r in group_runs if r["alignment"]["share"] is not None]
            aligned_text = percent(sum(shares) / len(shares) if shares else None)
            rows.append(Row(v, (Segment("placed (mean)", placed, PLACED),),
                            f"placed {placed:.1f}, rejections {rejected:.1f}, one NUMA node {aligned_text} "
                            f"({n} run{'s' * (n != 1)})"))
        out.append(bar_chart(rows, top, ident=f"axis-{ident}", css_class="chart axis",
                             caption=f"Along {name}: mean over the runs with each value"))
    return out


def _figure(r: Mapping[str, Any], name: str) -> str:
    al = r["alignment"]
    values = {"pods": r["pods"], "placed": r["placed"], "unschedulable": r["unschedulable"],
              "kubelet rejections": sum(r["kubeletRejections"].values()), "pods rejected": r["rejectedPods"],
              "retries": r["retries"], "failed after retries": r["failed"],
              "Guaranteed on 1 NUMA node": percent(al["share"]),
              "Guaranteed on fewest possible": percent(al["fewestShare"])}
    return str(values[name])


FIGURES = ("pods", "placed", "unschedulable", "kubelet rejections", "pods rejected", "retries",
           "failed after retries", "Guaranteed on 1 NUMA node", "Guaranteed on fewest possible")


def _table(runs: Sequence[Mapping[str, Any]]) -> str:
    head = "".join(f"<th>{escape(_label(r))}</th>" for r in runs)
    body = "".join(f"<tr><td>{escape(name)}</td>" + "".join(f"<td>{escape(_figure(r, name))}</td>" for r in runs)
                   + "</tr>" for name in FIGURES)
    return (f"<table class=\"runs\" id=\"runs-table\"><thead><tr><th></th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def simulation_report(sim: Mapping[str, Any]) -> str:
    runs = list(sim["runs"])
    title_text = f"numalign simulate: {sim['cluster']}"
    body = [f"<h1>{escape(title_text)}</h1>",
            f"<p class=\"summary\">cluster <b>{escape(str(sim['cluster']))}</b> ({sim['nodes']} nodes); workload "
            f"{escape(str(sim['workload']))} ({sim['pods']} pods); seed {sim['seed']}; up to {sim['maxRetries']} "
            f"retries after a kubelet rejection; {len(runs)} run(s)</p>",
            "<h2>The runs side by side</h2>", _table(runs),
            "<div class=\"charts\">", _outcome(runs), _rejections(runs), _alignment(runs), "</div>",
            *dra_sections(runs),
            "<h2>Stranded capacity</h2><p class=\"detail\">Free capacity on nodes where no pending pod shape (or, "
            "with nothing pending, no workload shape) would be admitted.</p>",
            "<div class=\"charts\">", *_stranded(runs), "</div>",
            "<h2>NUMA occupancy per node pool</h2><p class=\"detail\">Share of each NUMA node's allocatable CPUs held "
            "exclusively at the end of the run, over the pool's nodes (rows: pools; columns: NUMA node ids).</p>",
            "<div class=\"charts\" id=\"occupancy\">", *(_occupancy(r, i) for i, r in enumerate(runs)), "</div>"]
    axes = _axes(runs)
    body.append("<h2>Along each swept axis</h2>")
    body += (["<div class=\"charts\" id=\"axes\">", *axes, "</div>"] if axes
             else ["<p>one value per axis: nothing swept</p>"])
    return html_page(title_text, body)
