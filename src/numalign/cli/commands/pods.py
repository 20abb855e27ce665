"""`numalign pods`: the node's pods and their allocations, from the status file `numalign serve` keeps."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES

if TYPE_CHECKING:
    from numalign.cli.commands.pods_request import PodsRequest, StateFilesNode
    from numalign.machine.topology import Machine
    from numalign.report.view import NodeView


def register(sub: Any) -> None:
    from numalign.paths import DEFAULT_STATE_DIR

    p: argparse.ArgumentParser = sub.add_parser(
        "pods",
        help=SUMMARIES["pods"],
        description="Read the agent status (numalign_status.json) in the state directory of `numalign serve` and "
        "list every pod "
        "(admitted, rejected or pending) with its CPUs, memory and devices, and every invalid manifest. A state "
        "directory without it (written by `numalign admit --state-dir`, a kubelet's /var/lib/kubelet, or a "
        "--node snapshot) is read through its checkpoints, on the machine and kubelet configuration of its node "
        "record (numalign_node.json), else those of --machine, --devices and the kubelet options.",
    )
    p.add_argument("--state-dir", metavar="DIR", type=Path, default=DEFAULT_STATE_DIR,
                   help=f"the agent's --state-dir (default {DEFAULT_STATE_DIR})")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, "wide", help="text (default): a table of the pods (NAMESPACE NAME STATUS CPUS MEMORY DEVICES) "
                   "and the machine drawn with them; wide: more columns (CONTAINERS HUGEPAGES DEVICE-IDS FILE) and "
                   "each container's allocation and runtime requests; json, yaml: the status document")
    p.add_argument("--machine", metavar="FILE|NAME",
                   help="the machine to draw the pods on (default: the one the agent recorded in its status file; "
                   "for other state directories the one admit recorded, else dual-socket, as for admit)")
    from numalign.cli.options.kubeletflags import add_kubelet_flags
    from numalign.cli.options.nodeargs import add_node_args

    add_node_args(p)
    add_kubelet_flags(p, "for a state directory without the agent's status file: the kubelet configuration it "
                      "was written with (as for admit)")
    from numalign.cli.options.reportargs import add_report_arg

    add_report_arg(p, "the machine with every pod's CPUs, memory and devices and each rejected pod's decision record")
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p)


def run(args: argparse.Namespace) -> int:
    from numalign.cli.commands.pods_request import PodsRequest

    return list_pods(PodsRequest.from_args(args))


def list_pods(request: PodsRequest) -> int:
    from numalign.adapters.statedir.layout import STATUS_FILE
    from numalign.errors import InvalidInputError

    doc = dict(request.status) if request.status is not None else None
    runs = [dict(p) for p in request.processes]
    agent = doc is not None
    if doc is None and runs:
        doc = {"pods": {}}
        view = _view(request, doc)
    elif doc is None:
        # No agent: the pods of the state files themselves (admit's directory, a kubelet's, a snapshot).
        agent = True
        assert request.files is not None, "without the agent's status the request reads the state files"
        doc, view = _from_state_files(request.files)
        if doc is None:
            raise InvalidInputError(
                f"{request.state_dir}: no state there (neither {STATUS_FILE} of `numalign serve` nor the kubelet's "
                "state files); pass the --state-dir of the agent or of `numalign admit`, or --node SNAPSHOT"
            )
    else:
        view = _view(request, doc)
    if request.report is not None:
        from numalign.cli.options.reportargs import write_report
        from numalign.report import node_report

        if view is None:
            raise InvalidInputError(
                f"{Path(str(request.state_dir)) / STATUS_FILE} names no machine (written by an older numalign "
                "serve); pass --machine NAME|FILE, the machine the agent runs with, to draw the report"
            )
        write_report(request.report, node_report(view))
    if request.output in ("json", "yaml"):
        from numalign.cli.commands.pods_document import pods_document
        from numalign.cli.output import emit

        emit(pods_document(doc, runs), request.output)
        return 0
    from numalign.cli.commands.pods_table import print_pods, table
    from numalign.run.listing import run_rows

    if agent:
        print_pods(doc, wide=request.output == "wide")
        if doc.get("kubeletVersion"):
            print("; ".join([f"decided as kubelet {doc['kubeletVersion']}",
                             *(f"preview: {k}={v}" for k, v in sorted((doc.get("previews") or {}).items()))]))
    if runs:
        # `numalign run` processes: a second table, one row per process holding an allocation.
        print(("\n" if agent else "") + table(*run_rows(runs)), end="")
    if view is not None:
        from numalign.cli.options.reportargs import use_color
        from numalign.report import terminal_picture

        print()
        sys.stdout.write(terminal_picture(view, color=use_color(sys.stdout)))
    return 0


def _from_state_files(files: StateFilesNode) -> tuple[dict[str, Any] | None, NodeView | None]:
    """The pods of a state directory (or snapshot) read through a read-only Node, and their picture."""
    from numalign.adapters.statedir.directory import state_directory
    from numalign.cli.options.nodeargs import snapshot_errors_of, state_pods
    from numalign.cli.options.versionargs import version_fields
    from numalign.kubelet.node import Node
    from numalign.report import node_view_from_status
    from numalign.run.records import ended_runs

    machine, notes, version, previews = files.machine, list(files.notes), files.version, files.previews
    if files.state_dir is None:
        # A snapshot of a node with no state files (no kubelet ran there, or it keeps none): no pods, as
        # kubectl says "No resources found", and the machine drawn bare.
        empty: dict[str, Any] = {"pods": {}, **version_fields(version, previews)}
        return empty, node_view_from_status(machine, empty, title=f"numalign pods: {machine.name}",
                                            notes=[f"{files.where} holds no state files: no pods", *notes])
    if files.config is None:
        return None, None
    with snapshot_errors_of(files.snapshot, files.config_label):
        store = state_directory(files.state_dir, read_only=True, kubelet_version=version)
        node = Node(machine, files.config, store=store,
                    ended_pods=ended_runs(store, writing=False),  # ended `numalign run` processes hold nothing
                    kubelet_version=version, previews=previews)
    snap = files.snapshot
    listed = snap.pod_resources_list() if snap is not None else None  # bounded, one line when damaged
    doc: dict[str, Any] = {"pods": state_pods(node, listed), **version_fields(version, previews)}
    _add_claims(doc["pods"], node)
    from numalign.k8s.cpuset import format_cpuset

    # The reserved CPUs, as the agent's status file gives them, so the picture marks them here too.
    doc["reserved_cpus"] = format_cpuset(node.cpu.reserved_cpus)
    view = node_view_from_status(machine, doc, title=f"numalign pods: {machine.name}",
                                 notes=[f"from the state files in {files.where}", *notes])
    return doc, view


def _add_claims(pods: dict[str, dict[str, Any]], node: Any) -> None:
    """Each pod's DRA claims as the pod record keeps them (the node's DRA manager): claim namespace/name
    -> its devices as driver/pool/device."""
    for h in node.dra.held():
        for ref in h.reserved_for:
            if ref.uid in pods:
                pods[ref.uid].setdefault("claims", {})[h.key] = list(h.devices)


def _view(request: PodsRequest, doc: dict[str, Any]) -> NodeView | None:
    """The pods on their machine: --machine, else the machine the agent recorded; None when neither."""
    from numalign.report import node_view_from_status

    if request.machine:
        from numalign.adapters.sysfs import load_machine

        machine = load_machine(request.machine)
    elif isinstance(doc.get("machine"), dict):
        from numalign.machine.fileformat import machine_from_dict

        machine = machine_from_dict(doc["machine"], f"{Path(str(request.state_dir)) / 'numalign_status.json'}: machine")
    else:
        return None
    devices = doc.get("plugin_devices")
    if isinstance(devices, dict):  # serve's devices are its plugins', never the machine file's
        machine = with_plugin_devices(machine, devices)
    return node_view_from_status(machine, doc, title=f"numalign pods: {machine.name}",
                                 notes=[f"from the agent's state in {request.state_dir}"])


def with_plugin_devices(machine: Machine, devices: dict[Any, Any]) -> Machine:
    """The machine with the devices the agent's plugins reported (status file `plugin_devices`) in place of
    its own: each on the NUMA nodes of its TopologyInfo that the machine has (none: drawn on no node).
    An entry of the wrong shape is left out: the picture is a view, the pods and their devices are read
    from the pod entries."""
    import dataclasses

    from numalign.machine.topology import Device

    ids = set(machine.numa_ids())
    out: list[Device] = []
    for resource, by_id in sorted(devices.items(), key=lambda kv: str(kv[0])):
        if not isinstance(resource, str) or not isinstance(by_id, dict):
            continue
        for device_id, numa in sorted(by_id.items(), key=lambda kv: str(kv[0])):
            if not isinstance(device_id, str) or not (numa is None or isinstance(numa, list)):
                continue
            nodes = tuple(sorted({n for n in numa or () if isinstance(n, int) and n in ids}))
            out.append(Device(device_id, resource, nodes or None))
    return dataclasses.replace(machine, devices=tuple(out))
