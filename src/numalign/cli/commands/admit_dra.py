"""`numalign admit` with DRA: the pods' ResourceClaims allocated on this node as the scheduler would
when it picks this node, before the kubelet decides CPUs, memory and device-plugin devices as it always
does (its Topology Manager ignores DRA devices). A pod whose claims cannot be allocated never reaches
the kubelet: it is unschedulable on this node, said as the scheduler says it.

The hooks admit.py calls: `load` (pods and DRA objects from the same files), `DRAAdmit.before` /
`after` around node.admit, and the text and JSON each pod gets.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.answer.present.dra import claim_lines, dra_json, report_view, verdict_lines
from numalign.core.decision import AdmitResult, DecisionRecord
from numalign.errors import InvalidInputError
from numalign.k8s.dra.types import DRAObjects
from numalign.k8s.pod import Pod

if TYPE_CHECKING:
    from numalign.cli.commands.admit_request import AdmitRequest

UNSCHEDULABLE = "Unschedulable"  # the PodScheduled condition's reason
SCHEDULER_ERROR = "SchedulerError"


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-name", metavar="NAME",
                   help="DRA: the node the pods' ResourceClaims are allocated on (the ResourceSlices' nodeName); "
                   "default: the one node the slices name, else the snapshot's node, else the machine's name")
    p.add_argument("--dra-driver", action="append", default=[], metavar="cpu[=SETTINGS]|memory",
                   help="DRA: publish the ResourceSlices dra-driver-cpu (driver dra.cpu, with its DeviceClass dra.cpu; "
                   "SETTINGS individual (the default here), grouped (by NUMA node), numanode, socket or machine, or "
                   "the driver's own cpuDeviceMode=..., groupBy=..., reservedCPUs=... comma-separated; the reserved "
                   "CPUs are left out) or dra-driver-memory (driver dra.memory) would publish for this machine, so "
                   "claims can take CPUs and memory through DRA (docs/dra.md); repeat for both")


def load(pod_files: list[Path], replicas: int | None, notes: list[str],
         snapshot: Any = None) -> tuple[list[Pod], DRAObjects]:
    """Pods and DRA objects from the files, as `kubectl apply -f` takes them. A file of DRA objects
    alone (a `kubectl get resourceslices,deviceclasses,resourceclaims -A -o json` dump) is fine; a
    node snapshot's dump (`snapshot --dra-objects`) is read first, so the files given win."""
    from numalign.adapters.textfiles import load_documents, source_name
    from numalign.cli.options.podargs import expansion_notes
    from numalign.k8s.dra.documents import EXPECTED_WITH_DRA, pods_and_dra_from_documents
    from numalign.k8s.manifest import SUPPORTED_KINDS, Expansion
    from numalign.k8s.podfields import unknown_pod_field_warnings

    pods: list[Pod] = []
    objects = DRAObjects()
    kept = getattr(snapshot, "dra_objects", None)
    if kept is not None:
        docs = load_documents(kept, "the snapshot's DRA objects", EXPECTED_WITH_DRA)
        _, dra = pods_and_dra_from_documents(docs, f"{snapshot.path}:dra/objects.json", skipped=[])
        objects.merge(dra)
        notes.append(f"DRA objects from the snapshot: {len(dra)}")
    for f in pod_files:
        skipped: list[str] = []
        expansion = Expansion(replicas)  # workloads give spec.replicas pods unless --replicas N says
        docs = load_documents(f, "the manifest", EXPECTED_WITH_DRA)
        found, dra = pods_and_dra_from_documents(docs, source_name(f), expand_replicas=expansion,
                                                 skipped=skipped)
        for message in unknown_pod_field_warnings(docs, source_name(f)):  # after the reader's own errors
            print(f"warning: {message}", file=sys.stderr)
        notes.extend(skipped)
        notes.extend(expansion_notes(source_name(f), expansion))
        if not found and not len(dra):
            raise InvalidInputError(
                f"{source_name(f)}: no Pod (or workload with a pod template) found"
                + (f" ({len(skipped)} other object(s) skipped, e.g. {skipped[0]})" if skipped else "")
                + f"; expected a manifest of kind {', '.join(SUPPORTED_KINDS)} (or DRA objects beside pods); check "
                "that the input is the one you meant and is not empty"
            )
        pods.extend(found)
        objects.merge(dra)
    if not pods:
        raise InvalidInputError(
            f"{', '.join(source_name(f) for f in pod_files)}: DRA objects but no Pod found; expected pods too (in "
            "the same files or another one named beside them)"
        )
    return pods, objects


