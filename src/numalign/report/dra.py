"""DRA in the pictures: the node picture's DRA devices (chips on their NUMA nodes, coloured by the
container whose claim holds them; a pod whose devices are apart from its CPUs or memory is marked
misaligned) and the simulation report's DRA section (pods with ResourceClaims placed and
unschedulable, and whether their devices share a NUMA node with their CPUs and memory).

Reads the `dra` figures of SimulationResult.to_dict() (cluster/result.py documents them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Final

from numalign.machine.topology import Device
from numalign.report.charts import Row, Segment, bar_chart, percent
from numalign.report.verdict import ALIGNED as V_ALIGNED
from numalign.report.verdict import COUNT_KEYS, VERDICTS, worst
from numalign.report.verdict import NOT_ALIGNED as V_NOT_ALIGNED
from numalign.report.verdict import NOTHING_PINNED as V_NOTHING_PINNED
from numalign.report.verdict import UNKNOWN as V_UNKNOWN
from numalign.report.view import NodeView

ALIGNED_COLOUR, APART, UNPINNED, UNKNOWN = "#59a14f", "#e15759", "#bab0ac", "#9c755f"
PLACED, UNSCHEDULABLE = "#4e79a7", "#f28e2b"


def _label(run: Mapping[str, Any]) -> str:
    return str(run["config"].get("label") or run["config"]["scheduler"])


# The verdicts' colours, in report/verdict.py's words.
_COLOURS: Final = ((V_ALIGNED, ALIGNED_COLOUR), (V_NOT_ALIGNED, APART), (V_NOTHING_PINNED, UNPINNED),
                   (V_UNKNOWN, UNKNOWN))


def dra_sections(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's DRA section; nothing when no run had pods with claims."""
    with_dra = [r for r in runs if r.get("dra")]
    if not with_dra:
        return []
    placed = [Row(_label(r), (Segment("placed", r["dra"]["placed"], PLACED),
                              Segment("unschedulable", sum(r["dra"]["unschedulable"].values()), UNSCHEDULABLE)),
                  f"{r['dra']['placed']}/{r['dra']['pods']} placed") for r in with_dra]
    top = max((r["dra"]["pods"] for r in with_dra), default=1) or 1
    aligned = [Row(_label(r), tuple(Segment(v, r["dra"][COUNT_KEYS[v]], colour) for v, colour in _COLOURS),
                   f"{percent(r['dra']['alignedShare'])} aligned") for r in with_dra]
    reasons = "".join(
        f"<li>{escape(_label(r))}: {n} pod(s): {escape(reason)}</li>"
        for r in with_dra for reason, n in r["dra"]["unschedulable"].items()) + "".join(
        f"<li>{escape(_label(r))}: why, {n} pod(s): {escape(why)}</li>"
        for r in with_dra for why, n in (r["dra"].get("why") or {}).items())
    # simulate's `dra map order` note (pools at 1.34/1.35, whose scheduler ranges over a Go map of the
    # node's pools): which placed pods another pool order would give other devices, in its words.
    map_order = "".join(
        f"<li>dra map order ({escape(_label(r))}): {r['dra']['mapOrder']['pods']} placed pod(s) got devices "
        f"another pool order would change; e.g. {escape(str(r['dra']['mapOrder']['example']))}</li>"
        for r in with_dra if (r["dra"].get("mapOrder") or {}).get("pods"))
    return [
        "<h2>DRA: pods with ResourceClaims</h2><p class=\"detail\">Claims allocated as the scheduler's "
        "DynamicResources plugin does; the kubelet's Topology Manager ignores DRA devices, so a pod's devices "
        "share a NUMA node with its pinned CPUs and memory only by chance (or by a matchAttribute over a "
        "DRA CPU claim).</p>",
        "<div class=\"charts\" id=\"dra\">",
        bar_chart(placed, top, ident="dra-outcome", caption="DRA pods: placed, unschedulable",
                  keys=(("placed", PLACED), ("unschedulable", UNSCHEDULABLE))),
        bar_chart(aligned, max((r["dra"]["placed"] for r in with_dra), default=1) or 1, ident="dra-alignment",
                  caption="Placed DRA pods: devices on the NUMA node of their CPUs and memory",
                  keys=_COLOURS),
        "</div>",
        *([f"<ul class=\"detail\" id=\"dra-unschedulable\">{reasons}</ul>"] if reasons else []),
        *([f"<ul class=\"detail\" id=\"dra-map-order\">{map_order}</ul>"] if map_order else []),
    ]


# ---- the node picture --------------------------------------------------------------------------

DRA_RESOURCE_SUFFIX = "/dra"  # a DRA device is drawn as a chip of resource "<driver>/dra", labelled "dra <name>"


@dataclass(frozen=True)
class DRAChip:
    """A DRA device a pod's container holds, as the picture needs it."""

    pod: str        # namespace/name
    container: str  # "" when no container of the pod uses it
    claim: str      # namespace/name
    driver: str
    device: str
    numa_node: int | None


def with_dra_devices(view: NodeView, chips: Sequence[DRAChip], free: Sequence[tuple[str, str, int | None]],
                     dra_alignment: Mapping[str, Mapping[str, Any]]) -> NodeView:
    """The view with DRA devices drawn on their NUMA nodes as chips coloured by the container holding
    them (`free`: devices no pod holds, (driver, device, NUMA node)), and each pod's DRA alignment in its
    summary: a pod whose DRA devices are apart from its CPUs or memory is marked misaligned."""
    devices = [Device(f"{c.device}", f"{c.driver}{DRA_RESOURCE_SUFFIX}",
                      None if c.numa_node is None else (c.numa_node,)) for c in chips]
    seen = {(d.resource, d.id) for d in devices}
    for driver, device, numa in free:
        key = (f"{driver}{DRA_RESOURCE_SUFFIX}", device)
        if key not in seen:
            seen.add(key)
            devices.append(Device(device, key[0], None if numa is None else (numa,)))
    machine = dataclasses.replace(view.machine, devices=(*view.machine.devices, *devices))
    pods = []
    for p in view.pods:
        mine = [c for c in chips if c.pod == p.key]
        al = dra_alignment.get(p.key)
        if not mine and al is None:
            pods.append(p)
            continue
        containers = []
        for cv in p.containers:
            held: dict[str, list[str]] = {}
            for c in mine:
                if c.container == cv.name:
                    held.setdefault(f"{c.driver}{DRA_RESOURCE_SUFFIX}", []).append(c.device)
            containers.append(dataclasses.replace(cv, devices={**cv.devices, **{r: tuple(v) for r, v in held.items()}}))
        alignment = dict(p.alignment or {})
        if al is not None:
            claims = sorted({c.claim for c in mine})
            # The pod's verdict joins the kubelet's and the DRA devices' (report/verdict.py's rule), and
            # heads the line as it heads each part.
            parts = [v for v in (alignment.get("verdict"), al.get("verdict")) if v in VERDICTS]
            alignment["verdict"] = worst(parts)
            alignment["summary"] = (f"{alignment['verdict']}: kubelet: {alignment.get('summary', 'admitted')}; "
                                    f"DRA ({', '.join(claims)}): {al.get('summary', '')}")
            alignment["aligned"] = alignment["verdict"] == V_ALIGNED
        pods.append(dataclasses.replace(p, containers=tuple(containers), alignment=alignment))
    return dataclasses.replace(view, machine=machine, pods=tuple(pods))
