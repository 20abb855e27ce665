"""Helpers for the browser tests: run the CLI, read a PNG header, compare bounding boxes."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from support.browser import Browser

EXE = [sys.executable, "-m", "numalign.cli.main"]


def numalign(*args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    return p


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG header (the file is a real PNG, not just bytes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


Box = dict[str, float]


def boxes(b: Browser, selector: str) -> list[Box]:
    """Bounding boxes (page coordinates) of every element matching `selector`, in document order."""
    got = b.evaluate(
        f"[...document.querySelectorAll({selector!r})].map(e => {{ const r = e.getBoundingClientRect(); "
        "return {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height}; })"
    )
    assert isinstance(got, list)
    return got


def inside(inner: Box, outer: Box) -> bool:
    eps = 0.5
    return (inner["x"] >= outer["x"] - eps and inner["y"] >= outer["y"] - eps
            and inner["x"] + inner["w"] <= outer["x"] + outer["w"] + eps
            and inner["y"] + inner["h"] <= outer["y"] + outer["h"] + eps)


def disjoint(a: Box, b: Box) -> bool:
    return (a["x"] + a["w"] <= b["x"] + 0.5 or b["x"] + b["w"] <= a["x"] + 0.5
            or a["y"] + a["h"] <= b["y"] + 0.5 or b["y"] + b["h"] <= a["y"] + 0.5)
