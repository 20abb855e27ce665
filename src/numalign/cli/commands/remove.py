"""`numalign remove POD... --state-dir DIR`: release pods from a state directory, as the kubelet does
when a pod is deleted (its CPUs go back to the shared pool, its memory and devices are freed)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from numalign.cli.commands.summaries import SUMMARIES


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "remove",
        help=SUMMARIES["remove"],
        description="Remove pods from --state-dir and write the state files again (owner lock and one "
        "transaction, as admit writes). POD is namespace/name, a name in the default namespace, or a pod UID. "
        "The machine and kubelet configuration are those of the node record (numalign_node.json), unless "
        "--machine, --devices or kubelet options are given.",
    )
    p.add_argument("pods", nargs="+", metavar="POD", help="namespace/name, name (namespace default) or UID")
    p.add_argument("--state-dir", metavar="DIR", type=Path, required=True, help="the state directory to change")
    p.add_argument("--machine", metavar="FILE|NAME", help="the machine the state was written on "
                   "(default: dual-socket, as for admit)")
    p.add_argument("--devices", metavar="RESOURCE=FILE|FILE.json", action="append", default=[],
                   help="the devices the state was written with (as for admit)")
    from numalign.cli.output import add_output_arg

    add_output_arg(p)
    from numalign.cli.options.kubeletflags import add_kubelet_flags

    add_kubelet_flags(p, "the kubelet configuration the state was written with (as for admit)")


def run(args: argparse.Namespace) -> int:
    import os

    from numalign.adapters.statedir.directory import check_state_dir, state_directory
    from numalign.adapters.statedir.layout import POD_RECORD_FILE
    from numalign.adapters.statedir.locks import acquire_owner
    from numalign.cli.options.nodeargs import node_config, resolve_node
    from numalign.errors import InvalidInputError
    from numalign.kubelet.node import Node
    from numalign.machine.examples import DEFAULT_MACHINE

    # lexists: a record that is there but cannot be read (a symlink loop) is said by its reader, not "no such file"
    if not os.path.lexists(args.state_dir / POD_RECORD_FILE):
        raise InvalidInputError(
            f"{args.state_dir / POD_RECORD_FILE}: no such file; expected a state directory written by `numalign admit "
            "--state-dir` (pods the kubelet itself admitted are removed by deleting them from the cluster)"
        )
    from numalign.cli.options.noderecord import apply_record
    from numalign.cli.options.podref import find_pod

    apply_record(args)
    machine, _ = resolve_node(args, DEFAULT_MACHINE)
    from numalign.cli.options.versionargs import node_version

    version = node_version(args, [])
    config = node_config(args, machine)
    removed = []
    check_state_dir(args.state_dir)
    with acquire_owner(args.state_dir, "numalign remove"):
        # ended `numalign run` processes are released; a running one's pod is not removed
        from numalign.run.records import ended_runs, refuse_a_running_run

        store = state_directory(args.state_dir, kubelet_version=version)
        node = Node(machine, config, store=store, ended_pods=ended_runs(store, writing=True),
                    kubelet_version=version)
        # One transaction: every pod named is removed, or (a write failed) none.
        node_place = getattr(node.store, "state_dir", "the node")
        held = {h.key for h in node.dra.held()}
        with node.transaction() as tx:
            pods = {pod.uid: pod for pod in (find_pod(node, ref, "remove", node_place) for ref in args.pods)}
            for pod in pods.values():
                refuse_a_running_run(f"remove {pod.key}", store.processes.get(pod.uid) if store is not None else None)
                node.remove(pod.uid)
                removed.append({"namespace": pod.namespace, "name": pod.name, "uid": pod.uid})
        if tx.failure is not None:
            raise tx.failure
        left = len(node.pods)
        # The removed pods' reservations ended with them (in the same write as the pod record); a claim
        # no pod reserves any more is deallocated, as the resource claim controller does.
        released = sorted(held - {h.key for h in node.dra.held()})
    if args.output != "text":
        from numalign.cli.output import emit

        # docs/schemas/remove.schema.json: the summary first, keys in the documents' camelCase
        emit({"schemaVersion": 1,
              "summary": {"removed": len(removed), "podsLeft": left, "claimsReleased": len(released)},
              "stateDir": str(args.state_dir), "removed": removed, "claimsReleased": released}, args.output)
    else:
        for r in removed:
            print(f"removed {r['namespace']}/{r['name']} (uid {r['uid']})")
        for key in released:
            print(f"deallocated DRA claim {key} (no pod reserves it any more; its devices are free)")
        print(f"{left} pod(s) left in {args.state_dir}")
    return 0

