"""Tar archives users hand us, extracted within bounds: sysfs dump tarballs (`--machine X.tar.bz2`) and
`numalign snapshot` tarballs (`--node`).

Every header is checked before anything is written (one pass over the archive, which stops at the
first entry past a limit, so a bomb costs at most the limits in decompression and nothing on disk):

- at most `MAX_ARCHIVE_MEMBERS` entries of at most `MAX_ARCHIVE_DEPTH` path components, each regular
  file at most `MAX_ARCHIVE_MEMBER_BYTES`, and at most `MAX_ARCHIVE_BYTES` in all (numalign.limits);
- only regular files, directories and links: a device, FIFO or other special entry is refused;
- no entry whose name, or whose link target, leaves the extraction directory (an absolute path, or
  `..` past the top).

Then the checked entries are extracted with tarfile's "data" filter as a second guard. Any refusal is
one line naming the archive, the entry, the limit and what was expected.
"""

from __future__ import annotations

import lzma
import posixpath
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

from numalign.errors import InvalidInputError
from numalign.limits import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_DEPTH,
    MAX_ARCHIVE_MEMBER_BYTES,
    MAX_ARCHIVE_MEMBERS,
    MiB,
    flat,
    quote,
)


class ArchiveError(InvalidInputError):
    """An archive numalign will not extract (too large, too many entries, special or escaping entries)."""


def _escapes(name: str) -> bool:
    normal = posixpath.normpath(name)
    return name.startswith("/") or normal == ".." or normal.startswith("../")


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n:,} bytes"


def _kind(member: tarfile.TarInfo) -> str:
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return f"a special entry (tar type {member.type!r})"


def check_members(tf: tarfile.TarFile, label: str, expected: str,
                  keep: Callable[[str], bool] | None = None) -> list[tarfile.TarInfo]:
    """The entries of `tf` to extract (those `keep` accepts), every entry checked against the limits."""
    def refuse(what: str, fix: str = "check that this is the file you meant") -> ArchiveError:
        return ArchiveError(f"{label}: {what}; expected {expected}; {fix}")

    kept: list[tarfile.TarInfo] = []
    total = 0
    for count, member in enumerate(tf, start=1):
        if count > MAX_ARCHIVE_MEMBERS:
            raise refuse(f"more than {MAX_ARCHIVE_MEMBERS:,} entries (the limit)",
                         "a node's snapshot or sysfs dump has a few thousand")
        name = quote(member.name)
        if _escapes(member.name):
            raise refuse(f"entry {name} leaves the extraction directory (an absolute path or ..)")
        depth = member.name.count("/") + 1
        if depth > MAX_ARCHIVE_DEPTH:
            raise refuse(f"entry {flat(member.name, 80)} is {depth} directories deep, more than the limit of "
                         f"{MAX_ARCHIVE_DEPTH}", "a node's snapshot or sysfs dump is at most about 20 deep")
        if member.isreg():
            if member.size > MAX_ARCHIVE_MEMBER_BYTES:
                raise refuse(f"entry {name} is {member.size:,} bytes, more than the limit of "
                             f"{_size(MAX_ARCHIVE_MEMBER_BYTES)} for one file")
            total += member.size
            if total > MAX_ARCHIVE_BYTES:
                raise refuse(f"more than {_size(MAX_ARCHIVE_BYTES)} of files in all (the limit), reached "
                             f"at entry {name}")
        elif member.issym():
            target = posixpath.join(posixpath.dirname(member.name), member.linkname)
            if member.linkname.startswith("/") or _escapes(target):
                raise refuse(f"entry {name} is a link to {quote(member.linkname)}, outside the extraction "
                             "directory")
        elif member.islnk():
            if _escapes(member.linkname):
                raise refuse(f"entry {name} is a hard link to {quote(member.linkname)}, outside the extraction "
                             "directory")
        elif not member.isdir():
            raise refuse(f"entry {name} is {_kind(member)}",
                         "an archive of files holds only files, directories and links")
        if keep is None or keep(member.name):
            kept.append(member)
    return kept


def extract_archive(path: Path, dest: Path, label: str, expected: str,
                    keep: Callable[[str], bool] | None = None, not_archive_fix: str = "check the file") -> None:
    """Extract the checked entries of the tar archive `path` (plain, gzip, bzip2 or xz) into `dest`.
    Raises ArchiveError (invalid input) for an archive it refuses or cannot read."""
    try:
        with tarfile.open(path) as tf:
            members = check_members(tf, label, expected, keep)
            tf.extractall(dest, members=members, filter="data")
    except tarfile.ReadError:
        # tarfile's own text lists every compression it tried, one per line; one line says it all.
        raise ArchiveError(f"{label}: not a tar archive (plain, gzip, bzip2 or xz), or a damaged one; expected "
                           f"{expected}; {not_archive_fix}") from None
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
        raise ArchiveError(f"{label}: cannot extract ({flat(' '.join(str(e).split()), 200)}); expected "
                           f"{expected}; check the file") from None
    except OSError as e:
        if e.errno is None:  # gzip's and bz2's words for damaged compressed data
            raise ArchiveError(f"{label}: damaged compressed data ({flat(str(e), 120)}); expected {expected}; "
                               "check the file") from None
        if e.filename is None:  # the file the system refused is named in the message, whatever it is
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise
