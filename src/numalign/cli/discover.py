"""`numalign discover`: show a machine (this one by default) as a tree, or write its machine file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "discover",
        help="show the machine's NUMA topology (this machine, a sysfs dump, a machine file or a built-in)",
        description="Read the machine from sysfs (default: this machine) or from --machine, then print a "
        "tree (node -> socket -> cores; memory, hugepages, devices; distances) or the machine file "
        "(--output json|yaml) that every --machine option accepts.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--sysfs-root", metavar="DIR", help="root holding sys/ (an extracted sysfs dump); default /")
    src.add_argument(
        "--machine",
        metavar="FILE|NAME",
        help="a built-in machine name, a machine file (.json/.yaml), cadvisor MachineInfo JSON, "
        "a sysfs root directory or a dump tarball",
    )
    src.add_argument("--list", action="store_true", help="list the built-in machines")
    p.add_argument(
        "--output",
        "-o",
        choices=("text", "json", "yaml", "cadvisor"),
        default="text",
        help="text tree, the machine file as json or yaml, or cadvisor MachineInfo JSON (the kubelet's view)",
    )


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.sysfs import discover_sysfs, find_sysfs_root, load_machine
    from numalign.machine.examples import EXAMPLES, example, example_names
    from numalign.machine.fileformat import machine_to_text
    from numalign.machine.render import render_list, render_machine

    if args.list:
        names = example_names()
        if args.output == "text":
            describe = {n: " ".join((EXAMPLES[n].__doc__ or "").split("\n\n")[0].split()) for n in names}
            sys.stdout.write(render_list(names, describe))
        else:
            import json

            rows = [{"name": n, "numa_nodes": len(example(n).numa_nodes), "cpus": len(example(n).cpus)} for n in names]
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if args.machine:
        machine = load_machine(args.machine)
    else:
        machine = discover_sysfs(find_sysfs_root(Path(args.sysfs_root)) if args.sysfs_root else "/")
    if args.output == "text":
        sys.stdout.write(render_machine(machine))
    elif args.output == "cadvisor":
        import json

        from numalign.machine.cadvisor import machine_to_cadvisor

        sys.stdout.write(json.dumps(machine_to_cadvisor(machine), indent=2) + "\n")
    else:
        sys.stdout.write(machine_to_text(machine, args.output))
    return 0
