"""What a `numalign run` leaves running after its command ended, and how the CPUs it held are freed
for real.

A container's processes end with the container: the runtime kills what is left in its cgroup. A run's
command may leave children behind (a daemon, a `&` in a script), and a run killed with -9 leaves its
command's descendants too; with `--no-cgroup` there is no cgroup to find them by. So every run's
command starts with NUMALIGN_RUN=<pid>.<start time> of the command in its environment, which its
descendants inherit, and a run's leftovers are:

* the processes in its cgroup (cgroup.procs), when it has one;
* the processes started after the run whose environment names its pod (they inherited it);
* the processes started after the run whose CPU affinity lies inside the exclusive CPUs it held
  (they inherited the pinning but cleared their environment), unless they carry another run's marker,
  have a live parent that is not a leftover (then they are someone else's: a taskset in a shell), or
  are orphans in another session whose leader still runs (another shell's or test suite's).

The first two are ended (SIGKILL), as a container's are. The third are never signalled, since nothing
proves they are the run's: while one runs, the run's pod stays recorded, so its CPUs are not handed to
another run; `numalign pods` shows the pod, and the next open tries again. Reading other users'
/proc/PID/environ needs root (or the same user), as writing their affinity does.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from numalign.errors import NumalignError
from numalign.k8s.cpuset import parse_cpuset
from numalign.run.cgroup import remove_cgroup
from numalign.run.process import PROC, ProcessRef, is_alive, start_time

RUN_ENV = "NUMALIGN_RUN"


def run_marker(ref: ProcessRef) -> str:
    """The value of RUN_ENV for the run whose command is `ref`: pid and start time tell it apart."""
    return f"{ref.pid}.{ref.start_time}"


def _marker_of(pid: int, proc: Path) -> str | None:
    """The RUN_ENV value in a process's environment ("" when it has none, None when unreadable)."""
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = f"{RUN_ENV}=".encode()
    return next((v[len(prefix):].decode("ascii", "replace") for v in raw.split(b"\0") if v.startswith(prefix)), "")


def _affinity(pid: int, proc: Path) -> set[int] | None:
    try:
        text = (proc / str(pid) / "status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            with contextlib.suppress(NumalignError, ValueError):
                return set(parse_cpuset(line.split(":", 1)[1].strip()))
    return None


def _cgroup_members(record: Mapping[str, Any]) -> set[int]:
    cgroup, uid = record.get("cgroup"), record.get("pod_uid")
    # Only a cgroup this run created (named after its pod's uid) is looked into.
    if not isinstance(cgroup, str) or not isinstance(uid, str) or Path(cgroup).name != uid:
        return set()
    try:
        return {int(w) for w in (Path(cgroup) / "cgroup.procs").read_text(encoding="ascii").split()}
    except (OSError, ValueError):
        return set()


def _exclusive_cpus(record: Mapping[str, Any]) -> set[int]:
    alloc = record.get("allocation")
    if not isinstance(alloc, Mapping) or not alloc.get("exclusive_cpus"):
        return set()
    cpus = alloc.get("cpus")
    if not isinstance(cpus, str):
        return set()
    try:
        return set(parse_cpuset(cpus))
    except (NumalignError, ValueError):
        return set()


def leftovers(record: Mapping[str, Any], proc: Path = PROC) -> tuple[set[int], set[int]]:
    """(ours, pinned): processes left by the run `record` describes that are provably its own (its cgroup, or its
    environment), and those only pinned inside its exclusive CPUs. The recorded command itself, while it
    runs, is in neither: it is the run, not a leftover."""
    try:
        ref = ProcessRef.from_dict(record, "numalign_pods.json")
    except NumalignError:
        return set(), set()
    me = os.getpid()
    ours = _cgroup_members(record)
    marker = run_marker(ref)
    pinned: set[int] = set()
    exclusive = _exclusive_cpus(record)
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        pid = int(d.name)
        if pid in (me, ref.pid) or pid in ours:
            continue
        started = start_time(pid, proc)
        if started is None or started < ref.start_time:
            continue  # older than the run: not its child
        theirs = _marker_of(pid, proc)
        if theirs == marker:
            ours.add(pid)
        elif theirs:
            continue  # another run's (of this directory or another): its own run accounts for it
        elif exclusive and (affinity := _affinity(pid, proc)) is not None and affinity and affinity <= exclusive:
            pinned.add(pid)
    ours.discard(ref.pid)
    # A pinned process is taken for the run's only when it was left behind: orphaned (its parent is PID 1
    # or a service manager that adopts orphans) or the child of another leftover. A pinned process with
    # a live parent of its own (a shell's taskset, another tool) is someone else's.
    adopted = {pid for pid in pinned if _orphaned(pid, proc) and not _another_session(pid, record, pinned, proc)}
    grew = True
    while grew:
        more = {pid for pid in pinned - adopted if _parent(pid, proc) in adopted | ours}
        adopted |= more
        grew = bool(more)
    return {p for p in ours if _running(p, proc)}, {p for p in adopted if _running(p, proc)}


def _parent(pid: int, proc: Path) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2:].split()[1])


def _session(pid: int, proc: Path) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2:].split()[3])


