"""All 2,600 allocator vectors recorded from the real Kubernetes 1.36.2 code (../shared/oracle/dra):
numalign's outcome, devices (per claim, in order) and message agree with upstream's in every one."""

from __future__ import annotations

from typing import Any

import pytest
from support.dra_oracle import agrees, answer, vectors

FILES = {"allocator-1.36.2.jsonl.gz": 2000, "allocator-1.36.2-alpha.jsonl.gz": 600}


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_recorded_vector_agrees(name: str) -> None:
    differ: dict[str, tuple[Any, Any]] = {}
    count = 0
    for row in vectors(name):
        count += 1
        mine = answer(row["case"])
        if not agrees(mine, row["upstream"]):
            differ[row["case"]["id"]] = (row["upstream"], mine)
    assert count == FILES[name]
    assert differ == {}, f"{len(differ)} of {count} vectors differ from upstream"
