"""Admission results and the decision record: what every hint provider hinted, what was merged, why.

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
from numalign.core.hint import TopologyHint
from numalign.core.implicit.hints import ImplicitHints, ProviderAnswer, search_masks
from numalign.core.merge import FilteredList

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
# Not a kubelet reason: the kubelet never answers (its Allocate does not return, k/k #140730). numalign
# reports such a pod as not admitted with this reason and says so instead of a verdict ("HANGS").
KUBELET_HANGS = "KubeletHangs"
# Not a kubelet reason either: the Topology Manager's merge stopped at numalign's own work bound
# (core/implicit/merge.py, docs/fidelity.md), where the kubelet would walk every permutation of its hint
# lists. The pod is rejected with it and the bound's line as the message; other pods are decided as ever.
MERGE_WORK_BOUND = "TopologyMergeWorkBound"


@dataclass(frozen=True)
class AdmitResult:
    """The kubelet's PodAdmitResult: admitted, or the failure reason and message."""

    admit: bool
    reason: str = ""
    message: str = ""

    def __init__(self, admit: bool, reason: str = "", message: str = "") -> None:
        # Written out, as for every record of an admission below: the dataclass decorator's generated
        # __init__ is interpreted Python even in the compiled core (mypyc keeps one written here native).
        object.__setattr__(self, "admit", admit)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "message", message)

    @classmethod
    def admitted(cls) -> AdmitResult:
        return _ADMITTED if cls is AdmitResult else cls(True)  # a value: one instance serves every admission

    @classmethod
    def topology_affinity_error(cls) -> AdmitResult:
        return cls(False, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)

    @classmethod
    def merge_work_bound(cls, message: str) -> AdmitResult:
        return cls(False, MERGE_WORK_BOUND, message)

    @classmethod
    def from_allocation_error(cls, reason: str | None, message: str) -> AdmitResult:
        """Upstream admission.GetPodAdmitResult: typed errors keep their type, others are unexpected."""
        if reason:
            return cls(False, reason, message)
        return cls(False, UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {message}, which is unexpected")

    @property
    def hangs(self) -> bool:
        """The kubelet gives no answer at all: it hangs deciding this pod."""
        return self.reason == KUBELET_HANGS

    def verdict(self) -> str:
        """`admitted`, `REJECTED: reason: message`, or `HANGS: message` (no kubelet answer)."""
        if self.admit:
            return "admitted"
        return f"HANGS: {self.message}" if self.hangs else f"REJECTED: {self.reason}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"admit": self.admit, "reason": self.reason, "message": self.message}
        if self.hangs:
            out["hangs"] = True
        return out


_ADMITTED = AdmitResult(True)


def hint_text(h: TopologyHint) -> str:
    """A hint as explanations and the record's text (answer/present/admit.py) write it."""
    # Past 8 nodes (the kubelet's default limit) the mask is written as ranges: {0-63}P, not 64 numbers.
    if h.mask is not None and h.mask.bit_count() > 8:
        return _nodes_text(h.mask) + ("P" if h.preferred else "")
    return str(h)


MAX_RENDERED_HINTS = 12


def hints_text(hints: Sequence[TopologyHint]) -> str:
    """At most MAX_RENDERED_HINTS hints (big machines have thousands); the JSON keeps them all."""
    shown = " ".join(hint_text(h) for h in hints[:MAX_RENDERED_HINTS])
    rest = len(hints) - MAX_RENDERED_HINTS
    return shown if rest <= 0 else f"{shown} ... (+{rest} more)"


def _nodes_text(mask: int) -> str:
    """NUMA ids as ranges ({0-33}): implicit lists span whole machines of up to 64 nodes."""
    runs: list[list[int]] = []
    for n in bits_of(mask):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return "{" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) + "}"


def _preferred_sizes_text(src: ImplicitHints) -> str:
    if src.pref_sizes is None:
        return "masks spanning the fewest sockets"
    return "masks of " + " or ".join(map(str, sorted(src.pref_sizes))) + " node(s)"


def implicit_text(src: ImplicitHints) -> str:
    """An implicit list in words: what defines its members, never the members (up to 2^N of them)."""
    text = f"any mask of nodes {_nodes_text(src.top)} that can hold the request" if src.up_pass is not None else ""
    if src.extras:
        listed = hints_text(src.extras)
        text = f"{text}, and {listed}" if text else listed
    return f"{text} (narrowest: {src.min_count} node(s); preferred: {_preferred_sizes_text(src)})"


def _source_text(src: Sequence[TopologyHint] | ImplicitHints) -> str:
    return implicit_text(src) if isinstance(src, ImplicitHints) else hints_text(src)


