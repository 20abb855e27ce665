"""Admitting pods on one node, in order, with the answers beside each decision: `admit_pods(node, pods)`.

This is `numalign admit` without its command line: the loop over the pods in one transaction of the
node's state (all kept, or none), `--replace`'s removal of an earlier pod of the same name, DRA's
scheduler half around each admission when the caller brings one, and beside each decision record an
admitted pod's alignment or a rejected pod's why and verified "would fit if". The result is one typed
`AdmitDocument` that answer/present/ renders as text, JSON/YAML and HTML.

    from numalign import Node, admit_pods, example, pods_from_yaml
    doc = admit_pods(Node(example("dual-socket"), config), pods)
    print("\\n".join(doc.text_lines(details=False)))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from numalign.answer.alignment import AlignmentJudge, PodAlignment, empty_node_capacity
from numalign.answer.free import numa_capacity
from numalign.answer.present.admit import AdmitDocument, DRAAnswers, PodAnswer
from numalign.answer.present.versions import version_fields, version_text
from numalign.answer.rejected import Rejected
from numalign.answer.whatif import Answer, AnswerCache
from numalign.core.decision import DecisionRecord
from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.resources import is_extended_resource_name
from numalign.kubelet.node import Node


class NodeAnswers:
    """The answers beside each decision on one node, asked right after each admission."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.judge = AlignmentJudge(node.machine, empty_node_capacity(numa_capacity(node)))
        self.cache = AnswerCache()

    def after(self, pod: Pod, rec: DecisionRecord) -> PodAlignment | Answer:
        """Call right after node.admit(pod) returned rec, before the node changes again."""
        if rec.result.admit:
            return self.judge.pod(rec.allocations)
        return self.cache.answer(self.node, Rejected(self.node, pod, rec))


class AdmitDRA(DRAAnswers, Protocol):
    """DRA's scheduler half of admitting pods on the node (claims allocated before the kubelet sees a pod,
    reserved after; the node's DRA manager keeps them in its state), and its part of the answers."""

    def before(self, node: Node, pod: Pod) -> DecisionRecord | None:
        """None: the kubelet sees the pod; else the scheduler's verdict (the pod never reaches the node)."""
        ...

    def after(self, node: Node, pod: Pod, rec: DecisionRecord) -> None: ...


def already_admitted(pod: Pod) -> str:
    """The library's words for a pod admitted twice (the command line names its options instead)."""
    return (f"pod {pod.key} (uid {pod.uid}) is already admitted on this node; expected a pod not admitted yet; "
            "pass replace=True to admit it in place of the earlier one, or give it another name (or metadata.uid)")


def admit_pods(
    node: Node,
    pods: Sequence[Pod],
    *,
    notes: Iterable[str] = (),
    replace: bool = False,
    dra: AdmitDRA | None = None,
    refuse_again: Callable[[Pod], str] = already_admitted,
    step: Callable[[str], None] | None = None,
) -> AdmitDocument:
    """Admit `pods` in order in one transaction of the node's state (all kept, or none) and answer each.

    `replace`: a pod of the same namespace/name (or uid) already on the node is removed first; without it
    such a pod is InvalidInputError with `refuse_again(pod)` as its message. `dra`: the scheduler's DRA
    half, asked before and after each admission (the claims are the node's state, written with its pods).
    `step`: called with each pod's key once it is decided. A write that fails turns the admissions into
    rejections, explained as they then stand."""
    said = list(notes)
    answers = NodeAnswers(node)
    records: list[DecisionRecord] = []
    extras: list[PodAlignment | Answer | None] = []
    with node.transaction() as tx:
        for pod in pods:
            held = [p for p in node.pods.values() if p.key == pod.key or p.uid == pod.uid]
            if held and replace and not any(r.pod_uid in {h.uid for h in held} for r in records):
                for old in held:
                    node.remove(old.uid)  # its claims' reservations end with it (kubelet/dramanager)
                said.append(f"replaced: pod {pod.key} removed from the state before admitting the new one")
            elif held:
                raise InvalidInputError(refuse_again(pod))
            unschedulable = dra.before(node, pod) if dra is not None else None
            if unschedulable is not None:  # the scheduler's verdict: the kubelet never sees the pod
                records.append(unschedulable)
                extras.append(None)
            else:
                records.append(node.admit(pod))
                extras.append(answers.after(pod, records[-1]))
                if dra is not None:
                    dra.after(node, pod, records[-1])
            if step is not None:
                step(pod.key)
    outcome = tx.outcome(records, node.pods)
    settled = [x if new is old else answers.after(pod, new)
               for pod, old, new, x in zip(pods, records, outcome, extras, strict=True)]
    version, previews = node.kubelet_version, node.previews
    return AdmitDocument(
        node.machine.name, f"{node.machine.name}; {version_text(version, previews)}", node.config, said,
        version_fields(version, previews),
        tuple(PodAnswer(pod, rec, extra, unprovided_extended_resources(pod, node))
              for pod, rec, extra in zip(pods, outcome, settled, strict=True)),
        dra)


def unprovided_extended_resources(pod: Pod, node: Node) -> tuple[str, ...]:
    """Extended resources the pod asks for that no device plugin (nor the machine file) provides. The
    kubelet drops them before its fit check (removeMissingExtendedResources: a scheduler extender may
    own them) and the device manager gives no hint, so the pod is admitted without them; the text says
    so, since "devices: no preference" alone reads as if the devices were found."""
    names = {
        name
        for c in (*pod.init_containers, *pod.containers)
        for name in (*c.requests, *c.limits)
        if is_extended_resource_name(name)
    }
    return tuple(sorted(n for n in names if not node.devices.is_device_plugin_resource(n)))
