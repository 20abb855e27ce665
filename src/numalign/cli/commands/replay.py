"""`numalign replay FILE [--check]`: run recorded scenarios through numalign."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from numalign.replay.runner import ReplayOutcome

MAX_LISTED_DIFFERENCES = 5
# Leading lines that are not JSON before the file is taken for something else (a YAML manifest, a log).
NOT_JSON_LINES = 20


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help=SUMMARIES["replay"],
        description="Read one scenario per line ({'scenario':..., 'result':...} or a bare scenario), "
        "print one result per line; with --check compare with each line's result. A line that cannot be "
        "replayed (bad JSON, a field of the wrong type or out of range) is named on stderr with its line number "
        "and field, its result is {'input_error': ...}, the rest of the file still runs, and the exit status is 2; "
        "a file whose first 20 lines (or all) are none of them JSON is refused in one line.",
    )
    p.add_argument("file", help="JSON-lines file of scenarios, or - for standard input")
    p.add_argument("--check", action="store_true", help="compare with recorded results; exit 1 on any difference")
    p.add_argument("--kubelet-version", metavar="X.Y[.Z]",
                   help="replay as this kubelet version (default 1.35, the era the shared oracle vectors were "
                   "recorded from; docs/kubelet-versions.md lists the supported ones)")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, help="text (default): one JSON result per line as it is computed (with --check: the "
                   "differences and a count); json or yaml: one document at the end, {results: [...]} or with "
                   "--check {total, equal, differences: [...]}")


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.kubeletversion import resolve_noted as resolve
    from numalign.errors import InvalidInputError
    from numalign.kubelet.versions import REPLAY_DEFAULT
    from numalign.replay.runner import bounded_lines, replay_lines

    version = REPLAY_DEFAULT if args.kubelet_version is None else resolve(args.kubelet_version, "--kubelet-version")
    if args.file == "-":
        source = "<stdin>"
        outcomes = _refuse_non_json(replay_lines(bounded_lines(sys.stdin), source, version), source)
        return _run(outcomes, args.check, source, args.output)
    path = Path(args.file)
    if not path.exists():
        raise InvalidInputError(f"replay: file {str(path)!r} not found; pass a JSON-lines file of scenarios")
    if path.is_dir():
        raise InvalidInputError(
            f"replay: {str(path)!r} is a directory; expected a JSON-lines file of scenarios; pass the file itself"
        )
    try:
        with path.open(encoding="utf-8") as fh:
            outcomes = _refuse_non_json(replay_lines(bounded_lines(fh), str(path), version), str(path))
            return _run(outcomes, args.check, str(path), args.output)
    except UnicodeDecodeError as exc:
        # Lines are decoded as they are read, so this can come after some results were printed.
        raise InvalidInputError(
            f"replay: {path}: not UTF-8 text ({exc.reason}); expected a JSON-lines file of scenarios in UTF-8; "
            "convert it (e.g. iconv -t UTF-8) or pass the right file"
        ) from None
    except PermissionError as exc:
        raise InvalidInputError(
            f"replay: {path}: cannot read the scenarios: {exc.strerror}; make it readable by this user"
        ) from None


def _refuse_non_json(outcomes: Iterable[ReplayOutcome], source: str) -> Iterator[ReplayOutcome]:
    """The outcomes, unless the file's first NOT_JSON_LINES lines (or all of a shorter file's) are none of
    them JSON: then it is no scenarios file (a pod manifest given by mistake printed an error line and a
    result line for each of its 700,000 lines), refused in one line before anything is printed."""
    import re

    from numalign.errors import InvalidInputError

    held: list[ReplayOutcome] = []
    it = iter(outcomes)
    for o in it:
        if o.error is None or "not valid JSON (" not in o.error:
            yield from held
            yield o
            yield from it
            return
        held.append(o)
        if len(held) == NOT_JSON_LINES:
            break
    if held:
        why = re.search(r"not valid JSON \((.*?)\);", held[0].error or "")
        which = (f"its first {len(held)} lines are not" if len(held) == NOT_JSON_LINES
                 else f"none of its {len(held)} lines is" if len(held) > 1 else "its one line is not")
        raise InvalidInputError(
            f"replay: {source}: {which} JSON (line {held[0].line_no}: {why.group(1) if why else 'not valid'}); "
            'expected a JSON-lines file of scenarios, one {"scenario": ..., "result": ...} per line; check that '
            "this is the file you meant")


def _run(outcomes: Iterable[ReplayOutcome], check: bool, source: str, output: str) -> int:
    from numalign.cli.output import EXIT_CHECK_FAILED, EXIT_INVALID, EXIT_OK, emit
    from numalign.errors import InvalidInputError

    total = equal = 0
    diffs: list[str] = []
    differences: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    bad = 0
    for o in outcomes:
        total += 1
        if o.error is not None:
            # One line on stderr; the result line says the same, and the next scenario still runs.
            bad += 1
            print(f"numalign replay: error: {o.error}", file=sys.stderr)
            if not check and output == "text":
                print(json.dumps({"id": o.scenario_id, "result": {"input_error": o.error}}, sort_keys=True))
            elif not check:
                results.append({"id": o.scenario_id, "result": {"input_error": o.error}})
            else:
                differences.append({"id": o.scenario_id, "line": o.line_no, "error": o.error})
                diffs.append(f"{o.scenario_id} (line {o.line_no}): not replayed (see the error above)")
            continue
        if not check:
            if output == "text":
                print(json.dumps({"id": o.scenario_id, "result": o.result}, sort_keys=True))
            else:
                results.append({"id": o.scenario_id, "result": o.result})
            continue
        if o.expected is None:
            diffs.append(f"{o.scenario_id} (line {o.line_no}): no recorded result to compare")
            differences.append({"id": o.scenario_id, "line": o.line_no, "expected": None, "got": o.result})
        elif o.equal:
            equal += 1
        else:
            diffs.append(
                f"{o.scenario_id} (line {o.line_no}): expected {json.dumps(o.expected, sort_keys=True)}, "
                f"got {json.dumps(o.result, sort_keys=True)}"
            )
            differences.append({"id": o.scenario_id, "line": o.line_no, "expected": o.expected, "got": o.result})
    if total == 0:
        # "0/0 equal" would read as a pass that failed for no stated reason.
        raise InvalidInputError(
            f"replay: {source}: no scenarios (the input is empty or holds only blank lines); expected one JSON "
            "scenario per line ({\"scenario\": ..., \"result\": ...}); check that this is the file you meant"
        )
    if output != "text":
        emit({"results": results} if not check else {"total": total, "equal": equal, "differences": differences},
             output, sort_keys=True)
    if not check:
        return EXIT_INVALID if bad else EXIT_OK
    if output != "text":
        return EXIT_INVALID if bad else EXIT_OK if equal == total else EXIT_CHECK_FAILED
    for d in diffs[:MAX_LISTED_DIFFERENCES]:
        print(f"DIFF {d}")
    if len(diffs) > MAX_LISTED_DIFFERENCES:
        print(f"... and {len(diffs) - MAX_LISTED_DIFFERENCES} more differences")
    print(f"{equal}/{total} equal")
    if bad:
        return EXIT_INVALID
    return EXIT_OK if equal == total else EXIT_CHECK_FAILED