def implicit_to_dict(src: ImplicitHints) -> dict[str, Any]:
    """The JSON form of an implicit list in a decision record ."""
    return {
        "implicit": True,
        "label": src.label,
        "nodes": bits_of(src.top) if src.up_pass is not None else [],
        "narrowest_count": src.min_count,
        "preferred_counts": None if src.pref_sizes is None else sorted(src.pref_sizes),
        "listed": [h.to_dict() for h in src.extras],
    }


def provider_answer_to_json(hints: ProviderAnswer) -> dict[str, Any] | None:
    """provider_hints_to_json for answers that may hold implicit lists (explicit ones unchanged)."""
    if hints is None:
        return None
    out: dict[str, Any] = {}
    for r, hs in hints.items():
        if hs is None:
            out[r] = None
        elif isinstance(hs, ImplicitHints):
            out[r] = implicit_to_dict(hs)
        else:
            out[r] = [h.to_dict() for h in hs]
    return out


def has_preferred(src: Sequence[TopologyHint] | ImplicitHints) -> bool:
    """Does the list hold a preferred hint (an implicit one is searched, not listed)."""
    if not isinstance(src, ImplicitHints):
        return any(h.preferred for h in src)
    if any(h.preferred for h in src.extras):
        return True
    if src.up_pass is None or not src.has_up():
        return False
    nodes = bits_of(src.top)
    sizes = sorted(src.pref_sizes) if src.pref_sizes is not None else range(1, len(nodes) + 1)
    for c in sizes:

        def leaf(m: int) -> bool:
            return src.in_up(m) and src.is_preferred(m)

        def prune(inc: int, allowed: int, c: int = c) -> bool:
            return src.bound(inc, allowed, c)

        if next(search_masks(nodes, c, leaf, prune), None) is not None:
            return True
    return False


def _mask_text(mask: int | None) -> str:
    # Past 8 nodes (the kubelet's default limit) ids are written as ranges: {0-63}, not 64 numbers.
    if mask is not None and mask.bit_count() > 8:
        return _nodes_text(mask)
    return "any" if mask is None else "{" + ",".join(map(str, bits_of(mask))) + "}"


@dataclass(frozen=True)
class ProviderRecord:
    provider: str
    hints: ProviderAnswer  # explicit lists, or implicit ones on large machines (see providers/implicit)

    def __init__(self, provider: str, hints: ProviderAnswer) -> None:
        object.__setattr__(self, "provider", provider)
        object.__setattr__(self, "hints", hints)

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "hints": provider_answer_to_json(self.hints)}


@dataclass(frozen=True)
class ContainerDecision:
    """One merge: a container (container scope) or the whole pod (pod scope, container '')."""

    container: str
    providers: tuple[ProviderRecord, ...]
    merged: TopologyHint | None
    admit: bool
    explanation: tuple[str, ...] = ()
    allocation_error: str | None = None
    # Implicit merges only: the candidates that became the best so far, then the winner (bounded).
    considered: tuple[TopologyHint, ...] = ()

    def __init__(self, container: str, providers: tuple[ProviderRecord, ...], merged: TopologyHint | None,
                 admit: bool, explanation: tuple[str, ...] = (), allocation_error: str | None = None,
                 considered: tuple[TopologyHint, ...] = ()) -> None:
        object.__setattr__(self, "container", container)
        object.__setattr__(self, "providers", providers)
        object.__setattr__(self, "merged", merged)
        object.__setattr__(self, "admit", admit)
        object.__setattr__(self, "explanation", explanation)
        object.__setattr__(self, "allocation_error", allocation_error)
        object.__setattr__(self, "considered", considered)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "container": self.container or None,
            "providers": [p.to_dict() for p in self.providers],
            "merged": None if self.merged is None else self.merged.to_dict(),
            "admit": self.admit,
            "explanation": list(self.explanation),
            "allocation_error": self.allocation_error,
        }
        if self.considered:
            out["considered"] = [h.to_dict() for h in self.considered]
        return out


@dataclass(frozen=True)
class MemoryBlock:
    """A container's memory block: `size` bytes of one resource (memory, hugepages-<size>) on a set of
    NUMA nodes, as the memory manager's Static policy assigns it."""

    type: str
    size: int
    numa_nodes: tuple[int, ...]

    def __init__(self, type: str, size: int, numa_nodes: tuple[int, ...]) -> None:
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "numa_nodes", numa_nodes)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "size": self.size, "numa_nodes": list(self.numa_nodes)}


