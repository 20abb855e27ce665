"""Directories and socket paths that run into a regular file: one line naming the option, the path and
the fix, exit code 3, before any server starts; any other OSError of a command is one line too."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration.test_cli_input_errors import error_of

from numalign.cli.main import main
from numalign.cli.output import EXIT_ERROR


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "passwd"
    path.write_text("root:x:0:0\n")
    return path


def _serve(tmp_path: Path, *override: str) -> list[str]:
    return ["serve", "--machine", "dual-socket", "--device-plugin-dir", str(tmp_path / "dp"),
            "--state-dir", str(tmp_path / "state"), "--pod-resources-socket", str(tmp_path / "pr" / "pr.sock"),
            *override]


@pytest.mark.parametrize("option", ["--device-plugin-dir", "--state-dir"])
def test_serve_directory_that_is_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, a_file: Path,
                                        option: str) -> None:
    msg = error_of(capsys, *_serve(tmp_path, option, str(a_file)))
    assert f"{option} {a_file}: is a file, not a directory; expected a directory (or a path that does not " \
           "exist yet, then it is created); pass a directory path" in msg
    below = a_file / "dp"
    msg = error_of(capsys, *_serve(tmp_path, option, str(below)))
    assert f"{option} {below}: {a_file} is a file, not a directory" in msg
    assert not (tmp_path / "dp").exists() and not (tmp_path / "state").exists()  # nothing started


def test_serve_socket_below_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, a_file: Path) -> None:
    sock = a_file / "pr.sock"
    msg = error_of(capsys, *_serve(tmp_path, "--pod-resources-socket", str(sock)))
    assert f"--pod-resources-socket {sock}: {a_file} is a file, not a directory; expected a path whose parent " \
           "is a directory" in msg and "pass a path inside a directory" in msg


def test_plugin_directory_that_is_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, a_file: Path) -> None:
    devices = tmp_path / "gpus.yaml"
    devices.write_text("- {id: gpu0, numa: 0}\n")
    for bad, where in ((a_file, "is a file"), (a_file / "dp", f"{a_file} is a file")):
        msg = error_of(capsys, "plugin", "--resource", "example.com/gpu", "--devices", str(devices),
                       "--device-plugin-dir", str(bad))
        assert f"--device-plugin-dir {bad}: {where}, not a directory" in msg


def test_dangling_symlink_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    msg = error_of(capsys, *_serve(tmp_path, "--state-dir", str(link / "state")))
    assert f"--state-dir {link / 'state'}: {link} is a dangling symlink, not a directory" in msg


def test_any_oserror_of_a_command_is_one_line(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import numalign.cli.commands.replay as replay

    def refuse(args: object) -> int:
        raise PermissionError(13, "Permission denied", "/var/lib/kubelet/cpu_manager_state")

    monkeypatch.setattr(replay, "run", refuse)
    msg = error_of(capsys, "replay", "x.jsonl", status=EXIT_ERROR)  # the file system refused: not bad input
    assert msg == ("numalign replay: error: /var/lib/kubelet/cpu_manager_state: Permission denied; "
                   "check the path and its permissions")
    with pytest.raises(PermissionError):
        main(["--debug", "replay", "x.jsonl"])
