"""A small Linux sysfs tree written as the kernel lays it out (node CPU links, PCI devices), for tests
that need a node to discover or snapshot."""

from __future__ import annotations

from pathlib import Path


def write_sysfs(root: Path, *, nodes: int = 2, cores: int = 2, threads: int = 2,
                gpus: dict[str, int] | None = None, hostname: str = "worker-1") -> Path:
    """Write sys/ and proc/ under `root`: `nodes` NUMA nodes of `cores` cores x `threads` threads,
    64 GiB each, and NVIDIA GPUs {PCI address: NUMA node}. Returns root."""
    system = root / "sys" / "devices" / "system"
    n_cores = nodes * cores
    n_cpus = n_cores * threads
    (system / "cpu").mkdir(parents=True)
    (system / "cpu" / "online").write_text(f"0-{n_cpus - 1}\n")
    for cpu in range(n_cpus):
        core = cpu % n_cores
        topo = system / "cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "core_id").write_text(f"{core}\n")
        (topo / "physical_package_id").write_text(f"{core // cores}\n")
    (system / "node").mkdir()
    (system / "node" / "online").write_text(f"0-{nodes - 1}\n")
    for n in range(nodes):
        d = system / "node" / f"node{n}"
        d.mkdir()
        (d / "meminfo").write_text(f"Node {n} MemTotal:       67108864 kB\n")
        (d / "distance").write_text(" ".join("10" if m == n else "21" for m in range(nodes)) + "\n")
        for cpu in range(n_cpus):
            if (cpu % n_cores) // cores == n:
                (d / f"cpu{cpu}").symlink_to(f"../../cpu/cpu{cpu}")
    for addr, node in (gpus or {}).items():
        dev = root / "sys" / "bus" / "pci" / "devices" / addr
        dev.mkdir(parents=True)
        (dev / "class").write_text("0x030200\n")
        (dev / "vendor").write_text("0x10de\n")
        (dev / "numa_node").write_text(f"{node}\n")
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text(f"MemTotal:       {67108864 * nodes} kB\n")
    (root / "proc" / "sys" / "kernel" / "hostname").write_text(f"{hostname}\n")
    return root
