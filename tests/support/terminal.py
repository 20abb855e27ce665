"""Running a command with its stderr on a terminal (a pseudo-terminal), as a user at a shell would."""
from __future__ import annotations

import os
import pty
import subprocess
import threading


def run_on_a_terminal(cmd: list[str], timeout: float = 300) -> tuple[subprocess.CompletedProcess[bytes], str]:
    """Run cmd with stdout piped and stderr on a fresh pseudo-terminal; return the finished process and
    everything it wrote to the terminal. Both are read while the command runs (the terminal on a
    thread), so a command that says a lot on either never blocks on a full buffer. Raises
    CalledProcessError on a failure."""
    leader, follower = pty.openpty()
    seen: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed (the command ended) and drained
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    try:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=follower) as proc:
            os.close(follower)
            follower = -1
            reader.start()
            out, _ = proc.communicate(timeout=timeout)
        reader.join(timeout)
    finally:
        if follower != -1:
            os.close(follower)
        if not reader.is_alive():
            os.close(leader)
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, None)
    done.check_returncode()
    return done, b"".join(seen).decode()
