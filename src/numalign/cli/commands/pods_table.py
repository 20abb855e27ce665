"""`numalign pods` as text: a kubectl-like table of the agent's pods, then what the table cannot hold.

One row per pod. STATUS is `admitted`, `pending`, or for a rejected pod the kubelet's reason (as
`kubectl get pods` shows a pod the kubelet rejected: TopologyAffinityError, OutOfcpu, ...). CPUS is the
pod's exclusive CPUs (`shared` when it runs in the shared pool), MEMORY its pinned memory with the NUMA
nodes after `@`, DEVICES a count per resource. `-o wide` adds CONTAINERS, HUGEPAGES, DEVICE-IDS and FILE
columns and, under the table, each container's allocation and what the device plugins asked the runtime
for.
"""

from __future__ import annotations

from typing import Any

from numalign.k8s.cpuset import format_cpuset, parse_cpuset
from numalign.machine.render import binary_quantity

COLUMNS = ("NAMESPACE", "NAME", "STATUS", "CPUS", "MEMORY", "DEVICES")
WIDE_COLUMNS = (*COLUMNS, "CONTAINERS", "HUGEPAGES", "DEVICE-IDS", "FILE")


def table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Left-aligned columns three spaces apart, as kubectl's printers (tabwriter, padding 3)."""
    widths = [max(len(r[i]) for r in (headers, *rows)) for i in range(len(headers))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
                   for r in (headers, *rows))


def print_pods(doc: dict[str, Any], wide: bool) -> None:
    pods = sorted(doc["pods"].values(), key=lambda p: (p["namespace"], p["name"]))
    if pods:
        print(table(WIDE_COLUMNS if wide else COLUMNS, [_row(p, wide) for p in pods]), end="")
    else:
        print("no pods")
    for p in pods:
        if p["status"] != "admitted":
            print(f"{p['namespace']}/{p['name']}: {p['status']}: {p.get('reason') or ''}: {p.get('message') or ''}")
        for claim, devices in sorted((p.get("claims") or {}).items()):
            print(f"{p['namespace']}/{p['name']}: DRA claim {claim}: {', '.join(devices) or 'no device'}")
        for cname, err in sorted((p.get("container_errors") or {}).items()):
            print(f"{p['namespace']}/{p['name']}: container {cname} start failed: {err}")
    if wide:
        _print_containers(pods)
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


def _row(p: dict[str, Any], wide: bool) -> tuple[str, ...]:
    allocs = list((p.get("allocations") or {}).values())
    status = p["status"]
    if status == "rejected":
        status = p.get("reason") or status
    exclusive = frozenset[int]().union(*(parse_cpuset(a.get("cpus") or "") for a in allocs
                                          if a.get("exclusive_cpus")))
    cpus = format_cpuset(exclusive) if exclusive else ("shared" if allocs else "-")
    memory = _memory(allocs, lambda t: t == "memory")
    devices: dict[str, list[str]] = {}
    for a in allocs:
        for res, ids in (a.get("devices") or {}).items():
            devices.setdefault(res, []).extend(ids)
    counts = ",".join(f"{res}={len(ids)}" for res, ids in sorted(devices.items())) or "-"
    row = (p["namespace"], p["name"], status, cpus, memory, counts)
    if not wide:
        return row
    ids = ",".join(i for _, group in sorted(devices.items()) for i in sorted(group)) or "-"
    return (*row, p.get("containers") or "-", _memory(allocs, lambda t: t != "memory"), ids, p.get("file") or "-")


def _memory(allocs: list[dict[str, Any]], wanted: Any) -> str:
    """Pinned memory of the chosen types summed over containers: `4Gi@0`, `hugepages-1Gi=2Gi@0,1`."""
    sizes: dict[str, int] = {}
    nodes: dict[str, set[int]] = {}
    for a in allocs:
        for b in a.get("memory") or []:
            if wanted(b["type"]) and isinstance(b.get("size"), int):
                sizes[b["type"]] = sizes.get(b["type"], 0) + b["size"]
                nodes.setdefault(b["type"], set()).update(b.get("numa_nodes") or [])
    cells = [(f"{t}=" if t != "memory" else "") + f"{binary_quantity(sizes[t])}@{','.join(map(str, sorted(nodes[t])))}"
             for t in sorted(sizes)]
    return ";".join(cells) or "-"


def _print_containers(pods: list[dict[str, Any]]) -> None:
    """-o wide: every container's allocation, as `numalign admit` prints it, and its runtime requests."""
    from numalign.report.view import container_order

    for p in pods:
        allocations = [(n, p["allocations"][n]) for n in container_order(p) if n in (p.get("allocations") or {})]
        if not allocations:
            continue
        print(f"{p['namespace']}/{p['name']}:")
        for cname, a in allocations:
            pool = "exclusive" if a.get("exclusive_cpus") else "shared pool"
            parts = [f"cpus {a.get('cpus') or '-'} ({pool})"]
            for b in a.get("memory", []):
                size = binary_quantity(b["size"]) if isinstance(b.get("size"), int) else b.get("size")
                parts.append(f"{b['type']} {size} on NUMA {','.join(map(str, b['numa_nodes']))}")
            for res, devs in sorted(a.get("devices", {}).items()):
                parts.append(f"{res} {' '.join(sorted(devs))}{_device_numa(devs)}")
            print(f"    {cname}: " + "; ".join(parts))
            _print_runtime((p.get("runtime") or {}).get(cname) or {})


def _device_numa(devs: Any) -> str:
    """` (NUMA 0)` after a resource's device ids, as `numalign admit` prints them: the NUMA nodes the
    plugin reported for them (`none` when it reported no topology). The status file keeps each id's
    nodes (id -> nodes); a bare id list carries none to show."""
    if not isinstance(devs, dict):
        return ""
    numa = sorted({int(n) for nodes in devs.values() if nodes for n in nodes})
    return f" (NUMA {','.join(map(str, numa)) if numa else 'none'})"  # 0,1 as admit and the memory part say


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
