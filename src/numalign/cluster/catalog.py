"""Names of the built-in clusters, importable without the simulation machinery (for --help)."""

from __future__ import annotations

from typing import Final

DESCRIPTIONS: Final = {
    "example": "8 dual-socket GPU nodes (4 NUMA nodes, 8 GPUs each) and 4 EPYC NPS4 nodes (8 NUMA nodes)",
    "bench": "1,000 dual-socket GPU nodes (4 NUMA nodes, SMT, 8 GPUs each)",
}
