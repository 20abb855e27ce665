"""report/verdict.py: a pod's verdict from its containers'."""

from __future__ import annotations

from numalign.report.verdict import ALIGNED, NOT_ALIGNED, NOTHING_PINNED, UNKNOWN, marked, worst


def test_the_worst_of_what_is_pinned_and_nothing_pinned_only_when_nothing_is() -> None:
    assert worst([]) == NOTHING_PINNED
    assert worst([NOTHING_PINNED, NOTHING_PINNED]) == NOTHING_PINNED
    assert worst([ALIGNED, NOTHING_PINNED]) == ALIGNED  # a sidecar on the shared pool changes nothing
    assert worst([ALIGNED, UNKNOWN, NOTHING_PINNED]) == UNKNOWN
    assert worst([UNKNOWN, NOT_ALIGNED, ALIGNED]) == NOT_ALIGNED


def test_only_not_aligned_is_marked() -> None:
    assert [marked(v) for v in (ALIGNED, NOT_ALIGNED, UNKNOWN, NOTHING_PINNED)] == [False, True, False, False]
