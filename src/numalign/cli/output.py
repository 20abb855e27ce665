"""What every `numalign` command shares on its way out: `-o`, the exit codes, `-v` and `--log-format`.

A command module uses it in three lines: `add_output_arg(p)` in `register`, `emit(doc, args.output)` for
json/yaml in `run`, and one of the EXIT_* codes as its return value. main.py adds `-v` and `--log-format`
to every command and calls `configure_logging` before `run`, so commands only log (never print warnings).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from typing import Any, Final, TextIO

# ---- exit codes: the table in `numalign --help` and the README -------------------------------------------

EXIT_OK: Final = 0
EXIT_CHECK_FAILED: Final = 1  # the command ran and the answer is "no": admit --exit-code, replay --check
EXIT_INVALID: Final = 2  # invalid input: flags (argparse's own 2), files, names, values; nothing was done
EXIT_ERROR: Final = 3  # the command failed while running (writes, sockets, plugins, state files), or a bug
EXIT_INTERRUPTED: Final = 130  # SIGINT, as shells report 128 + 2

EXIT_CODES_HELP: Final = """exit status:
  0    success (admit: whether or not pods were rejected, unless --exit-code)
  1    the answer is no: admit --exit-code with a rejected pod, replay --check with a difference
  2    invalid input: bad flags, or a file, name, value or machine (sysfs) that cannot be used;
       one line says which and how to fix it
  3    the command failed while running (writing files, sockets, device plugins, state files),
       or a bug (--debug shows the traceback)
  130  interrupted
  run: once COMMAND started, its own exit status (128+N when signal N ended it; 126/127 when it
       could not be executed or found)"""

# ---- -o ----------------------------------------------------------------------------------------------------

OUTPUTS: Final = ("text", "json", "yaml")


def add_output_arg(
    p: argparse.ArgumentParser, *extra: str, default: str = "text", help: str | None = None
) -> None:
    """`-o/--output text|json|yaml` plus command-specific formats (wide, csv, cadvisor)."""
    choices = (*OUTPUTS, *extra)
    p.add_argument("-o", "--output", choices=choices, default=default, metavar="|".join(choices),
                   help=help or f"output format (default {default}); json and yaml print the same document")


def emit(obj: Any, fmt: str, *, sort_keys: bool = False, stream: TextIO | None = None) -> None:
    """One document on stdout: indented JSON or block YAML (the `-o json|yaml` of every command)."""
    out = sys.stdout if stream is None else stream
    if fmt == "json":
        json.dump(obj, out, indent=2, sort_keys=sort_keys)
        out.write("\n")
    elif fmt == "yaml":
        import yaml

        # Through JSON first, so both formats show the same document (tuples as lists, keys as strings).
        out.write(yaml.safe_dump(json.loads(json.dumps(obj)), sort_keys=sort_keys))
    else:
        raise ValueError(f"emit: format {fmt!r} is not json or yaml")


def emit_event(obj: dict[str, Any], fmt: str, text: str) -> None:
    """One status line of a long-running command (serve, plugin), flushed at once so a supervisor or
    pipe sees it while the command runs: `text`, a JSON line, or one YAML document after `---`."""
    if fmt == "json":
        sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    elif fmt == "yaml":
        import yaml

        sys.stdout.write("---\n" + yaml.safe_dump(obj, sort_keys=True))
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()


# ---- -v and --log-format, as klog -------------------------------------------------------------------------

LOG_FORMATS: Final = ("text", "json")
DEBUG_V: Final = 4  # Kubernetes' logging conventions: V(4) is debug-level verbosity
# Attributes every LogRecord has; anything else came from `extra=` and is a key/value of the line.
_RECORD_ATTRS: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def add_logging_args(p: argparse.ArgumentParser, *, top_level: bool) -> None:
    """On the top-level parser with defaults; on each command with SUPPRESS, so `numalign -v 2 admit` and
    `numalign admit -v 2` both work and the later one does not reset the earlier."""
    default: Any = argparse.SUPPRESS
    g = p.add_argument_group("logging (as klog)") if not top_level else p
    g.add_argument("-v", "--v", dest="verbosity", type=_verbosity, metavar="N",
                   default=0 if top_level else default,
                   help="log verbosity: 0 (default) warnings and errors, plus start-up and status for serve and "
                   "plugin; 1 info; 4 debug")
    g.add_argument("--log-format", dest="log_format", choices=LOG_FORMATS,
                   default="text" if top_level else default,
                   help="text (default) or json: one JSON object per line, {\"ts\", \"v\", \"logger\", \"msg\", "
                   "key/values}, as klog's JSON format")


def _verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid verbosity {text!r}: expected a whole number >= 0, e.g. -v 2")
    return value


def record_v(record: logging.LogRecord, long_running: bool) -> int:
    """The verbosity at which a record is shown. Warnings and errors always (0). Info is the start-up and
    status of serve and plugin (0) but detail for the one-shot commands, whose answer is on stdout (1).
    Below info: debug (4) and anything finer (5)."""
    if record.levelno >= logging.WARNING:
        return 0
    if record.levelno >= logging.INFO:
        return 0 if long_running else 1
    return DEBUG_V if record.levelno >= logging.DEBUG else DEBUG_V + 1


class _VerbosityFilter(logging.Filter):
    def __init__(self, verbosity: int, long_running: bool, min_level: int) -> None:
        super().__init__()
        self.verbosity, self.long_running, self.min_level = verbosity, long_running, min_level

    def filter(self, record: logging.LogRecord) -> bool:
        v = record_v(record, self.long_running)
        record.v = v
        return v <= self.verbosity and record.levelno >= self.min_level


class JSONFormatter(logging.Formatter):
    """klog's JSON lines: ts (Unix seconds), v, logger, msg, then the record's key/values (`extra=`).
    Warnings and errors add "level" (klog's JSON marks only errors, by "err"); an exception adds "err"."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"ts": round(record.created, 6), "v": getattr(record, "v", 0),
                                "logger": record.name, "msg": record.getMessage()}
        if record.levelno >= logging.WARNING:
            line["level"] = "error" if record.levelno >= logging.ERROR else "warning"
        if record.exc_info and record.exc_info[1] is not None:
            line["err"] = str(record.exc_info[1])
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and key != "v" and key not in line:
                line[key] = value
        return json.dumps(line, default=str)


