"""`numalign run` processes as `numalign pods` lists them: read from numalign_pods.json (as the state
directory reads it) under a shared transaction, each marked alive or ended (an ended one is released
by the next command that decides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numalign.adapters.statedir.directory import read_pod_record
from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.locks import transaction
from numalign.errors import NumalignError
from numalign.machine.render import binary_quantity
from numalign.run.process import ProcessRef, describe, is_alive


def run_processes(state_dir: Path) -> list[dict[str, Any]]:
    """One entry per run pod: pod, uid, pid, start_time, command, container, allocation, alive."""
    with transaction(state_dir, shared=True):
        record = read_pod_record(state_dir)
    out = []
    for entry in record.pods if record is not None else ():
        proc = entry.process
        if proc is None:
            continue
        try:
            ref = ProcessRef.from_dict(proc, f"{state_dir / POD_RECORD_FILE}: pod {entry.uid}")
        except NumalignError:
            continue
        meta = entry.manifest.get("metadata") or {}
        out.append({
            "pod": f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}", "uid": entry.uid,
            **ref.to_dict(), "container": proc.get("container"), "allocation": proc.get("allocation") or {},
            "cgroup": proc.get("cgroup"), "alive": is_alive(ref),
        })
    return sorted(out, key=lambda r: r["pid"])


RUN_COLUMNS = ("PID", "COMMAND", "POD", "STATUS", "CPUS", "MEMORY", "DEVICES")


def run_rows(runs: list[dict[str, Any]]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The processes as table rows: STATUS running, or ended (released by the next run, admit or serve)."""
    rows: list[tuple[str, ...]] = []
    for r in runs:
        a = r["allocation"]
        cpus = a.get("cpus") or "-"
        memory = ", ".join(f"{binary_quantity(b['size'])}@{','.join(map(str, b['numa_nodes']))}"
                           for b in a.get("memory", []) if b.get("type") == "memory") or "-"
        devices = ", ".join(f"{res} {' '.join(sorted(devs))}" for res, devs in sorted((a.get("devices") or {}).items()))
        rows.append((str(r["pid"]), describe(r["command"], 40), r["pod"], "running" if r["alive"] else "ended",
                     cpus if a.get("exclusive_cpus") else f"shared ({cpus})", memory, devices or "-"))
    return RUN_COLUMNS, rows
