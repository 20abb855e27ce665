"""What a run leaves behind never keeps an exclusive CPU that another run is given (issue 22, item 7).

Real processes: a COMMAND that starts a child which outlives it, then `numalign run` ends normally or is
killed with -9, with and without a cgroup. Each child reports its pid and affinity on a pipe before the
test goes on, so nothing depends on timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support.schemas import validate

from numalign.k8s.cpuset import parse_cpuset

# The child: reports pid and affinity, then sleeps until killed. `env -i` (CLEAR) drops the inherited
# environment, as a daemon that scrubs it would.
CHILD = "import os, sys, time; print(os.getpid(), sorted(os.sched_getaffinity(0)), flush=True); time.sleep(3600)"


def command(clear_env: bool) -> list[str]:
    child = f"{'env -i ' if clear_env else ''}{sys.executable} -c '{CHILD}'"
    # COMMAND starts the child in the background (its line goes straight to our pipe), then waits on stdin.
    return ["sh", "-c", f"{child} & cat >/dev/null"]


def run_args(state: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "numalign.cli.main", "run", "--state-dir", str(state), "-o", "json",
            "--cpus", "1", "--memory", "32Mi", *extra, "--"]


def start_leaving_a_child(
    state: Path, *extra: str, clear_env: bool = False
) -> tuple[subprocess.Popen[str], int, set[int]]:
    proc = subprocess.Popen([*run_args(state, *extra), *command(clear_env)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line, proc.stderr.read()  # type: ignore[union-attr]
    pid_text, _, cpus = line.partition(" ")
    return proc, int(pid_text), set(json.loads(cpus))


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def next_run(state: Path, *extra: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run([*run_args(state, *extra), "true"], capture_output=True, text=True, timeout=120,
                          check=False)
    doc = json.loads(done.stderr[done.stderr.index("{"):])
    validate("run", doc)
    return done.returncode, doc


def given_cpus(doc: dict[str, object]) -> set[int]:
    alloc = doc["decision"]["allocations"]["main"]  # type: ignore[index]
    return set(parse_cpuset(alloc["cpus"]))


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def killed(proc: subprocess.Popen[str]) -> None:
    """kill -9 `numalign run` and wait for it; the child keeps its pipes open, so no communicate()."""
    proc.kill()
    proc.wait(timeout=60)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_a_child_left_by_a_normal_exit_ends_with_the_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc, child, cpus = start_leaving_a_child(state, "--no-cgroup")
    try:
        _out, err = proc.communicate("", timeout=120)  # COMMAND ends; its child would live on
        assert proc.returncode == 0, err
        assert not running(child)  # ended with the run, as a container's processes are
        code, doc = next_run(state, "--no-cgroup")
        # the CPU is free for real, and given again (the document says why, should it not be)
        assert code == 0 and given_cpus(doc) == cpus, (code, cpus, doc)
    finally:
        kill(child)


def test_a_killed_runs_child_is_ended_before_its_cpu_is_given_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc, child, cpus = start_leaving_a_child(state, "--no-cgroup")
    try:
        killed(proc)  # kill -9 of numalign run: COMMAND dies with it, its child does not
        assert running(child)
        code, doc = next_run(state, "--no-cgroup")
        assert code == 0, doc
        assert doc["releasedEndedRuns"]
        assert not running(child)  # ended first: the CPU it ran on is never shared
        assert given_cpus(doc) == cpus
    finally:
        kill(child)


def test_a_pinned_child_that_scrubbed_its_environment_keeps_the_cpu_held(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc, child, cpus = start_leaving_a_child(state, "--no-cgroup", clear_env=True)
    try:
        killed(proc)
        assert running(child)
        code, doc = next_run(state, "--no-cgroup")
        # Nothing proves the child is the run's, so it is not killed; its CPU is not handed out either.
        assert running(child)
        assert not doc["releasedEndedRuns"]
        if code == 0:
            assert not given_cpus(doc) & cpus
        else:
            assert code == 1  # no other CPU free on this host: rejected, never given the child's CPU
        kill(child)
        while running(child):
            os.sched_yield()
        code, doc = next_run(state, "--no-cgroup")
        assert code == 0 and doc["releasedEndedRuns"]
        assert given_cpus(doc) == cpus
    finally:
        kill(child)
