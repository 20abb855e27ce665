"""Horizontal bar charts, hand-built SVG: one row per label, stacked coloured segments, the figure
written at the end of each bar so the chart reads without hovering (and prints)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from numalign.report import colors
from numalign.report.svg import group, rect, svg, text, title

ROW_H = 16
ROW_GAP = 5
BAR_W = 360.0
FONT = 11


@dataclass(frozen=True)
class Segment:
    name: str
    value: float
    colour: str


@dataclass(frozen=True)
class Row:
    label: str
    segments: tuple[Segment, ...]
    note: str  # written after the bar


def bar_chart(rows: Sequence[Row], scale: float, *, ident: str, caption: str,
              keys: Sequence[tuple[str, str]] = (), css_class: str = "chart") -> str:
    """`scale` is the value of a full-width bar; `keys` (name, colour) make a small legend under it."""
    label_w = max((len(r.label) for r in rows), default=0) * FONT * 0.6 + 10
    note_w = max((len(r.note) for r in rows), default=0) * FONT * 0.6 + 10
    parts = [text(0, FONT + 1, caption, font_size=FONT + 1, font_weight="bold", fill=colors.INK)]
    y = FONT + 10.0
    for r in rows:
        parts.append(text(label_w - 6, y + ROW_H - 4, r.label, font_size=FONT, fill=colors.INK, text_anchor="end",
                          class_="row-label"))
        bars = [rect(label_w, y, BAR_W, ROW_H, None, fill="#f5f7fa")]
        x = label_w
        for seg in r.segments:
            w = BAR_W * seg.value / scale if scale else 0.0
            bars.append(rect(x, y, max(0.0, w), ROW_H, f"{r.label}: {seg.name} {seg.value:g}", fill=seg.colour,
                             class_="bar"))
            x += w
        parts.append(group(bars, class_="row"))
        parts.append(text(x + 5, y + ROW_H - 4, r.note, font_size=FONT - 1, fill=colors.INK, class_="row-note"))
        y += ROW_H + ROW_GAP
    if keys:
        kx = label_w
        for name, colour in keys:
            parts.append(rect(kx, y + 2, 10, 10, None, fill=colour))
            parts.append(text(kx + 14, y + 11, name, font_size=FONT - 1, fill=colors.INK))
            kx += 14 + len(name) * (FONT - 1) * 0.6 + 14
        y += 16
    width = label_w + BAR_W + note_w + 10
    return svg([title(caption), group(parts)], width, y + 4, id=ident, class_=f"picture {css_class}")


def percent(share: float | None) -> str:
    """A share as a percentage, "–" for a share of nothing (0 of 0 pods is not 100% aligned)."""
    return "–" if share is None else f"{share:.1%}"
