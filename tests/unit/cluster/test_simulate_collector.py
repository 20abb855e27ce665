"""The collector setting a simulation runs under: full collections deferred, young ones kept."""
from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from numalign.cluster.simulate import collector_paused


class _Cycle:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    old, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield
    gc.set_threshold(*old)
    if not enabled:
        gc.disable()


@pytest.mark.usefixtures("default_thresholds")
def test_cycles_made_during_a_run_are_freed_as_they_go() -> None:
    live: weakref.WeakSet[_Cycle] = weakref.WeakSet()
    with collector_paused():
        assert gc.isenabled()
        for _ in range(50_000):
            live.add(_Cycle())
        # With the collector off all 50,000 would still be here; young collections free them.
        assert len(live) < 10_000


@pytest.mark.usefixtures("default_thresholds")
def test_full_collections_are_deferred_and_the_thresholds_restored_on_error() -> None:
    with pytest.raises(KeyboardInterrupt), collector_paused():
        t0, t1, t2 = gc.get_threshold()
        assert (t0, t1) == (700, 10) and t2 > 10
        raise KeyboardInterrupt
    assert gc.get_threshold() == (700, 10, 10)
