"""Keep shared-pool runs off CPUs that another run was just given exclusively.

The kubelet's CPU manager gives containers without exclusive CPUs the shared pool, which shrinks
when a container gets exclusive CPUs and grows when it releases them; its reconcile loop rewrites the
shared containers' cpusets every --cpu-manager-reconcile-period. A run does the same at once: in the
transaction that admits or releases a run, every live shared-pool run gets the pool as it now is
(every thread of its command and of its command's descendants, and its cgroup's cpuset.cpus), so no
shared-pool process keeps running on a CPU that is exclusive from then on.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from numalign.errors import NumalignError
from numalign.kubelet.node import Node
from numalign.run.affinity import allowed_cpus
from numalign.run.process import PROC, ProcessRef, is_alive
from numalign.run.records import RunProcesses


def descendants(root: int, proc: Path = PROC) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_bytes()
        except OSError:
            continue
        ppid = int(raw[raw.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _set_tasks(pid: int, cpus: list[int], proc: Path = PROC) -> None:
    for task in descendants(pid, proc):
        try:
            tids = [int(t.name) for t in (proc / str(task) / "task").iterdir()]
        except OSError:
            continue  # ended meanwhile
        for tid in tids:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.sched_setaffinity(tid, cpus)


def reconcile_shared_pool(node: Node, runs: RunProcesses) -> list[str]:
    """Give every live shared-pool run the current pool; returns the pods whose CPUs changed. Called
    inside the caller's transaction, which writes the records' new CPUs."""
    changed = []
    for uid, record in list(runs.records.items()):
        container = record.get("container")
        alloc = record.get("allocation")
        if uid not in node.pods or not isinstance(container, str) or not isinstance(alloc, dict):
            continue
        if alloc.get("exclusive_cpus"):
            continue
        now = node.allocation(uid, container)
        cpus = now.cpus_text
        if cpus == alloc.get("cpus"):
            continue
        try:
            ref = ProcessRef.from_dict(record, "numalign_pods.json")
        except NumalignError:
            continue
        if not is_alive(ref):
            continue
        cgroup = record.get("cgroup")
        if isinstance(cgroup, str) and (Path(cgroup) / "cpuset.cpus").exists():
            with contextlib.suppress(OSError):
                (Path(cgroup) / "cpuset.cpus").write_text(f"{cpus}\n", encoding="ascii")
        _set_tasks(ref.pid, sorted(set(now.cpus) & allowed_cpus()) or list(now.cpus))
        runs.records[uid] = {**record, "allocation": {**alloc, "cpus": cpus}}
        changed.append(node.pods[uid].key)
    return changed
