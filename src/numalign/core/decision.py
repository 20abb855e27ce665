"""Admission results and the decision record: what every provider hinted, what was merged, why.

The kubelet answers a rejected pod with "Resources cannot be allocated with Topology locality" and
nothing else. The decision record keeps, per container (or per pod in pod scope), every provider's
hints per resource, the merged hint and the verdict, plus a plain-language explanation of a rejection
(which provider, which resource, which hints). It is pure data: printable and JSON-serialisable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalign.core.bitmask import bits_of
from numalign.core.hint import ProviderHints, TopologyHint, provider_hints_to_json
from numalign.core.merge import FilteredList

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True)
class AdmitResult:
    """The kubelet's PodAdmitResult: admitted, or the failure reason and message."""

    admit: bool
    reason: str = ""
    message: str = ""

    @classmethod
    def admitted(cls) -> AdmitResult:
        return cls(True)

    @classmethod
    def topology_affinity_error(cls) -> AdmitResult:
        return cls(False, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)

    @classmethod
    def from_allocation_error(cls, reason: str | None, message: str) -> AdmitResult:
        """Upstream admission.GetPodAdmitResult: typed errors keep their type, others are unexpected."""
        if reason:
            return cls(False, reason, message)
        return cls(False, UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {message}, which is unexpected")

    def to_dict(self) -> dict[str, Any]:
        return {"admit": self.admit, "reason": self.reason, "message": self.message}


def _hint_text(h: TopologyHint) -> str:
    return str(h)


MAX_RENDERED_HINTS = 12


def _hints_text(hints: Sequence[TopologyHint]) -> str:
    """At most MAX_RENDERED_HINTS hints (big machines have thousands); the JSON keeps them all."""
    shown = " ".join(_hint_text(h) for h in hints[:MAX_RENDERED_HINTS])
    rest = len(hints) - MAX_RENDERED_HINTS
    return shown if rest <= 0 else f"{shown} ... (+{rest} more)"


def _mask_text(mask: int | None) -> str:
    return "any" if mask is None else "{" + ",".join(map(str, bits_of(mask))) + "}"


@dataclass(frozen=True)
class ProviderRecord:
    provider: str
    hints: ProviderHints

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "hints": provider_hints_to_json(self.hints)}


@dataclass(frozen=True)
class ContainerDecision:
    """One merge: a container (container scope) or the whole pod (pod scope, container '')."""

    container: str
    providers: tuple[ProviderRecord, ...]
    merged: TopologyHint | None
    admit: bool
    explanation: tuple[str, ...] = ()
    allocation_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "container": self.container or None,
            "providers": [p.to_dict() for p in self.providers],
            "merged": None if self.merged is None else self.merged.to_dict(),
            "admit": self.admit,
            "explanation": list(self.explanation),
            "allocation_error": self.allocation_error,
        }


@dataclass(frozen=True)
class DecisionRecord:
    pod: str
    pod_uid: str
    policy: str
    scope: str
    options: Mapping[str, str]
    decisions: tuple[ContainerDecision, ...]
    result: AdmitResult
    allocations: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "pod_uid": self.pod_uid,
            "policy": self.policy,
            "scope": self.scope,
            "options": dict(self.options),
            "result": self.result.to_dict(),
            "decisions": [d.to_dict() for d in self.decisions],
            "allocations": dict(self.allocations),
        }

    def render(self) -> str:
        """A human-readable account, as printed by `numalign admit`."""
        verdict = "admitted" if self.result.admit else f"REJECTED: {self.result.reason}: {self.result.message}"
        lines = [f"pod {self.pod}: {verdict}", f"  policy {self.policy}, scope {self.scope}"]
        for d in self.decisions:
            who = f"container {d.container}" if d.container else "pod (all containers)"
            merged = "not merged" if d.merged is None else _hint_text(d.merged)
            lines.append(f"  {who}: merged {merged} -> {'admit' if d.admit else 'reject'}")
            for p in d.providers:
                if not p.hints:
                    lines.append(f"    {p.provider}: no preference")
                    continue
                for res in sorted(p.hints):
                    hs = p.hints[res]
                    text = "don't care" if hs is None else ("cannot be satisfied ([])" if not hs else _hints_text(hs))
                    lines.append(f"    {p.provider}/{res}: {text}")
            lines.extend(f"    why: {e}" for e in d.explanation)
            if d.allocation_error:
                lines.append(f"    allocation failed: {d.allocation_error}")
        return "\n".join(lines)


def explain(
    policy: str,
    provider_names: Sequence[str],
    lists: Sequence[FilteredList],
    original: Sequence[ProviderHints],
    merged: TopologyHint,
    admit: bool,
) -> tuple[str, ...]:
    """Why a merge was not admitted (or not preferred), naming providers, resources and hints."""
    if admit and merged.preferred:
        return ()
    out: list[str] = []

    def who(f: FilteredList) -> str:
        name = provider_names[f.provider] if f.provider < len(provider_names) else f"provider {f.provider}"
        return f"{name}/{f.resource}" if f.resource is not None else name

    for f in lists:
        if f.resource is None:
            continue
        pmap = original[f.provider] if f.provider < len(original) else None
        raw = None if not pmap else pmap.get(f.resource)
        if raw is not None and len(raw) == 0:
            out.append(
                f"{who(f)} cannot be satisfied on any NUMA placement: the provider returned no hints "
                "(not enough free capacity for the request on this node)"
            )
        elif raw is not None and not any(h.preferred for h in raw):
            out.append(f"{who(f)} has no preferred placement; it offers only " + _hints_text(raw))
        elif policy == "single-numa-node" and raw is not None and not f.hints:
            out.append(f"{who(f)} cannot fit on a single NUMA node; its hints are " + _hints_text(raw))
    if not out:
        prefs = []
        for f in lists:
            masks = sorted({h.mask for h in f.hints if h.preferred and h.mask is not None})
            if masks:
                prefs.append(f"{who(f)} prefers " + " or ".join(_mask_text(m) for m in masks))
        target = "one NUMA node" if policy == "single-numa-node" else "one common NUMA placement"
        if prefs:
            out.append(f"the preferred placements do not agree on {target}: " + "; ".join(prefs))
        else:
            out.append(f"no provider offers a preferred placement; merged result {_hint_text(merged)}")
    return tuple(out)
