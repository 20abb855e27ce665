"""What `numalign admit` answers, as one typed document rendered three ways: `to_dict()` is the
`-o json|yaml` document, `text_lines()` the text, and present/html.py the --report page, all from the
same `AdmitDocument` (answer/admit.py makes it).

Each pod's answer (`PodAnswer`) is its decision record, its alignment (admitted) or why and would-fit-if
(rejected), the extended resources no device plugin provides, and DRA's part when the pods use claims.
Text stays readable at thousands of pods: past FULL_RECORDS_UP_TO pods each gets a few lines, rejected
pods of one shape share a line, and the summary comes first (present/text.py renders the parts); JSON and
YAML keep everything.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from numalign.answer.alignment import PodAlignment
from numalign.answer.present.keys import camel_keys
from numalign.answer.present.text import (
    FULL_RECORDS_UP_TO,
    allocation_line,
    clip,
    compact_lines,
    pod_shape,
    requested_resources,
    summary_lines,
    text_lines,
)
from numalign.answer.whatif import Answer
from numalign.core.decision import DecisionRecord, hint_text, hints_text, implicit_text
from numalign.core.implicit.hints import ImplicitHints
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Pod


def record_text(rec: DecisionRecord) -> str:
    """A decision record as text: the verdict, the policy and scope, then per container (or pod) the merged
    hint, each hint provider's hints per resource, the hints considered, why, and an allocation error."""
    lines = [f"pod {rec.pod}: {rec.result.verdict()}", f"  policy {rec.policy}, scope {rec.scope}"]
    for d in rec.decisions:
        who = f"container {d.container}" if d.container else "pod (all containers)"
        merged = "not merged" if d.merged is None else hint_text(d.merged)
        lines.append(f"  {who}: merged {merged} -> {'admit' if d.admit else 'reject'}")
        for p in d.providers:
            if not p.hints:
                lines.append(f"    {p.provider}: no preference")
                continue
            for res in sorted(p.hints):
                hs = p.hints[res]
                if hs is None:
                    text = "don't care"
                elif isinstance(hs, ImplicitHints):
                    text = implicit_text(hs)
                else:
                    text = "cannot be satisfied ([])" if not hs else hints_text(hs)
                lines.append(f"    {p.provider}/{res}: {text}")
        if d.considered:
            lines.append(f"    considered: {hints_text(d.considered)}")
        lines.extend(f"    why: {e}" for e in d.explanation)
        if d.allocation_error:
            lines.append(f"    allocation failed: {d.allocation_error}")
    return "\n".join(lines)


class DRAAnswers(Protocol):
    """DRA's part of the answers (the command line's DRAAdmit): read when rendered, not before."""

    def unschedulable(self, pod: Pod) -> bool: ...
    def verdict_lines(self, pod: Pod, details: bool) -> list[str]: ...
    def text_lines(self, pod: Pod) -> list[str]: ...
    def to_json(self, pod: Pod) -> dict[str, Any]: ...


def extra_dict(extra: PodAlignment | Answer) -> dict[str, Any]:
    """An admitted pod's alignment, or a rejected pod's answer, as its JSON field."""
    if isinstance(extra, PodAlignment):
        return {"alignment": extra.to_dict()}
    return {"answer": extra.to_dict()}


def config_dict(config: KubeletConfig) -> dict[str, Any]:
    """The resource-manager settings in effect, under their KubeletConfiguration names."""
    return {
        "topologyManagerPolicy": config.topology_manager_policy,
        "topologyManagerScope": config.topology_manager_scope,
        "topologyManagerPolicyOptions": dict(config.topology_manager_policy_options),
        "cpuManagerPolicy": config.cpu_manager_policy,
        "cpuManagerPolicyOptions": dict(config.cpu_manager_policy_options),
        "memoryManagerPolicy": config.memory_manager_policy,
    }


SCHEMA_VERSION = 1  # of admit's JSON/YAML document; docs/changelog.md lists what each version changed

def sorted_keys(value: Any) -> Any:
    """`value` with every mapping's keys in sorted order (json's sort_keys, applied before the top level
    is laid out by hand)."""
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


