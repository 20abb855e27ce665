"""`numalign admit POD.yaml...`: admit pods on a node as the kubelet would, and say why not.

With no arguments it runs the main job: the built-in example pods on the built-in dual-socket machine
with a typical NUMA-aligned kubelet configuration (static CPU manager, Static memory manager,
single-numa-node topology manager). Without --config that example configuration stands in for the
config file, pods or no pods, and kubelet flags override it field by field.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES
from numalign.cli.options.nodeargs import EXAMPLE_CONFIG
from numalign.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from numalign.adapters.statedir.directory import StateDirectory
    from numalign.answer.present.admit import AdmitDocument
    from numalign.cli.commands.admit_request import AdmitRequest
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.pod import Pod
    from numalign.kubelet.node import Node
    from numalign.machine.topology import Machine
    from numalign.report import NodeView


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "admit",
        help=SUMMARIES["admit"],
        description="Admit pods in order, as the kubelet's Topology Manager, CPU, memory and device managers "
        "would, and print each decision with the CPUs, memory and devices given. With no pods: the built-in "
        "example pods. Without --config: the built-in example kubelet configuration, which kubelet flags "
        "override field by field.",
    )
    p.add_argument("pods", nargs="*", metavar="POD.yaml",
                   help="Pod manifests (YAML/JSON, Lists, workloads); - reads standard input (`helm template ... | "
                   "numalign admit -`); other kinds (Service, ConfigMap, ...) are skipped with a note")
    p.add_argument("--machine", metavar="FILE|NAME", help="machine file, sysfs dump, cadvisor JSON or a "
                   "built-in name (default: dual-socket)")
    p.add_argument("--state-dir", metavar="DIR", type=Path,
                   help="read and write the kubelet state files here (cpu_manager_state, memory_manager_state, "
                   "device-plugins/kubelet_internal_checkpoint) and numalign_pods.json, so successive runs see "
                   "earlier pods; one run is one transaction (all its pods are kept, or none), and a directory "
                   "another admit or serve owns is refused")
    p.add_argument("--dry-run", action="store_true",
                   help="with --state-dir: read the state files but write nothing, so it is safe to ask "
                   "\"would this pod be admitted now?\" of a live node's /var/lib/kubelet")
    from numalign.cli.options.podargs import add_replicas_arg

    add_replicas_arg(p)
    p.add_argument("--replace", action="store_true",
                   help="a pod of the same namespace/name already in --state-dir is removed first and the new one "
                   "admitted in its place (a new version of the same workload); without it such a pod is an error")
    from numalign.cli.options.nodeargs import add_node_args

    add_node_args(p)
    from numalign.cli.commands.admit_dra import add_args as add_dra_args

    add_dra_args(p)
    p.add_argument("--node-condition", action="append", default=[], metavar="CONDITION",
                   help="a pressure condition the node has (MemoryPressure, DiskPressure, PIDPressure; repeat "
                   "for more): the kubelet's eviction manager then rejects BestEffort pods (MemoryPressure "
                   "alone) or every pod, with reason Evicted. numalign observes no usage; by default none")
    p.add_argument("--details", action="store_true",
                   help="text: print every pod's whole decision record, every resource free on every NUMA node, "
                   "and every line whole; by default any line (a why: too, even for one pod) is cut at 200 "
                   "characters, ending '(+N chars; --details)', past 10 pods each pod gets a few lines, identical "
                   "rejections are named once (repeats in a row share one line), and free capacity is shown for the "
                   "resources a pod asks for")
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when any pod is rejected (as git diff --exit-code), so a script can ask "
                   "\"would it fit?\"; without it admit exits 0 whatever the decisions")
    from numalign.cli.output import add_output_arg

    add_output_arg(p)
    from numalign.cli.options.reportargs import add_report_arg

    add_report_arg(p, "the machine with every container's CPUs, memory and devices and each rejected pod's "
                   "decision record")
    from numalign.cli.options.kubeletflags import add_kubelet_flags

    add_kubelet_flags(p, "a KubeletConfiguration file and the kubelet's own flags (flags win); without "
                      "--config the built-in example configuration is the base (static CPU manager, Static "
                      "memory manager, single-numa-node), not the kubelet's defaults")
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p)


def run(args: argparse.Namespace) -> int:
    from numalign.cli.commands.admit_request import read_request

    return admit(read_request(args))


def admit(req: AdmitRequest) -> int:
    """The command, from its request: the pods admitted on the node in one transaction, then the output."""
    from numalign.cli.commands.admit_dra import load as load_pods_and_dra

    notes = list(req.notes)
    # Pods and the DRA objects beside them (slices, classes, claims), as `kubectl apply -f` reads them.
    from numalign.k8s.dra.read import checked_as

    # Selectors are checked as the API server of the modelled release checks them.
    with checked_as(req.kubelet_version.minor):
        pods, dra_objects = load_pods_and_dra(list(req.pod_files), req.replicas, notes, req.snapshot)
    owner = None
    if req.state_dir is not None and not req.dry_run:
        from numalign.adapters.statedir.directory import check_state_dir
        from numalign.adapters.statedir.locks import acquire_owner

        check_state_dir(req.state_dir)
        # One owner per state directory; the kernel drops the lock when this process ends.
        owner = acquire_owner(req.state_dir, "numalign admit")
    with owner if owner is not None else contextlib.nullcontext():
        node, doc = _admit_all(req, pods, notes, dra_objects)
    from numalign.cli.output import EXIT_CHECK_FAILED, EXIT_OK, emit

    if req.report is not None:
        from numalign.answer.present.html import admit_html
        from numalign.cli.options.reportargs import write_report

        write_report(req.report, admit_html(node, doc, _dra_picture(doc, [p.pod for p in doc.pods])))
    if req.output == "text":
        for line in doc.text_lines(req.details):
            print(line)
    else:
        emit(doc.to_dict(req.details), req.output)
    rejected = any(not p.record.result.admit for p in doc.pods)
    return EXIT_CHECK_FAILED if req.exit_code and rejected else EXIT_OK


def _admit_all(req: AdmitRequest, pods: list[Any], notes: list[str], dra_objects: Any) -> tuple[Node, AdmitDocument]:
    """The node the request describes, and the pods admitted on it (answer/admit.py) in one transaction of
    the state directory (if any): all kept, or none."""
    from numalign.kubelet.admission.eviction import NodeCondition
    from numalign.kubelet.node import Node

    conditions = [NodeCondition.parse(c) for c in req.node_conditions]
    from numalign.cli.options.nodeargs import snapshot_errors_of

    machine, config = req.machine, req.config
    if req.dra_drivers:
        from numalign.cli.commands.admit_dra import parse_drivers

        # Before the state directory is opened; checked even when no pod has claims (then unused), so a
        # mistyped value is refused rather than silently ignored.
        parse_drivers(req.dra_drivers, machine)
    try:
        with snapshot_errors_of(req.snapshot, req.config_label):
            store: StateDirectory | None = None
            ended: Callable[[Mapping[str, Pod]], Sequence[str]] | None = None
            if req.state_dir is not None:  # the state directory's adapters are imported only when used
                from numalign.adapters.statedir.directory import state_directory
                from numalign.run.records import ended_runs

                store = state_directory(req.state_dir, read_only=req.dry_run, kubelet_version=req.kubelet_version)
                # ended `numalign run` processes are released (and what they left ended), except on a dry run
                ended = ended_runs(store, writing=not req.dry_run)
            node = Node(machine, config, store=store, node_conditions=conditions, ended_pods=ended,
                        kubelet_version=req.kubelet_version, previews=req.previews)
    except ConfigError as exc:
        exc = _with_numa_nodes(exc, config, machine)
        if req.example_base is None:
            raise exc from None
        # The user never wrote this configuration: say where it came from and how to replace it.
        raise ConfigError(
            f"{exc} (the kubelet configuration is the built-in example {EXAMPLE_CONFIG}, used because no "
            "--config was given; pass --config FILE, or override its fields with kubelet flags, e.g. "
            "--policy-option KEY=VALUE, --reserved-cpus, --reserved-memory, --kube-reserved)"
        ) from None
    if req.state_dir is not None and not req.dry_run:
        from numalign.cli.options.noderecord import write_record

        # Only once the node started on the directory (its checkpoints agree with this machine and
        # configuration): a wrong --machine or config refused above must not replace the record, or every
        # later pods, remove and nrt would start the node that way and meet the same refusal.
        write_record(req.state_dir, req.machine, req.machine_spec, req.config_path, list(req.flags),
                     req.kubelet_version)
    if req.replace and store is not None and not req.dry_run:
        _refuse_replacing_a_running_run(node, store, pods)
    from numalign.answer.admit import admit_pods
    from numalign.cli.commands.admit_dra import DRAAdmit
    from numalign.cli.options.clusterargs import Progress

    dra = DRAAdmit(req, dra_objects, node, notes) if DRAAdmit.wanted(pods, dra_objects, machine) else None
    snap = req.snapshot  # its state by the snapshot's name
    where = req.state_dir if snap is None else f"{snap.path}:state"
    progress = Progress(f"admit: {len(pods)} pod(s) on {machine.name}")  # drawn only when stderr is a terminal
    try:
        doc = admit_pods(node, pods, notes=notes, replace=req.replace, dra=dra,
                         refuse_again=lambda pod: _already_admitted(pod, where, req.dry_run), step=progress.step)
    finally:
        progress.close()
    return node, doc


def _refuse_replacing_a_running_run(node: Node, store: StateDirectory, pods: Sequence[Pod]) -> None:
    """--replace removes the earlier pod of the same namespace/name or uid, as `remove` does; the pod of a
    `numalign run` whose process still runs is refused as `remove` refuses it, before anything is written.
    Same uid is the same pod to the kubelet: replacing it in place would hand the running process's record
    (and CPUs) to the new version, and another uid would free CPUs the process still runs pinned on."""
    from numalign.run.records import refuse_a_running_run

    for pod in pods:
        for old in node.pods.values():
            if old.key == pod.key or old.uid == pod.uid:
                refuse_a_running_run(f"admit --replace {pod.key}", store.processes.get(old.uid),
                                     "; or admit the new version under another name (or metadata.uid)")


def _dra_picture(doc: AdmitDocument, pods: list[Pod]) -> Callable[[NodeView], NodeView] | None:
    """The report's DRA part (the devices on their NUMA nodes, with their claims' holders), if any."""
    from numalign.cli.commands.admit_dra import DRAAdmit

    dra = doc.dra
    if not isinstance(dra, DRAAdmit):
        return None
    return lambda view: dra.report_view(view, pods)


def _with_numa_nodes(exc: ConfigError, config: KubeletConfig, machine: Machine) -> ConfigError:
    """The kubelet's "references a NUMA node N that does not exist" names no node that does exist. On a
    machine without NUMA nodes (or with node -1) the kubelet's start errors come one at a time; the first
    one says every change the machine needs, so nobody walks the chain."""
    existing = sorted(n.id for n in machine.numa_nodes)
    needs = _needs_without_numa(config, existing)
    if needs:
        what = "no NUMA node (cadvisor found none)" if not existing else "NUMA node -1 (no NUMA node directory)"
        return ConfigError(
            f"{exc}; machine {machine.name} has {what}: the kubelet admits pods on it only with "
            f"{' and '.join(needs)} "
            "(docs/machine-format.md, Machines without NUMA nodes)"
        )
    missing = sorted({r.numa_node for r in config.reserved_memory} - set(existing))
    if not missing or "references a NUMA node" not in str(exc):
        return exc
    if not existing:
        return ConfigError(f"{exc}; machine {machine.name} has no NUMA node (cadvisor found none), so no memory "
                           "can be reserved on one: use --memory-manager-policy None")
    return ConfigError(
        f"{exc}; machine {machine.name} has NUMA node{'s' if len(existing) > 1 else ''} "
        f"{','.join(map(str, existing))}; reserve memory only on those (--reserved-memory "
        f"{existing[0]}:memory=SIZE, or reservedMemory in --config), or pick the machine with --machine"
    )


def _needs_without_numa(config: KubeletConfig, existing: list[int]) -> list[str]:
    """The options a machine without NUMA nodes, or with node -1, needs before the kubelet admits on it."""
    needs: list[str] = []
    if not existing:
        if config.cpu_manager_policy == "static":  # empty CPU details: no CPU to reserve or give
            needs.append("--cpu-manager-policy none")
        if config.topology_manager_policy in ("restricted", "single-numa-node"):  # no hint is ever preferred
            needs.append("--topology-manager-policy none or best-effort (restricted and single-numa-node reject "
                         "every pod there)")
    elif -1 not in existing:
        return needs
    elif config.topology_manager_policy != "none":  # NewBitMask(-1): a panic at the first pod
        needs.append("--topology-manager-policy none")
    if config.memory_manager_policy == "Static":
        needs.append("--memory-manager-policy None")
    return needs


def _already_admitted(pod: Pod, state_dir: Path | str | None, dry_run: bool) -> str:
    """Node.admit's own message names library calls; on the command line the fixes are options."""
    what = f"pod {pod.key} (uid {pod.uid}) is already admitted"
    rename = "give the pod another name (or metadata.uid)"
    if state_dir is None:
        return f"{what} earlier in this run (a pod is admitted once); {rename} for each copy"
    if dry_run:
        return (f"{what} in the state of {state_dir}; expected a pod not admitted there yet; add --replace to "
                f"ask about a new version in its place, or {rename} to ask about a copy")
    return (
        f"{what} in the state of {state_dir}; expected a pod not admitted there yet; add --replace to admit the "
        f"new version in its place, {rename} for a copy, use a fresh --state-dir, or use --dry-run to ask "
        "without keeping pods"
    )