def node_name_of(machine: Any) -> str:
    """The machine's name when it can name a node (a DNS subdomain), else "node" (a shorthand's text)."""
    import re

    name = str(machine.name)
    return name if len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) else "node"


class DRAAdmit:
    """The scheduler's DRA half of admitting pods on one node, and what it adds to the output."""

    def __init__(self, req: AdmitRequest, objects: DRAObjects, node: Any, notes: list[str]) -> None:
        from numalign.machine.dra import machine_slices
        from numalign.scheduler.dra.features import dra_enabled
        from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

        machine = self.machine = req.machine
        # Gate off (1.33's default): the API server drops spec.resourceClaims, so pods are scheduled and
        # admitted without their claims' devices.
        self.enabled = dra_enabled(str(node.kubelet_version), None)
        name = self._node_name(req, objects)
        extra = machine_slices(machine, name) + _driver_slices(req.dra_drivers, machine, name, node)
        if any(s.driver == "dra.cpu" for s in extra) and "dra.cpu" not in objects.classes:
            from numalign.machine.dradrivers import cpu_device_class

            # The driver's Helm chart installs its DeviceClass; one given in the files wins.
            objects.classes["dra.cpu"] = cpu_device_class()
        self.node = node
        from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle

        # The kubelet's side (the node's DRA manager: what its pods' claims hold, kept in the state
        # directory with the pod record) around the scheduler's view of this node over the same objects.
        self.life: ClaimLifecycle[PodClaims] = ClaimLifecycle(
            node.dra, objects, lambda view: NodeDRA(view, name, version=node.kubelet_version, extra_slices=extra,
                                                  explain_failures=True))
        self.outcomes: dict[str, Any] = {}  # pod uid -> PodClaims
        self.alignments: dict[str, Any] = {}  # pod uid -> PodDRAAlignment
        devices = sum(len(s.devices) for s in self.dra.slices if s.node_name in (None, name))
        if not self.enabled:
            notes.append(f"DRA: the DynamicResourceAllocation feature gate is off by default in "
                         f"{node.kubelet_version}: the API server drops the pods' resourceClaims, so no device is "
                         "allocated and the kubelet admits the pods without them")
            return
        from numalign.k8s.previews import DRA_TOPOLOGY_HINTS

        self.hints: Any = None
        if node.previews.on(DRA_TOPOLOGY_HINTS):
            from numalign.kubelet.previews.dra_hints import DRAHintProvider

            # Preview (k/k PR #139982, closed): the claims' devices become Topology Manager hints.
            self.hints = DRAHintProvider()
            node.tm.add_hint_provider(self.hints)
            notes.append(f"preview: {DRA_TOPOLOGY_HINTS}=true: DRA devices with a NUMA node are Topology Manager "
                         "hints (the design of the closed k/k PR #139982; no kubelet release does this)")
        held = len(node.dra.held())
        if held:  # the state directory's, or a snapshot's
            where = node.store.name if node.store is not None else "the node"
            notes.append(f"DRA: {held} claim(s) allocated by earlier runs on {where} keep their devices "
                         "(numalign_pods.json)")
        notes.append(f"DRA: claims are allocated on node {name} as the scheduler's DynamicResources plugin does "
                     f"({devices} device(s) in {len(self.dra.slices)} ResourceSlice(s), {len(objects.classes)} "
                     "DeviceClass(es)); the Topology Manager ignores DRA devices, as every kubelet release does")

    @property
    def dra(self) -> Any:
        """The scheduler's view of this node (scheduler.dra.scheduling.NodeDRA) as the node holds its claims now."""
        return self.life.ledger

    @staticmethod
    def _node_name(req: AdmitRequest, objects: DRAObjects) -> str:
        if req.node_name:
            return req.node_name
        names = sorted({s.node_name for s in objects.slices if s.node_name})
        if len(names) == 1:
            return names[0]
        if len(names) > 1:
            raise InvalidInputError(
                f"the ResourceSlices name {len(names)} nodes ({', '.join(names[:5])}"
                f"{', ...' if len(names) > 5 else ''}); expected the slices of one node; pass --node-name NAME to "
                "say which is this node"
            )
        snap = req.snapshot
        return str(snap.node_name) if snap is not None else node_name_of(req.machine)

    @staticmethod
    def wanted(pods: list[Pod], objects: DRAObjects, machine: Any) -> bool:
        return any(p.resource_claims for p in pods)

    def before(self, node: Any, pod: Pod) -> DecisionRecord | None:
        """Allocate the pod's claims; a record when the pod is unschedulable here (the kubelet never sees it)."""
        outcome = self.life.allocate(pod) if self.enabled else None
        if outcome is None:
            return None
        self.outcomes[pod.uid] = outcome
        failure = outcome.failure
        if failure is None:
            if self.hints is not None:
                from numalign.answer.dra_alignment import hint_nodes

                self.hints.set_pod(pod.uid, hint_nodes(self.machine, outcome))
            return None
        reason = UNSCHEDULABLE if failure.unschedulable else SCHEDULER_ERROR
        return DecisionRecord(pod.key, pod.uid, node.tm.policy_name, node.tm.scope_name, dict(node.tm.options), (),
                              AdmitResult(False, reason, failure.line()))

    def after(self, node: Any, pod: Pod, rec: DecisionRecord) -> None:
        """The kubelet admitted (or rejected) the pod: an admitted pod's claims are reserved for it."""
        from numalign.answer.dra_alignment import pod_alignment

        outcome = self.outcomes.get(pod.uid)
        if outcome is None or outcome.failure is not None or not rec.result.admit:
            return
        self.life.commit(outcome)  # reserved in the node's DRA manager: written with the pod record
        previews = ("dra-topology-hints=true",) if self.hints is not None else ()
        alignment = pod_alignment(node.machine, outcome, rec.allocations, previews)
        if alignment.misaligned:  # what would align it, each option run on this node (answer/dra_whatif.py)
            from numalign.answer.dra_whatif import aligned_if, with_options

            alignment = with_options(alignment, *aligned_if(node, pod, outcome, self.dra, rec.allocations))
        self.alignments[pod.uid] = alignment

    # ---- output ------------------------------------------------------------------------------
    def unschedulable(self, pod: Pod) -> bool:
        outcome = self.outcomes.get(pod.uid)
        return outcome is not None and outcome.failure is not None

    def verdict_lines(self, pod: Pod, details: bool) -> list[str]:
        return verdict_lines(pod, self.outcomes[pod.uid], details)

    def text_lines(self, pod: Pod) -> list[str]:
        return claim_lines(self.node, self.machine, pod, self.outcomes.get(pod.uid), self.alignments.get(pod.uid))

    def to_json(self, pod: Pod) -> dict[str, Any]:
        return dra_json(self.dra.node, self.outcomes.get(pod.uid), self.alignments.get(pod.uid))

    def report_view(self, view: Any, pods: list[Pod]) -> Any:
        """admit --report: the node picture with this node's DRA devices (answer/present/dra.py)."""
        return report_view(self.machine, self.dra, self.outcomes, self.alignments, view, pods)


