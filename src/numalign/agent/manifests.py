"""Poll a static-pod manifest directory, as the kubelet's file source does (stdlib only, no inotify).

`ManifestWatcher.scan()` returns what changed since the last scan. A file counts as changed when its
content changes (size/mtime/inode are only the cheap pre-check), so rewriting a file with the same
bytes does nothing. Hidden files (leading '.') are ignored, as the kubelet ignores them, which also
skips editors' and write_atomic's temporary files.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("numalign.agent.manifests")

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class ManifestChanges:
    """Files (absolute paths as str) that appeared or changed, and files that disappeared."""

    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.removed)


@dataclass
class _Seen:
    stat_key: tuple[int, int, int]
    digest: str


class ManifestWatcher:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory).absolute()
        self._seen: dict[str, _Seen] = {}

    def known(self) -> list[str]:
        return sorted(self._seen)

    def _list(self) -> dict[str, tuple[int, int, int]]:
        out: dict[str, tuple[int, int, int]] = {}
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return out  # a missing directory is an empty one (the kubelet says the same)
        except OSError as e:
            log.error("cannot list manifest directory %s: %s", self.directory, e)
            raise
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith(SUFFIXES):
                continue
            try:
                if not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue  # vanished between listing and stat: the next scan sees it gone
            out[entry.path] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return out

    def scan(self) -> ManifestChanges:
        try:
            current = self._list()
        except OSError:
            return ManifestChanges()  # keep what we know; logged in _list
        changes = ManifestChanges()
        for path in sorted(set(self._seen) - set(current)):
            del self._seen[path]
            changes.removed.append(path)
        for path, key in sorted(current.items()):
            seen = self._seen.get(path)
            if seen is not None and seen.stat_key == key:
                continue
            try:
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                continue
            self._seen[path] = _Seen(key, digest)
            if seen is None or seen.digest != digest:
                changes.changed.append(path)
        return changes
