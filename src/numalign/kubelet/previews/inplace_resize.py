"""Preview `inplace-resize-exclusive-cpus` (KEP-5554): an in-place resize of one container's CPUs as an
operation on a node's state, decided as kubernetes/kubernetes PR #140629 would with the gate
InPlacePodVerticalScalingExclusiveCPUs on (the CPU manager side is kubelet/cpumanager/resize.py).

The kubelet runs a resize through the allocation manager's admit handlers with the "resize" lifecycle
operation (merged k/k PR #140224): the Topology Manager asks every hint provider again for the resized
container. Memory and devices keep what they hold, so their providers answer for their current
allocation; the CPU manager answers with masks that keep the current CPUs; the configured policy merges
them, and a refusal (restricted, single-numa-node) makes the resize Infeasible. A shrink needs no hint:
it only releases CPUs added by earlier grows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from numalign.core.bitmask import bits_of
from numalign.core.decision import TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE
from numalign.errors import InvalidInputError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.previews import INPLACE_RESIZE_EXCLUSIVE_CPUS
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.cpumanager.resize import (
    GATE_OFF_MESSAGE,
    ResizeRefusedError,
    apply_resize,
    check_resize,
    nodes_of,
    resize_hints,
)
from numalign.limits import MAX_RESIZE_NUMA_NODES

RESOURCE_CPU = "cpu"
_MAX_CPUS = 1_000_000  # far past any machine: a larger count is a typo, not a question


@dataclass(frozen=True)
class ResizeResult:
    """What the resize did (or why not). CPU sets as sorted lists; `baseline` as checkpointed."""

    pod: str
    uid: str
    container: str
    requested: str
    resized: bool
    reason: str = ""
    message: str = ""
    before: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)
    baseline: list[int] = field(default_factory=list)
    affinity: list[int] | None = None  # the merged NUMA affinity of a grow (None: no Topology Manager mask)
    numa_nodes: list[int] = field(default_factory=list)  # the NUMA nodes of the CPUs after

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod, "uid": self.uid, "container": self.container, "requestedCPUs": self.requested,
            "resized": self.resized, "reason": self.reason, "message": self.message,
            "cpusBefore": self.before, "cpusAfter": self.after, "baselineCPUs": self.baseline,
            "added": sorted(set(self.after) - set(self.before)),
            "released": sorted(set(self.before) - set(self.after)),
            "affinity": self.affinity, "numaNodes": self.numa_nodes,
        }


def require_preview(node: Any) -> StaticPolicy:
    """The preview is on and the CPU manager is static; else one line saying what to add or why not."""
    if not node.previews.on(INPLACE_RESIZE_EXCLUSIVE_CPUS):
        raise InvalidInputError(
            f"resize: in-place resize of exclusive CPUs is a preview (KEP-5554, not in kubelet "
            f"{node.kubelet_version}, whose allocation manager answers: {GATE_OFF_MESSAGE}); "
            f"add --preview {INPLACE_RESIZE_EXCLUSIVE_CPUS} to model it")
    cpu = node.cpu
    if not isinstance(cpu, StaticPolicy):
        raise InvalidInputError(
            f"resize: cpuManagerPolicy is {node.config.cpu_manager_policy!r}, so no container has exclusive CPUs; "
            "this preview models the static policy (--cpu-manager-policy static); the kubelet resizes "
            "shared-pool containers without it")
    return cpu


def parse_cpus(text: str) -> int | None:
    """The new CPU count: a whole number of CPUs, None for a fractional one (the PR's exclusive-to-shared
    refusal); not a positive quantity at all is invalid input."""
    q = Quantity.parse(text, "--cpus")
    milli = q.milli_value()
    if milli <= 0 or milli > _MAX_CPUS * 1000:
        raise InvalidInputError(f"--cpus {text}: expected a CPU count between 1 and {_MAX_CPUS} (e.g. 4 or 4000m)")
    return milli // 1000 if milli % 1000 == 0 else None


def _with_cpus(pod: Pod, name: str, cpus: int) -> tuple[Pod, Container]:
    """The pod as the resize leaves it: the container's CPU request and limit both `cpus` (Guaranteed)."""
    q = Quantity.from_int(cpus)
    new: Container | None = None

    def edit(c: Container) -> Container:
        nonlocal new
        if c.name != name:
            return c
        new = replace(c, requests={**c.requests, RESOURCE_CPU: q}, limits={**c.limits, RESOURCE_CPU: q})
        return new

    out = replace(pod, init_containers=tuple(edit(c) for c in pod.init_containers),
                  containers=tuple(edit(c) for c in pod.containers))
    assert new is not None
    return out, new


