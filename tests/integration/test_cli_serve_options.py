"""`numalign serve` option handling checked without running the agent: the Agent is replaced by a
recorder that stops the command at construction, so the options it would get can be asserted."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import numalign.adapters.sysfs as sysfs
import numalign.agent as agent_pkg
from numalign.cli.main import main
from numalign.cli.output import EXIT_ERROR, EXIT_INVALID
from numalign.errors import DiscoveryError, InvalidInputError, NumalignError
from numalign.machine.examples import example


class _RecordedError(NumalignError):
    """Raised by the recorder instead of starting servers."""


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []

    class Recorder:
        def __init__(self, options: Any) -> None:
            seen.append(options)
            raise _RecordedError("recorded")

    monkeypatch.setattr(agent_pkg, "Agent", Recorder)
    return seen


def _serve(tmp_path: Path, *extra: str) -> list[str]:
    return ["serve", "--device-plugin-dir", str(tmp_path / "dp"), "--state-dir", str(tmp_path / "state"),
            "--pod-resources-socket", str(tmp_path / "pr.sock"), *extra]


def test_without_machine_serve_reads_this_host(monkeypatch: pytest.MonkeyPatch, recorded: list[Any],
                                               tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roots: list[Any] = []

    def discover(root: Any = "/", name: str | None = None) -> Any:
        roots.append(root)
        return dataclasses.replace(example("epyc-nps4"), name="this-host")

    monkeypatch.setattr(sysfs, "discover_sysfs", discover)
    assert main(_serve(tmp_path)) == EXIT_ERROR
    assert roots == ["/"]
    assert recorded[0].machine.name == "this-host"
    assert "recorded" in capsys.readouterr().err


def test_with_machine_serve_uses_it(recorded: list[Any], tmp_path: Path) -> None:
    assert main(_serve(tmp_path, "--machine", "dual-socket")) == EXIT_ERROR
    assert recorded[0].machine == example("dual-socket")


def test_discovery_failure_says_to_pass_machine(monkeypatch: pytest.MonkeyPatch, recorded: list[Any],
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def fail(root: Any = "/", name: str | None = None) -> Any:
        raise DiscoveryError("/sys/devices/system/cpu: no cpuN directories")

    monkeypatch.setattr(sysfs, "discover_sysfs", fail)
    assert main(_serve(tmp_path)) == EXIT_INVALID  # the fix is an option: --machine
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not recorded
    assert err.startswith("numalign serve: error: cannot read this host's topology from /sys "
                          "(/sys/devices/system/cpu: no cpuN directories)")
    assert "pass --machine FILE|NAME" in err and "dual-socket" in err


def test_machine_help_names_the_host_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default: this host, read from /sys" in out and "default: dual-socket" not in out


def test_manifests_that_is_a_file_is_refused(capsys: pytest.CaptureFixture[str], recorded: list[Any],
                                             tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\n")
    assert main(_serve(tmp_path, "--machine", "dual-socket", "--manifests", str(pod))) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err == (f"numalign serve: error: --manifests {pod}: is a file, not a directory; expected the static-pod "
                   "manifest directory (every *.yaml, *.yml, *.json in it is a pod); pass the directory that "
                   "holds the manifest\n")
    assert not recorded


def test_missing_manifests_directory_is_watched_with_a_warning(
    caplog: pytest.LogCaptureFixture, recorded: list[Any], tmp_path: Path
) -> None:
    missing = tmp_path / "nonexistent"
    with caplog.at_level("WARNING", logger="numalign.serve"):
        assert main(_serve(tmp_path, "--machine", "dual-socket", "--manifests", str(missing))) == EXIT_ERROR
    assert recorded[0].manifests == missing
    assert [r.getMessage() for r in caplog.records if r.name == "numalign.serve"] == [
        f"--manifests {missing}: the directory does not exist yet; it is watched, and pods put there once it is "
        "created are admitted (check the path if that is not what you meant)"
    ]
    caplog.clear()
    missing.mkdir()
    with caplog.at_level("WARNING", logger="numalign.serve"):
        main(_serve(tmp_path, "--machine", "dual-socket", "--manifests", str(missing)))
    assert not [r for r in caplog.records if r.name == "numalign.serve"]


def test_metrics_address_not_on_this_host() -> None:
    from numalign.agent.metrics_http import MetricsServer

    # Binding an address this host does not have fails in the kernel; no packet is sent.
    with pytest.raises(InvalidInputError) as info:
        MetricsServer("8.8.8.8:9100", lambda: b"").start()
    msg = str(info.value)
    assert msg.startswith("--metrics-address 8.8.8.8:9100: the address 8.8.8.8 is not on this host (bind failed: ")
    assert "free port" not in msg and "127.0.0.1" in msg


def test_metrics_port_in_use_says_choose_a_free_port() -> None:
    import socket

    from numalign.agent.metrics_http import MetricsServer

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InvalidInputError) as info:
            MetricsServer(f"127.0.0.1:{port}", lambda: b"").start()
    assert f"--metrics-address 127.0.0.1:{port}: cannot listen: " in str(info.value)
    assert "choose a free port" in str(info.value)
