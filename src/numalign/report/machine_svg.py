"""The machine drawn: sockets > NUMA nodes > cores > threads, memory and hugepages per NUMA node,
devices on their NUMA nodes, each container's share coloured (see report.colors).

Theory of operation
-------------------
Every box of a level has the same size (cells, cores, NUMA nodes, sockets), so a reader compares
nodes at a glance and a 64-node machine is the 4-node picture with more rows. Sizes come from the
machine, never from the pods: a CPU cell is wide enough for its id at a font that stays legible when
printed (9 px up to 256 CPUs, 7 px beyond); layout.grid_cols picks rows and columns at each level.
Tooltips (<title>) carry the details a label has no room for.

Memory is drawn against each NUMA node's total memory; a container's block that spans several NUMA
nodes is spread evenly over them (the allocation record gives the block and its nodes, not the split).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from numalign.k8s.cpuset import format_cpuset
from numalign.machine.render import human_bytes, page_size_name
from numalign.machine.topology import Device, Machine, NUMANode
from numalign.report import colors
from numalign.report.layout import block_size, cols_within, grid_cols, place
from numalign.report.svg import el, group, rect, svg, text, title
from numalign.report.view import NodeView

PAD = 6
GAP = 8
BAR_H = 7
LINE = 11
MINI_W = 64  # px: a memory-only NUMA node's box
PICTURE_WIDTH = 940  # px: sockets side by side up to this, leaving room for the decision records


@dataclass
class Owners:
    """Who holds what: colour index per container, and the maps the drawing looks things up in."""

    names: list[str]  # "ns/pod container", by colour index
    cpu: dict[int, int]
    memory: dict[tuple[int, str], list[tuple[int, float]]]  # (numa, type) -> [(owner, bytes)]
    device: dict[tuple[str, str], int]  # (resource, id) -> owner

    @classmethod
    def of(cls, view: NodeView) -> Owners:
        out = cls([], {}, {}, {})
        for i, (pod, c) in enumerate(view.owners()):
            out.names.append(f"{pod.key} {c.name}")
            if c.exclusive:
                for cpu in c.cpus:
                    out.cpu[cpu] = i  # later containers win: an app container reusing an init container's CPUs
            for b in c.memory:
                for n in b.numa_nodes:
                    out.memory.setdefault((n, b.type), []).append((i, b.size / max(1, len(b.numa_nodes))))
            for res, ids in c.devices.items():
                for d in ids:
                    out.device[(res, d)] = i
        return out


def short_device(d: Device) -> str:
    """"nvidia.com/gpu" + "0000:17:00.0" -> "gpu 17:00.0": short enough to sit on a chip. A PCI domain
    other than 0000 stays ("gpu 0008:01:00.0"): a GB200 tray's GPUs differ only in it."""
    kind = d.resource.rsplit("/", 1)[-1].split("_")[0][:8]
    ident = d.id[-10:]
    if len(d.id) == 12 and d.id[4] == ":":
        ident = d.id[5:] if d.id.startswith("0000:") else d.id
    return f"{kind} {ident}"


@dataclass(frozen=True)
class Metrics:
    font: float
    cell_w: float
    cell_h: float

    @classmethod
    def of(cls, m: Machine) -> Metrics:
        font = 9.0 if len(m.cpus) <= 256 else 7.0
        digits = len(str(max((c.id for c in m.cpus), default=0)))
        return cls(font, max(16.0, math.ceil(digits * font * 0.62) + 5), font + 5)

    def chip_w(self, label: str) -> float:
        return len(label) * self.font * 0.6 + 8