class _CommandFormatter(logging.Formatter):
    """One-shot commands word a log line like their error line: `numalign CMD: warning: ...`."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self.command = command

    def format(self, record: logging.LogRecord) -> str:
        text = f"numalign {self.command}: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the sys.stderr of the moment (as logging's lastResort does), so a replaced stderr (a test's
    capture, a redirect) is followed rather than a closed one written to."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def configure_logging(args: argparse.Namespace, command: str, long_running: bool) -> Callable[[], None]:
    """Install the one stderr handler of this command on the root logger; the returned function puts the
    root logger back as it was, so main() called in-process (tests, embedding) leaves nothing behind."""
    verbosity: int = getattr(args, "verbosity", 0)
    fmt: str = getattr(args, "log_format", "text")
    min_level = logging.NOTSET
    legacy: str | None = getattr(args, "log_level", None)
    if legacy is not None:
        # The deprecated --log-level of serve and plugin, kept working: DEBUG is -v 4, WARNING/ERROR hide info.
        verbosity = max(verbosity, DEBUG_V) if legacy == "DEBUG" else verbosity
        min_level = logging.getLevelName(legacy) if legacy in ("WARNING", "ERROR") else logging.NOTSET
    root = logging.getLogger()
    previous_level = root.level
    handler = _StderrHandler()
    handler.addFilter(_VerbosityFilter(verbosity, long_running, min_level))
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    elif long_running:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(_CommandFormatter(command))
    root.addHandler(handler)
    # The logger's level is the cheap first gate (no record is built below it); the filter decides the rest.
    if verbosity >= DEBUG_V + 1:
        level = logging.NOTSET + 1
    elif verbosity >= DEBUG_V:
        level = logging.DEBUG
    elif verbosity >= 1 or long_running:
        level = logging.INFO
    else:
        level = logging.WARNING
    root.setLevel(level)
    if legacy is not None:
        logging.getLogger("numalign.cli").warning(
            "flag --log-level has been deprecated, use -v N instead (-v 4 for DEBUG)")

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(previous_level)

    return restore
