"""Which process holds an allocation, and whether it still runs.

A pid alone is not an identity: after a process ends the kernel may give its pid to another. The
start time (field 22 of /proc/PID/stat, clock ticks after boot) tells the two apart, so a record
counts as alive only while a process with that pid AND that start time exists and is not a zombie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalign.errors import CheckpointError

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessRef:
    """The process a `numalign run` allocation belongs to (the command it runs)."""

    pid: int
    start_time: int
    command: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "start_time": self.start_time, "command": list(self.command)}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], where: str) -> ProcessRef:
        pid, start, command = obj.get("pid"), obj.get("start_time"), obj.get("command")
        if (
            not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0
            or not isinstance(start, int) or isinstance(start, bool) or start < 0
            or not isinstance(command, list) or not all(isinstance(a, str) for a in command)
        ):
            raise CheckpointError(
                f"{where}: process: expected {{pid: int > 0, start_time: int >= 0, command: [str]}}, got {obj!r}; "
                "the record was not written by numalign run; restore the file or remove that pod's entry"
            )
        return cls(pid, start, tuple(command))


def _stat_fields(pid: int, proc: Path = PROC) -> list[str] | None:
    """/proc/PID/stat split after the command name (which may hold spaces and parentheses)."""
    try:
        raw = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    end = raw.rfind(b")")
    if end < 0:
        return None
    # fields[0] is field 3 (state); field N is fields[N - 3].
    return raw[end + 2:].decode("ascii", "replace").split()


def start_time(pid: int, proc: Path = PROC) -> int | None:
    """Field 22 of /proc/PID/stat (starttime), or None when no such process exists."""
    fields = _stat_fields(pid, proc)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[22 - 3])


def is_alive(ref: ProcessRef, proc: Path = PROC) -> bool:
    """The recorded process still runs: same pid, same start time, not a zombie waiting to be reaped."""
    fields = _stat_fields(ref.pid, proc)
    if fields is None or len(fields) < 20:
        return False
    return fields[0] not in ("Z", "X") and int(fields[22 - 3]) == ref.start_time


def describe(command: Sequence[str], limit: int = 60) -> str:
    """A command line short enough for one table cell."""
    text = " ".join(command)
    return text if len(text) <= limit else text[: limit - 3] + "..."
