"""../shared/oracle/cpu/take-by-topology.jsonl.gz: 2,000 CPU allocations recorded from the real upstream
takeByTopologyNUMAPacked / takeByTopologyNUMADistributed of kubelet 1.33.3 and 1.36.2, replayed at both
versions through the options each version's Behaviours give takeByTopology.

The versions differ where prefer-align-cpus-by-uncorecache takes a partial uncore cache for an odd count
(k/k #131850, 1.34+). `hang: true` is a call that did not return within 3 s; the record's three are 16-NUMA-
node machines where the search did not finish in 3 s at one or both versions, not the #140730 loop: the
distributed code is the same at both versions and one of them, or numalign, answers."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from support.shared import shared_dir

from numalign.errors import AllocationError
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.accumulator import PACKED, SPREAD
from numalign.kubelet.cpumanager.distributed import KUBELET_HANGS
from numalign.kubelet.cpumanager.options import StaticPolicyOptions
from numalign.kubelet.cpumanager.take import TakeOptions, take_by_topology
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.kubelet.versions import behaviours

VERSIONS = ("1.33.3", "1.36.2")
# Recorded as a 3 s timeout at a version where the other version (or both) needs a long search, not a loop.
TIMED_OUT = {"cpu-2-845", "cpu-2-1430", "cpu-2-1536"}


def cases() -> Iterator[dict[str, Any]]:
    with gzip.open(shared_dir() / "oracle" / "cpu" / "take-by-topology.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def take_options(case: dict[str, Any], version: str) -> TakeOptions:
    """The options the static policy hands takeByTopology for the recorded call, at `version`."""
    distributed = case["mode"] == "distributed"
    opts = StaticPolicyOptions(
        full_pcpus_only=distributed and case["group"] > 1,
        distribute_cpus_across_numa=distributed,
        distribute_cpus_across_cores=case["spread"],
        prefer_align_cpus_by_uncorecache=bool(case.get("uncore")) and not distributed,
    )
    return opts.take_options(behaviours(KubeletVersion.parse(version)))


@cache
def _answer(case_json: str, options: TakeOptions) -> tuple[str, Any]:
    case = json.loads(case_json)
    topo = CPUTopology.from_cpu_infos([CPUInfo(*row) for row in case["cpus"]])
    if case["mode"] == "distributed":
        # the recorded cpuGroupSize is the machine's threads per core under full-pcpus-only (or 1)
        assert case["group"] == (topo.cpus_per_core() if options.full_pcpus_only else 1), case["id"]
    try:
        return "cpus", sorted(take_by_topology(topo, case["avail"], case["n"], options))
    except AllocationError as e:
        return ("hang", True) if e.reason == KUBELET_HANGS else ("error", str(e))


def answer(case: dict[str, Any], version: str) -> dict[str, Any]:
    """numalign's answer in the record's shape; equal options at both versions are computed once."""
    key, value = _answer(json.dumps(case, sort_keys=True), take_options(case, version))
    return {key: value}


def test_the_record_is_what_this_test_reads() -> None:
    """2,000 cases, both versions recorded for each, the strategies the options give."""
    seen = list(cases())
    assert len(seen) == 2000
    assert all(set(c["upstream"]) == set(VERSIONS) for c in seen)
    assert {(c["case"]["mode"], c["case"]["spread"]) for c in seen} >= {("packed", False), ("distributed", True)}
    assert SPREAD != PACKED


def test_every_case_agrees_with_upstream_at_both_versions() -> None:
    differ: list[str] = []
    checked = 0
    for rec in cases():
        case = rec["case"]
        if case["id"] in TIMED_OUT:
            continue
        for version in VERSIONS:
            got = answer(case, version)
            checked += 1
            if got != rec["upstream"][version]:
                differ.append(f"{case['id']} at {version}: upstream {rec['upstream'][version]}, numalign {got}")
    assert differ == []
    assert checked == 2 * (2000 - len(TIMED_OUT))


def test_the_versions_differ_only_in_the_uncore_cache_odd_count_rule() -> None:
    changed = [rec["case"] for rec in cases() if rec["case"]["id"] not in TIMED_OUT
               and rec["upstream"]["1.33.3"] != rec["upstream"]["1.36.2"]]
    assert len(changed) == 28
    assert all(c["mode"] == "packed" and c["uncore"] for c in changed)
    assert all(answer(c, "1.33.3") != answer(c, "1.36.2") for c in changed)


def test_no_recorded_case_is_the_140730_loop() -> None:
    """The record's three `hang` entries are all TIMED_OUT (tests/unit/kubelet/cpumanager/
    test_cpu_distributed_hang.py builds the #140730 loop itself)."""
    assert {r["case"]["id"] for r in cases() if {"hang": True} in r["upstream"].values()} == TIMED_OUT


@pytest.mark.parametrize("case_id", sorted(TIMED_OUT))
def test_the_recorded_timeouts_are_long_searches_not_loops(case_id: str) -> None:
    """Where a version answered, numalign gives that answer at both (the distributed code is the same); where
    neither did (cpu-2-1430, groups of 1, where no remainder can be stranded), numalign still answers."""
    (rec,) = [r for r in cases() if r["case"]["id"] == case_id]
    answered = [rec["upstream"][v] for v in VERSIONS if "cpus" in rec["upstream"][v]]
    for version in VERSIONS:
        got = answer(rec["case"], version)
        assert "cpus" in got and len(got["cpus"]) == rec["case"]["n"]
        if answered:
            assert got == answered[0]
