"""Up-front checks of the directories and socket paths a long-running command will create or use.

The servers create what is missing (mkdir -p, as the kubelet does) only once they start; a path that
runs into a regular file would then fail deep inside with FileExistsError or NotADirectoryError. Checked
here first, the user gets one line naming the option, the path and the fix.
"""

from __future__ import annotations

from pathlib import Path

from numalign.errors import InvalidInputError

_CREATED = "expected a directory (or a path that does not exist yet, then it is created)"


def _first_existing(path: Path) -> Path | None:
    """`path` or its nearest ancestor that exists (lexically; symlinks are followed by stat)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
        if candidate.is_symlink():
            return candidate  # a dangling symlink: mkdir through it fails like a file would
    return None


def _kind(path: Path) -> str:
    return "a dangling symlink" if path.is_symlink() and not path.exists() else "a file"


def check_directory(path: Path | str, option: str) -> None:
    """DIR must be a directory, or not exist yet and be creatable below an existing directory."""
    path = Path(path)
    found = _first_existing(path)
    if found is None or found.is_dir():
        return
    where = f"is {_kind(found)}" if found == path else f"{found} is {_kind(found)}"
    raise InvalidInputError(f"{option} {path}: {where}, not a directory; {_CREATED}; pass a directory path")


def check_parent_directory(path: Path | str, option: str) -> None:
    """PATH's parent must be a directory, or not exist yet and be creatable (PATH itself is a file or socket)."""
    path = Path(path)
    parent = path.parent
    found = _first_existing(parent)
    if found is None or found.is_dir():
        return
    raise InvalidInputError(
        f"{option} {path}: {found} is {_kind(found)}, not a directory; expected a path whose parent is a directory "
        "(or does not exist yet, then it is created); pass a path inside a directory"
    )
