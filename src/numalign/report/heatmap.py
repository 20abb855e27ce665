"""Heat maps: the NUMA distance matrix, and any grid of values in 0..1 (simulation occupancy).

Cells shrink as the grid grows (24 px with the value written in, down to 7 px at 64 x 64) and every
cell keeps a tooltip, so a 64-node matrix stays a readable 450 px square whose structure (sockets on
a ring) shows at a glance."""

from __future__ import annotations

from collections.abc import Sequence

from numalign.machine.topology import Machine
from numalign.report import colors
from numalign.report.svg import group, rect, svg, text, title


def _cell(n: int) -> float:
    return 24.0 if n <= 8 else 16.0 if n <= 20 else max(7.0, 448.0 / n)


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    values: Sequence[Sequence[float | None]],
    shade: Sequence[Sequence[float]],
    tips: Sequence[Sequence[str]],
    *,
    ident: str,
    caption: str,
    fmt: str = "{:g}",
) -> str:
    """An SVG heat map: `shade` (0..1) colours the cells, `values` are written in when they fit."""
    c = _cell(max(len(rows), len(cols)))
    label_w = min(120.0, max(len(r) for r in rows) * 6.2 + 8) if rows else 0
    top = 18.0 + (max(len(x) for x in cols) * 5.5 if len(cols) > 8 and c < 24 else 14.0)
    every = 1 if c >= 9 else 8
    parts = [text(0, 12, caption, font_size=11, font_weight="bold", fill=colors.INK)]
    for j, name in enumerate(cols):
        if j % every == 0:
            x = label_w + j * c + c / 2
            if top > 32:
                parts.append(text(x, top - 3, name, font_size=8, fill=colors.INK,
                                  transform=f"rotate(-90 {x:.1f} {top - 3:.1f})", dominant_baseline="middle"))
            else:
                parts.append(text(x, top - 3, name, font_size=9, fill=colors.INK, text_anchor="middle"))
    cells = []
    for i, name in enumerate(rows):
        y = top + i * c
        if i % every == 0:
            parts.append(text(label_w - 4, y + c / 2 + 3, name, font_size=min(9, c), fill=colors.INK,
                              text_anchor="end"))
        for j in range(len(cols)):
            fill = colors.sequential(shade[i][j]) if shade[i][j] >= 0 else colors.MISSING  # < 0: no such cell
            cells.append(rect(label_w + j * c, y, c, c, tips[i][j], fill=fill, stroke="#ffffff", stroke_width=0.5))
            v = values[i][j]
            if v is not None and c >= 16:
                cells.append(text(label_w + j * c + c / 2, y + c / 2 + 3, fmt.format(v), font_size=8 if c < 24 else 9,
                                  fill=colors.ink_on(fill), text_anchor="middle"))
    parts.append(group(cells, class_="cells"))
    w, h = max(label_w + len(cols) * c + 2, len(caption) * 6.6), top + len(rows) * c + 2
    return svg([title(caption), group(parts, id=f"{ident}-map")], w, h, id=ident, class_="picture heatmap")


def distance_svg(m: Machine) -> str | None:
    matrix = m.distance_matrix()
    if not matrix:  # None (no rows) or {} (no NUMA node)
        return None
    ids = m.numa_ids()
    flat = [d for row in matrix.values() for d in row]
    lo, hi = min(flat), max(flat)
    values = [matrix[i] for i in ids]
    shade = [[(d - lo) / (hi - lo) if hi > lo else 0.0 for d in row] for row in values]
    tips = [[f"NUMA node {a} to node {b}: distance {values[i][j]}" for j, b in enumerate(ids)]
            for i, a in enumerate(ids)]
    names = [str(i) for i in ids]
    return heatmap(names, names, [list(map(float, r)) for r in values], shade, tips, ident="distances",
                   caption=f"NUMA distances (SLIT, {lo} = local)")