def _driver_slices(specs: tuple[str, ...], machine: Any, node_name: str, node: Any) -> list[Any]:
    """--dra-driver cpu[=SETTINGS] / memory: the slices those drivers publish for this machine."""
    from numalign.machine.dradrivers import driver_slices

    cpu_mode, reserved, memory = parse_drivers(specs, machine)
    if cpu_mode is None and not memory:
        return []
    if cpu_mode is not None and reserved is None:
        reserved = kubelet_reserved_cpus(node)
    return driver_slices(machine, node_name, cpu_mode, memory, reserved or frozenset())


def parse_drivers(specs: tuple[str, ...], machine: Any) -> tuple[str | None, frozenset[int] | None, bool]:
    """--dra-driver's values: (the CPU driver's mode or None, its reservedCPUs or None, memory driver on).
    Checked whether or not a pod has claims, so a mistyped value is refused, never silently unused."""
    from numalign.machine.dradrivers import CPU_DRIVER_SYNTAX, parse_cpu_driver

    cpu_mode: str | None = None
    reserved: frozenset[int] | None = None
    memory = False
    for spec in specs:
        name, sep, settings = spec.partition("=")
        if name == "cpu" and cpu_mode is None:
            cpu_mode, reserved = parse_cpu_driver(settings, f"--dra-driver {spec}")
            _check_reserved_on(machine, reserved, f"--dra-driver {spec}")
        elif name == "memory" and not sep and not memory:
            memory = True
        else:
            raise InvalidInputError(f"--dra-driver {spec}: expected {CPU_DRIVER_SYNTAX} or memory, each once")
    return cpu_mode, reserved, memory


