"""The --report option shared by admit, pods, discover and simulate, and the terminal-colour rule."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO


def add_report_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--report", metavar="FILE.html", type=Path,
                   help=f"also write a self-contained HTML page (no network, opens from disk, printable) "
                   f"drawing {what}")


def write_report(path: Path, html: str) -> None:
    """Atomically, so a reader never sees half a page; a bad path is one line (exit 3 as an I/O error)."""
    from numalign.adapters.statedir.files import write_atomic

    write_atomic(path, html.encode("utf-8"), mode=0o644)
    if sys.stderr.isatty():
        sys.stderr.write(f"report written to {path}\n")


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal only, and never with NO_COLOR set to anything non-empty (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")
