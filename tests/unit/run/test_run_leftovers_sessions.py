"""Which orphans pinned on a run's CPUs keep the run held (run.leftovers), read from a /proc tree: one in
another session whose leader still runs is another shell's or test suite's (seen in CI: another suite's
scrubbed child, pinned on the same CPU of this 2-CPU host by its own state directory, kept a finished
run's CPU held and the next run was refused); the rest cannot be told apart and keep it held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numalign.run.leftovers import leftovers

RUN_PID, RUN_START, RUN_SESSION = 100, 1000, 50


def fake(root: Path, pid: int, *, ppid: int = 1, sid: int = RUN_SESSION, start: int = 2000, cpus: str = "1",
         environ: bytes = b"", state: str = "S") -> None:
    fields = [state, str(ppid), str(sid), str(sid), *["0"] * 15, str(start), "0"]  # fields 3..23
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} (python) {' '.join(fields)}\n")
    (d / "environ").write_bytes(environ)
    (d / "status").write_text(f"Name:\tpython\nCpus_allowed_list:\t{cpus}\n")


def record(**extra: Any) -> dict[str, Any]:
    return {"pid": RUN_PID, "start_time": RUN_START, "command": ["sh"], "pod_uid": "u",
            "allocation": {"exclusive_cpus": True, "cpus": "1"}, **extra}


def test_an_orphan_of_another_live_session_is_someone_elses(tmp_path: Path) -> None:
    fake(tmp_path, 700, sid=600)  # the orphan, pinned on CPU 1, environment cleared
    fake(tmp_path, 600, ppid=5, sid=600, start=10, cpus="0-1")  # its session's leader: another shell, running
    assert leftovers(record(session=RUN_SESSION), tmp_path) == (set(), set())
    # a record written before the session was recorded keeps the old rule: held
    assert leftovers(record(), tmp_path) == (set(), {700})


def test_the_orphans_that_cannot_be_told_apart_keep_the_run_held(tmp_path: Path) -> None:
    fake(tmp_path, 701)  # in the run's session: the command's own child, scrubbed
    fake(tmp_path, 702, sid=702)  # a session of its own: a daemon that called setsid
    fake(tmp_path, 703, sid=650)  # another session whose leader is gone
    fake(tmp_path, 705, sid=704)  # a session led by a daemon pinned on the run's CPUs itself
    fake(tmp_path, 704, sid=704)
    fake(tmp_path, 600, ppid=5, sid=600, start=10, cpus="0-1")
    fake(tmp_path, 706, sid=600, state="Z")  # a zombie holds nothing
    assert leftovers(record(session=RUN_SESSION), tmp_path) == (set(), {701, 702, 703, 704, 705})
