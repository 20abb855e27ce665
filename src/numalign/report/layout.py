"""Grid packing for the machine picture: how many columns make a block of equal boxes look right.

The same rule packs cores into a NUMA node, NUMA nodes into a socket and sockets into the machine, so
a 4-node machine and a 64-node one are drawn by one code path: boxes keep a readable size (a CPU id
always fits its cell) and only the number of rows and columns grows.
"""

from __future__ import annotations

import math


def grid_cols(n: int, item_w: float, item_h: float, aspect: float = 1.6) -> int:
    """Columns for n boxes of item_w x item_h so the block's width/height comes close to `aspect`,
    preferring full rows (an empty slot costs as much as a poor aspect)."""
    if n <= 1:
        return 1
    best, best_cost = 1, math.inf
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        w, h = cols * item_w, rows * item_h
        cost = abs(math.log((w / h) / aspect)) + 2.0 * (rows * cols - n) / n
        if cost < best_cost - 1e-9:
            best, best_cost = cols, cost
    return best


def place(n: int, cols: int, item_w: float, item_h: float, gap: float) -> list[tuple[float, float]]:
    """Top-left corners, row by row."""
    return [((i % cols) * (item_w + gap), (i // cols) * (item_h + gap)) for i in range(n)]


def block_size(n: int, cols: int, item_w: float, item_h: float, gap: float) -> tuple[float, float]:
    rows = math.ceil(n / cols) if n else 0
    return cols * item_w + max(0, cols - 1) * gap, rows * item_h + max(0, rows - 1) * gap


def cols_within(n: int, item_w: float, gap: float, width: float) -> int:
    """The most columns (at least one) whose row still fits `width`: sockets side by side while the
    picture leaves room for the decision records beside it."""
    cols = 1
    while cols < n and (cols + 1) * item_w + cols * gap <= width:
        cols += 1
    return cols
