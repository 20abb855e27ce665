"""Colours: one per container that holds something, told apart on screen, in print and by most
colour-blind readers (the first ten are the Tableau 10 palette; later ones walk the hue circle by the
golden angle, so neighbours in the legend never look alike)."""

from __future__ import annotations

import colorsys

_BASE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
         "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac")

FREE = "#ffffff"
SHARED = "#e8eef5"  # the shared pool: CPUs any non-exclusive container may run on
OFFLINE = "#9e9e9e"
RESERVED_STROKE = "#555555"
BORDER = "#5f6b7a"
INK = "#1f2933"
MISSING = "#f3f4f6"  # a heat-map cell that does not exist (a pool with fewer NUMA nodes)


def owner_colour(i: int) -> str:
    if i < len(_BASE):
        return _BASE[i]
    hue = (i * 0.618033988749895) % 1.0
    r, g, b = colorsys.hls_to_rgb(hue, 0.55, 0.55)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def ink_on(fill: str) -> str:
    """Black or white text, whichever reads better on `fill` (#rrggbb)."""
    r, g, b = (int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.5 else "#ffffff"


def sequential(t: float) -> str:
    """0..1 on a light-to-dark blue ramp (heat maps): light is near, dark is far or full."""
    t = min(1.0, max(0.0, t))
    lo, hi = (0xf7, 0xfb, 0xff), (0x08, 0x30, 0x6b)
    r, g, b = (round(a + (z - a) * t) for a, z in zip(lo, hi, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"
