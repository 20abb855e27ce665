"""`numalign run` processes as `numalign pods` lists them: read from numalign_pods.json (as the state
directory reads it) under a shared transaction, each marked alive or ended (an ended one is released
by the next command that decides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numalign.adapters.statedir.directory import read_pod_record
from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.locks import transaction
from numalign.errors import CheckpointError, NumalignError
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
        allocation = proc.get("allocation") or {}
        if not _listable(allocation):
            # Shown as it is (the node reads the checkpoints), so a damaged one is said here in one line, not
            # met as an internal error in the table.
            raise CheckpointError(
                f"{state_dir / POD_RECORD_FILE}: pod {entry.uid}: process.allocation: expected {{cpus: string, "
                "memory: [{size: integer, numa_nodes: [integer], type: string}], devices: {resource: [id]}}, got "
                f"{str(allocation)[:120]}; the record was not written by numalign run; restore the file or remove "
                "that pod's entry")
        out.append({
            "pod": f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}", "uid": entry.uid,
            **ref.to_dict(), "container": proc.get("container"), "allocation": allocation,
            "cgroup": proc.get("cgroup"), "alive": is_alive(ref),
        })
    return sorted(out, key=lambda r: r["pid"])


def _listable(a: Any) -> bool:
    """The shape run_rows and `pods -o json` read: {cpus, memory: [{size, numa_nodes, type}], devices}."""
    if not isinstance(a, dict):
        return False
    memory, devices = a.get("memory") or [], a.get("devices") or {}
    return (isinstance(a.get("cpus") or "", str) and isinstance(memory, list) and isinstance(devices, dict)
            and all(isinstance(b, dict) and isinstance(b.get("size"), int) and isinstance(b.get("type"), str)
                    and isinstance(b.get("numa_nodes"), list) for b in memory)
            and all(isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in devices.values()))


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
