"""Replays ../shared/oracle/dra/cel-1.36.2.jsonl.gz (selector expressions recorded from the real 1.36.2
DRA CEL environment) through numalign's CEL and lists what differs, per aspect:
- `create`: what the API server says when an object with the selector is created (a compile error,
  "too complex, exceeds cost limit", or nothing);
- `stored`: the compile error for an already stored object;
- `value`: the selector's value on the case's device, or the runtime error the allocator reports;
- `max_cost`, `output_type`: the estimated cost and the checked output type;
- `actual_cost`: the evaluated cost (the runtime limit is checked against it).
Run as a script for a summary: `python tests/support/cel_vectors.py [-v]`."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from numalign.k8s.dra.cel import (
    CELFeatures,
    CELRuntimeError,
    compile_selector,
    cost_error,
    device_matches,
    device_variables,
    evaluate,
)
from numalign.k8s.dra.types import DeviceAttribute, DeviceCapacity
from numalign.k8s.quantity import Quantity
from support.shared import shared_dir

ASPECTS = ("create", "stored", "value", "max_cost", "output_type", "actual_cost")


def vector_file() -> Path:
    return shared_dir() / "oracle" / "dra" / "cel-1.36.2.jsonl.gz"


def load() -> list[dict[str, Any]]:
    with gzip.open(vector_file(), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _features(case: dict[str, Any]) -> CELFeatures:
    gates = case.get("gate_overrides") or {}
    minor = int(str(case["version"]).split(".")[1])
    consumable = gates.get("DRAConsumableCapacity", minor >= 36)
    return CELFeatures(consumable_capacity=consumable, list_type_attributes=gates.get("DRAListTypeAttributes", False),
                       minor=minor)


def _device(case: dict[str, Any], features: CELFeatures) -> dict[str, Any]:
    d = case["device"]
    attrs = {}
    for name, raw in d["attributes"].items():
        ((kind, value),) = raw.items()
        attrs[name] = DeviceAttribute(kind, (value,))
    caps = {name: DeviceCapacity(Quantity.parse(raw["value"])) for name, raw in d["capacity"].items()}
    return device_variables(d["driver"], attrs, caps, d.get("allowMultipleAllocations"), features)


def answer(case: dict[str, Any]) -> dict[str, Any]:
    """numalign's answer in the vectors' vocabulary."""
    features = _features(case)
    out: dict[str, Any] = {}
    new = compile_selector(case["expr"], features, new_object=True)
    stored = compile_selector(case["expr"], features)
    out["create"] = new.error if new.error is not None else cost_error(new)
    out["stored"] = stored.error
    if stored.error is None:
        out["max_cost"] = stored.max_cost
        out["output_type"] = stored.output_type
        device = _device(case, features)
        try:
            out["value"] = ("result", device_matches(stored, device))
        except CELRuntimeError as exc:
            out["value"] = ("runtime_error", str(exc))
        try:
            out["actual_cost"] = evaluate(stored, device)[1]
        except CELRuntimeError as exc:
            out["actual_cost"] = exc.cost
    return out


def expected(row: dict[str, Any]) -> dict[str, Any]:
    e = row["upstream"]["extra"]
    out: dict[str, Any] = {}
    out["create"] = e.get("compile_error") or ("too complex, exceeds cost limit" if e.get("cost_exceeds") else None)
    out["stored"] = e.get("stored_compile_error")
    if out["stored"] is None:
        if "compile_error" not in e:
            out["max_cost"] = e["max_cost"]
        out["output_type"] = e.get("output_type")
        if "actual_cost" in e:
            out["actual_cost"] = e["actual_cost"]
        if "result" in e:
            out["value"] = ("result", e["result"])
        elif "runtime_error" in e:
            out["value"] = ("runtime_error", e["runtime_error"])
    return out


def differences(rows: list[dict[str, Any]]) -> list[tuple[str, str, Any, Any]]:
    """(case id, aspect, upstream, numalign) for every aspect that differs."""
    out = []
    for row in rows:
        want, got = expected(row), answer(row["case"])
        for aspect in ASPECTS:
            if aspect in want and want[aspect] != got.get(aspect):
                out.append((row["case"]["id"], aspect, want[aspect], got.get(aspect)))
    return out


def main() -> None:
    rows = load()
    by_id = {r["case"]["id"]: r for r in rows}
    diffs = differences(rows)
    cases = {d[0] for d in diffs}
    print(f"{len(rows)} cases, {len(cases)} differ; by aspect: {dict(Counter(d[1] for d in diffs))}")
    if "-v" in sys.argv:
        for case_id, aspect, want, got in diffs:
            expr = by_id[case_id]["case"]["expr"]
            print(f"--- {case_id} {aspect}: {expr}\n  upstream: {want!r}\n  numalign: {got!r}")


if __name__ == "__main__":
    main()
