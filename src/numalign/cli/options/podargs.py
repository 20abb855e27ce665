"""How commands turn workloads into pods: `--replicas N` (admit, nrt, simulate, capacity: one meaning
everywhere), and the note saying how many."""

from __future__ import annotations

import argparse
from typing import Any

from numalign.limits import MAX_REPLICAS


def _copies(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of pods; a workload's spec.replicas pods are admitted by default, so "
            "drop --replicas, or give a count (--replicas 1: one pod per workload)") from None
    if not 1 <= n <= MAX_REPLICAS:
        raise argparse.ArgumentTypeError(f"{n}: expected a number of pods from 1 to {MAX_REPLICAS}")
    return n


def add_replicas_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--replicas", type=_copies, metavar="N",
                   help="pods of each workload (Deployment, StatefulSet, ReplicaSet, Job, ...); default: "
                   "its own spec.replicas (spec.parallelism for a Job), said in a note; a bare Pod stays one pod "
                   "(as `kubectl scale` refuses a Pod), said in a note")


def expansion_notes(source: str, expansion: Any) -> list[str]:
    """One note per workload expanded, so a Deployment's answer is never silently about one pod."""
    return [f"note: {source}: {line}" for line in expansion.expanded]
