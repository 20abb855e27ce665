"""The one Hypothesis profile for every test, and the schema check of every document a command prints.

No deadline: a shared 2-core machine makes single examples slow now and then, and a deadline would
turn that into a flaky failure that says nothing about the code. Slow or large data generation is
expected for random machines, so those health checks are off. Each test keeps its own max_examples.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "numalign",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("numalign")


# ---- every -o json|yaml document a test prints in-process is checked against its published schema --------


@pytest.fixture(autouse=True)
def _documents_validate_against_their_schemas(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whenever main() runs a command with a schema under docs/schemas/, what it emits as JSON or YAML
    must validate (tests/support/schemas.py): the schemas stay true of every case the tests run."""
    from support.schemas import has_schema, validate

    import numalign.cli.main as cli_main
    import numalign.cli.output as output

    command: list[str] = []
    configure, emit, emit_event = output.configure_logging, output.emit, output.emit_event

    def noting(args: Any, name: str, long_running: bool) -> Any:
        command[:] = [name]
        return configure(args, name, long_running)

    def checked(obj: Any, fmt: str, **kw: Any) -> None:
        if command and has_schema(command[0]) and fmt in ("json", "yaml"):
            validate(command[0], json.loads(json.dumps(obj)))
        emit(obj, fmt, **kw)

    def checked_event(obj: dict[str, Any], fmt: str, text: str) -> None:
        if command and has_schema(command[0]) and fmt in ("json", "yaml"):
            validate(command[0], json.loads(json.dumps(obj)))
        emit_event(obj, fmt, text)

    monkeypatch.setattr(cli_main, "configure_logging", noting)
    monkeypatch.setattr(output, "emit", checked)
    monkeypatch.setattr(output, "emit_event", checked_event)
    yield
