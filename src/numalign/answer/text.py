"""The answers `numalign admit` adds to each decision: an admitted pod's alignment, a rejected pod's
why, free capacity and verified "would fit if" list; as JSON fields and as text lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.answer.alignment import AlignmentJudge, ContainerAlignment, PodAlignment, empty_node_capacity
from numalign.answer.free import FreeCapacity, numa_capacity
from numalign.answer.whatif import Answer, AnswerCache
from numalign.answer.why import show
from numalign.core.decision import DecisionRecord
from numalign.k8s.pod import Pod
from numalign.k8s.resources import RESOURCE_CPU
from numalign.kubelet.node import Node
from numalign.machine.render import binary_quantity

MAX_HOLDERS = 3


class NodeAnswers:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.judge = AlignmentJudge(node.machine, empty_node_capacity(numa_capacity(node)))
        self.cache = AnswerCache()

    def after(self, pod: Pod, rec: DecisionRecord) -> PodAlignment | Answer:
        """Call right after node.admit(pod) returned rec, before the node changes again."""
        if rec.result.admit:
            return self.judge.pod(rec.allocations)
        return self.cache.answer(self.node, pod, rec)


def to_json(extra: PodAlignment | Answer) -> dict[str, Any]:
    if isinstance(extra, PodAlignment):
        return {"alignment": extra.to_dict()}
    return {"answer": extra.to_dict()}


def allocation_line(name: str, alloc: Mapping[str, Any], alignment: ContainerAlignment | None) -> str:
    """`c: cpus 1-4 (exclusive, NUMA 0); memory 4Gi on NUMA 0; nvidia.com/gpu 0000:17:00.0 (NUMA 0)`."""
    cpu_numa = f", NUMA {_ids(alignment.cpus)}" if alignment is not None and alignment.cpus else ""
    pool = f" (exclusive{cpu_numa})" if alloc["exclusive_cpus"] else " (shared pool)"
    parts = [f"cpus {alloc['cpus'] or '-'}{pool}"]
    for b in alloc["memory"]:
        parts.append(f"{b['type']} {binary_quantity(b['size'])} on NUMA {_ids(b['numa_nodes'])}")
    for res, devs in alloc["devices"].items():
        numa = sorted({n for topo in devs.values() if topo for n in topo})
        parts.append(f"{res} {' '.join(devs)} (NUMA {_ids(numa) if numa else 'none'})")
    line = f"    {name}: " + "; ".join(parts)
    if alignment is not None and alignment.flags:
        line += "  <- " + "; ".join(alignment.flags)
    return line


def text_lines(extra: PodAlignment | Answer, reason_has_why: bool) -> list[str]:
    if isinstance(extra, PodAlignment):
        return [f"  alignment: {extra.summary()}"]
    lines = [] if reason_has_why else [f"  why: {w}" for w in extra.why]
    free = _free_text(extra.free)
    if free:
        lines.append("  free now:")
        lines.extend(f"    {f}" for f in free)
    if extra.would_fit_if:
        lines.append(f"  would fit if (each checked by admitting again on a copy of the node; "
                     f"{extra.tried} tried):")
        lines.extend(f"    - {s.change}: {s.outcome}" for s in extra.would_fit_if)
    else:
        lines.append(f"  would fit if: no change numalign tries admits it ({extra.tried} tried: other Topology "
                     "Manager policy or scope, smaller requests, evicting the pods that hold what is missing)")
    return lines


def _ids(ids: Any) -> str:
    return ",".join(map(str, sorted(ids)))


def _amount(f: FreeCapacity, value: int) -> str:
    if f.numa_node is None:
        return show(f.resource, value)
    if f.resource == RESOURCE_CPU:
        return f"{value} CPUs" if value != 1 else "1 CPU"
    return show(f.resource, value)


def _free_text(free: tuple[FreeCapacity, ...]) -> list[str]:
    out = []
    for f in free:
        where = "node" if f.numa_node is None else f"NUMA {f.numa_node}"
        held = ", ".join(f"{h.pod}{'/' + h.container if h.container else ''} {_amount(f, h.amount)}"
                         for h in f.held_by[:MAX_HOLDERS])
        more = len(f.held_by) - MAX_HOLDERS
        if more > 0:
            held += f", {more} more pod{'s' if more > 1 else ''}"
        kind = " exclusive" if f.numa_node is not None and f.resource == RESOURCE_CPU else ""
        out.append(f"{where} {f.resource}{kind}: {_amount(f, f.free)} free of {_amount(f, f.allocatable)}"
                   + (f" (held by {held})" if held else ""))
    return out
