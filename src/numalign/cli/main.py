"""The `numalign` command. The only place errors become exit codes.

Subcommands live in their own modules (numalign.cli.<name>) exposing
`register(subparsers) -> None` and `run(args) -> int`; heavy imports happen inside `run`, so
`numalign --help` stays fast. A module that runs until signalled sets `LONG_RUNNING = True` (its info
lines are then shown at -v 0). Shared plumbing (-o, exit codes, logging): numalign.cli.output.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, Final, NoReturn

from numalign.cli.commands.summaries import SUMMARIES
from numalign.cli.output import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    add_logging_args,
    configure_logging,
)
from numalign.errors import DiscoveryError, InvalidInputError, NumalignError

# name -> module under numalign.cli; order is the order shown in --help.
COMMANDS: dict[str, str] = {
    "admit": "admit",
    "discover": "discover",
    "replay": "replay",
    "serve": "serve",
    "plugin": "plugin",
    "pods": "pods",
    "remove": "remove",
    "resize": "resize",
    "snapshot": "snapshot",
    "nrt": "nrt",
    "simulate": "simulate",
    "capacity": "capacity",
    "run": "run",
}



class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (what, and where to read more), not the whole usage block first; every
    command's parser is one of these (argparse builds subparsers with the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see '{self.prog} --help'\n")


class _VersionAction(argparse.Action):
    """argparse's "version" action, with the text computed only when asked (importlib.metadata costs
    start-up time every command would pay)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(_version())
        parser.exit()


def _version() -> str:
    """`numalign 0.1.0 (compiled core (74 modules, mypyc))`, or the reason the Python source runs."""
    import importlib.metadata

    from numalign import _compiled

    try:
        release = importlib.metadata.version("numalign")
    except importlib.metadata.PackageNotFoundError:
        release = "(not installed)"
    return f"numalign {release} ({_compiled.STATUS})"


