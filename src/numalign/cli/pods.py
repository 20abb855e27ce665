"""`numalign pods`: the node's pods and their allocations, from the status file `numalign serve` keeps."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from numalign.paths import DEFAULT_STATE_DIR

    p: argparse.ArgumentParser = sub.add_parser(
        "pods",
        help="list the node agent's pods, their admission outcome and allocations",
        description="Read numalign_status.json in the state directory of `numalign serve` and list every pod "
        "(admitted, rejected or pending) with its CPUs, memory and devices, and every invalid manifest.",
    )
    p.add_argument("--state-dir", metavar="DIR", type=Path, default=DEFAULT_STATE_DIR,
                   help=f"the agent's --state-dir (default {DEFAULT_STATE_DIR})")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, "wide", help="text (default): a table of the pods (NAMESPACE NAME STATUS CPUS MEMORY DEVICES) "
                   "and the machine drawn with them; wide: more columns (CONTAINERS HUGEPAGES DEVICE-IDS FILE) and "
                   "each container's allocation and runtime requests; json, yaml: the status document")
    p.add_argument("--machine", metavar="FILE|NAME",
                   help="the machine to draw the pods on (default: the one the agent recorded in its status file)")
    from numalign.cli.reportargs import add_report_arg

    add_report_arg(p, "the machine with every pod's CPUs, memory and devices and each rejected pod's decision record")


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.statelock import transaction
    from numalign.agent.status import STATUS_FILE, read_status
    from numalign.errors import InvalidInputError
    from numalign.run.listing import run_processes, run_rows

    with transaction(args.state_dir, shared=True):  # a reader: never between two files of one change
        doc = read_status(args.state_dir)
        runs = run_processes(args.state_dir)  # `numalign run` processes sharing the directory
    agent = doc is not None
    if doc is None and runs:
        doc = {"pods": {}}
    if doc is None:
        raise InvalidInputError(
            f"{args.state_dir / STATUS_FILE} does not exist: no `numalign serve` has run with --state-dir "
            f"{args.state_dir}; pass the agent's --state-dir"
        )
    view = _view(args, doc)
    if args.report is not None:
        from numalign.cli.reportargs import write_report
        from numalign.report import node_report

        if view is None:
            raise InvalidInputError(
                f"{args.state_dir / STATUS_FILE} names no machine (written by an older numalign serve); pass "
                "--machine NAME|FILE, the machine the agent runs with, to draw the report"
            )
        write_report(args.report, node_report(view))
    if args.output in ("json", "yaml"):
        from numalign.cli.output import emit

        emit({"pods": doc["pods"], "manifests": doc.get("manifests", {}), "resources": doc.get("resources", {}),
              "faults": doc.get("faults", {}), "processes": runs}, args.output, sort_keys=True)
        return 0
    from numalign.cli.pods_table import print_pods, table

    if agent:
        print_pods(doc, wide=args.output == "wide")
    if runs:
        # `numalign run` processes: a second table, one row per process holding an allocation.
        print(("\n" if agent else "") + table(*run_rows(runs)), end="")
    if view is not None:
        from numalign.cli.reportargs import use_color
        from numalign.report import terminal_picture

        print()
        sys.stdout.write(terminal_picture(view, color=use_color(sys.stdout)))
    return 0


def _view(args: argparse.Namespace, doc: dict[str, Any]) -> Any:
    """The pods on their machine: --machine, else the machine the agent recorded; None when neither."""
    from numalign.report import node_view_from_status

    if args.machine:
        from numalign.adapters.sysfs import load_machine

        machine = load_machine(args.machine)
    elif isinstance(doc.get("machine"), dict):
        from numalign.machine.fileformat import machine_from_dict

        machine = machine_from_dict(doc["machine"], f"{args.state_dir / 'numalign_status.json'}: machine")
    else:
        return None
    return node_view_from_status(machine, doc, title=f"numalign pods: {machine.name}",
                                 notes=[f"from the agent's state in {args.state_dir}"])