class MachinePicture:
    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.m = view.machine
        self.owners = Owners.of(view)
        self.k = Metrics.of(self.m)
        self.by_id = {c.id: c for c in self.m.cpus}
        cores: dict[int, list[list[int]]] = {n.id: [] for n in self.m.numa_nodes}
        for core in self.m.physical_cores():
            numa = self.by_id[min(core)].numa_node
            if numa is not None:
                cores[numa].append(sorted(core))
        self.cores = cores
        self.threads = max((len(c) for cs in cores.values() for c in cs), default=1)
        most = max((len(cs) for cs in cores.values()), default=0)
        self.core_cols = grid_cols(most, self.k.cell_w, self.threads * self.k.cell_h, 2.4) if most else 1
        grid_w, self.grid_h = block_size(most, self.core_cols, self.k.cell_w, self.threads * self.k.cell_h, 2)
        self.inner_w = max(grid_w, 118.0)
        self.pages = sorted({s for n in self.m.numa_nodes for s, c in n.hugepages.items() if c})
        self.chip_rows = max((len(self._chip_rows(n)) for n in self.m.numa_nodes), default=0)
        self.node_w = self.inner_w + 2 * PAD
        self.node_h = (PAD + LINE + 2 + self.grid_h + 4 + (1 + len(self.pages)) * (LINE + BAR_H + 2)
                       + self.chip_rows * (self.k.cell_h + 3) + PAD)

    # ---- pieces ------------------------------------------------------------------------------------
    def _devices(self, node: NUMANode) -> list[Device]:
        return [d for d in self.m.devices if d.numa_nodes and node.id == min(d.numa_nodes)]

    def _chip_rows(self, node: NUMANode) -> list[list[tuple[Device, float]]]:
        rows: list[list[tuple[Device, float]]] = []
        x = self.inner_w + 1
        for d in self._devices(node):
            w = self.k.chip_w(short_device(d))
            if x + w > self.inner_w:
                rows.append([])
                x = 0.0
            rows[-1].append((d, x))
            x += w + 3
        return rows

    def _cpu(self, cpu: int, x: float, y: float) -> str:
        k, info = self.k, self.by_id[cpu]
        owner = self.owners.cpu.get(cpu)
        if owner is not None:
            fill, who, cls = colors.owner_colour(owner), self.owners.names[owner] + " (exclusive)", "cpu owned"
        elif cpu in self.view.reserved_cpus:
            fill, who, cls = "url(#reserved)", "reserved (reservedSystemCPUs, kube and system reserved)", "cpu reserved"
        else:
            fill, who, cls = colors.FREE, "free: shared pool", "cpu"
        ink = colors.ink_on(fill) if fill.startswith("#") else colors.INK
        tip = f"CPU {cpu} (core {info.core}, socket {info.socket}, NUMA node {info.numa_node}): {who}"
        return group([
            rect(x, y, k.cell_w, k.cell_h, tip, fill=fill, stroke=colors.BORDER, stroke_width=0.5),
            text(x + k.cell_w / 2, y + k.cell_h - 3.5, str(cpu), font_size=k.font, fill=ink,
                 text_anchor="middle", class_="cpu-label"),
        ], class_=cls, data_cpu=cpu)

    def _bar(self, x: float, y: float, label: str, total: float, parts: Sequence[tuple[int, float]],
             kind: str) -> list[str]:
        used = sum(b for _, b in parts)
        out = [text(x, y + LINE - 2, label, font_size=self.k.font - 1, fill=colors.INK, class_="bar-label")]
        y += LINE
        out.append(rect(x, y, self.inner_w, BAR_H, f"{label}: {human_bytes(int(used))} of {human_bytes(int(total))} "
                        "held by containers", fill=colors.FREE, stroke=colors.BORDER, stroke_width=0.5))
        cx = x
        for owner, size in parts:
            w = self.inner_w * size / total if total else 0
            out.append(rect(cx, y, w, BAR_H, f"{self.owners.names[owner]}: {kind} {human_bytes(int(size))}",
                            fill=colors.owner_colour(owner), class_="mem owned"))
            cx += w
        return out

    def numa_node(self, node: NUMANode, x0: float, y0: float) -> str:
        k = self.k
        out = [rect(x0, y0, self.node_w, self.node_h, f"NUMA node {node.id}", fill="#fbfcfe",
                    stroke=colors.BORDER, rx=3, class_="numa-box")]
        x, y = x0 + PAD, y0 + PAD
        out.append(text(x, y + LINE - 2, f"NUMA node {node.id}", font_size=k.font + 1, font_weight="bold",
                        fill=colors.INK, class_="numa-label"))
        y += LINE + 2
        core_h = self.threads * k.cell_h
        cores = self.cores[node.id]
        for core, (cx, cy) in zip(cores, place(len(cores), self.core_cols, k.cell_w, core_h, 2), strict=True):
            out.append(group([self._cpu(cpu, x + cx, y + cy + t * k.cell_h) for t, cpu in enumerate(core)],
                             class_="core"))
        if not cores:
            out.append(text(x, y + LINE, "no CPUs (memory only)", font_size=k.font, fill=colors.INK))
        y += self.grid_h + 4
        mem = self.owners.memory.get((node.id, "memory"), [])
        used = sum(b for _, b in mem)
        out += self._bar(x, y, f"memory {human_bytes(int(used))} / {human_bytes(node.memory_bytes)}",
                         node.memory_bytes, mem, "memory")
        y += LINE + BAR_H + 2
        for size in self.pages:
            count = node.hugepages.get(size, 0)
            kind = f"hugepages-{page_size_name(size)}"
            parts = self.owners.memory.get((node.id, kind), [])
            held = sum(b for _, b in parts) / size
            out += self._bar(x, y, f"{page_size_name(size)} pages {held:.0f} / {count}", size * count, parts, kind)
            y += LINE + BAR_H + 2
        for row in self._chip_rows(node):
            for d, cx in row:
                out.append(self._device(d, x + cx, y))
            y += k.cell_h + 3
        return group(out, class_="numa", data_numa=node.id, id=f"numa-{node.id}")

    def _device(self, d: Device, x: float, y: float) -> str:
        label = short_device(d)
        owner = self.owners.device.get((d.resource, d.id))
        fill = colors.FREE if owner is None else colors.owner_colour(owner)
        who = "free" if owner is None else self.owners.names[owner]
        nodes = "no NUMA affinity" if not d.numa_nodes else "NUMA " + ",".join(map(str, d.numa_nodes))
        tip = f"{d.resource} {d.id} ({nodes}, {d.health}): {who}"
        w = self.k.chip_w(label)
        return group([
            rect(x, y, w, self.k.cell_h, tip, fill=fill, stroke=colors.INK, stroke_width=0.7, rx=2),
            text(x + 4, y + self.k.cell_h - 3.5, label, font_size=self.k.font, fill=colors.ink_on(fill)),
        ], class_="device" + (" owned" if owner is not None else ""), data_device=d.id)

    # ---- memory-only NUMA nodes (GPU HBM, CXL) -----------------------------------------------------
    def mini_size(self) -> tuple[float, float]:
        """A memory-only NUMA node is a small box: its id, its memory and hugepage bars, no CPU grid."""
        return MINI_W, PAD + LINE + (1 + len(self.pages)) * (BAR_H + 2) + PAD

    def memory_node(self, node: NUMANode, x0: float, y0: float) -> str:
        w, h = self.mini_size()
        mem = self.owners.memory.get((node.id, "memory"), [])
        used = sum(b for _, b in mem)
        size = human_bytes(node.memory_bytes) if node.memory_bytes else "empty"
        out = [rect(x0, y0, w, h, f"NUMA node {node.id} (no CPUs): memory {human_bytes(int(used))} of "
                    f"{human_bytes(node.memory_bytes)} held by containers", fill="#fbfcfe", stroke=colors.BORDER,
                    rx=3, class_="numa-box memory-only"),
               text(x0 + PAD, y0 + PAD + LINE - 3, f"{node.id}: {size}", font_size=self.k.font - 1,
                    fill=colors.INK, class_="numa-label")]
        y, inner = y0 + PAD + LINE, w - 2 * PAD
        bars = [(node.memory_bytes, mem, "memory")]
        bars += [(size_b * node.hugepages.get(size_b, 0), self.owners.memory.get(
            (node.id, f"hugepages-{page_size_name(size_b)}"), []), f"hugepages-{page_size_name(size_b)}")
            for size_b in self.pages]
        for total, parts, kind in bars:
            if not total:
                continue  # an empty node (a MIG placeholder) shows its id and "empty" only
            out.append(rect(x0 + PAD, y, inner, BAR_H, f"NUMA node {node.id} {kind}", fill=colors.FREE,
                            stroke=colors.BORDER, stroke_width=0.5))
            cx = x0 + PAD
            for owner, part in parts:
                pw = inner * part / total if total else 0
                out.append(rect(cx, y, pw, BAR_H, f"{self.owners.names[owner]}: {kind} {human_bytes(int(part))}",
                                fill=colors.owner_colour(owner), class_="mem owned"))
                cx += pw
            y += BAR_H + 2
        return group(out, class_="numa memory-only", data_numa=node.id, id=f"numa-{node.id}")

    # ---- the whole -----------------------------------------------------------------------------------
    def groups(self) -> list[tuple[str, list[NUMANode], list[tuple[str, list[NUMANode]]]]]:
        """Sockets with their NUMA nodes and, under them, the memory-only nodes that belong there: a device's
        own memory nodes under the device (label), other memory-only nodes under the socket of the one
        CPU node nearest to them by distance. Memory-only nodes with no such home form a group of their own."""
        sockets: dict[int, list[NUMANode]] = {}
        memory_only = {n.id: n for n in self.m.numa_nodes if not n.cpus}
        for n in self.m.numa_nodes:
            if n.cpus:
                sockets.setdefault(self.by_id[min(n.cpus)].socket, []).append(n)
        socket_of = {n.id: s for s, nodes in sockets.items() for n in nodes}
        strips: dict[int | None, list[tuple[str, list[NUMANode]]]] = {}
        for d in self.m.devices:
            own = [memory_only.pop(i) for i in d.memory_numa_nodes if i in memory_only]
            if own:
                home = socket_of.get(min(d.numa_nodes)) if d.numa_nodes else None
                strips.setdefault(home, []).append((f"{short_device(d)} memory", own))
        nearest: dict[int | None, list[NUMANode]] = {}
        ids = [n.id for n in self.m.numa_nodes]
        for n in memory_only.values():
            home = None
            if n.distances and len(n.distances) == len(ids):
                row = {i: dist for i, dist in zip(ids, n.distances, strict=True) if i in socket_of}
                best = min(row.values(), default=None)
                close = [i for i, dist in row.items() if dist == best]
                home = socket_of[close[0]] if len(close) == 1 else None
            nearest.setdefault(home, []).append(n)
        for home, nodes in nearest.items():
            strips.setdefault(home, []).append(("memory-only NUMA nodes", nodes))
        out = [(f"socket {s}", nodes, strips.get(s, [])) for s, nodes in sorted(sockets.items())]
        if None in strips:
            out.append(("memory-only NUMA nodes", [], strips[None]))
        return out

    def _strips_size(self, strips: list[tuple[str, list[NUMANode]]], width: float) -> float:
        mw, mh = self.mini_size()
        per_row = max(1, int((width + GAP / 2) // (mw + GAP / 2)))
        return sum(LINE + 2 + math.ceil(len(nodes) / per_row) * (mh + GAP / 2) for _, nodes in strips)

    def render(self) -> tuple[str, float, float]:
        """The <g id="topology"> element and its width and height."""
        groups = self.groups()
        most = max((len(nodes) for _, nodes, _ in groups), default=0)
        cols = grid_cols(most, self.node_w, self.node_h, 1.5) if most else 1
        bw, bh = block_size(most, cols, self.node_w, self.node_h, GAP)
        mw, mh = self.mini_size()
        widest_strip = max((len(nodes) for _, _, strips in groups for _, nodes in strips), default=0)
        inner_w = max(bw, min(widest_strip, 8) * (mw + GAP / 2)) if most else min(widest_strip, 12) * (mw + GAP / 2)
        sw = inner_w + 2 * PAD
        sh = max(bh + 2 * PAD + LINE + 4 + self._strips_size(strips, inner_w) for _, _, strips in groups)
        scols = cols_within(len(groups), sw, GAP * 2, PICTURE_WIDTH)
        per_row = max(1, int((inner_w + GAP / 2) // (mw + GAP / 2)))
        parts: list[str] = []
        for (name, nodes, strips), (gx, gy) in zip(groups, place(len(groups), scols, sw, sh, GAP * 2), strict=True):
            inner = [rect(gx, gy, sw, sh, name, fill="#eef2f7", stroke=colors.BORDER, rx=4, class_="socket-box"),
                     text(gx + PAD, gy + PAD + LINE - 1, name, font_size=self.k.font + 2, font_weight="bold",
                          fill=colors.INK, class_="socket-label")]
            for n, (nx, ny) in zip(nodes, place(len(nodes), cols, self.node_w, self.node_h, GAP), strict=True):
                inner.append(self.numa_node(n, gx + PAD + nx, gy + PAD + LINE + 4 + ny))
            y = gy + PAD + LINE + 4 + (bh + PAD if nodes else 0)
            for label, mem_nodes in strips:
                ids = format_cpuset([n.id for n in mem_nodes])
                inner.append(text(gx + PAD, y + LINE - 2, f"{label} (NUMA {ids})", font_size=self.k.font,
                                  fill=colors.INK, class_="strip-label"))
                y += LINE + 2
                for n, (nx, ny) in zip(mem_nodes, place(len(mem_nodes), per_row, mw, mh, GAP / 2), strict=True):
                    inner.append(self.memory_node(n, gx + PAD + nx, y + ny))
                y += math.ceil(len(mem_nodes) / per_row) * (mh + GAP / 2)
            parts.append(group(inner, class_="socket", data_socket=name))
        w, h = block_size(len(groups), scols, sw, sh, GAP * 2)
        floating = [d for d in self.m.devices if not d.numa_nodes]
        if floating:
            y = h + GAP
            parts.append(text(0, y + LINE - 2, "devices without NUMA affinity", font_size=self.k.font + 1,
                              fill=colors.INK))
            x = 0.0
            for d in floating:
                parts.append(self._device(d, x, y + LINE + 2))
                x += self.k.chip_w(short_device(d)) + 3
            heading_w = len("devices without NUMA affinity") * (self.k.font + 1) * 0.62
            w, h = max(w, x, heading_w), y + LINE + 2 + self.k.cell_h
        return group(parts, id="topology"), w, h


RESERVED_PATTERN = el("pattern", [
    rect(0, 0, 6, 6, fill="#d9d9d9"),
    el("path", d="M0,6 L6,0", stroke=colors.RESERVED_STROKE, stroke_width=1),
], id="reserved", width=6, height=6, patternUnits="userSpaceOnUse")


def machine_svg(view: NodeView) -> str:
    pic = MachinePicture(view)
    body, w, h = pic.render()
    return svg([el("defs", [RESERVED_PATTERN]), title(f"machine {view.machine.name}"), body],
               w + 2, h + 2, id="machine", role="img", class_="picture")