def build_parser(only: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole parser; with `lazy`, only command `only` gets its full parser and the others a line
    of help (from SUMMARIES): `numalign --help` and each command then import one command module, not
    all thirteen (most of --help's start-up time was their imports)."""
    parser = _Parser(
        prog="numalign",
        description="The kubelet Topology Manager, CPU, memory and device managers, decided exactly "
        "as the kubelet does, fast at any NUMA size.",
        epilog=EXIT_CODES_HELP,
        formatter_class=_Formatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print numalign's version and whether its compiled core is in use, and exit")
    add_logging_args(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if lazy and name != only:
            # Never parsed: a command named on the command line gets its full parser instead.
            sub.add_parser(name, help=SUMMARIES[name])
            continue
        try:
            mod = importlib.import_module(f"numalign.cli.commands.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"numalign.cli.commands.{module}":
                continue  # command not built yet in this checkout
            raise
        mod.register(sub)
    for command in sub.choices.values():
        add_logging_args(command, top_level=False)
        # Also after the command, where the internal-error line's "rerun with --debug" lands it
        # (`numalign admit pod.yaml --debug`); SUPPRESS keeps a `numalign --debug admit` given first.
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks for errors")
        if command.epilog is None:
            command.epilog = EXIT_CODES_HELP
            command.formatter_class = _Formatter
    return parser


class _Formatter(argparse.HelpFormatter):
    """Wrapped help text, but the exit-code table of the epilog kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return text if text is EXIT_CODES_HELP else super()._fill_text(text, width, indent)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        # The main job: with no arguments, admit the built-in example pods on a built-in machine.
        args_list = ["admit"] if "admit" in COMMANDS else ["--help"]
    # `numalign run ... -- COMMAND ARGS`: COMMAND's arguments are its own, never numalign's options.
    command_argv: list[str] | None = None
    at = _command_index(args_list)
    parser = build_parser(args_list[at] if at is not None else None, lazy=True)
    if at is not None and args_list[at] == "run" and "--" in args_list[at:]:
        cut = args_list.index("--", at)
        args_list, command_argv = args_list[:cut], args_list[cut + 1:]
    args, unknown = parser.parse_known_args(args_list)
    if unknown:
        _unrecognized(parser, getattr(args, "command", None), unknown)
    if command_argv is not None:
        args.command_argv = command_argv
    if args.command is None:
        parser.print_help()
        return EXIT_INVALID
    module = importlib.import_module(f"numalign.cli.commands.{COMMANDS[args.command]}")
    restore_logging = configure_logging(args, args.command, getattr(module, "LONG_RUNNING", False))
    try:
        return _run(module, args)
    finally:
        restore_logging()
        if argv is None:
            _leave_the_heap_to_exit()


# Options people reach for to run COMMAND as someone else (sudo -u, docker --user): numalign run has none.
_RUN_AS: Final = frozenset({"--user", "--uid", "--group", "--gid", "--as-user", "--runas", "--run-as"})


def _unrecognized(parser: argparse.ArgumentParser, command: str | None, unknown: list[str]) -> NoReturn:
    """argparse's "unrecognized arguments", named by the command they were given to (argparse names the top
    parser, `numalign: ... see 'numalign --help'`, whose help does not list the command's options)."""
    prog = f"{parser.prog} {command}" if command else parser.prog
    hint = ""
    if command == "run" and any(a.split("=", 1)[0] in _RUN_AS for a in unknown):
        hint = ("; numalign run has no option to change user: COMMAND runs as the user who ran numalign (root under "
                "sudo), and keeps its CPUs, memory policy and cgroup across an exec, so drop privileges inside it: "
                "sudo numalign run ... -- setpriv --reuid=$(id -u) --regid=$(id -g) --init-groups COMMAND")
    parser.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(unknown)}{hint}; see '{prog} --help'\n")


def _leave_the_heap_to_exit() -> None:
    """The process's own command line ran (the `numalign` script, `python -m numalign`), and the process
    exits next: what the command built is left for the operating system to take back. Python's last
    collection at exit would otherwise walk it all and free it object by object: a simulation's kubelets
    and pods are reference cycles only a collection frees, 1.7 s of an 8 s `simulate` at 10,000 nodes
    (docs/performance.md). Frozen objects are never collected; library callers of main(argv) keep theirs."""
    import gc

    gc.freeze()


def _command_index(args_list: Sequence[str]) -> int | None:
    """Where the command's name is: the first word that is not a top-level option or its value
    (`numalign -v 1 run ...` names `run`, not `1`)."""
    i = 0
    while i < len(args_list):
        arg = args_list[i]
        if arg in _TOP_LEVEL_VALUE_OPTIONS:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return i
    return None


# The top-level options that take their value as the next word (add_logging_args).
_TOP_LEVEL_VALUE_OPTIONS = frozenset({"-v", "--v", "--log-format"})


def _run(module: Any, args: argparse.Namespace) -> int:
    """The command's exit status: its own, or the one its error maps to (the table in EXIT_CODES_HELP)."""
    try:
        code: int = module.run(args)
    except (InvalidInputError, DiscoveryError) as e:
        # Both name what the user gave (a file, a flag, a machine or sysfs dump to read) and how to fix it.
        if args.debug:
            raise
        print(f"numalign {args.command}: error: {e}", file=sys.stderr)
        return EXIT_INVALID
    except NumalignError as e:
        if args.debug:
            raise
        print(f"numalign {args.command}: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:
        # A safety net: paths are checked up front, but the file system can still refuse (a path
        # replaced meanwhile, a read-only mount, permissions). One line, never a traceback.
        if args.debug:
            raise
        reason = e.strerror or str(e)
        if e.filename is not None:
            print(f"numalign {args.command}: error: {e.filename}: {reason}; check the path and its permissions",
                  file=sys.stderr)
        else:  # readers name their file (limits.read_bounded); say plainly when the system named none
            print(f"numalign {args.command}: error: {reason} (the system named no file; rerun with --debug to see "
                  "where); check the paths given and their permissions", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:
        # A bug: one line and a distinct exit status rather than Python's 1 (which means "rejected" to
        # scripts using admit --exit-code); --debug shows the traceback.
        if args.debug:
            raise
        print(f"numalign {args.command}: internal error: {type(e).__name__}: {e}; this is a bug in numalign: "
              "rerun with --debug for the traceback and report it", file=sys.stderr)
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
