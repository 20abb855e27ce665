"""The `numalign` command. The only place errors become exit codes.

Subcommands live in their own modules (numalign.cli.<name>) exposing
`register(subparsers) -> None` and `run(args) -> int`; heavy imports happen inside `run`, so
`numalign --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from numalign.errors import NumalignError

# name -> module under numalign.cli; order is the order shown in --help.
COMMANDS: dict[str, str] = {
    "admit": "admit",
    "discover": "discover",
    "replay": "replay",
    "serve": "serve",
    "plugin": "plugin",
    "pods": "pods",
    "nrt": "nrt",
    "simulate": "simulate",
    "capacity": "capacity",
}

EXIT_OK = 0
EXIT_FAILED_CHECK = 1
EXIT_USAGE = 2
EXIT_ERROR = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numalign",
        description="The kubelet Topology Manager, CPU, memory and device managers, decided exactly "
        "as the kubelet does, fast at any NUMA size.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        try:
            mod = importlib.import_module(f"numalign.cli.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"numalign.cli.{module}":
                continue  # command not built yet in this checkout
            raise
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args_list:
        # The main job: with no arguments, admit the built-in example pods on a built-in machine.
        args_list = ["admit"] if "admit" in COMMANDS else ["--help"]
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    module = importlib.import_module(f"numalign.cli.{COMMANDS[args.command]}")
    try:
        code: int = module.run(args)
    except NumalignError as e:
        if args.debug:
            raise
        print(f"numalign {args.command}: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:
        # A safety net: paths are checked up front, but the file system can still refuse (a path
        # replaced meanwhile, a read-only mount, permissions). One line, never a traceback.
        if args.debug:
            raise
        where = e.filename if e.filename is not None else "a file"
        reason = e.strerror or str(e)
        print(f"numalign {args.command}: error: {where}: {reason}; check the path and its permissions",
              file=sys.stderr)
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
