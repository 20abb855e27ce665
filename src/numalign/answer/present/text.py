"""The answers `numalign admit` adds to each decision (an admitted pod's alignment, a rejected pod's
why, free capacity and verified "would fit if" list; answer/admit.py computes them) as text lines.

Text stays readable at 64 NUMA nodes and thousands of pods: free capacity is shown only for the
resources the pod asks for and the NUMA nodes that have any, NUMA nodes in the same state share one
line, and at most MAX_FREE_LINES lines are shown unless details are asked for (JSON keeps everything).
"""

from __future__ import annotations

from typing import Any

from numalign.answer.alignment import ContainerAlignment, PodAlignment
from numalign.answer.free import FreeCapacity
from numalign.answer.whatif import Answer
from numalign.answer.why import show
from numalign.core.decision import ContainerAllocation, DecisionRecord
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.pod import Pod
from numalign.k8s.resources import RESOURCE_CPU
from numalign.machine.render import binary_quantity
from numalign.report.verdict import NOT_ALIGNED

MAX_HOLDERS = 3
MAX_FREE_LINES = 8
MAX_LINE = 200  # no text line is longer unless details are asked for


def node_ranges(ids: Any) -> str:
    """NUMA ids as ranges: 1-3,5,7-9 (the cpuset list format)."""
    return format_cpuset(sorted(ids))


def clip(line: str, width: int = MAX_LINE) -> str:
    """A line cut to `width` characters, saying how much was left out."""
    if len(line) <= width:
        return line
    keep = width - len(f" ... (+{len(line)} chars; --details)")
    return line[:keep] + f" ... (+{len(line) - keep} chars; --details)"


def allocation_line(name: str, alloc: ContainerAllocation, alignment: ContainerAlignment | None) -> str:
    """`c: cpus 1-4 (exclusive, NUMA 0); memory 4Gi on NUMA 0; nvidia.com/gpu 0000:17:00.0 (NUMA 0)`."""
    cpu_numa = f", NUMA {_ids(alignment.cpus)}" if alignment is not None and alignment.cpus else ""
    pool = f" (exclusive{cpu_numa})" if alloc.exclusive else " (shared pool)"
    parts = [f"cpus {alloc.cpus_text or '-'}{pool}"]
    for b in alloc.memory:
        parts.append(f"{b.type} {binary_quantity(b.size)} on NUMA {_ids(b.numa_nodes)}")
    for res, devs in alloc.devices.items():
        numa = sorted({n for topo in devs.values() if topo for n in topo})
        parts.append(f"{res} {' '.join(devs)} (NUMA {_ids(numa) if numa else 'none'})")
    line = f"    {name}: " + "; ".join(parts)
    if alignment is not None and alignment.flags:
        line += "  <- " + "; ".join(alignment.flags)
    return line


def text_lines(
    extra: PodAlignment | Answer, reason_has_why: bool, *, requested: set[str] | None = None, details: bool = True
) -> list[str]:
    """`requested`: the resources the pod asks for (free capacity of others is left out unless `details`)."""
    if isinstance(extra, PodAlignment):
        return [f"  alignment: {extra.summary()}"]
    lines = [] if reason_has_why else [f"  why: {w}" for w in extra.why]
    if extra.short_of:
        lines.append("  short of: " + "; ".join(extra.short_of))
    free = _free_text(extra.free) if details else _free_summary(extra.free, requested)
    if free:
        lines.append("  free now:")
        lines.extend(f"    {f}" for f in free)
    if extra.would_fit_if:
        lines.append(f"  would fit if (each checked by admitting again on a copy of the node; "
                     f"{extra.tried} tried):")
        lines.extend(f"    - {s.change}: {s.outcome}" for s in extra.would_fit_if)
    else:
        lines.append(f"  would fit if: {_nothing_fits(extra)}")
    return lines


def _nothing_fits(extra: Answer) -> str:
    """What was tried, and only that: "0 tried" beside a list of kinds read as if those were tried."""
    if not extra.tried:
        return ("numalign found no change to try for this rejection (it tries another Topology Manager "
                "policy or scope, smaller requests and evictions where they apply: none did here)")
    changes = "; ".join(extra.tried_changes) or f"{extra.tried} change(s)"
    return f"none of the {extra.tried} change(s) tried admits it: {changes}"


def _ids(ids: Any) -> str:
    return ",".join(map(str, sorted(ids)))


def _amount(f: FreeCapacity, value: int) -> str:
    if f.numa_node is None:
        return show(f.resource, value)
    if f.resource == RESOURCE_CPU:
        return f"{value} CPUs" if value != 1 else "1 CPU"
    return show(f.resource, value)


def _free_line(f: FreeCapacity, where: str, each: str = "") -> str:
    held = ", ".join(f"{h.pod}{'/' + h.container if h.container else ''} {_amount(f, h.amount)}"
                     for h in f.held_by[:MAX_HOLDERS])
    more = len(f.held_by) - MAX_HOLDERS
    if more > 0:
        held += f", {more} more pod{'s' if more > 1 else ''}"
    kind = " exclusive" if f.numa_node is not None and f.resource == RESOURCE_CPU else ""
    if f.numa_node is None and f.allocatable == 0 and not f.held_by:
        return f"{where} {f.resource}: 0 free of 0 (this node has 0 {f.resource})"
    return (f"{where} {f.resource}{kind}: {_amount(f, f.free)} free of {_amount(f, f.allocatable)}{each}"
            + (f" (held by {held})" if held else ""))


def _free_text(free: tuple[FreeCapacity, ...]) -> list[str]:
    """Every resource on every NUMA node (details)."""
    return [_free_line(f, "node" if f.numa_node is None else f"NUMA {f.numa_node}") for f in free]


