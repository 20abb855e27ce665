"""Reading the text files users name on the command line (manifests, KubeletConfiguration, machine
files), and the one way numalign words a YAML/JSON syntax error.

Every failure names the file, what it was read as, what was expected and the fix, so the CLI never
shows a traceback or PyYAML's `in "<unicode string>"` text.
"""

from __future__ import annotations

import errno
import json
from os import PathLike
from pathlib import Path
from typing import Final

import yaml

from numalign.errors import InvalidInputError

# errno -> how to fix it; the OS text (strerror) says what happened.
_FIXES: Final = {
    errno.ENOENT: "check the path",
    errno.EISDIR: "pass the file itself, not a directory",
    errno.ENOTDIR: "a part of the path is a file, not a directory; check the path",
    errno.EACCES: "make it readable by this user (chmod/chown) or run as a user who can read it",
    errno.EPERM: "make it readable by this user (chmod/chown) or run as a user who can read it",
}


def read_text_file(
    path: str | PathLike[str],
    what: str,
    expected: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> str:
    """The UTF-8 text of `path`. Any failure raises `error`:
    "PATH: cannot read WHAT: <reason>; expected EXPECTED; <fix>"."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{p}: cannot read {what}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected UTF-8 text "
            f"({expected}); convert it (e.g. iconv -t UTF-8) or pass the right file"
        ) from None
    except OSError as exc:
        fix = _FIXES.get(exc.errno or 0, "check the path and its permissions")
        raise error(
            f"{p}: cannot read {what}: {exc.strerror or exc}; expected {expected}; {fix}"
        ) from None


def syntax_error_message(exc: yaml.YAMLError | json.JSONDecodeError, source: str, expected: str) -> str:
    """"SOURCE: line L, column C: <problem>; expected EXPECTED; fix the syntax ..." for a PyYAML or
    json error (1-based line and column, as editors count)."""
    fix = "fix the syntax (indentation, quoting, ':' after keys) and try again"
    if isinstance(exc, json.JSONDecodeError):
        at = f"line {exc.lineno}, column {exc.colno}"
        return f"{source}: {at}: {exc.msg} (not valid JSON); expected {expected}; {fix}"
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    at = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
    context = getattr(exc, "context", None)
    where_context = f" ({context})" if context else ""
    return f"{source}:{at} {problem}{where_context} (not valid YAML or JSON); expected {expected}; {fix}"
