"""Replay of recorded scenarios (the ../shared/oracle vector format).

Each line is `{"scenario": {...}, "result": {...}}` or a bare scenario. The scenario's `kind` picks
the handler; handlers are pure functions scenario -> result, one module per kind beside this one
(replay_merge, replay_cpu, replay_devices, replay_memory). Each is imported by the loader of its
kind, so the CLI imports only the providers the file's kinds need.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from numalign.errors import InvalidInputError

Handler = Callable[[dict[str, Any]], dict[str, Any]]



def _merge() -> Handler:
    from numalign.sim.replay_merge import replay_merge

    return replay_merge


def _cpu_hints() -> Handler:
    from numalign.sim.replay_cpu import replay_cpu_hints

    return replay_cpu_hints


def _cpu_take() -> Handler:
    from numalign.sim.replay_cpu import replay_cpu_take

    return replay_cpu_take


def _device_hints() -> Handler:
    from numalign.sim.replay_devices import replay_device_hints

    return replay_device_hints


def _memory_hints() -> Handler:
    from numalign.sim.replay_memory import replay_memory_hints

    return replay_memory_hints


def _memory_allocate() -> Handler:
    from numalign.sim.replay_memory import replay_memory_allocate

    return replay_memory_allocate


# kind -> the loader of its handler. Merge scenarios are kind "realistic" / "adversarial" (or absent).
HANDLERS: dict[str, Callable[[], Handler]] = {
    "merge": _merge,
    "cpu_hints": _cpu_hints,
    "cpu_take": _cpu_take,
    "device_hints": _device_hints,
    "memory_hints": _memory_hints,
    "memory_allocate": _memory_allocate,
}
MERGE_KINDS = {"realistic", "adversarial", "merge"}
# Result keys that describe how the vector was produced or how to fix it, not what was decided.
IGNORED_RESULT_KEYS = {"deterministic", "fix"}


def handler_for(kind: str) -> Handler:
    key = "merge" if kind in MERGE_KINDS else kind
    load = HANDLERS.get(key)
    if load is None:
        known = ", ".join(sorted(set(HANDLERS) | MERGE_KINDS))
        raise InvalidInputError(f"unknown scenario kind {kind!r}; expected one of: {known}")
    return load()


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
