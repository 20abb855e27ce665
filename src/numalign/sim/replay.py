"""Replay of recorded scenarios (the ../shared/oracle vector format).

Each line is `{"scenario": {...}, "result": {...}}` or a bare scenario. The scenario's `kind` picks
the handler; handlers are pure functions scenario -> result, registered by dotted path so that the
CLI does not import every provider to replay one kind.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from numalign.errors import InvalidInputError

Handler = Callable[[dict[str, Any]], dict[str, Any]]

# kind -> "module:function". Merge scenarios are kind "realistic" / "adversarial" (or absent).
HANDLERS: dict[str, str] = {
    "merge": "numalign.core.replay_merge:replay_merge",
    "cpu_hints": "numalign.providers.cpu.replay:replay_cpu_hints",
    "cpu_take": "numalign.providers.cpu.replay:replay_cpu_take",
    "device_hints": "numalign.providers.devices.replay:replay_device_hints",
    "memory_hints": "numalign.providers.memory.replay:replay_memory_hints",
    "memory_allocate": "numalign.providers.memory.replay:replay_memory_allocate",
}
MERGE_KINDS = {"realistic", "adversarial", "merge"}
# Result keys that describe how the vector was produced or how to fix it, not what was decided.
IGNORED_RESULT_KEYS = {"deterministic", "fix"}


def handler_for(kind: str) -> Handler:
    key = "merge" if kind in MERGE_KINDS else kind
    target = HANDLERS.get(key)
    if target is None:
        known = ", ".join(sorted(set(HANDLERS) | MERGE_KINDS))
        raise InvalidInputError(f"unknown scenario kind {kind!r}; expected one of: {known}")
    mod_name, func_name = target.split(":")
    fn: Handler = getattr(importlib.import_module(mod_name), func_name)
    return fn


@dataclass
class ReplayOutcome:
    line_no: int
    scenario_id: str
    result: dict[str, Any]
    expected: dict[str, Any] | None

    @property
    def equal(self) -> bool:
        if self.expected is None:
            return False
        exp = {k: v for k, v in self.expected.items() if k not in IGNORED_RESULT_KEYS}
        got = {k: v for k, v in self.result.items() if k not in IGNORED_RESULT_KEYS}
        return exp == got


def parse_line(line: str, line_no: int, source: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidInputError(
            f"{source}:{line_no}: not valid JSON ({e.msg} at column {e.colno}); "
            "expected one JSON object per line"
        ) from None
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{source}:{line_no}: expected a JSON object, got {type(obj).__name__}")
    if "scenario" in obj:
        scenario, expected = obj["scenario"], obj.get("result")
    else:
        scenario, expected = obj, None
    if not isinstance(scenario, dict):
        raise InvalidInputError(f"{source}:{line_no}: 'scenario' must be an object")
    if expected is not None and not isinstance(expected, dict):
        raise InvalidInputError(f"{source}:{line_no}: 'result' must be an object")
    return scenario, expected


def replay_lines(lines: Iterable[str], source: str = "<input>") -> Iterator[ReplayOutcome]:
    cache: dict[str, Handler] = {}
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        scenario, expected = parse_line(line, line_no, source)
        kind = str(scenario.get("kind", "merge"))
        fn = cache.get(kind)
        if fn is None:
            fn = cache[kind] = handler_for(kind)
        try:
            result = fn(scenario)
        except InvalidInputError as e:
            raise InvalidInputError(f"{source}:{line_no}: {e}") from None
        yield ReplayOutcome(line_no, str(scenario.get("id", f"line {line_no}")), result, expected)
