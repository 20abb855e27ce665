"""Pictures: the machine drawn with its pods' CPUs, memory and devices, and simulations plotted.

Everything here returns text (an HTML page with inline SVG, or a terminal picture); the CLI writes it.
The page is self-contained: no script, no font, no stylesheet or image is fetched, so it opens from disk
and prints. docs/report-drawing.md says why the SVG is built by hand.
"""

from numalign.report.page import node_report
from numalign.report.terminal import terminal_picture
from numalign.report.view import NodeView, PodView, node_view_from_records, node_view_from_status

__all__ = [
    "NodeView",
    "PodView",
    "node_report",
    "node_view_from_records",
    "node_view_from_status",
    "terminal_picture",
]