@dataclass(frozen=True)
class PodAnswer:
    """One pod's answer. `extra`: the alignment of an admitted pod, why and would-fit-if of a rejected
    one, None when the kubelet never saw the pod (DRA: unschedulable)."""

    pod: Pod
    record: DecisionRecord
    extra: PodAlignment | Answer | None
    unprovided: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The record with its answer (without DRA's part: AdmitDocument adds it)."""
        return self.record.to_dict() | (extra_dict(self.extra) if self.extra is not None else {})

    def full_lines(self, details: bool) -> list[str]:
        """The whole record, the allocations, the answer and the notes (before `details` clipping)."""
        rec, extra = self.record, self.extra
        lines = record_text(rec).splitlines()
        if rec.result.admit and isinstance(extra, PodAlignment):  # an admitted pod's extra is its alignment
            by_name = {c.container: c for c in extra.containers}
            lines += [allocation_line(cname, alloc, by_name.get(cname)) for cname, alloc in rec.allocations.items()]
        if extra is not None:
            lines += text_lines(extra, rec.result.reason == "TopologyAffinityError",
                                requested=requested_resources(self.pod), details=details)
        for name in self.unprovided:
            if rec.result.admit:
                lines.append(f"  note: no device plugin provides {name} on this machine; the kubelet admits the pod "
                             "without those devices")
            else:
                lines.append(f"  note: no device plugin provides {name} on this machine; the kubelet leaves that "
                             "request out of admission, so it is not why the pod was rejected")
        return lines


@dataclass(frozen=True)
class AdmitDocument:
    """`numalign admit`'s answer for all its pods. `where`: the machine's name and the kubelet version
    as the text's first line names them; `version`: the same as JSON fields."""

    machine: str
    where: str
    config: KubeletConfig
    notes: Sequence[str]
    version: Mapping[str, Any]
    pods: tuple[PodAnswer, ...]
    dra: DRAAnswers | None = None

    def to_dict(self, details: bool = False) -> dict[str, Any]:
        """The `-o json|yaml` document (docs/schemas/admit.schema.json): the summary first, then the node and
        the pods, keys in one style (Kubernetes API camelCase). A rejection identical to an earlier one (the
        same reason, message and pod shape, as the text folds it) is the pod, its result and `sameAs` the
        first such pod, which counts them in `identicalRejections`; `details` keeps every pod whole."""
        dra = self.dra
        pods: list[dict[str, Any]] = []
        first: dict[tuple[object, ...], dict[str, Any]] = {}
        for answer in self.pods:
            rec, pod = answer.record, answer.pod
            unschedulable = dra is not None and dra.unschedulable(pod)
            if not rec.result.admit and not details and not unschedulable:
                same = (rec.result.reason, rec.result.message, pod_shape(pod))
                earlier = first.get(same)
                if earlier is not None:
                    earlier["identicalRejections"] = earlier.get("identicalRejections", 0) + 1
                    pods.append({"pod": rec.pod, "podUID": rec.pod_uid, "result": rec.result.to_dict(),
                                 "sameAs": earlier["pod"]})
                    continue
            entry = camel_keys(answer.to_dict() | (dra.to_json(pod) if dra is not None else {}))
            if not rec.result.admit and not details and not unschedulable:
                first[(rec.result.reason, rec.result.message, pod_shape(pod))] = entry
            pods.append(entry)
        body = {"machine": self.machine, "kubeletConfig": config_dict(self.config), "notes": list(self.notes),
                **self.version, "pods": pods}
        # Keys sorted as before at every level below the top, whose order reads summary first.
        return {"schemaVersion": SCHEMA_VERSION, "summary": self.summary(), **sorted_keys(body)}

    def summary(self) -> dict[str, Any]:
        """How many pods were admitted, and the rejections by reason (most first) with their counts."""
        reasons: dict[str, int] = {}
        for p in self.pods:
            if not p.record.result.admit:
                reasons[p.record.result.reason] = reasons.get(p.record.result.reason, 0) + 1
        admitted = sum(1 for p in self.pods if p.record.result.admit)
        return {"pods": len(self.pods), "admitted": admitted, "rejected": len(self.pods) - admitted,
                "rejectedBy": [{"reason": r, "pods": n} for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])]}

    def text_lines(self, details: bool) -> list[str]:
        """The text, one element per printed line (a wrapped note is one element). Past
        FULL_RECORDS_UP_TO pods, unless `details`, each pod gets a few lines."""
        config, dra = self.config, self.dra
        out = [f"machine {self.where}; topologyManagerPolicy {config.topology_manager_policy}, "
               f"scope {config.topology_manager_scope}, cpuManagerPolicy {config.cpu_manager_policy}, "
               f"memoryManagerPolicy {config.memory_manager_policy}"]
        # Notes are wrapped, never cut: each says what numalign assumed.
        out += ["\n".join(textwrap.wrap(f"# {n}", 200, subsequent_indent="#   ", break_on_hyphens=False))
                for n in self.notes]
        # The summary first, so that the answer to "how many fit?" is on the first screen at any size.
        out += summary_lines([p.record for p in self.pods], [p.pod for p in self.pods])
        compact = not details and len(self.pods) > FULL_RECORDS_UP_TO
        if compact:
            out.append("")
        first_rejected: dict[tuple[object, ...], str] = {}  # (reason, message, shape) -> the first such pod
        # Repeats of one rejection in a row share a line: 3,000 replicas on a full node were 2,890 lines
        # saying the same thing, between the summary and the end of the answer.
        run: list[str] = []  # the pods of the current run of repeats, in order
        run_of: tuple[object, ...] | None = None

        def end_run() -> None:
            if run and run_of is not None:
                reason, as_pod = run_of[0], first_rejected[run_of]
                who = f"pod {run[0]}" if len(run) == 1 else f"pods {run[0]} to {run[-1]} ({len(run)} in a row)"
                out.append(f"{who}: REJECTED: {reason} (as {as_pod}, the same pod shape)")
                run.clear()

        for answer in self.pods:
            rec, pod = answer.record, answer.pod
            if dra is not None and dra.unschedulable(pod):
                end_run()
                head, *why = dra.verdict_lines(pod, details)
                out += [("" if compact else "\n") + head, *(line if details else clip(line) for line in why)]
                continue
            if not rec.result.admit and not details:
                same = (rec.result.reason, rec.result.message, pod_shape(pod))
                if same in first_rejected:
                    if same != run_of:
                        end_run()
                    run_of = same
                    run.append(rec.pod)
                    continue
                first_rejected[same] = rec.pod
            end_run()
            dra_lines = dra.text_lines(pod) if dra is not None else []
            if compact:
                assert answer.extra is not None, "a pod the kubelet saw has its answer"
                out += [clip(line) for line in [*compact_lines(rec, answer.extra, pod), *dra_lines]]
                continue
            out.append("")
            out += [line if details else clip(line) for line in [*answer.full_lines(details), *dra_lines]]
        end_run()
        return out
