"""Waiting for a killed run's leftovers to be gone: until they are, however slow the machine."""
from __future__ import annotations

import subprocess

from numalign.run.leftovers import wait_ended


def test_waits_until_a_slow_process_is_gone() -> None:
    # A process that takes seconds to end stands for a SIGKILLed one on a machine at load average 25,
    # which the kernel runs (and so ends) only seconds later. The old bound gave up after two seconds
    # of polling and kept the run's CPUs held although its leftovers were about to be gone.
    slow = subprocess.Popen(["sleep", "5"])
    try:
        assert wait_ended({slow.pid}) == set()
        assert slow.poll() is not None or slow.wait(timeout=60) == 0  # it did end (a zombie until reaped)
    finally:
        slow.kill()
        slow.wait()


def test_returns_at_once_for_processes_already_gone() -> None:
    done = subprocess.Popen(["true"])
    done.wait()
    assert wait_ended({done.pid, 2**22 + 1}) == set()
