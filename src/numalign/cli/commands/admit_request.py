"""`numalign admit`'s command line read once, at the top, into one typed request (`AdmitRequest`).

Everything the options say is settled here, in the order the command always settled it: the state
directory's node record (a second run keeps the first run's node), the node (--machine, --node,
--devices), the kubelet version and previews, the kubelet configuration (--config or the built-in
example, kubelet flags over it), the dry run, and the notes that say where each came from. Below this
module nothing reads the argparse namespace: admit.py, the DRA half and the output take the request.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.options.nodeargs import EXAMPLE_CONFIG, data_file
from numalign.errors import InvalidInputError

if TYPE_CHECKING:
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.previews import Previews
    from numalign.k8s.version import KubeletVersion
    from numalign.machine.topology import Machine


@dataclass(frozen=True)
class AdmitRequest:
    """What `numalign admit` was asked, settled: the node, its configuration and state, the pods' files,
    the DRA options and the output wanted, with the notes that say where each setting came from."""

    pod_files: tuple[Path, ...]
    machine: Machine
    machine_spec: str | None  # the --machine value when it alone names the machine (numalign_node.json)
    config: KubeletConfig
    example_base: KubeletConfig | None  # the built-in example the config stands on (no --config), else None
    config_path: str | None  # --config (or the snapshot's, or the node record's)
    config_label: str  # how notes and snapshot errors name the configuration
    flags: tuple[tuple[str, str], ...]  # the kubelet flags, in command-line order
    kubelet_version: KubeletVersion
    previews: Previews
    state_dir: Path | None
    dry_run: bool
    snapshot: Any  # adapters.snapshot.NodeSnapshot of --node, or None
    replicas: int | None
    replace: bool
    node_conditions: tuple[str, ...]
    node_name: str | None  # DRA
    dra_drivers: tuple[str, ...]  # DRA
    details: bool
    exit_code: bool
    output: str
    report: Path | None
    notes: tuple[str, ...]


def read_request(args: argparse.Namespace) -> AdmitRequest:
    """The request the command line makes (bad input is one line, as the options' readers give it)."""
    from numalign.cli.options.kubeletflags import FLAGS_DEST, config_from_args
    from numalign.cli.options.nodeargs import config_label, example_base, resolve_node
    from numalign.cli.options.noderecord import apply_record
    from numalign.cli.options.versionargs import node_previews, node_version
    from numalign.machine.examples import DEFAULT_MACHINE

    notes: list[str] = []
    pod_files = [Path(p) for p in args.pods]
    if not pod_files:
        pod_files = [data_file("example-pods.yaml")]
        notes.append(f"no pods given: admitting the built-in examples ({pod_files[0].name})")
    recorded = apply_record(args)  # a second run on a state directory keeps the first run's node
    machine, node_notes = resolve_node(args, DEFAULT_MACHINE)
    notes.extend([*node_notes, *([recorded] if recorded else [])])
    version = node_version(args, notes)
    previews = node_previews(args, notes)
    snapshot = args.node_snapshot
    dry_run = bool(args.dry_run) or snapshot is not None  # a snapshot is a record of the node: asked, never changed
    flags: list[tuple[str, str]] = getattr(args, FLAGS_DEST, None) or []
    # Without --config the built-in example stands in for the config file, pods or no pods, and
    # flags override it field by field as they would a file (so the fix a refusal suggests,
    # e.g. --policy-option max-allowable-numa-nodes=16, changes only that field).
    base = example_base(args, machine)
    config = config_from_args(args, base=base)
    label = config_label(args)
    notes.extend(_config_notes(config, base, machine, flags, label))
    state_dir: Path | None = args.state_dir
    notes.extend(_dry_run_notes(dry_run, snapshot, state_dir))
    return AdmitRequest(
        tuple(pod_files), machine, _machine_spec(args, DEFAULT_MACHINE), config, base, args.kubelet_config, label,
        tuple(flags), version, previews, state_dir, dry_run, snapshot, args.replicas, bool(args.replace),
        tuple(args.node_condition), args.node_name, tuple(args.dra_driver), bool(args.details),
        bool(args.exit_code), args.output, args.report, tuple(notes))


def _config_notes(config: KubeletConfig, base: KubeletConfig | None, machine: Machine,
                  flags: list[tuple[str, str]], label: str) -> list[str]:
    notes: list[str] = []
    if base is not None:
        overrides = ", ".join(dict.fromkeys(name for name, _ in flags))
        notes.append(
            f"kubelet config: built-in example {EXAMPLE_CONFIG} ({base.cpu_manager_policy} CPU manager, "
            f"{base.memory_manager_policy} memory manager, {base.topology_manager_policy})"
            + (f", overridden by {overrides}" if overrides else "; pass --config or kubelet flags to change it")
        )
        if config.reserved_system_cpus == base.reserved_system_cpus and not machine.online_cpus():
            notes.append(f"kubelet config: reservedSystemCPUs {base.reserved_system_cpus}: the built-in example "
                         "reserves a first core, and this machine has no CPU the kubelet can place (--reserved-cpus "
                         "to change it)")
        elif config.reserved_system_cpus == base.reserved_system_cpus:
            notes.append(f"kubelet config: reservedSystemCPUs {base.reserved_system_cpus}: the machine's first core, "
                         "as the built-in example reserves it (--reserved-cpus to change it)")
    elif flags:
        notes.append(f"kubelet config: {label}, overridden by " + ", ".join(dict.fromkeys(name for name, _ in flags)))
    else:
        notes.append(f"kubelet config: {label}")
    if config.topology_manager_policy != "none" and config.cpu_manager_policy == "none":
        notes.append("note: cpuManagerPolicy is none, so CPUs take no part in NUMA alignment "
                     "(add --cpu-manager-policy static and a CPU reservation)")
    return notes


def _dry_run_notes(dry_run: bool, snapshot: Any, state_dir: Path | None) -> list[str]:
    if dry_run and snapshot is not None:
        return ["dry run: the snapshot is read, nothing is written"]
    if dry_run and state_dir is not None:
        if not state_dir.is_dir():
            # "Would it fit there now?" of a directory that is not there is a wrong path, not an empty node.
            raise InvalidInputError(
                f"--state-dir {state_dir}: no such directory; expected the kubelet's root directory (its "
                "state files) or a directory `numalign admit --state-dir` wrote; check the path"
            )
        return [f"dry run: the state in {state_dir} is read, nothing is written"]
    if dry_run:
        # Without --state-dir nothing is read or written anyway; say so rather than let the flag look active.
        return ["note: --dry-run has no effect without --state-dir (nothing is written either way); "
                "add --state-dir DIR to ask of a node's state files"]
    return []


def _machine_spec(args: argparse.Namespace, default: str) -> str | None:
    """The --machine value when it alone names the machine (a built-in name or the shorthand, no
    --devices), so numalign_node.json stays small; None when the machine must be kept whole."""
    from numalign.machine.examples import EXAMPLES
    from numalign.machine.shorthand import looks_like_shorthand

    spec = args.machine or default
    if args.devices or getattr(args, "recorded_machine", None) is not None:
        return None
    return spec if spec in EXAMPLES or (looks_like_shorthand(spec) and not Path(spec).exists()) else None
