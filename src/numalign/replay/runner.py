"""Replay of recorded scenarios (the ../shared/oracle vector format).

Each line is `{"scenario": {...}, "result": {...}}` or a bare scenario. The scenario's `kind` picks
the handler; handlers are pure functions scenario -> result, one module per kind beside this one
(replay_merge, replay_cpu, replay_devices, replay_memory). Each is imported by the loader of its
kind, so the CLI imports only the providers the file's kinds need.

The kubelet version replayed defaults to REPLAY_DEFAULT (1.35): the shared oracle vectors were recorded
from 1.35-era code and their format names no version. Kinds with a version-dependent step take the
version (VERSIONED_KINDS); the others decide the same at every supported version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from numalign.errors import InvalidInputError
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.versions import REPLAY_DEFAULT
from numalign.limits import MAX_REPLAY_LINE_BYTES, quote
from numalign.replay.check import check_scenario

Handler = Callable[[dict[str, Any]], dict[str, Any]]



def _merge() -> Handler:
    from numalign.replay.merge import replay_merge

    return replay_merge


def _cpu_hints() -> Handler:
    from numalign.replay.cpu import replay_cpu_hints

    return replay_cpu_hints


def _cpu_take() -> Handler:
    from numalign.replay.cpu import replay_cpu_take

    return replay_cpu_take


def _device_hints() -> Handler:
    from numalign.replay.devices import replay_device_hints

    return replay_device_hints


def _memory_hints() -> Handler:
    from numalign.replay.memory import replay_memory_hints

    return replay_memory_hints


def _memory_allocate() -> Handler:
    from numalign.replay.memory import replay_memory_allocate

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


# Kinds whose handler takes the kubelet version: device hints (k/k #138244 from 1.36.0) and the merge's
# start-up checks (policy-option maturity).
VERSIONED_KINDS = frozenset({"merge", "device_hints"})


def handler_for(kind: str, version: KubeletVersion = REPLAY_DEFAULT) -> Handler:
    key = "merge" if kind in MERGE_KINDS else kind
    load = HANDLERS.get(key)
    if load is None:
        known = ", ".join(sorted(set(HANDLERS) | MERGE_KINDS))
        raise InvalidInputError(f"field kind: unknown scenario kind {quote(kind)}; expected one of: {known}")
    handler = load()
    if key not in VERSIONED_KINDS:
        return handler
    versioned: Callable[..., dict[str, Any]] = handler
    return lambda scenario: versioned(scenario, version=version)


@dataclass
class ReplayOutcome:
    line_no: int
    scenario_id: str
    result: dict[str, Any]
    expected: dict[str, Any] | None
    # The line could not be replayed (bad JSON, a field out of range): one line saying where and why.
    error: str | None = None

    @property
    def equal(self) -> bool:
        if self.expected is None or self.error is not None:
            return False
        exp = {k: v for k, v in self.expected.items() if k not in IGNORED_RESULT_KEYS}
        got = {k: v for k, v in self.result.items() if k not in IGNORED_RESULT_KEYS}
        return exp == got


class LineTooLong(str):
    """Stands for a line longer than MAX_REPLAY_LINE_BYTES, which was skipped unread."""


# A line longer than the limit is skipped to its end, but not for ever (an endless stream has none).
MAX_SKIPPED_CHUNKS = 16


def bounded_lines(stream: IO[str], limit: int = MAX_REPLAY_LINE_BYTES, name: str | None = None) -> Iterator[str]:
    """The stream's lines, each read up to `limit` characters: a longer line (a file that is one
    endless line) is skipped to its end and given as a LineTooLong, so memory stays bounded. A read
    error names the file (`name`, else the stream's own name): the system's error names none."""
    source = name or str(getattr(stream, "name", "<stdin>"))
    number = 0
    try:
        while True:
            line = stream.readline(limit + 1)
            number += 1
            if not line:
                return
            if "\x00" in line:
                # JSON text never holds a NUL: this is binary data (/dev/zero, an image, a tarball), and
                # reading on could be endless.
                raise InvalidInputError(f"replay: {source}:{number}: binary data (a NUL byte); expected a JSON-lines "
                                        "file of scenarios; pass the scenarios file")
            if len(line) > limit and not line.endswith("\n"):
                skipped = 0
                while (rest := stream.readline(limit)) and not rest.endswith("\n"):
                    skipped += 1
                    if skipped >= MAX_SKIPPED_CHUNKS:
                        raise InvalidInputError(
                            f"replay: {source}:{number}: a line of more than {MAX_SKIPPED_CHUNKS} x {limit} "
                            "characters and no end; expected one JSON scenario per line; pass the scenarios file")
                yield LineTooLong()
                continue
            yield line
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror, name or str(getattr(stream, "name", "<stdin>"))) from None


def parse_line(line: str, line_no: int, source: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if isinstance(line, LineTooLong):
        raise InvalidInputError(
            f"{source}:{line_no}: longer than {MAX_REPLAY_LINE_BYTES} characters; expected one JSON scenario per "
            "line (the largest recorded vector is 36 kB); check the file"
        )
    from numalign.k8s.documents import DuplicateKeyError, duplicate_key_message, loads_json

    try:
        obj = loads_json(line)
    except DuplicateKeyError as e:
        # As every other file users give (k8s/documents.py): json.loads kept the last of a key written twice
        # silently, so a hand-written {"policy": "none", ..., "policy": "single-numa-node"} replayed the last.
        # The line is the file's; within one line the key's column is not worth a second place.
        e.line = e.first_line = 0
        raise InvalidInputError(duplicate_key_message(
            e, f"{source}:{line_no}", "one JSON scenario per line, each key once")) from None
    except json.JSONDecodeError as e:
        raise InvalidInputError(
            f"{source}:{line_no}: not valid JSON ({e.msg} at column {e.colno}); "
            "expected one JSON object per line"
        ) from None
    except (ValueError, RecursionError) as e:  # an integer of 4,300+ digits; nesting deeper than Python's stack
        raise InvalidInputError(
            f"{source}:{line_no}: cannot read the JSON ({quote(str(e), 60)}); expected one JSON scenario per line "
            "with numbers of at most 19 digits and a few levels of nesting"
        ) from None
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{source}:{line_no}: expected a JSON object, got {type(obj).__name__}")
    if "scenario" in obj:
        scenario, expected = obj["scenario"], obj.get("result")
    else:
        scenario, expected = obj, None
    if not isinstance(scenario, dict):
        raise InvalidInputError(f"{source}:{line_no}: field scenario: expected an object")
    if expected is not None and not isinstance(expected, dict):
        raise InvalidInputError(f"{source}:{line_no}: field result: expected an object")
    return scenario, expected


def replay_lines(lines: Iterable[str], source: str = "<input>",
                 version: KubeletVersion = REPLAY_DEFAULT) -> Iterator[ReplayOutcome]:
    """One outcome per non-blank line, decided as kubelet `version`. A line that cannot be replayed gives
    an outcome with `error` set (naming the line and the field) and the next line still runs, as
    start-up errors do."""
    cache: dict[str, Handler] = {}
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        scenario: dict[str, Any] = {}
        expected: dict[str, Any] | None = None
        try:
            scenario, expected = parse_line(line, line_no, source)
            kind = scenario.get("kind", "merge")
            if not isinstance(kind, str):
                raise InvalidInputError(f"field kind: got {quote(kind)}; expected a scenario kind such as \"merge\"")
            fn = cache.get(kind)
            if fn is None:
                fn = cache[kind] = handler_for(kind, version)
            check_scenario(scenario, kind)
            result = fn(scenario)
        except InvalidInputError as e:
            text = str(e)
            if not text.startswith(f"{source}:{line_no}:"):
                text = f"{source}:{line_no}: {text}"
            yield ReplayOutcome(line_no, _scenario_id(scenario, line_no), {}, expected, error=text)
            continue
        yield ReplayOutcome(line_no, _scenario_id(scenario, line_no), result, expected)


def _scenario_id(scenario: Mapping[str, Any], line_no: int) -> str:
    sid = scenario.get("id")
    return quote(sid, 60).strip("'") if isinstance(sid, str) else f"line {line_no}"
