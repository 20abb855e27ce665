"""Human-readable machine output: a tree NUMA node -> socket -> cores, memory, hugepages, devices,
then the distance matrix. Pure: returns text.
"""

from __future__ import annotations

from numalign.k8s.cpuset import format_cpuset
from numalign.machine.topology import Device, Machine, NUMANode

_BINARY = (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10))
_MAX_CORES_LISTED = 16


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def human_bytes(n: int) -> str:
    for suffix, shift in _BINARY:
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.0f} {suffix}" if value == int(value) else f"{value:.1f} {suffix}"
    return f"{n} B"


def binary_quantity(size: int) -> str:
    """Bytes as a Kubernetes quantity in the largest exact binary unit: 2097152 -> "2Mi", 1500 -> "1500"."""
    for suffix, shift in (("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{suffix}"
    return str(size)


def readable_bytes(size: int) -> str:
    """Bytes for a person comparing figures (free now, why, short of): binary units as kubectl writes
    them, in the largest unit that leaves at least 1 (exactly when exact, else to one decimal, "~"
    marking the rounding), so 96168556Ki is read beside 232Gi as ~91.7Gi. Exact amounts a manager
    allocated are binary_quantity's."""
    for suffix, shift in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        unit = 1 << shift
        if size >= unit:
            if size % unit == 0:
                return f"{size >> shift}{suffix}"
            return f"~{size / unit:.1f}{suffix}"
    return str(size)


def page_size_name(size: int) -> str:
    """2097152 -> "2Mi", as in the kubelet's hugepages-2Mi resource name."""
    return binary_quantity(size)


def no_numa_note(m: Machine) -> str:
    """What the kubelet sees of a machine without NUMA nodes (cadvisor found no node directory and no
    physical package id): CPUs it counts, none it can place."""
    counted = m.capacity_cpus()
    return (f"no NUMA node: the kubelet counts {_n(counted, 'CPU')} (cadvisor's NumCores) but knows no "
            "NUMA node, socket or core for any of them")


def render_machine(m: Machine) -> str:
    lines = [_summary(m)]
    if not m.numa_nodes:
        lines.append(no_numa_note(m))
    by_id = {c.id: c for c in m.cpus}
    for node in m.numa_nodes:
        lines.append(_node_line(node))
        sockets: dict[int, list[int]] = {}
        for cpu_id in sorted(node.cpus):
            sockets.setdefault(by_id[cpu_id].socket, []).append(cpu_id)
        for socket, cpus in sorted(sockets.items()):
            lines.extend(_socket_lines(m, socket, set(cpus)))
        for dev_line in _device_lines([d for d in m.devices if d.numa_nodes and node.id in d.numa_nodes]):
            lines.append(f"    {dev_line}")
    floating = [d for d in m.devices if d.numa_nodes is None]
    if floating:
        lines.append("devices without NUMA affinity")
        lines.extend(f"    {line}" for line in _device_lines(floating))
    unattached = sorted(c.id for c in m.cpus if c.online and c.numa_node is None)
    if unattached:
        lines.append(f"online CPUs in no NUMA node (the kubelet ignores them): {format_cpuset(unattached)}")
    offline = m.all_offline_cpus()
    if offline:
        lines.append(f"offline CPUs: {format_cpuset(offline)}")
    lines.extend(render_distances(m))
    return "\n".join(lines) + "\n"


def _summary(m: Machine) -> str:
    online = m.online_cpus()
    cores = m.physical_cores()
    memory = sum(n.memory_bytes for n in m.numa_nodes)
    cpuless = sum(1 for n in m.numa_nodes if not n.has_cpu)
    extra = f" ({cpuless} without CPUs)" if cpuless else ""
    return (
        f"machine {m.name}: {_n(len(m.sockets()), 'socket')}, {_n(len(m.numa_nodes), 'NUMA node')}{extra}, "
        f"{_n(len(cores), 'core')}, {_n(len(online), 'CPU')}, {human_bytes(memory)} memory, "
        f"{_n(len(m.devices), 'device')}"
    )


def _node_line(node: NUMANode) -> str:
    parts = [f"NUMA node {node.id}", f"memory {human_bytes(node.memory_bytes)}"]
    pages = [f"{page_size_name(size)} x {count}" for size, count in node.hugepages.items() if count]
    if pages:
        parts.append("hugepages " + ", ".join(pages))
    parts.append(f"CPUs {format_cpuset(node.cpus)}" if node.cpus else "no CPUs")
    return "  ".join(parts)


def _socket_lines(m: Machine, socket: int, cpus: set[int]) -> list[str]:
    cores = [c & cpus for c in m.physical_cores() if c & cpus]
    threads = sorted({len(c) for c in cores})
    smt = _n(threads[0], "thread") + " each" if len(threads) == 1 else f"{'/'.join(map(str, threads))} threads"
    l3 = sorted({c.l3 for c in m.cpus if c.id in cpus and c.l3 is not None})
    l3_text = f", L3 {','.join(map(str, l3))}" if l3 else ""
    out = [f"    socket {socket}: {_n(len(cores), 'core')}, {smt}{l3_text}"]
    if len(cores) <= _MAX_CORES_LISTED:
        out.append("      cores " + " ".join("+".join(map(str, sorted(c))) for c in cores))
    return out


def _device_lines(devices: list[Device]) -> list[str]:
    by_resource: dict[str, list[str]] = {}
    for d in devices:
        label = d.id if d.health == "Healthy" else f"{d.id} ({d.health})"
        by_resource.setdefault(d.resource, []).append(label)
    return [f"{res}: {', '.join(ids)}" for res, ids in sorted(by_resource.items())]


def render_distances(m: Machine) -> list[str]:
    if len(m.numa_nodes) < 2:
        return []
    matrix = m.distance_matrix()
    if matrix is None:
        return ["distances: not reported by the firmware"]
    ids = m.numa_ids()
    width = max(len(str(i)) for i in ids)
    width = max(width, *(len(str(x)) for row in matrix.values() for x in row)) + 1
    lines = ["distances", "  " + " " * (width + 1) + "".join(f"{i:>{width}}" for i in ids)]
    for i in ids:
        lines.append(f"  {i:>{width}} " + "".join(f"{x:>{width}}" for x in matrix[i]))
    return lines


def render_list(names: list[str], describe: dict[str, str]) -> str:
    width = max(len(n) for n in names)
    return "".join(f"{n:<{width}}  {describe[n]}\n" for n in names)
