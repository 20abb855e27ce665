"""`numalign --help` must stay cheap: building the parser imports no gRPC, agent or engine code.

Cold start is measured in benchmarks/bench.py; this test guards the cause of a slow start (a heavy
import at parser-build time), which is a property, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
