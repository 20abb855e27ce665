"""The one vocabulary of alignment verdicts: every output (text, JSON, the HTML report) words a pod's or
a container's alignment with these four, so a headline never says one thing while the JSON says another.

- `aligned`: everything pinned (exclusive CPUs, pinned memory, devices) on the NUMA nodes it should be;
- `NOT aligned`: something pinned is apart (a DRA device off its CPUs' and memory's NUMA node, a
  container spread over more NUMA nodes or sockets than it needs);
- `unknown`: a device's NUMA node is not known (no numaNode attribute, no pciBusID or pcieRoot attribute
  the machine lists);
- `nothing pinned`: nothing to align (shared-pool CPUs, memory not pinned, no NUMA-bound device).

Here, below answer/ (which decides the verdicts) and cluster/ (which counts them), because the report
draws them too. A pod's verdict is the worst of its containers' that pin something (NOT aligned, then
unknown, then aligned): a container with nothing pinned (a sidecar on the shared pool) leaves the
others' verdict as it is; nothing pinned when no container pins anything. The same rule joins the
kubelet's alignment and the DRA devices' in the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

Verdict = Literal["aligned", "NOT aligned", "unknown", "nothing pinned"]
ALIGNED: Final[Verdict] = "aligned"
NOT_ALIGNED: Final[Verdict] = "NOT aligned"
UNKNOWN: Final[Verdict] = "unknown"
NOTHING_PINNED: Final[Verdict] = "nothing pinned"
VERDICTS: Final[tuple[Verdict, ...]] = (ALIGNED, NOTHING_PINNED, UNKNOWN, NOT_ALIGNED)  # best first

# Counts by verdict (simulate's DRA figures) use these JSON keys (camelCase of the words).
COUNT_KEYS: Final[dict[Verdict, str]] = {ALIGNED: "aligned", NOT_ALIGNED: "notAligned", UNKNOWN: "unknown",
                                         NOTHING_PINNED: "nothingPinned"}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """A pod's verdict from its containers' (or parts'): the worst of those that pin something, nothing
    pinned when none does (or there are none)."""
    pinned = [v for v in verdicts if v != NOTHING_PINNED]
    return max(pinned, key=VERDICTS.index) if pinned else NOTHING_PINNED


def headline(verdict: Verdict, detail: str) -> str:
    """`NOT aligned: main: ...`: the verdict first, as every text and the report show it."""
    return f"{verdict}: {detail}" if detail else verdict


def marked(verdict: object) -> bool:
    """Whether the report marks (&#9888;) and lists first a pod with this verdict: only NOT aligned."""
    return verdict == NOT_ALIGNED
