from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.errors import InvalidInputError
from numalign.k8s.cpuset import format_cpuset, parse_cpuset, parse_go_cpuset


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", set()),
        ("1", {1}),
        ("0-3,6", {0, 1, 2, 3, 6}),
        ("0-5,34,46-48", {0, 1, 2, 3, 4, 5, 34, 46, 47, 48}),
        ("1-1", {1}),
        ("3,1,2", {1, 2, 3}),
        ("0-3\n", {0, 1, 2, 3}),
    ],
)
def test_parse(text: str, expected: set[int]) -> None:
    assert parse_cpuset(text) == frozenset(expected)


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "1,,2", "1-2-3", "0x1", "1..3"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(InvalidInputError, match="reservedSystemCPUs"):
        parse_cpuset(text, where="reservedSystemCPUs")


def test_range_error_names_bounds() -> None:
    with pytest.raises(InvalidInputError, match=r"\(3 > 1\)"):
        parse_cpuset("3-1")


@pytest.mark.parametrize(
    ("cpus", "text"),
    [([], ""), ([5], "5"), ([0, 1, 2, 3, 6], "0-3,6"), ([7, 1, 2, 3, 9, 10], "1-3,7,9-10"), ([1, 3], "1,3")],
)
def test_format(cpus: list[int], text: str) -> None:
    assert format_cpuset(cpus) == text


@settings(max_examples=100)
@given(st.frozensets(st.integers(min_value=0, max_value=300)))
def test_round_trip(cpus: frozenset[int]) -> None:
    assert parse_cpuset(format_cpuset(cpus)) == cpus


@pytest.mark.parametrize("text", ["0-999999999", "8192", "0-3,65536", "1" * 5000])
def test_ids_past_the_bound_are_refused_before_anything_is_built(text: str) -> None:
    # a state or machine file with a huge range must give one line, not exhaust memory
    with pytest.raises(InvalidInputError, match=r"cpu_manager_state: .* expected ids from 0 to 8191"):
        parse_cpuset(text, where="cpu_manager_state")
    with pytest.raises(ValueError, match="expected ids from 0 to 8191"):
        parse_go_cpuset(text)


def test_the_highest_allowed_id_parses() -> None:
    assert parse_cpuset("8191") == frozenset({8191})
    assert len(parse_go_cpuset("0-8191")) == 8192
