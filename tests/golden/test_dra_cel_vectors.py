"""The 3,000 selector expressions recorded from the real 1.36.2 DRA CEL environment
(../shared/oracle/dra/cel-1.36.2.jsonl.gz) replay through numalign's CEL: what the API server says on
create, the compile error of a stored object, the checked output type, the estimated cost, the value
or runtime error on the case's device, and the evaluated cost. `python tests/support/cel_vectors.py -v`
lists any difference."""

from __future__ import annotations

import re

from support.cel_vectors import differences, load

# A macro over device.attributes or device.capacity walks a Go map, in Go's random order: where it stops
# early (exists, all), upstream's evaluated cost depends on that order, numalign walks the keys as the
# device lists them. Those costs may differ; every other one must be upstream's.
_OVER_A_MAP = re.compile(r"device\.(attributes|capacity)(\[[^\]]*\])?\.(exists|all|exists_one|filter|map)\(")
MAX_MAP_ORDER_COSTS = 71  # measured; lower it, never raise it


def test_the_cel_vectors_replay_equal() -> None:
    rows = load()
    assert len(rows) == 3000
    exprs = {r["case"]["id"]: r["case"]["expr"] for r in rows}
    diffs = differences(rows)
    decisive = [d for d in diffs if d[1] != "actual_cost"]
    assert not decisive, f"{len(decisive)} answers differ; first: {decisive[:3]}"
    costs = [d for d in diffs if d[1] == "actual_cost"]
    ordered = [d for d in costs if _OVER_A_MAP.search(exprs[d[0]])]
    other = [d for d in costs if d not in ordered]
    assert not other, f"{len(other)} evaluated costs differ; first: {other[:3]}"
    assert len(ordered) <= MAX_MAP_ORDER_COSTS, f"{len(ordered)} map-order costs differ; first: {ordered[:3]}"
