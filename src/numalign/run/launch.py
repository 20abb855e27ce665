"""Start COMMAND where the decision placed it, wait for it, pass signals on.

The command's process is forked before admission, so its pid and start time are what the state
records, and then waits at a gate (a pipe). Once the allocation is written, the parent sends the
placement through the gate; the child joins its cgroup (which resets its affinity to the cgroup's
cpuset, so that comes first), sets its affinity and memory policy, and execs. If the admission fails
the gate closes without a placement and the child exits without running anything. A failure in the
child before exec comes back as one line through a second, close-on-exec pipe.

The child asks the kernel to kill it when `numalign run` dies (PR_SET_PDEATHSIG), so a kill -9 of the
supervisor cannot leave the command running on CPUs the state no longer holds for it.

Signals: sent to `numalign run` by another process (kill, systemd, a batch scheduler) they are
forwarded to the command; sent by the terminal (Ctrl-C) they already reached the command, which
shares the process group, and are not sent twice.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from numalign.errors import NumalignError
from numalign.run.affinity import set_cpu_affinity, set_memory_bind

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH)
_PR_SET_PDEATHSIG = 1
# A placement the child could not apply ends it with numalign's own error code (cli.main EXIT_ERROR);
# a command that cannot be run, with the shell's 126 and 127.
EXIT_PLACEMENT = 3
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127


class LaunchError(NumalignError):
    """The command could not be started where it was placed."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Placement:
    cpus: frozenset[int] | None  # None: leave the affinity as inherited
    mems: frozenset[int] | None  # None: no memory policy
    env: Mapping[str, str]
    cgroup: Path | None

    def to_json(self) -> bytes:
        return json.dumps({
            "cpus": None if self.cpus is None else sorted(self.cpus),
            "mems": None if self.mems is None else sorted(self.mems),
            "env": dict(self.env),
            "cgroup": None if self.cgroup is None else str(self.cgroup),
        }).encode()


class GatedChild:
    """A forked child holding COMMAND, waiting for its placement."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)
        self._old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {*FORWARDED, signal.SIGCHLD})
        gate_r, self._gate_w = os.pipe()
        self._err_r, err_w = os.pipe()
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which execs or _exits
            os.close(self._gate_w)
            os.close(self._err_r)
            _child(self.command, parent, gate_r, err_w, self._old_mask)
        os.close(gate_r)
        os.close(err_w)
        self.pid = pid
        self.status: int | None = None

    def abort(self) -> None:
        """Close the gate without a placement: the child exits and runs nothing."""
        self._close_gate()
        self._reap_blocking()
        self._restore()

    def start(self, placement: Placement) -> None:
        """Send the placement; return once COMMAND is exec'd, or raise LaunchError with the child's reason."""
        with contextlib.suppress(BrokenPipeError):  # the child died already; its status tells
            os.write(self._gate_w, placement.to_json())
        self._close_gate()
        chunks = []
        while chunk := os.read(self._err_r, 4096):
            chunks.append(chunk)
        os.close(self._err_r)
        self._err_r = -1
        if chunks:
            code_text, _, message = b"".join(chunks).decode("utf-8", "replace").partition(" ")
            self._reap_blocking()
            self._restore()
            raise LaunchError(message, int(code_text))

    def wait(self) -> int:
        """Wait for COMMAND, forwarding signals; its exit code (128 + N when killed by signal N)."""
        try:
            while self.status is None:
                info = signal.sigwaitinfo({*FORWARDED, signal.SIGCHLD})
                if info.si_signo == signal.SIGCHLD:
                    self._reap(os.WNOHANG)
                elif info.si_code <= 0:
                    # SI_USER, SI_QUEUE, SI_TKILL: another process sent it; the terminal's signals
                    # (si_code > 0) went to the whole foreground process group already.
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, info.si_signo)
        finally:
            self._restore()
        return exit_code(self.status)

    def _reap(self, flags: int) -> None:
        pid, status = os.waitpid(self.pid, flags)
        if pid == self.pid:
            self.status = status

    def _reap_blocking(self) -> None:
        if self.status is None:
            self._reap(0)

    def _close_gate(self) -> None:
        if self._gate_w >= 0:
            os.close(self._gate_w)
            self._gate_w = -1

    def _restore(self) -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)
        if self._err_r >= 0:
            os.close(self._err_r)
            self._err_r = -1


def exit_code(status: int | None) -> int:
    if status is None:
        return 1
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _child(  # pragma: no cover - runs in the forked child
    command: list[str], parent: int, gate: int, err: int, mask: set[int | signal.Signals]
) -> None:
    code = EXIT_PLACEMENT
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)
        data = b""
        while chunk := os.read(gate, 65536):
            data += chunk
        os.close(gate)
        if not data:
            os._exit(0)  # admission refused: run nothing
        obj = json.loads(data)
        if obj["cgroup"] is not None:
            try:
                (Path(obj["cgroup"]) / "cgroup.procs").write_text(f"{os.getpid()}\n", encoding="ascii")
            except OSError as e:
                raise NumalignError(f"cannot join cgroup {obj['cgroup']}: {e.strerror or e}") from None
        if obj["cpus"] is not None:
            set_cpu_affinity(obj["cpus"])
        if obj["mems"] is not None:
            set_memory_bind(obj["mems"])
        env = dict(os.environ)
        env.update(obj["env"])
        # COMMAND starts with default dispositions, as subprocess's restore_signals gives: Python
        # ignores SIGPIPE and SIGXFSZ, and exec would keep them ignored. A terminal's Ctrl-C that came
        # while the gate was closed is pending: with the default action it ends the child here, as it
        # would have ended COMMAND.
        for sig in (*FORWARDED, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        try:
            os.execvpe(command[0], command, env)
        except FileNotFoundError:
            code = EXIT_NOT_FOUND
            raise NumalignError(f"{command[0]}: command not found; check the name and PATH") from None
        except PermissionError:
            code = EXIT_CANNOT_EXECUTE
            raise NumalignError(f"{command[0]}: permission denied; expected an executable file") from None
        except OSError as e:
            code = EXIT_CANNOT_EXECUTE
            raise NumalignError(f"{command[0]}: cannot execute: {e.strerror or e}") from None
    except BaseException as e:  # the child must never return into the parent's code
        with contextlib.suppress(BaseException):
            os.write(err, f"{code} {e}".encode())
        os._exit(code)
