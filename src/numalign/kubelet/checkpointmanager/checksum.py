"""Checkpoint checksums: FNV-1a-32 over go-spew text (checkpointmanager/checksum + util/hash).

`checksum.New(data)` writes `dump.ForHash(data)` into `fnv.New32a()` and stores `Sum32()` widened to
uint64 (type checksum.Checksum), so every stored value fits in 32 bits even though the JSON field
is a uint64.
"""

from __future__ import annotations

from typing import Any

from numalign.kubelet.checkpointmanager.gospew import GoType, sprint_for_hash

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv1a_32(data: bytes) -> int:
    """hash/fnv New32a: xor the byte in, then multiply by the 32-bit FNV prime."""
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def checksum_of_text(text: str) -> int:
    # Go strings are bytes; the checkpoints' strings come from UTF-8 JSON, so encode the same way.
    return fnv1a_32(text.encode("utf-8"))


def go_checksum(t: GoType, value: Any) -> int:
    """checksum.New(value) for a value of Go type `t` (the caller zeroes the Checksum field)."""
    return checksum_of_text(sprint_for_hash(t, value))
