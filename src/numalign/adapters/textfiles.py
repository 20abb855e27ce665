"""Reading the files users name on the command line (manifests, KubeletConfiguration, machine, cluster,
sweep, mix, device and dump files), or standard input for `-`.

`load_documents` is the one loading path for YAML/JSON: read here, parse in k8s.documents. Every failure
names the file, what it was read as, what was expected and the fix, so the CLI never shows a traceback or
PyYAML's `in "<unicode string>"` text.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.documents import parse_documents
from numalign.k8s.manifest import EXPECTED_MANIFEST, Expansion, pods_from_documents
from numalign.k8s.pod import Pod
from numalign.limits import MAX_TEXT_FILE_BYTES, read_bounded

STDIN: Final = "-"

# errno -> how to fix it; the OS text (strerror) says what happened.
_FIXES: Final = {
    errno.ENOENT: "check the path",
    errno.EISDIR: "pass the file itself, not a directory",
    errno.ENOTDIR: "a part of the path is a file, not a directory; check the path",
    errno.EACCES: "make it readable by this user (chmod/chown) or run as a user who can read it",
    errno.EPERM: "make it readable by this user (chmod/chown) or run as a user who can read it",
}


def source_name(path: str | PathLike[str]) -> str:
    """How a file is named in messages: its path, or <stdin> for `-`."""
    return "<stdin>" if str(path) == STDIN else str(path)


def read_text_file(
    path: str | PathLike[str],
    what: str,
    expected: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> str:
    """The UTF-8 text of `path` (standard input for `-`). Any failure raises `error`:
    "PATH: cannot read WHAT: <reason>; expected EXPECTED; <fix>"."""
    p = Path(path)
    name = source_name(path)
    try:
        if str(path) == STDIN:
            data = sys.stdin.buffer.read(MAX_TEXT_FILE_BYTES + 1)
            if len(data) > MAX_TEXT_FILE_BYTES:
                raise InvalidInputError(f"{name}: cannot read {what}: larger than the limit of "
                                        f"{MAX_TEXT_FILE_BYTES >> 20} MiB; check that this is the input you meant")
            return data.decode("utf-8")
        # Bounded: a device that never ends (/dev/zero) or a huge file stops at the limit.
        return read_bounded(p, MAX_TEXT_FILE_BYTES, what).decode("utf-8")
    except InvalidInputError as exc:
        raise error(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise error(
            f"{name}: cannot read {what}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected UTF-8 text "
            f"({expected}); convert it (e.g. iconv -t UTF-8) or pass the right file"
        ) from None
    except OSError as exc:
        fix = _FIXES.get(exc.errno or 0, "check the path and its permissions")
        raise error(f"{name}: cannot read {what}: {exc.strerror or exc}; expected {expected}; {fix}") from None


def load_documents(
    path: str | PathLike[str],
    what: str,
    expected: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> list[Any]:
    """Every YAML/JSON document of a file (or stdin for `-`), empty ones as None."""
    return parse_documents(read_text_file(path, what, expected, error), source_name(path), expected, error)


def load_document(
    path: str | PathLike[str],
    what: str,
    expected: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> Any:
    """The one document of a file (None when it is empty); several documents are an error, as a file of
    one object written twice by mistake should not silently lose its second half."""
    docs = [d for d in load_documents(path, what, expected, error) if d is not None]
    if len(docs) > 1:
        raise error(f"{source_name(path)}: {len(docs)} YAML documents; expected one ({expected}); "
                    "remove the extra '---' sections or split the file")
    return docs[0] if docs else None


def load_pods(
    path: str | PathLike[str], *, expand_replicas: bool | Expansion = False, skipped: list[str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Pod]:
    """The pods of a manifest file (or stdin for `-`), as k8s.manifest reads them; with `skipped`,
    objects of other kinds are noted there instead of being an error; with `warn`, each unknown field
    of a pod (k8s.podfields: a misspelt `resources`) is said there."""
    docs = load_documents(path, "the manifest", EXPECTED_MANIFEST)
    pods = pods_from_documents(docs, source_name(path), expand_replicas=expand_replicas, skipped=skipped)
    if warn is not None:
        from numalign.k8s.podfields import unknown_pod_field_warnings

        for message in unknown_pod_field_warnings(docs, source_name(path)):
            warn(message)
    return pods