@dataclass(frozen=True)
class ContainerAllocation:
    """What a container was given: its CPUs (exclusive, or the shared pool), memory blocks, and device
    IDs per resource with each device's NUMA nodes (None: the device reports no topology).

    `cpus_text` is the CPU set as the kubelet writes it (Go's cpuset String, k8s.cpuset.format_cpuset),
    given by the builder: core formats no cpusets, and a node shares one text among the containers of
    its shared pool."""

    cpus: tuple[int, ...] = ()  # ascending
    exclusive: bool = False
    memory: tuple[MemoryBlock, ...] = ()
    devices: Mapping[str, Mapping[str, tuple[int, ...] | None]] = field(default_factory=dict)
    cpus_text: str = ""

    def __init__(self, cpus: tuple[int, ...] = (), exclusive: bool = False, memory: tuple[MemoryBlock, ...] = (),
                 devices: Mapping[str, Mapping[str, tuple[int, ...] | None]] | None = None,
                 cpus_text: str = "") -> None:
        object.__setattr__(self, "cpus", cpus)
        object.__setattr__(self, "exclusive", exclusive)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "devices", {} if devices is None else devices)
        object.__setattr__(self, "cpus_text", cpus_text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus": self.cpus_text,
            "exclusive_cpus": self.exclusive,
            "memory": [b.to_dict() for b in self.memory],
            "devices": {res: {d: None if t is None else list(t) for d, t in ids.items()}
                        for res, ids in self.devices.items()},
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
    allocations: Mapping[str, ContainerAllocation] = field(default_factory=dict)

    def __init__(self, pod: str, pod_uid: str, policy: str, scope: str, options: Mapping[str, str],
                 decisions: tuple[ContainerDecision, ...], result: AdmitResult,
                 allocations: Mapping[str, ContainerAllocation] | None = None) -> None:
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "pod_uid", pod_uid)
        object.__setattr__(self, "policy", policy)
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "decisions", decisions)
        object.__setattr__(self, "result", result)
        object.__setattr__(self, "allocations", {} if allocations is None else allocations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "pod_uid": self.pod_uid,
            "policy": self.policy,
            "scope": self.scope,
            "options": dict(self.options),
            "result": self.result.to_dict(),
            "decisions": [d.to_dict() for d in self.decisions],
            "allocations": {name: a.to_dict() for name, a in self.allocations.items()},
        }


def explain(
    policy: str,
    provider_names: Sequence[str],
    lists: Sequence[FilteredList],
    original: Sequence[ProviderAnswer],
    merged: TopologyHint,
    admit: bool,
) -> tuple[str, ...]:
    """Why a merge was not admitted (or not preferred), naming providers, resources and hints.

    `lists` are the merged lists (implicit ones are described, not listed)."""
    if admit and merged.preferred:
        return ()
    out: list[str] = []

    def who(f: FilteredList) -> str:
        name = provider_names[f.provider] if f.provider < len(provider_names) else f"hint provider {f.provider}"
        return f"{name}/{f.resource}" if f.resource is not None else name

    for f in lists:
        if f.resource is None:
            continue
        pmap = original[f.provider] if f.provider < len(original) else None
        raw = None if not pmap else pmap.get(f.resource)
        if raw is not None and not isinstance(raw, ImplicitHints) and len(raw) == 0:
            out.append(
                f"{who(f)} cannot be satisfied on any NUMA placement: the hint provider returned no hints "
                "(not enough free capacity for the request on this node)"
            )
        elif raw is not None and not has_preferred(raw):
            out.append(f"{who(f)} has no preferred placement; it offers only " + _source_text(raw))
        elif policy == "single-numa-node" and raw is not None and not f.hints:
            out.append(f"{who(f)} cannot fit on a single NUMA node; its hints are " + _source_text(raw))
    if not out:
        prefs = []
        for f in lists:
            hs = f.hints
            if isinstance(hs, ImplicitHints):
                within = f" within {_nodes_text(hs.top)}" if hs.up_pass is not None else ""
                listed = sorted({h.mask for h in hs.extras if h.preferred and h.mask is not None})
                also = "".join(f" or {_mask_text(m)}" for m in listed)
                prefs.append(f"{who(f)} prefers {_preferred_sizes_text(hs)}{within}{also}")
                continue
            masks = sorted({h.mask for h in hs if h.preferred and h.mask is not None})
            if masks:
                prefs.append(f"{who(f)} prefers " + " or ".join(_mask_text(m) for m in masks))
        target = "one NUMA node" if policy == "single-numa-node" else "one common NUMA placement"
        if prefs:
            out.append(f"the preferred placements do not agree on {target}: " + "; ".join(prefs))
        else:
            out.append(f"no hint provider offers a preferred placement; merged result {hint_text(merged)}")
    return tuple(out)
