"""Fixtures for the gRPC integration tests: a short socket directory and a running fake kubelet
(numalign's RegistrationServer with recording callbacks). Every wait has a timeout."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from numalign.deviceplugin.testing import FakeKubelet, KubeletRecorder

# The kubelet side dials plugins on this host's unix sockets, which answer in milliseconds; a dial
# that has not connected by then never will (the tests that point it at a missing socket wait this out).
DIAL_TIMEOUT = 0.5


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # pytest's tmp_path can push unix socket paths past the 107-byte limit; use a short private dir.
    d = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(sock_dir: Path) -> Iterator[FakeKubelet]:
    k = FakeKubelet(sock_dir, dial_timeout=DIAL_TIMEOUT, call_timeout=3.0)
    k.start()
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture
def recorder() -> KubeletRecorder:
    return KubeletRecorder()
