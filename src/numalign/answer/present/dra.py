"""`numalign admit`'s DRA part, rendered: an unschedulable pod's verdict and why, a scheduled pod's claims
and their devices with its DRA alignment, the `dra` JSON field, and the --report page's DRA devices.

The scheduler's half of admitting (cli/commands/admit_dra.py's DRAAdmit) keeps each pod's claims'
outcome (scheduler.dra.scheduling.PodClaims) and DRA alignment (answer.dra_alignment.PodDRAAlignment);
these functions render them, as the rest of answer/present renders the kubelet's half.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from numalign.k8s.pod import Pod

if TYPE_CHECKING:
    from numalign.kubelet.node import Node
    from numalign.machine.topology import Machine


def verdict_lines(pod: Pod, outcome: Any, details: bool) -> list[str]:
    """An unschedulable pod's verdict, then why its claims do not fit (scheduler/dra/explain.py): the
    reasons, and with `details` every request's counts and every constraint."""
    failure = outcome.failure
    if failure.unschedulable:
        head = (f"pod {pod.key}: UNSCHEDULABLE on this node (kube-scheduler's DynamicResources plugin; the "
                f"kubelet never sees the pod): {failure.line()}")
    else:
        head = (f"pod {pod.key}: NOT SCHEDULED (kube-scheduler's DynamicResources plugin reports an error and "
                f"retries the pod): {failure.line()}")
    note = [f"  dra map order: {failure.map_order}"] if failure.map_order else []
    why = outcome.explanation
    if why is None:
        return [head, *note]
    return [head, *note, *(f"  why: {line}" for line in why.lines()),
            *(f"  dra details: {line}" for line in why.lines(details=True)[len(why.reasons):] if details)]


def claim_lines(node: Node, machine: Machine, pod: Pod, outcome: Any, alignment: Any) -> list[str]:
    """A scheduled pod's claims with their devices and where they are, the DRA CPU and memory drivers'
    part, and its DRA alignment with what would align it."""
    from numalign.answer.dra_alignment import claim_lines as device_lines

    if outcome is None or outcome.failure is not None:
        return []
    lines = device_lines(outcome, machine)
    if outcome.result.map_order:
        lines.append(f"  dra map order: {outcome.result.map_order}")
    if any(d.driver in ("dra.cpu", "dra.memory") for d in outcome.devices):
        from numalign.answer.dra_drivers import driver_lines

        lines += driver_lines(node, pod, outcome)
    if alignment is not None:
        lines.append(f"  dra alignment: {alignment.summary()}")
        if alignment.misaligned:
            lines.append(f"  would be aligned if (each checked by running it again; {alignment.tried} tried):"
                         if alignment.options else
                         f"  would be aligned if: no option numalign tries aligns it ({alignment.tried} tried)")
        for o in alignment.options:
            lines.append(f"    - {o.change}: {o.outcome}")
    return lines


def dra_json(node_name: str, outcome: Any, alignment: Any) -> dict[str, Any]:
    """The pod's `dra` field: its claims' devices (or why they do not fit) and its DRA alignment."""
    if outcome is None:
        return {}
    failure = outcome.failure
    if failure is not None:
        out_failure: dict[str, Any] = {"schedulable": False, "kind": failure.kind, "message": failure.message,
                                       "where": failure.where, "node": failure.node}
        if failure.map_order:
            out_failure["mapOrder"] = failure.map_order
        if outcome.explanation is not None:
            out_failure["explanation"] = outcome.explanation.to_dict()
        return {"dra": out_failure}
    out: dict[str, Any] = {"schedulable": True, "node": node_name,
                           "claims": {c.claim.key: [d.device_id for d in c.devices]
                                      for c in outcome.result.claims}}
    if outcome.result.map_order:
        out["mapOrder"] = outcome.result.map_order
    if alignment is not None:
        out["alignment"] = alignment.to_dict()
    return {"dra": out}


def report_view(machine: Machine, ledger: Any, outcomes: Mapping[str, Any], alignments: Mapping[str, Any],
                view: Any, pods: list[Pod]) -> Any:
    """admit --report: the node picture with the DRA devices of this node, held ones coloured by their
    container, and each pod's DRA alignment in its summary."""
    from numalign.answer.dra_alignment import device_place
    from numalign.report.dra import DRAChip, with_dra_devices

    chips = []
    for pod in pods:
        outcome = outcomes.get(pod.uid)
        if outcome is None or outcome.failure is not None or pod.uid not in alignments:
            continue
        used: set[str] = set()
        for c in pod.all_containers():
            for d in outcome.container_devices(c.name):
                used.add(d.device_id)
                chips.append(DRAChip(pod.key, c.name, d.claim, d.driver, d.device,
                                     device_place(machine, d).numa_node))
        for d in outcome.devices:
            if d.device_id not in used:
                chips.append(DRAChip(pod.key, "", d.claim, d.driver, d.device, device_place(machine, d).numa_node))
    free = []
    for s in ledger.slices:
        if s.node_name not in (None, ledger.node):
            continue
        for dev in s.devices:
            numa = dev.attributes.get("resource.kubernetes.io/numaNode")
            free.append((s.driver, dev.name, int(numa.values[0]) if numa is not None and numa.kind == "int" else None))
    alignment = {pod.key: alignments[pod.uid].to_dict() for pod in pods if pod.uid in alignments}
    view = with_dra_devices(view, chips, free, alignment)
    # An unschedulable pod's record says why its claims do not fit, every finding listed.
    why = {pod.key: outcomes[pod.uid].explanation for pod in pods
           if pod.uid in outcomes and outcomes[pod.uid].explanation is not None}
    if not why:
        return view
    return dataclasses.replace(view, pods=tuple(
        dataclasses.replace(p, answer={**(p.answer or {}), "why": why[p.key].lines(details=True)})
        if p.key in why else p for p in view.pods))
