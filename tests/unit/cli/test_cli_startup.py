"""`numalign --help` must stay cheap: building the parser imports no gRPC, agent or engine code.

Cold start is measured in benchmarks/bench.py; this test guards the cause of a slow start (a heavy
import at parser-build time), which is a property, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("grpc", "numalign.agent", "numalign.kubelet", "numalign.adapters.grpc", "prometheus_client")


def test_building_the_parser_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from numalign.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = json.loads(out)
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []


def test_every_command_is_registered() -> None:
    from numalign.cli.main import COMMANDS, build_parser

    help_text = build_parser().format_help()
    for name in COMMANDS:
        assert name in help_text


def test_admit_does_not_import_prometheus_client() -> None:
    """Metrics are rendered only where they are served (the agent's /metrics): an admission updates the
    plain store in numalign.metrics and never pays for prometheus_client's import."""
    code = (
        "import contextlib, io, json, sys\n"
        "from numalign.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['admit']) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = json.loads(out)
    assert "numalign.kubelet.node" in loaded and "numalign.metrics" in loaded  # it did admit, through the metric store
    assert [m for m in loaded if m == "prometheus_client" or m.startswith("prometheus_client.")] == []


def _modules_after(argv: list[str]) -> list[str]:
    code = (
        "import contextlib, io, json, sys\n"
        "from numalign.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def test_admit_imports_no_grpc_or_protobuf(tmp_path: Path) -> None:
    """`numalign admit`, with or without a state directory, never loads gRPC or protobuf: the device
    checkpoint's AllocResp is read and written without them (kubelet.devicemanager.allocresp). The
    later runs read back the device checkpoint the first wrote (the built-in pods hold devices) and
    replace its pods."""
    wire = ("grpc", "google.protobuf", "numalign.adapters.grpc")
    state = str(tmp_path / "state")
    runs = (["admit"], ["admit", "--state-dir", state], ["admit", "--state-dir", state, "--replace"],
            ["admit", "--state-dir", state, "--replace", "--dry-run"])
    for argv in runs:
        loaded = _modules_after(argv)
        assert "numalign.kubelet.node" in loaded  # it did admit
        assert [m for m in loaded if any(m == w or m.startswith(w + ".") for w in wire)] == [], argv
        if argv == runs[1]:
            assert (tmp_path / "state" / "device-plugins" / "kubelet_internal_checkpoint").is_file()


def _command_modules_after(argv: list[str]) -> list[str]:
    code = (
        "import json, sys\n"
        "from numalign.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    loaded: list[str] = json.loads(err.strip().splitlines()[-1])
    return [m for m in loaded if m.startswith("numalign.cli.commands.") and m != "numalign.cli.commands.summaries"]


def test_top_level_help_imports_no_command_module() -> None:
    """`numalign --help` lists every command from SUMMARIES without importing one (its start-up cost)."""
    assert _command_modules_after(["--help"]) == []


def test_a_command_imports_only_its_own_module() -> None:
    assert _command_modules_after(["discover", "--help"]) == ["numalign.cli.commands.discover"]


def test_the_listed_summaries_are_what_each_command_registers() -> None:
    import argparse

    from numalign.cli.commands.summaries import SUMMARIES
    from numalign.cli.main import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert {a.dest: a.help for a in sub._choices_actions} == SUMMARIES
    assert list(SUMMARIES) == list(COMMANDS)


def test_admit_without_a_state_directory_imports_no_state_file_code(tmp_path: Path) -> None:
    """The one-pod `admit` pays only for what it uses (issue 29: <= 300 ms of CPU): without --state-dir no
    state-directory adapter or checkpoint codec is imported; with one they are."""
    stateful = ("numalign.adapters.statedir.directory", "numalign.kubelet.checkpointmanager")
    loaded = _modules_after(["admit"])
    assert "numalign.kubelet.node" in loaded  # it did admit
    assert [m for m in loaded if any(m == s or m.startswith(s + ".") for s in stateful)] == []
    with_dir = _modules_after(["admit", "--state-dir", str(tmp_path / "state")])
    assert "numalign.adapters.statedir.directory" in with_dir
