"""Upstream's own test tables (../shared/spec/upstream_cases.json, copied into tests/golden/data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from support.reference_merge import ref_policy_merge

from numalign.core.bitmask import bits_of, is_narrower, iterate_bitmasks, mask_of, mask_string
from numalign.core.hint import TopologyHint, provider_hints_from_json
from numalign.core.merge import FilteredList, best_non_preferred, mask_fitter, max_of_min_affinity_counts
from numalign.core.numa import NUMAInfo
from numalign.core.policies import PolicyOptions, make_policy
from numalign.core.policies.options import (
    OPTION_MATURITY_BY_RELEASE,
    Maturity,
    check_policy_option_available,
)
from numalign.core.policies.single_numa_node import filter_single_numa_hints
from numalign.errors import ConfigError, InvalidInputError

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "upstream_cases.json").read_text(encoding="utf-8")
)


def cases(kind: str) -> list[dict[str, Any]]:
    return [c for c in CASES if c["kind"] == kind]


def _ids(kind: str) -> list[str]:
    return [f"{i}-{c['name']}" for i, c in enumerate(cases(kind))]


def _hint(obj: dict[str, Any] | None) -> TopologyHint | None:
    return None if obj is None else TopologyHint.from_dict(obj)


def _opts(raw: dict[str, Any] | None) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (raw or {}).items()}


@pytest.mark.parametrize("case", cases("policy_merge"), ids=_ids("policy_merge"))
def test_policy_merge(case: dict[str, Any]) -> None:
    distances = None if case["distances"] is None else {int(k): v for k, v in case["distances"].items()}
    numa = NUMAInfo.create(case["numa_nodes"], distances)
    opts = PolicyOptions.parse(_opts(case["options"]))
    providers = [provider_hints_from_json(p, f"providers[{i}]") for i, p in enumerate(case["providers"])]
    result = make_policy(case["policy"], numa, opts).merge(providers)
    expected = TopologyHint.from_dict(case["expected"])
    assert result.hint == expected
    assert result.admit == case["expected_admit"]
    if case.get("naive_permutations", 0) <= 100_000:
        ref_hint, ref_admit = ref_policy_merge(case["policy"], providers, numa, opts.prefer_closest_numa)
        assert (ref_hint, ref_admit) == (expected, case["expected_admit"])


@pytest.mark.parametrize("case", cases("hint_merger_compare"), ids=_ids("hint_merger_compare"))
def test_hint_merger_compare(case: dict[str, Any]) -> None:
    # The fast merge ranks candidates instead of comparing pairs; the ranking must pick the same one.
    numa = NUMAInfo.create([])
    fitter = mask_fitter(numa, use_closest=False)
    cur, cand = _hint(case["current"]), _hint(case["candidate"])
    assert cand is not None and cand.mask is not None
    b = case["best_non_preferred_affinity_count"]
    if cand.mask == 0:
        winner = "current"
    elif cur is None:
        winner = "candidate"
    else:
        assert cur.mask is not None
        if cur.preferred != cand.preferred:
            winner = "candidate" if cand.preferred else "current"
        elif cur.mask == cand.mask:
            winner = "current"
        elif cur.preferred:
            winner = "current" if fitter(cur.mask, cand.mask) == cur.mask else "candidate"
        else:
            best = best_non_preferred([cur.mask, cand.mask], b, fitter)
            winner = "current" if best == cur.mask else "candidate"
    assert winner == case["expected"]


@pytest.mark.parametrize("case", cases("max_of_min_affinity_counts"), ids=_ids("max_of_min_affinity_counts"))
def test_max_of_min_affinity_counts(case: dict[str, Any]) -> None:
    lists = [[TopologyHint.from_dict(h) for h in hs] for hs in case["filtered_hints"]]
    assert max_of_min_affinity_counts(lists) == case["expected"]


@pytest.mark.parametrize("case", cases("filter_single_numa_hints"), ids=_ids("filter_single_numa_hints"))
def test_filter_single_numa_hints(case: dict[str, Any]) -> None:
    lists = [FilteredList(0, None, tuple(TopologyHint.from_dict(h) for h in hs)) for hs in case["input"]]
    # filter_single_numa_hints always lists (it keeps at most one hint per NUMA node)
    got = [[h.to_dict() for h in cast(tuple[TopologyHint, ...], f.hints)] for f in filter_single_numa_hints(lists)]
    expected = [
        [{"mask": h["bits"], "preferred": h["preferred"]} for h in (hs or [])] for hs in (case["expected"] or [])
    ]
    assert got == expected


@pytest.mark.parametrize("case", cases("can_admit"), ids=_ids("can_admit"))
def test_can_admit(case: dict[str, Any]) -> None:
    hint = TopologyHint.from_dict(case["hint"])
    # Each policy's admit rule, driven through a provider that offers exactly this hint.
    numa = NUMAInfo.create([0, 1])
    result = make_policy(case["policy"], numa).merge([{"r": [hint]}])
    assert result.admit == case["expected"]


@pytest.mark.parametrize("case", cases("new_numa_info"), ids=_ids("new_numa_info"))
def test_new_numa_info(case: dict[str, Any]) -> None:
    prefer = bool(case["options"]["prefer-closest-numa-nodes"])
    nodes = [t["id"] for t in case["topology"]]
    rows = {t["id"]: t["distances"] for t in case["topology"] if t.get("distances") is not None}
    numa = NUMAInfo.create(nodes, rows if prefer else None)
    if case["expected_error_contains"]:
        with pytest.raises(InvalidInputError, match=case["expected_error_contains"]):
            numa.require_distances()
        return
    if prefer:
        numa.require_distances()
    assert list(numa.nodes) == case["expected"]["nodes"]
    expected_rows = {int(k): v for k, v in case["expected"]["distances"].items() if v is not None}
    got_rows = {k: list(v) for k, v in (numa.distances or {}).items()}
    assert got_rows == expected_rows


@pytest.mark.parametrize("case", cases("calculate_average_distance"), ids=_ids("calculate_average_distance"))
def test_calculate_average_distance(case: dict[str, Any]) -> None:
    rows = {int(k): v for k, v in case["distances"].items()}
    numa = NUMAInfo.create(sorted(rows), rows)
    assert numa.average_distance(mask_of(case["mask_bits"])) == case["expected"]


@pytest.mark.parametrize("case", cases("numa_closest"), ids=_ids("numa_closest"))
def test_numa_closest(case: dict[str, Any]) -> None:
    rows = {int(k): v for k, v in case["distances"].items()}
    numa = NUMAInfo.create(sorted(rows), rows)
    cur, cand = mask_of(case["current"]), mask_of(case["candidate"])
    best = numa.closest(cand, cur)  # upstream calls Closest(candidate, current)
    assert ("current" if best == cur else "candidate") == case["expected"]


def _gates(case: dict[str, Any]) -> dict[str, bool]:
    return {case["feature_gate"]: bool(case["feature_gate_enabled"])} if case["feature_gate"] else {}


# The 1.32-era test file: prefer-closest stable, max-allowable beta, plus the options it injects.
TABLE_132_WITH_TEST_OPTIONS = {
    **OPTION_MATURITY_BY_RELEASE["1.32"],
    "fancy-new-option": Maturity.BETA,
    "fancy-alpha-option": Maturity.ALPHA,
}


@pytest.mark.parametrize("case", cases("new_policy_options"), ids=_ids("new_policy_options"))
def test_new_policy_options(case: dict[str, Any]) -> None:
    opts = {k: v for k, v in case["policy_options"].items() if not k.startswith("fancy-")}
    fancy = {k: v for k, v in case["policy_options"].items() if k.startswith("fancy-")}
    gates = _gates(case)
    if case["expected_error_contains"]:
        with pytest.raises(ConfigError, match=case["expected_error_contains"]):
            for name in fancy:
                check_policy_option_available(name, gates, TABLE_132_WITH_TEST_OPTIONS)
            PolicyOptions.parse(opts, gates, TABLE_132_WITH_TEST_OPTIONS)
        return
    for name in fancy:
        check_policy_option_available(name, gates, TABLE_132_WITH_TEST_OPTIONS)
    got = PolicyOptions.parse(opts, gates, TABLE_132_WITH_TEST_OPTIONS)
    assert got.prefer_closest_numa == case["expected"]["PreferClosestNUMA"]
    assert got.max_allowable_numa_nodes == case["expected"]["MaxAllowableNUMANodes"]


@pytest.mark.parametrize(
    "case", cases("check_policy_option_available"), ids=_ids("check_policy_option_available")
)
def test_check_policy_option_available(case: dict[str, Any]) -> None:
    try:
        check_policy_option_available(case["option"], _gates(case), TABLE_132_WITH_TEST_OPTIONS)
        available = True
    except ConfigError:
        available = False
    assert available == case["expected_available"]


def _bm_op(case: dict[str, Any]) -> Any:
    op = case["op"]
    if op == "NewEmptyBitMask":
        return mask_string(0)
    if op == "NewBitMask":
        return mask_string(mask_of(case["bits"]))
    if op in ("Add", "Remove"):
        m = mask_of(case["initial"])
        if any(b < 0 or b >= 64 for b in case["bits"]):
            return mask_string(m)  # upstream: all-or-nothing on an invalid id
        other = mask_of(case["bits"])
        return mask_string(m | other if op == "Add" else m & ~other)
    if op.startswith(("And", "Or")):
        masks = [mask_of(b) for b in case["masks"]]
        acc = masks[0]
        for m in masks[1:]:
            acc = acc & m if op.startswith("And") else acc | m
        return mask_string(acc)
    if op == "Clear":
        return mask_string(0)
    if op == "Fill":
        return mask_string((1 << 64) - 1)  # upstream fills all 64 bits, not just machine nodes
    m = mask_of(case.get("initial", []))
    if op == "IsEmpty":
        return m == 0
    if op == "IsSet":
        return case["bit"] >= 0 and bool(m >> case["bit"] & 1)
    if op == "AnySet":
        return any(b >= 0 and bool(m >> b & 1) for b in case["bits"])
    if op == "IsEqual":
        return mask_of(case["first"]) == mask_of(case["second"])
    if op == "Count":
        return m.bit_count()
    if op == "GetBits":
        return bits_of(m)
    if op == "IsNarrowerThan":
        return is_narrower(mask_of(case["first"]), mask_of(case["second"]))
    if op.startswith("IterateBitMasks"):
        return sum(1 for _ in iterate_bitmasks(case["bits"]))
    raise AssertionError(f"unhandled op {op}")


@pytest.mark.parametrize("case", cases("bitmask"), ids=_ids("bitmask"))
def test_bitmask(case: dict[str, Any]) -> None:
    got = _bm_op(case)
    if "expected_string" in case:
        assert got == case["expected_string"]
    elif "expected_count" in case:
        assert got == case["expected_count"]
    else:
        expected = case["expected"]
        assert got == ([] if expected is None and case["op"] == "GetBits" else expected)


def test_every_case_kind_is_covered() -> None:
    kinds = {c["kind"] for c in CASES}
    assert kinds == {
        "policy_merge",
        "hint_merger_compare",
        "max_of_min_affinity_counts",
        "filter_single_numa_hints",
        "can_admit",
        "new_numa_info",
        "calculate_average_distance",
        "numa_closest",
        "new_policy_options",
        "check_policy_option_available",
        "bitmask",
    }
