"""Bounds on what numalign accepts, and the one way an error quotes what it was given.

Every input surface (manifests, KubeletConfiguration, machine files, cadvisor JSON, sysfs attributes,
replay lines, state files, plugin registrations) is bounded here, before a parser or an allocator sees
it, so absurd input gives one line naming the limit and the fix instead of a traceback, a memory
blow-up or a crash in a C parser:

- size: a file is read up to its limit and refused past it, so a device that never ends (/dev/zero)
  costs at most the limit (`read_bounded`); state files must also be regular files;
- nesting: JSON and YAML nested deeper than `MAX_NESTING_DEPTH` is refused before the parser runs
  (`check_nesting`). Python's json recurses per level (RecursionError at about 1,000) and PyYAML's C
  loader overflows the C stack at a few tens of thousands of levels (a segmentation fault that takes
  `numalign serve` down), so neither may see such text;
- numbers: NUMA node ids, CPU ids, quantity text and workload replicas have ceilings far above any
  real machine (Linux caps NUMA nodes at 1024 and CPUs at 8192) and far below what would exhaust
  memory when turned into sets or bitmasks.

Errors quote user input through `quote`, a bounded prefix: an echoed 10 kB string must not become a
10 kB error line (or exceed gRPC's metadata limit, so that a plugin sees RESOURCE_EXHAUSTED instead of
the message).

Stdlib only and pure except `read_bounded`, so every layer may use it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from os import PathLike
from typing import Final

from numalign.errors import InvalidInputError

KiB: Final = 1 << 10
MiB: Final = 1 << 20

# Text files people hand us: manifests, KubeletConfiguration, machine files, cadvisor JSON, cluster
# and workload files. The largest real ones (a 64-node machine file, a List of a thousand pods) are a
# few MB.
MAX_TEXT_FILE_BYTES: Final = 32 * MiB
# The kubelet's own state files and numalign_pods.json (a thousand pods' allocations are a few MB).
MAX_STATE_FILE_BYTES: Final = 64 * MiB
# One replay line (the largest upstream vector is 36 kB).
MAX_REPLAY_LINE_BYTES: Final = 4 * MiB
# JSON/YAML nesting: a pod manifest is about 10 levels deep; 100 leaves room for any real document.
MAX_NESTING_DEPTH: Final = 100
# Linux MAX_NUMNODES is 1 << CONFIG_NODES_SHIFT (at most 10): node ids 0..1023.
MAX_NUMA_NODE_ID: Final = 1023
# cadvisor names NUMA nodes after physical package ids when sysfs has no node directory, and the kernel
# writes -1 for an unknown package (s390): node -1 is the one negative id a machine can hold.
MIN_NUMA_NODE_ID: Final = -1
# Linux NR_CPUS is at most 8192 (x86 MAXSMP, powerpc); CPU ids 0..8191.
MAX_CPU_ID: Final = 8191
# A quantity is at most a few dozen characters ("129127208515966861312", "1.5Gi"); Python refuses to
# turn more than 4,300 digits into an int, and long ones cost quadratic time.
MAX_QUANTITY_CHARS: Final = 256
# `numalign resize` (preview) asks the hint providers for explicit mask lists again: 2^N - 1 masks per
# provider, fine at 16 NUMA nodes (65,535) and out of reach at 64.
MAX_RESIZE_NUMA_NODES: Final = 16
# `admit` admits a workload's spec.replicas (or --replicas) copies of its pod on ONE node; maxPods is
# 110 by default and rarely above a few hundred, so 10,000 copies answer every real question.
MAX_REPLICAS: Final = 10_000
# DRA objects (ResourceSlices, DeviceClasses, ResourceClaims, templates) read from one set of files: a
# 5,000-node cluster with a few slices a node and a claim a pod stays far below.
MAX_DRA_OBJECTS: Final = 200_000
# Tar archives (sysfs dumps, `numalign snapshot` tarballs): a snapshot holds a few thousand small sysfs
# files (about 25 per CPU: a 4,000-CPU machine stays under the entry limit), the kubelet config and
# four state files; a sysfs dump of hwloc's gather tool holds about 16,000 entries for 256 CPUs.
MAX_ARCHIVE_MEMBERS: Final = 100_000
# Path components of one archive entry: sysfs is at most ~20 deep (sys/devices/pci.../.../net/eth0/...);
# extracting an entry 1,000 directories deep overflows os.makedirs' recursion.
MAX_ARCHIVE_DEPTH: Final = 64
# One member: the largest is a state file (MAX_STATE_FILE_BYTES).
MAX_ARCHIVE_MEMBER_BYTES: Final = 64 * MiB
# All members together: real snapshots are a few MB; this leaves room for four large state files.
MAX_ARCHIVE_BYTES: Final = 256 * MiB
# Nodes of a simulated cluster (pool `count:`s together): twice the largest cluster Kubernetes supports
# (5,000 nodes). Each simulated node holds its own managers' state, so 10^9 would take all memory.
MAX_CLUSTER_NODES: Final = 10_000
# Pods `--generate` (or a Mix's `count:`) draws: 20 per node at the node limit.
MAX_GENERATED_PODS: Final = 200_000
# How much of a user's string an error line quotes.
QUOTE_CHARS: Final = 80

def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """repr(value), cut to at most `limit` characters of it plus "... (N characters)" when longer."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    head = text[:limit]
    shown = repr(head) if isinstance(value, str) else head
    return f"{shown}... ({len(text)} characters)"