def _another_session(pid: int, record: Mapping[str, Any], pinned: set[int], proc: Path) -> bool:
    """An orphaned pinned process is another's when it is in a session other than the run's (recorded at
    launch: the command and what it starts inherit it) whose leader still runs and is not pinned on the
    run's CPUs itself: a process another user's shell or test suite left pinned on the same CPUs (another
    state directory's run gave it them too). A process that is its session's leader (a daemon that called
    setsid), or whose session's leader is gone, cannot be told apart: it keeps the run held, as before.
    Records written before the session was recorded keep the old rule."""
    ours = record.get("session")
    sid = _session(pid, proc)
    if not isinstance(ours, int) or isinstance(ours, bool) or sid is None or sid in (ours, pid):
        return False
    return sid not in pinned and _running(sid, proc)


def _orphaned(pid: int, proc: Path) -> bool:
    parent = _parent(pid, proc)
    if parent is None:
        return False
    if parent == 1:
        return True
    try:  # a user's service manager (systemd --user) adopts orphans as a subreaper
        return (proc / str(parent) / "comm").read_text(encoding="utf-8", errors="replace").strip() == "systemd"
    except OSError:
        return False


def _running(pid: int, proc: Path) -> bool:
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def holds(record: Mapping[str, Any], proc: Path = PROC) -> bool:
    """The run still holds what it was given: its command runs, or something it left does."""
    try:
        ref = ProcessRef.from_dict(record, "numalign_pods.json")
    except NumalignError:
        return True  # not ours to judge: keep it rather than release someone's allocation
    if is_alive(ref, proc):
        return True
    ours, pinned = leftovers(record, proc)
    return bool(ours or pinned)


def end(pids: Iterable[int]) -> None:
    """SIGKILL what an ended run provably left (leftovers' `ours`), as a container's processes end with it."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# How long end()'s victims get to be gone before their run counts as still holding its CPUs. SIGKILL
# ends a process as soon as the kernel next runs it, which on a machine at load average 25 can take
# seconds; only a process stuck in uninterruptible sleep outlasts this. Waiting returns the moment the
# last one ends (pidfds), so the bound costs nothing when the machine is quick.
_END_WAIT_SECONDS = 60.0


def wait_ended(pids: set[int], proc: Path = PROC) -> set[int]:
    """Wait (bounded by _END_WAIT_SECONDS) for killed processes to be gone; returns those still running."""
    pids = {p for p in pids if _running(p, proc)}
    if not pids:
        return pids
    deadline = time.monotonic() + _END_WAIT_SECONDS
    if proc == PROC and hasattr(os, "pidfd_open"):
        _wait_pidfds(pids, deadline)
    while pids and time.monotonic() < deadline:
        # Without pidfds (or for a process a pidfd could not be opened for): poll /proc.
        pids = {p for p in pids if _running(p, proc)}
        if pids:
            time.sleep(0.01)
    return {p for p in pids if _running(p, proc)}


def _wait_pidfds(pids: set[int], deadline: float) -> None:
    """Block until every process has exited (a pidfd polls readable once its process is a zombie or
    reaped) or the deadline passes."""
    fds: list[int] = []
    try:
        poller = select.poll()
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # already gone
            except OSError:
                return  # no pidfds here (old kernel, seccomp): the caller polls /proc
            fds.append(fd)
            poller.register(fd, select.POLLIN)
        waiting = set(fds)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for fd, _event in poller.poll(left * 1000):
                waiting.discard(fd)
                poller.unregister(fd)
    finally:
        for fd in fds:
            os.close(fd)


def describe_holders(pids: Iterable[int], proc: Path = PROC) -> str:
    parts = []
    for pid in sorted(pids)[:5]:
        try:
            comm = (proc / str(pid) / "comm").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            comm = "?"
        parts.append(f"{pid} ({comm})")
    more = len(list(pids)) - len(parts)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def process_alive(record: Mapping[str, Any]) -> bool:
    """Node's liveness check for run pods, for readers (pods, --dry-run): the run still holds what it was
    given while its command (the recorded pid with the recorded start time) runs, or anything it left
    behind does (run.leftovers)."""
    return holds(record)


def process_alive_reclaiming(record: Mapping[str, Any]) -> bool:
    """The same check for writers (run, serve, admit, remove), which free an ended run's CPUs for real
    first: what the run provably left (its cgroup's and its environment's processes) is killed, as a
    container's processes are when it ends, and waited for; only when nothing of it runs any more is its
    pod released. Processes merely pinned on its CPUs keep it held (see run.leftovers)."""
    try:
        ref = ProcessRef.from_dict(record, "numalign_pods.json")
    except NumalignError:
        return True  # not ours to judge: keep it rather than release someone's allocation
    if is_alive(ref):
        return True
    ours, pinned = leftovers(record)
    end(ours)
    if wait_ended(ours) or pinned:
        return True
    cgroup, uid = record.get("cgroup"), record.get("pod_uid")
    if isinstance(cgroup, str) and isinstance(uid, str) and Path(cgroup).name == uid:
        # Emptied above: a run's cgroup goes with its pod, whoever reclaims it (a run or serve).
        with contextlib.suppress(NumalignError, OSError):
            remove_cgroup(Path(cgroup))
    return False
