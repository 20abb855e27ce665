"""The 3,000 selector expressions recorded from the real 1.36.2 DRA CEL environment
(../shared/oracle/dra/cel-1.36.2.jsonl.gz) replay through numalign's CEL: what the API server says on
create, the compile error of a stored object, the checked output type, the estimated cost and the
value or runtime error on the case's device. `python tests/support/cel_vectors.py -v` lists any
difference."""

from __future__ import annotations

from support.cel_vectors import differences, load

# Known and measured: one estimate differs by 3 (4,851 upstream) in a selector whose cost is far
# below the limit, so no answer changes. Lower it, never raise it.
MAX_DIFFERING_ASPECTS = 1


def test_the_cel_vectors_replay_equal() -> None:
    rows = load()
    assert len(rows) == 3000
    diffs = differences(rows)
    decisive = [d for d in diffs if d[1] != "max_cost"]
    assert not decisive, f"{len(decisive)} answers differ; first: {decisive[:3]}"
    assert len(diffs) <= MAX_DIFFERING_ASPECTS, f"{len(diffs)} differ; first: {diffs[:3]}"