def flat(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` as it may stand unquoted inside a one-line message (where upstream's wording prints a value
    raw): control characters escaped (a newline becomes \\n), at most `limit` characters of it."""
    escaped = repr(text[: limit + 1])[1:-1]
    return escaped if len(text) <= limit else f"{repr(text[:limit])[1:-1]}... ({len(text)} characters)"

def go_quote(value: str, limit: int = QUOTE_CHARS) -> str:
    """Go's %q of at most `limit` characters of `value` (JSON string quoting, close to Go's for the
    names plugins and configs send), with "... (N characters)" when it was longer."""
    if len(value) <= limit:
        return json.dumps(value, ensure_ascii=False)
    return f"{json.dumps(value[:limit], ensure_ascii=False)}... ({len(value)} characters)"

def clip(message: str, limit: int = 4 * KiB) -> str:
    """A message cut to `limit` characters: the last guard where a message goes into a size-limited
    place (gRPC status details travel in headers, 8 kB by default)."""
    return message if len(message) <= limit else f"{message[:limit]}... (cut at {limit} of {len(message)} characters)"

def check_nesting(text: str, where: str, expected: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """Refuse JSON/YAML text nested deeper than `limit` before any parser sees it.

    Counts flow brackets ({ [) outside quoted strings and the indentation depth of block lines, a
    cheap over-estimate: text that passes cannot make the parsers recurse more than about `limit`
    levels per counted level. Comments and quoted scalars are skipped."""
    depth = _flow_depth(text)
    if depth <= limit:
        depth = max(depth, _block_depth(text))
    if depth > limit:
        raise InvalidInputError(
            f"{where}: nested {depth} levels deep, more than the limit of {limit}; expected {expected}; "
            "a real document is a few levels deep: check that this is the file you meant"
        )

def _flow_depth(text: str) -> int:
    depth = deepest = 0
    in_string: str | None = None
    escaped = False
    in_comment = False
    prev = "\n"
    for ch in text:
        if in_comment:
            in_comment = ch != "\n"
        elif in_string is not None:
            if escaped:
                escaped = False
            elif ch == "\\" and in_string == '"':
                escaped = True
            elif ch == in_string:
                in_string = None
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
        # A quote or '#' inside a plain scalar (it's, a#b) starts nothing: only where a token may start.
        elif ch in "\"'" and prev in _TOKEN_START:
            in_string = ch
        elif ch == "#" and prev in " \t\n":
            in_comment = True
        prev = ch
    return deepest

_TOKEN_START = " \t\r\n:,[{-?"

_BLOCK_LINE = re.compile(r"^( *)((?:- +)*)", re.MULTILINE)

def _block_depth(text: str) -> int:
    """YAML block nesting: distinct indentation levels open at once, each "- " counting as one."""
    deepest = 0
    stack: list[int] = []
    for m in _BLOCK_LINE.finditer(text):
        indent = len(m.group(1))
        dashes = m.group(2).count("-")
        while stack and stack[-1] >= indent:
            stack.pop()
        stack.append(indent)
        deepest = max(deepest, len(stack) + dashes)
    return deepest

def check_replicas(count: int, where: str) -> int:
    if count > MAX_REPLICAS:
        raise InvalidInputError(
            f"{where}: {count} replicas is more than numalign admits on one node ({MAX_REPLICAS}); the "
            "kubelet's maxPods is 110 by default: lower spec.replicas, or give --replicas N (N copies)"
        )
    return count

def check_count(count: int, limit: int, where: str, what: str, fix: str) -> int:
    """`count` (already a whole number >= 1) when at most `limit`, else one line naming the limit."""
    if count > limit:
        raise InvalidInputError(f"{where}: {count:,} {what} is more than the limit of {limit:,}; {fix}")
    return count


def read_bounded(path: str | PathLike[str], limit: int, what: str, *, regular_only: bool = False) -> bytes:
    """The bytes of `path`, at most `limit` of them: a longer file, or a device that never ends
    (/dev/zero), raises InvalidInputError once the limit is passed, so memory stays bounded. Pipes and
    devices are read (`numalign admit <(kubectl get pod -o yaml)` is a FIFO, /dev/null is empty) unless
    `regular_only`, for files that can only be regular (state files), where they are refused unread.
    OSError passes through (callers word it)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    # O_NONBLOCK: opening a FIFO that is to be refused must not wait for a writer.
    fd = os.open(path, flags | (os.O_NONBLOCK if regular_only else 0))
    try:
        return _read_fd(fd, path, limit, what, regular_only)
    except OSError as e:
        if e.filename is None:  # fstat and read name no file: every message names the one it read
            raise OSError(e.errno, e.strerror, os.fspath(path)) from None
        raise
    finally:
        os.close(fd)


def _read_fd(fd: int, path: str | PathLike[str], limit: int, what: str, regular_only: bool) -> bytes:
    """The bytes behind an open descriptor of `path`, bounded (read_bounded)."""
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", os.fspath(path))
    if regular_only and not stat.S_ISREG(st.st_mode):
        kind = "a character device" if stat.S_ISCHR(st.st_mode) else (
            "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file")
        raise InvalidInputError(
            f"{os.fspath(path)}: cannot read {what}: it is {kind}; expected a regular file; move it away"
        )
    if stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise InvalidInputError(_too_large(path, what, st.st_size, limit))
    chunks: list[bytes] = []
    size = 0
    while True:  # a file still growing, or a device, stops at the limit too
        chunk = os.read(fd, min(limit + 1 - size, 1 * MiB))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise InvalidInputError(_too_large(path, what, size, limit))
    return b"".join(chunks)


def _too_large(path: str | PathLike[str], what: str, size: int, limit: int) -> str:
    return (
        f"{os.fspath(path)}: cannot read {what}: {size} bytes or more, larger than the limit of {limit // MiB} MiB; "
        "check that this is the file you meant"
    )
