"""A real `numalign serve` in a private directory for the interop peers (see peers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interop.peers import Serve, private_dir


@pytest.fixture
def serve() -> Iterator[Serve]:
    for root in private_dir():
        s = Serve(root)
        s.start()
        try:
            yield s
        finally:
            s.stop()