def _check_reserved_on(machine: Any, reserved: frozenset[int] | None, where: str) -> None:
    """dra-driver-cpu's reservedCPUs must name CPUs of this machine. The driver would drop unknown ids and
    publish every CPU (nothing reserved, silently); numalign refuses them as the kubelet refuses such a
    reservedSystemCPUs (the driver's docs ask for the two to be the same set). A count such as
    reservedCPUs=200 is read as CPU id 200, which the line says."""
    if not reserved:
        return
    from numalign.k8s.cpuset import format_cpuset

    known = {c.id for c in machine.cpu_infos()}
    unknown = sorted(reserved - known)
    if unknown:
        raise InvalidInputError(
            f"{where}: reservedCPUs names CPU(s) {format_cpuset(unknown)}, not on this machine ({machine.name} has "
            f"CPUs {format_cpuset(known)}); reservedCPUs is a cpuset of CPU ids, as the kubelet's reservedSystemCPUs, "
            "not a count: name the CPUs to leave out, e.g. reservedCPUs=0,1")


def kubelet_reserved_cpus(node: Any) -> frozenset[int]:
    """The CPUs dra-driver-cpu leaves out unless told otherwise: those the kubelet reserves. The driver
    runs beside CPU manager `none`, which reserves no set; its docs ask for its reservedCPUs to be the
    kubelet's reservation (reservedSystemCPUs, or as many CPUs as kubeReserved + systemReserved cpu), so
    numalign takes the set the static policy would reserve from the same configuration."""
    if node.cpu.policy_name != "none":
        return frozenset(node.cpu.reserved_cpus)
    explicit: frozenset[int] = node.config.reserved_cpus()
    if explicit:
        return explicit
    from numalign.errors import ConfigError
    from numalign.k8s.quantity import Quantity, QuantityFormat
    from numalign.kubelet.cpumanager.manager import new_cpu_manager_policy
    from numalign.kubelet.cpumanager.topology import CPUTopology

    machine = node.machine
    capacity = {"cpu": Quantity.from_int(machine.capacity_cpus()),
                "memory": Quantity.from_int(machine.capacity_memory(), QuantityFormat.BINARY_SI)}
    cpu = node.config.node_allocatable_reservation(capacity).get("cpu")
    if cpu is None or cpu.is_zero():
        return frozenset()
    try:
        static = new_cpu_manager_policy("static", CPUTopology.from_machine(machine), reserved_cpu=cpu)
    except ConfigError as exc:
        raise InvalidInputError(f"--dra-driver cpu: the CPUs to leave out for the kubelet's reservation ({cpu} "
                                f"CPU): {exc}; say which with --dra-driver cpu=reservedCPUs=CPUSET") from None
    return frozenset(static.reserved_cpus)
