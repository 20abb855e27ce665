"""`numalign pods`: the node's pods and their allocations, from the status file `numalign serve` keeps."""

from __future__ import annotations

import argparse
import json
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
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.add_argument("--machine", metavar="FILE|NAME",
                   help="the machine to draw the pods on (default: the one the agent recorded in its status file)")
    from numalign.cli.reportargs import add_report_arg

    add_report_arg(p, "the machine with every pod's CPUs, memory and devices and each rejected pod's decision record")


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.statelock import transaction
    from numalign.agent.status import STATUS_FILE, read_status
    from numalign.errors import InvalidInputError

    with transaction(args.state_dir, shared=True):  # a reader: never between two files of one change
        doc = read_status(args.state_dir)
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
    if args.output == "json":
        json.dump({"pods": doc["pods"], "manifests": doc.get("manifests", {}),
                   "resources": doc.get("resources", {}), "faults": doc.get("faults", {})},
                  sys.stdout, indent=2, sort_keys=True)
        print()
        return 0
    _print_text(doc)
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


def _print_text(doc: dict[str, Any]) -> None:
    from numalign.machine.render import binary_quantity

    pods = sorted(doc["pods"].values(), key=lambda p: (p["namespace"], p["name"]))
    if not pods:
        print("no pods")
    for p in pods:
        line = f"{p['namespace']}/{p['name']}  {p['status']}"
        if p["status"] != "admitted":
            line += f"  {p.get('reason') or ''}: {p.get('message') or ''}"
        if p["status"] == "admitted" and p.get("containers") in ("starting", "failed"):
            line += f"  containers {p['containers']}"
        if p.get("file"):
            line += f"  ({p['file']})"
        print(line)
        for cname, a in sorted((p.get("allocations") or {}).items()):
            pool = "exclusive" if a.get("exclusive_cpus") else "shared pool"
            parts = [f"cpus {a.get('cpus') or '-'} ({pool})"]
            for b in a.get("memory", []):
                size = binary_quantity(b["size"]) if isinstance(b.get("size"), int) else b.get("size")
                parts.append(f"{b['type']} {size} on NUMA {','.join(map(str, b['numa_nodes']))}")
            for res, devs in sorted(a.get("devices", {}).items()):
                parts.append(f"{res} {' '.join(sorted(devs))}")
            print(f"    {cname}: " + "; ".join(parts))
            _print_runtime((p.get("runtime") or {}).get(cname) or {})
        for cname, err in sorted((p.get("container_errors") or {}).items()):
            print(f"    {cname}: container start failed: {err}")
    for res, info in sorted((doc.get("resources") or {}).items()):
        healthy, unhealthy = info.get("healthy") or [], info.get("unhealthy") or []
        plugin = "plugin connected" if info.get("connected") else "plugin not connected"
        if info.get("connected") and info.get("reported") is False:
            plugin += ", no devices reported yet"
        line = f"resource {res}: {len(healthy)} healthy"
        if unhealthy:
            line += f", {len(unhealthy)} unhealthy ({' '.join(unhealthy)})"
        print(f"{line}; {plugin}")
    bad = {f: m for f, m in sorted(doc.get("manifests", {}).items()) if m.get("status") != "ok"}
    for f, info in bad.items():
        print(f"invalid manifest {f}: {info.get('error')}")
    faults = doc.get("faults") or {}
    if faults:
        print("faults: " + ", ".join(f"{k}={v}" for k, v in sorted(faults.items())))


def _print_runtime(rt: dict[str, Any]) -> None:
    """What the device plugins' Allocate asked the container runtime for (CRI fields)."""
    env = rt.get("envs") or {}
    if env:
        print(f"      env {' '.join(f'{k}={v}' for k, v in sorted(env.items()))}")
    for mt in rt.get("mounts") or []:
        ro = " (read-only)" if mt.get("read_only") else ""
        print(f"      mount {mt.get('host_path')} -> {mt.get('container_path')}{ro}")
    for dev in rt.get("devices") or []:
        print(f"      device {dev.get('host_path')} -> {dev.get('container_path')} ({dev.get('permissions')})")
    annotations = rt.get("annotations") or {}
    if annotations:
        print(f"      annotations {' '.join(f'{k}={v}' for k, v in sorted(annotations.items()))}")
    cdi = rt.get("cdi_devices") or []
    if cdi:
        print(f"      cdi {' '.join(cdi)}")
