"""A JSON object with a key written twice is refused in work linear in its keys (review 4 F1): the
object_pairs_hook only notices the duplicate, the text is then read once to name it."""

from __future__ import annotations

import json

import pytest

from numalign.k8s import documents
from numalign.k8s.documents import DuplicateKeyError, loads_json


class _CountingKey(str):
    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountingKey.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_hook_compares_keys_only_where_their_hashes_meet() -> None:
    keys = [_CountingKey(f"k{i}") for i in range(20_000)] + [_CountingKey("k0")]
    _CountingKey.compared = 0
    with pytest.raises(DuplicateKeyError):
        documents._unique_object([(k, 1) for k in keys])
    # The quadratic search this replaces compared some 2 x 10^8 pairs here.
    assert _CountingKey.compared < 100


def test_a_large_object_with_its_duplicate_last_is_named_with_its_line() -> None:
    lines = ["{"] + [f'  "k{i}": {i},' for i in range(200_000)] + ['  "k7": 0', "}"]
    with pytest.raises(DuplicateKeyError) as caught:
        loads_json("\n".join(lines))
    assert (caught.value.key, caught.value.line, caught.value.column) == ("k7", 200_002, 3)
    assert loads_json(json.dumps({"a": 1, "b": {"a": 2}})) == {"a": 1, "b": {"a": 2}}
