"""`numalign resize POD --container C --cpus N --preview inplace-resize-exclusive-cpus`: an in-place resize
of a container with exclusive CPUs (KEP-5554, a preview), applied to a node's state as the kubelet with
InPlacePodVerticalScalingExclusiveCPUs would apply `kubectl patch pod --subresource resize`."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from numalign.cli.commands.summaries import SUMMARIES

EXIT_REFUSED = 1


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "resize",
        help=SUMMARIES["resize"],
        description="PREVIEW of KEP-5554 (in-place resize of pods with exclusive CPUs, alpha targeted at 1.38; "
        "k/k PR #140629): needs --preview inplace-resize-exclusive-cpus. Grows keep every CPU the container "
        "has and add CPUs aligned to the NUMA affinity the Topology Manager merges for the resized container "
        "(memory, devices and reserved CPUs honoured); shrinks return towards the baseline CPUs (the admission "
        "cpuset, checkpointed in cpu_manager_state) and never below. Exit 0 resized, 1 refused (with "
        "upstream's reason), 2 invalid input. With --node (a snapshot) nothing is written.",
    )
    p.add_argument("pod", metavar="POD", help="namespace/name, name (namespace default) or UID")
    p.add_argument("--container", required=True, metavar="NAME", help="the container to resize")
    p.add_argument("--cpus", required=True, metavar="N", help="the new CPU request and limit (a whole number "
                   "for exclusive CPUs, e.g. 4 or 4000m)")
    p.add_argument("--state-dir", metavar="DIR", type=Path, help="the state directory to change (written by "
                   "admit)")
    p.add_argument("--machine", metavar="FILE|NAME", help="the machine the state was written on (default: the "
                   "node record's, else dual-socket)")
    p.add_argument("--dry-run", action="store_true", help="say what the resize would do; write nothing")
    from numalign.cli.options.nodeargs import add_node_args
    from numalign.cli.output import add_output_arg

    add_node_args(p)
    add_output_arg(p)
    from numalign.cli.options.kubeletflags import add_kubelet_flags

    add_kubelet_flags(p, "the kubelet configuration the state was written with (as for admit)")
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p)


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.statedir.directory import check_state_dir, state_directory
    from numalign.adapters.statedir.layout import POD_RECORD_FILE
    from numalign.adapters.statedir.locks import acquire_owner
    from numalign.cli.options.nodeargs import node_config, resolve_node, snapshot_errors
    from numalign.cli.options.noderecord import apply_record
    from numalign.cli.options.podref import find_pod
    from numalign.cli.options.versionargs import node_previews, node_version, version_fields
    from numalign.errors import InvalidInputError
    from numalign.k8s.previews import INPLACE_RESIZE_EXCLUSIVE_CPUS
    from numalign.kubelet.node import Node
    from numalign.kubelet.previews.inplace_resize import resize_container
    from numalign.machine.examples import DEFAULT_MACHINE
    from numalign.run.records import ended_runs

    notes: list[str] = []
    previews = node_previews(args, notes)
    if not previews.on(INPLACE_RESIZE_EXCLUSIVE_CPUS):
        raise InvalidInputError(
            "resize: in-place resize of exclusive CPUs is a preview of KEP-5554 (no released kubelet does it: "
            "its allocation manager answers 'Resize is infeasible for Guaranteed Pods alongside CPU Manager "
            f"policy \"static\"'); add --preview {INPLACE_RESIZE_EXCLUSIVE_CPUS}")
    if args.node is None and args.state_dir is None:
        raise InvalidInputError("resize: no node state given; expected --state-dir DIR (written by `numalign admit "
                                "--state-dir`) or --node SNAPSHOT")
    if args.state_dir is not None and not (args.state_dir / POD_RECORD_FILE).is_file():
        raise InvalidInputError(f"{args.state_dir / POD_RECORD_FILE}: no such file; expected a state directory "
                                "written by `numalign admit --state-dir`")
    apply_record(args)
    machine, found = resolve_node(args, DEFAULT_MACHINE)
    notes += found
    version = node_version(args, notes)
    config = node_config(args, machine)
    snapshot = args.node is not None
    dry_run = args.dry_run or snapshot
    if snapshot:
        notes.append("--node: a snapshot's state is never written (as --dry-run)")
    if args.state_dir is None:
        raise InvalidInputError(f"--node {args.node}: the snapshot holds no state files, so no pod to resize")
    where = args.node if snapshot else args.state_dir
    check_state_dir(args.state_dir)
    # A dry run only reads (the store's shared lock); a resize owns the directory while it writes.
    owner = contextlib.nullcontext() if dry_run else acquire_owner(args.state_dir, "numalign resize")
    with snapshot_errors(args), owner:
        # ended `numalign run` processes hold nothing; a write releases them for good, as `remove` does
        store = state_directory(args.state_dir, read_only=dry_run, kubelet_version=version)
        node = Node(machine, config, store=store, ended_pods=ended_runs(store, writing=not dry_run),
                    kubelet_version=version, previews=previews)
        pod = find_pod(node, args.pod, "resize", where)
        if dry_run:
            result = resize_container(node, pod, args.container, args.cpus)
        else:
            with node.transaction() as tx:
                result = resize_container(node, pod, args.container, args.cpus)
            if tx.failure is not None:
                raise tx.failure
    if args.output != "text":
        from numalign.cli.output import emit

        # docs/schemas/resize.schema.json: the summary first (the verdict), then the result's detail
        summary = {"pod": result.pod, "container": result.container, "requestedCPUs": result.requested,
                   "resized": result.resized, "dryRun": dry_run}
        emit({"schemaVersion": 1, "summary": summary, **result.to_dict(), "dryRun": dry_run, "stateDir": str(where),
              **version_fields(version, previews), "notes": notes}, args.output)
    else:
        _print_text(result, notes, dry_run)
    return 0 if result.resized else EXIT_REFUSED


def _print_text(result: Any, notes: list[str], dry_run: bool) -> None:
    from numalign.k8s.cpuset import format_cpuset

    def cs(cpus: list[int]) -> str:
        return format_cpuset(frozenset(cpus)) or "none"

    for note in notes:
        print(note)
    target = f"{result.pod} container {result.container}"
    if not result.resized:
        print(f"refused: {target} to {result.requested} CPUs ({result.reason}): {result.message}")
        print(f"  CPUs stay {cs(result.before)}")
        return
    verb = "would resize" if dry_run else "resized"
    print(f"{verb} {target}: {len(result.before)} -> {len(result.after)} CPUs")
    print(f"  CPUs      {cs(result.before)} -> {cs(result.after)} (NUMA node(s) "
          f"{','.join(map(str, result.numa_nodes))})")
    print(f"  baseline  {cs(result.baseline)} (kept)")
    added = sorted(set(result.after) - set(result.before))
    released = sorted(set(result.before) - set(result.after))
    if added:
        print(f"  added     {cs(added)}" + ("" if result.affinity is None else
                                            f" (affinity NUMA {','.join(map(str, result.affinity))})"))
    if released:
        print(f"  released  {cs(released)} (back to the shared pool)")
