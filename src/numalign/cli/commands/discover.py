"""`numalign discover`: show a machine (this one by default) as a tree, or write its machine file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES

if TYPE_CHECKING:
    from numalign.machine.topology import Machine


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "discover",
        help=SUMMARIES["discover"],
        description="Read the machine from sysfs (default: this machine) or from --machine, then print a "
        "tree (NUMA node -> socket -> cores; memory, hugepages, devices; distances) or the machine file "
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
    src.add_argument("--node", metavar="SNAPSHOT", type=Path,
                     help="a `numalign snapshot` tarball: its sysfs, with the devices its PodResources reported")
    src.add_argument("--list", action="store_true", help="list the built-in machines")
    p.add_argument(
        "--hwloc",
        action="store_true",
        help="show sysfs as hwloc reads it (node membership from cpumap, thread_siblings, node 0 for a kernel "
        "without NUMA) instead of as the kubelet reads it (cadvisor + topology.Discover); a second opinion "
        "only: every decision uses the kubelet's reading",
    )
    from numalign.cli.output import add_output_arg

    add_output_arg(p, "cadvisor", help="text tree, the machine file as json or yaml, or cadvisor MachineInfo JSON "
                   "(the kubelet's view); with --list: the built-in machines")
    from numalign.cli.options.reportargs import add_report_arg

    add_report_arg(p, "the machine: sockets, NUMA nodes, cores, threads, memory, hugepages, devices, distances")


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.sysfs import (
        discover_sysfs,
        discover_sysfs_hwloc,
        extracted_dump,
        find_sysfs_root,
        is_dump_archive,
        load_machine,
    )
    from numalign.machine.examples import EXAMPLES, example, example_names
    from numalign.machine.fileformat import machine_to_text
    from numalign.machine.render import render_list, render_machine

    if args.list:
        names = example_names()
        if args.output == "text":
            describe = {n: " ".join((EXAMPLES[n].__doc__ or "").split("\n\n")[0].split()) for n in names}
            sys.stdout.write(render_list(names, describe))
        else:
            from numalign.cli.output import emit

            rows = [{"name": n, "numaNodes": len(example(n).numa_nodes), "cpus": len(example(n).cpus)} for n in names]
            emit(rows, "yaml" if args.output == "yaml" else "json")
        return 0
    root = None
    if args.node is not None:
        from numalign.adapters.snapshot import open_snapshot

        snap = open_snapshot(args.node)
        root = snap.root if args.hwloc else None
        machine = discover_sysfs_hwloc(root, name=snap.node_name) if root is not None else snap.machine()
    elif args.machine:
        path = Path(args.machine)
        if args.machine in EXAMPLES or not path.exists():
            root = None
        elif path.is_dir():
            root = find_sysfs_root(path)
        else:  # a dump tarball reads as the same dump extracted: --hwloc and the second opinion included
            root = extracted_dump(path) if is_dump_archive(path) else None
        machine = load_machine(args.machine) if root is None or not args.hwloc else discover_sysfs_hwloc(root)
    else:
        root = find_sysfs_root(Path(args.sysfs_root)) if args.sysfs_root else Path("/")
        machine = discover_sysfs_hwloc(root) if args.hwloc else discover_sysfs(root)
    if root is not None and not args.hwloc:
        _second_opinion(machine, root)
    if args.report is not None:
        from numalign.cli.options.reportargs import write_report
        from numalign.report import NodeView, node_report

        where = args.machine or (f"sysfs under {args.sysfs_root}" if args.sysfs_root else "this host's sysfs")
        write_report(args.report, node_report(NodeView(machine, f"numalign discover: {machine.name}",
                                                       notes=(f"read from {where}",))))
    if args.output == "text":
        from numalign.cli.options.reportargs import use_color
        from numalign.report import NodeView, terminal_picture

        sys.stdout.write(render_machine(machine))
        sys.stdout.write("\n" + terminal_picture(NodeView(machine, machine.name), color=use_color(sys.stdout)))
    elif args.output == "cadvisor":
        import json

        from numalign.machine.cadvisor import machine_to_cadvisor

        sys.stdout.write(json.dumps(machine_to_cadvisor(machine), indent=2) + "\n")
    elif args.output == "json":
        from numalign.cli.output import emit
        from numalign.machine.fileformat import machine_to_dict

        emit(machine_to_dict(machine), "json")  # the machine file; docs/schemas/discover.schema.json
    else:  # YAML in flow style per CPU and device, one line each, for a file people edit
        sys.stdout.write(machine_to_text(machine, args.output))
    return 0


def _second_opinion(machine: Machine, root: Path) -> None:
    """Say where hwloc reads the same sysfs differently: that is where the firmware looks inconsistent."""
    import logging

    from numalign.adapters.sysfs import discover_sysfs_hwloc
    from numalign.errors import DiscoveryError

    log = logging.getLogger("numalign.discover")
    if machine.cadvisor is not None and machine.cadvisor.num_cpus > 0 and not machine.cpus:
        log.warning("cadvisor places no CPU on this machine (%s): the kubelet starts with %d CPUs and empty CPU "
                    "details, so its static CPU manager can neither reserve nor pin a CPU",
                    "no physical package id" if not machine.numa_nodes else "no online CPU with a readable "
                    "core_id and physical_package_id under its NUMA nodes", machine.cadvisor.num_cpus)
    elif not machine.cpus:
        log.warning("cadvisor counts no CPU on this machine (no online CPU with a readable core_id and "
                    "physical_package_id under its NUMA nodes): the kubelet's static CPU manager would not start "
                    "(could not detect number of cpus)")
    unlinked = _cpumap_only_nodes(root)
    if unlinked:
        log.warning("NUMA node(s) %s list CPUs in cpumap but have no cpuN links: cadvisor reads only the links, so "
                    "the kubelet sees no CPU on them (docs/machine-format.md, Discovery from sysfs)",
                    ",".join(map(str, unlinked)))
    try:
        hw = discover_sysfs_hwloc(root)
    except DiscoveryError as e:
        log.warning("hwloc would not read this machine (%s); shown as the kubelet reads it", e)
        return
    ours = {c.id: c.numa_node for c in machine.cpus}
    theirs = {c.id: c.numa_node for c in hw.cpus if c.online}
    notes = []
    if machine.numa_ids() != hw.numa_ids():
        notes.append(f"NUMA nodes {machine.numa_ids()} (kubelet) vs {hw.numa_ids()} (hwloc)")
    if ours != theirs:
        differ = sorted(set(ours) ^ set(theirs) | {c for c in set(ours) & set(theirs) if ours[c] != theirs[c]})
        notes.append(f"{len(differ)} CPU(s) placed differently or seen by one reading only "
                     f"(e.g. {', '.join(map(str, differ[:8]))})")
    if notes:
        log.warning("hwloc reads this sysfs differently: %s; the firmware looks inconsistent there "
                    "(numalign discover --hwloc shows hwloc's reading; decisions use the kubelet's)", "; ".join(notes))


def _cpumap_only_nodes(root: Path) -> list[int]:
    """NUMA nodes whose `cpumap` names CPUs while the directory has no `cpuN` link (old dumps, and
    hwloc's fakeheterocpunuma): cadvisor's GetNodesInfo globs the links and never reads cpumap, so
    those CPUs are not on the node for the kubelet, whatever hwloc shows."""
    import re

    from numalign.errors import InvalidInputError
    from numalign.limits import read_bounded

    nodes = root / "sys" / "devices" / "system" / "node"
    out = []
    try:
        entries = sorted(nodes.iterdir()) if nodes.is_dir() else []
    except OSError:
        return []
    for d in entries:
        m = re.fullmatch(r"node(\d+)", d.name)
        if m is None or d.is_symlink() or not d.is_dir():
            continue
        try:
            if any(re.fullmatch(r"cpu\d+", e.name) for e in d.iterdir()):
                continue
            text = read_bounded(d / "cpumap", 4096, "a NUMA node's cpumap", regular_only=True).decode("ascii")
        except (OSError, UnicodeDecodeError, InvalidInputError):
            continue  # discovery itself reports unreadable files; this is only an explanation
        if any(c not in "0," for c in text.strip()):
            out.append(int(m.group(1)))
    return sorted(out)
