"""The shared CLI plumbing (numalign.cli.output): klog's verbosity levels and JSON lines, emit's formats."""

from __future__ import annotations

import argparse
import io
import json
import logging

import pytest
import yaml

from numalign.cli.output import DEBUG_V, JSONFormatter, add_logging_args, emit, record_v


def _record(level: int, msg: str = "pod %s admitted", **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("numalign.agent", level, "agent.py", 1, msg, ("ns/p",), None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_verbosity_of_records_as_klog() -> None:
    assert record_v(_record(logging.ERROR), long_running=False) == 0
    assert record_v(_record(logging.WARNING), long_running=False) == 0
    assert record_v(_record(logging.INFO), long_running=True) == 0  # serve's start-up and status
    assert record_v(_record(logging.INFO), long_running=False) == 1  # a one-shot command's detail
    assert record_v(_record(logging.DEBUG), long_running=True) == DEBUG_V == 4


def test_json_lines_carry_ts_v_msg_and_key_values() -> None:
    line = json.loads(JSONFormatter().format(_record(logging.INFO, v=1, pod_uid="u-1", cpus=[1, 2])))
    assert line.pop("ts") > 0
    assert line == {"v": 1, "logger": "numalign.agent", "msg": "pod ns/p admitted", "pod_uid": "u-1", "cpus": [1, 2]}
    warning = json.loads(JSONFormatter().format(_record(logging.WARNING, "plugin %s gone")))
    assert warning["level"] == "warning" and warning["msg"] == "plugin ns/p gone"


def test_v_before_or_after_the_command() -> None:
    top = argparse.ArgumentParser()
    add_logging_args(top, top_level=True)
    sub = top.add_subparsers(dest="command")
    add_logging_args(sub.add_parser("admit"), top_level=False)
    assert top.parse_args(["-v", "2", "admit"]).verbosity == 2
    assert top.parse_args(["admit", "--v=3"]).verbosity == 3
    assert top.parse_args(["-v", "2", "admit", "--log-format", "json"]).log_format == "json"
    assert top.parse_args(["admit"]).verbosity == 0
    with pytest.raises(SystemExit):
        top.parse_args(["admit", "-v", "-1"])


def test_emit_prints_the_same_document_as_json_and_yaml() -> None:
    doc = {"b": (1, 2), "a": {"nested": None}}
    as_json, as_yaml = io.StringIO(), io.StringIO()
    emit(doc, "json", stream=as_json)
    emit(doc, "yaml", stream=as_yaml)
    assert json.loads(as_json.getvalue()) == yaml.safe_load(as_yaml.getvalue()) == {"b": [1, 2], "a": {"nested": None}}


@pytest.mark.parametrize("where", ["after", "before"])
def test_debug_works_where_the_internal_error_line_says_to_add_it(
    where: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The internal-error line says "rerun with --debug"; appended to the command as typed, argparse
    refused it ("unrecognized arguments: --debug") since only `numalign --debug COMMAND` was accepted."""
    import numalign.cli.commands.discover as discover
    from numalign.cli.main import main
    from numalign.cli.output import EXIT_ERROR

    def boom(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(discover, "run", boom)
    assert main(["discover", "--machine", "dual-socket"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("numalign discover: internal error: RuntimeError: a bug;") and "rerun with --debug" in err
    argv = ["discover", "--machine", "dual-socket", "--debug"] if where == "after" else \
        ["--debug", "discover", "--machine", "dual-socket"]
    with pytest.raises(RuntimeError, match="a bug"):
        main(argv)
