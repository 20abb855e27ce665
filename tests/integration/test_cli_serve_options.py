"""`numalign serve` option handling checked without running the agent: the Agent is replaced by a
recorder that stops the command at construction, so the options it would get can be asserted."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import numalign.adapters.sysfs as sysfs
import numalign.agent as agent_pkg
from numalign.cli.main import EXIT_ERROR, main
from numalign.errors import DiscoveryError, NumalignError
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
    assert main(_serve(tmp_path)) == EXIT_ERROR
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
