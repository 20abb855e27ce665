"""`numalign pods`'s command line read once, at the top, into one typed request (PodsRequest).

Where the pods come from is settled here, in the order the command always settled it: the agent's
status file and the `numalign run` processes of --state-dir (under a shared transaction), else the
state files themselves (admit's directory, a kubelet's, a --node snapshot) read on the node their
record, --machine, --devices and the kubelet options describe (StateFilesNode). Below it nothing reads
the argparse namespace."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.previews import Previews
    from numalign.k8s.version import KubeletVersion
    from numalign.machine.topology import Machine


@dataclass(frozen=True)
class StateFilesNode:
    """The node a state directory or snapshot is read on. `config` is None when there are no state
    files to read (then nothing else is read either); `snapshot`: the --node snapshot, or None."""

    state_dir: Path | None
    where: str  # the directory or the snapshot, as notes name it
    machine: Machine
    config: KubeletConfig | None
    config_label: str
    version: KubeletVersion
    previews: Previews
    notes: tuple[str, ...]
    snapshot: Any


@dataclass(frozen=True)
class PodsRequest:
    state_dir: Path | None
    machine: str | None  # --machine: draws the agent's pods on it
    output: str
    report: Path | None
    status: Mapping[str, Any] | None  # the agent's status document, when there is one
    processes: tuple[Mapping[str, Any], ...]  # `numalign run` processes sharing the directory
    files: StateFilesNode | None  # set when neither is there: the state files are read

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PodsRequest:
        from numalign.adapters.statedir.locks import transaction
        from numalign.agent.status import read_status
        from numalign.run.listing import run_processes

        status = None
        processes: list[Any] = []
        if args.node is None:
            with transaction(args.state_dir, shared=True):  # a reader: never between two files of one change
                status = read_status(args.state_dir)
                processes = run_processes(args.state_dir)
        files = _state_files_node(args) if status is None and not processes else None
        return cls(args.state_dir, args.machine, args.output, args.report, status, tuple(processes), files)


def _state_files_node(args: argparse.Namespace) -> StateFilesNode:
    from numalign.adapters.statedir.files import CheckpointStore
    from numalign.adapters.statedir.layout import POD_RECORD_FILE
    from numalign.cli.options.nodeargs import config_label, node_config, resolve_node, snapshot_errors_of
    from numalign.cli.options.noderecord import apply_record
    from numalign.cli.options.versionargs import node_previews, node_version
    from numalign.machine.examples import DEFAULT_MACHINE

    if args.node is not None:
        args.state_dir = None  # the snapshot's state is used (resolve_node refuses both)
    recorded = apply_record(args)
    machine, notes = resolve_node(args, DEFAULT_MACHINE)
    notes += [recorded] if recorded else []
    version, previews = node_version(args, notes), node_previews(args, notes)
    where = str(args.node if args.node is not None else args.state_dir)
    state_dir: Path | None = args.state_dir
    config = None
    label = config_label(args) if args.node_snapshot is not None else ""
    if state_dir is not None:
        store = CheckpointStore.under(state_dir)
        if any(p.is_file() for p in (store.cpu_path, store.memory_path, store.device_path,
                                     state_dir / POD_RECORD_FILE)):
            with snapshot_errors_of(args.node_snapshot, label):
                config = node_config(args, machine)
    return StateFilesNode(state_dir, where, machine, config, label, version, previews, tuple(notes),
                          args.node_snapshot)
