"""scripts/setup run for real (bash) against stand-ins for apt-get, sudo and the venv's python that record
what they were asked: it waits for another apt's lock instead of failing, and says what it is doing
(pip's progress on a terminal, quiet otherwise)."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# apt-get as Debian's behaves while another apt holds the dpkg lock: without a lock timeout it fails at
# once with apt's own message; with one, it waits (here: the other apt has finished) and succeeds.
_APT_GET = """#!/bin/bash
echo "apt-get $*" >> "$LOG"
case " $* " in
  *" -o DPkg::Lock::Timeout="*) exit 0 ;;
esac
echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
exit 100
"""
_SUDO = '#!/bin/bash\necho "sudo $*" >> "$LOG"\nexec "$@"\n'
_ID = "#!/bin/bash\necho 1000\n"  # not root: the script goes through sudo
_PYTHON = '#!/bin/bash\necho "python $*" >> "$LOG"\necho "pip says: Collecting ..."\n'


def _sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the script beside a pyproject.toml and a .venv whose python only records its arguments;
    PATH holds the stand-ins and the few real tools the script uses, and no chromium."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup", root / "scripts" / "setup")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, text in (("apt-get", _APT_GET), ("sudo", _SUDO), ("id", _ID)):
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    (venv_bin / "python").write_text(_PYTHON)
    (venv_bin / "python").chmod(0o755)
    for real in ("dirname", "env", "touch"):
        found = shutil.which(real)
        assert found is not None
        (tools / real).symlink_to(found)
    env = {"PATH": str(tools), "LOG": str(tmp_path / "calls.log"), "HOME": str(tmp_path)}
    return root, env


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_setup_waits_for_another_apts_lock(tmp_path: Path) -> None:
    root, env = _sandbox(tmp_path)
    done = subprocess.run(["/bin/bash", str(root / "scripts" / "setup"), "--test"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    apt = [c for c in _calls(tmp_path) if c.startswith("apt-get")]
    assert [("update" if " update " in c else "install" if " install " in c else c) for c in apt] == [
        "update", "install"]
    assert all("-o DPkg::Lock::Timeout=600" in c for c in apt)
    assert any(c.startswith("sudo env DEBIAN_FRONTEND=noninteractive apt-get") for c in _calls(tmp_path))


def test_setup_says_what_it_does_and_keeps_pip_quiet_off_a_terminal(tmp_path: Path) -> None:
    root, env = _sandbox(tmp_path)
    done = subprocess.run(["/bin/bash", str(root / "scripts" / "setup"), "--test"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("scripts/setup: ")]
    assert any("chromium" in line for line in said)
    assert any("installing numalign[test]" in line and "pip" in line for line in said)
    assert said[-1].startswith("scripts/setup: done")
    pips = [c for c in _calls(tmp_path) if c.startswith("python -m pip install")]
    assert len(pips) == 2 and all("--quiet" in c for c in pips)
    assert done.stdout == ""  # pip's own lines go to stderr with the rest, and the compiled core's build's
    assert "python scripts/compile.py" in _calls(tmp_path)  # the compiled core is built (or found up to date)
    again = subprocess.run(["/bin/bash", str(root / "scripts" / "setup")], env=env,
                           capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "installing numalign " in again.stderr


def test_setup_shows_pips_progress_on_a_terminal(tmp_path: Path) -> None:
    root, env = _sandbox(tmp_path)
    (tmp_path / "bin" / "chromium").write_text("#!/bin/bash\n")  # present: no apt step here
    (tmp_path / "bin" / "chromium").chmod(0o755)
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(["/bin/bash", str(root / "scripts" / "setup")], env=env, stderr=terminal,
                              stdout=subprocess.DEVNULL, check=False)
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal's other end is closed: everything was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    assert done.returncode == 0
    pips = [c for c in _calls(tmp_path) if c.startswith("python -m pip install")]
    assert len(pips) == 2 and not any("--quiet" in c for c in pips)
    assert b"pip says: Collecting" in shown and b"scripts/setup: installing numalign" in shown