def find_container(pod: Pod, name: str) -> Container:
    for c in pod.all_containers():
        if c.name == name:
            return c
    names = ", ".join(c.name for c in pod.all_containers())
    raise InvalidInputError(f"resize --container {name}: pod {pod.key} has no such container; expected one of {names}")


def resize_container(node: Any, pod: Pod, container: str, cpus_text: str) -> ResizeResult:
    """Resize `container` of the admitted `pod` to `cpus_text` CPUs on `node` (in memory; the caller
    commits with node.transaction() or drops the node for a dry run)."""
    cpu = require_preview(node)
    find_container(pod, container)
    requested = parse_cpus(cpus_text)
    base = partial(ResizeResult, pod.key, pod.uid, container, cpus_text)
    current_set = cpu.get_cpu_set(pod.uid, container) or frozenset()
    try:
        current, baseline = check_resize(cpu, pod.uid, container, requested, cpus_text)
    except ResizeRefusedError as e:
        return base(resized=False, reason=e.reason or "", message=str(e),
                            before=sorted(current_set), after=sorted(current_set))
    assert requested is not None
    new_pod, new_container = _with_cpus(pod, container, requested)
    affinity: int | None = None
    hint = None
    if requested > len(current) and node.tm.policy_name != "none":
        if node.tm.scope_name != "container":
            raise InvalidInputError(
                f"resize: topologyManagerScope {node.tm.scope_name} is not modelled by this preview (PR #140629 "
                "describes the container scope); use --topology-manager-scope container")
        numa = len(node.numa.nodes)
        if numa > MAX_RESIZE_NUMA_NODES:
            raise InvalidInputError(
                f"resize: a grow under topologyManagerPolicy {node.tm.policy_name} on {numa} NUMA nodes is not "
                f"modelled past {MAX_RESIZE_NUMA_NODES} (the resized container's hints are enumerated); use a "
                "machine of at most 16 NUMA nodes or --topology-manager-policy none")
        answers = [({RESOURCE_CPU: resize_hints(cpu, current, requested)} if p is cpu
                    else p.get_topology_hints(new_pod, new_container)) for p in node.tm.scope.providers]
        merged = node.tm.scope.policy.merge(answers)
        if not merged.admit:
            return base(resized=False, reason=TOPOLOGY_AFFINITY_ERROR,
                                message=f"{TOPOLOGY_AFFINITY_MESSAGE} (the resized container's CPUs must keep "
                                f"NUMA node(s) {','.join(map(str, nodes_of(cpu, current)))})",
                                before=sorted(current), after=sorted(current), baseline=sorted(baseline))
        hint = merged.hint
        affinity = hint.mask
    try:
        done = apply_resize(cpu, pod.uid, container, requested, affinity)
    except ResizeRefusedError as e:
        return base(resized=False, reason=e.reason or "", message=str(e),
                            before=sorted(current), after=sorted(current), baseline=sorted(baseline))
    if hint is not None:
        node.tm.scope.set_topology_hint(pod.uid, container, hint)
    node.replace_pod(new_pod)
    return base(resized=True, before=sorted(done.before), after=sorted(done.after),
                        baseline=sorted(done.baseline),
                        affinity=None if affinity is None else bits_of(affinity),
                        numa_nodes=nodes_of(cpu, done.after))