def _free_summary(
    free: tuple[FreeCapacity, ...], requested: set[str] | None, limit: int | None = MAX_FREE_LINES
) -> list[str]:
    """The resources the pod asks for, on the NUMA nodes that have any; NUMA nodes in the same state
    (same free and allocatable, nothing held) share a line; at most MAX_FREE_LINES lines."""
    rows = [f for f in free if (f.allocatable > 0 or f.held_by or f.numa_node is None)
            and (requested is None or f.numa_node is None or f.resource in requested)]
    groups: dict[tuple[str, int, int], list[int]] = {}
    out: list[tuple[int, str]] = []  # (order, line); a group's line takes its first member's place
    for i, f in enumerate(rows):
        if f.numa_node is None or f.held_by:
            out.append((i, _free_line(f, "node" if f.numa_node is None else f"NUMA {f.numa_node}")))
            continue
        key = (f.resource, f.free, f.allocatable)
        if key not in groups:
            groups[key] = []
            out.append((i, ""))  # filled below
        groups[key].append(f.numa_node)
    lines: list[str] = []
    group_iter = iter(groups.items())
    for _, line in out:
        if line:
            lines.append(line)
            continue
        (resource, _, _), members = next(group_iter)
        sample = next(f for f in rows if f.numa_node == members[0] and f.resource == resource)
        where = f"NUMA {node_ranges(members)}"
        lines.append(clip(_free_line(sample, where, " each" if len(members) > 1 else "")))
    if limit is not None and len(lines) > limit:
        rest = len(lines) - limit
        lines = [*lines[:limit], f"... {rest} more line{'s' if rest > 1 else ''} (--details shows every "
                 "resource on every NUMA node)"]
    return lines


# ---- many pods: summaries first, details on request --------------------------------------------

# Up to this many pods every decision record is printed whole; past it, each pod gets a few lines
# (admit --details prints every record whole at any count).
FULL_RECORDS_UP_TO = 10
COMPACT_FREE_LINES = 2
COMPACT_SUGGESTIONS = 2


def pod_shape(pod: Pod) -> tuple[object, ...]:
    """What decides a pod's answer besides the node: its containers' requests and limits, and the claims
    or claim templates its DRA claims come from (pods of the same requests asking for different claims
    are answered apart: one may be unschedulable for a selector, another for a count)."""
    containers = tuple(
        (c.name, tuple(sorted((k, str(v)) for k, v in c.requests.items())),
         tuple(sorted((k, str(v)) for k, v in c.limits.items())))
        for c in pod.all_containers()
    )
    claims = tuple((c.name, c.resource_claim_name, c.resource_claim_template_name) for c in pod.resource_claims)
    return (*containers, str(pod.pod_requests), str(pod.pod_limits), claims)


def requested_resources(pod: Pod) -> set[str]:
    return {r for c in pod.all_containers() for r in (*c.requests, *c.limits)}


def compact_lines(rec: DecisionRecord, extra: PodAlignment | Answer, pod: Pod) -> list[str]:
    """A few lines for one pod: the verdict, where it runs or why not, what is free, what would fit."""
    if rec.result.admit:
        lines = [f"pod {rec.pod}: admitted"]
        by_name = {c.container: c for c in extra.containers} if isinstance(extra, PodAlignment) else {}
        lines += [clip(allocation_line(name, alloc, by_name.get(name))) for name, alloc in rec.allocations.items()]
        if isinstance(extra, PodAlignment) and extra.verdict == NOT_ALIGNED:
            lines.append(clip(f"  alignment: {extra.summary()}"))
        return lines
    lines = [clip(f"pod {rec.pod}: {rec.result.verdict()}")]
    why = [e for d in rec.decisions for e in d.explanation]
    if isinstance(extra, Answer):
        why = why or list(extra.why)
        lines += [clip(f"  why: {w}") for w in why[:1]]
        if extra.short_of:
            lines.append(clip("  short of: " + "; ".join(extra.short_of)))
        free = _free_summary(extra.free, requested_resources(pod), limit=None)
        if free:
            rest = len(free) - COMPACT_FREE_LINES
            more = f" ({rest} more line{'s' if rest > 1 else ''} with --details)" if rest > 0 else ""
            lines.append("  free now:" + more)
            lines += [clip(f"    {f}") for f in free[:COMPACT_FREE_LINES]]
        for s in extra.would_fit_if[:COMPACT_SUGGESTIONS]:
            lines.append(clip(f"  would fit if {s.change}: {s.outcome}"))
    return lines


def summary_lines(records: list[DecisionRecord], pods: list[Pod]) -> list[str]:
    """The closing summary: how many were admitted, and the rejections by reason, each with its most
    frequent pod shapes named by their first pod."""
    admitted = sum(1 for r in records if r.result.admit)
    lines = [f"{admitted}/{len(records)} pods admitted"]
    by_reason: dict[str, dict[tuple[object, ...], list[str]]] = {}
    for rec, pod in zip(records, pods, strict=True):
        if not rec.result.admit:
            by_reason.setdefault(rec.result.reason, {}).setdefault(pod_shape(pod), []).append(rec.pod)
    for reason, shapes in sorted(by_reason.items(), key=lambda kv: -sum(len(v) for v in kv[1].values())):
        count = sum(len(v) for v in shapes.values())
        top = sorted(shapes.values(), key=len, reverse=True)
        named = ", ".join(f"{v[0]}" + (f" and {len(v) - 1} more of its shape" if len(v) > 1 else "") for v in top[:3])
        more = len(top) - 3
        lines.append(clip(f"  {reason}: {count} pod{'s' if count > 1 else ''} ({named}"
                          + (f", {more} other shapes" if more > 0 else "") + ")"))
    return lines
