"""The pod-set fingerprint the NFD topology-updater publishes as the `nodeTopologyPodsFingerprint`
attribute (k8stopologyawareschedwg/podfingerprint, format `pfp0v001`, as NFD v0.18 vendors it).

scheduler-plugins' NodeResourceTopology cache compares it with the fingerprint of the pods it knows
on the node: while they differ the node stays "dirty" and is not trusted for scheduling, so an
object without it (or with a wrong one) never resyncs.

The algorithm (version v001): each pod is identified by namespace and name only; its hash is
XXH64(name, seed = XXH64(namespace, seed 0)). The pod hashes are sorted as unsigned 64-bit integers,
written little-endian, 8 bytes each, into one XXH64 stream (seed 0), and that digest is printed
big-endian in hexadecimal after the prefix "pfp0" and the version "v001". Any order of the same pods
gives the same fingerprint; the empty set has one too (the topology-updater publishes none when
PodResources List returns no pod at all).

XXH64 is written out here (the reference algorithm, Yann Collet's xxHash specification): the pod
names are short, so a pure-Python hash costs microseconds per pod and needs no dependency.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

ATTRIBUTE: Final = "nodeTopologyPodsFingerprint"
PREFIX: Final = "pfp0"
VERSION: Final = "v001"

_MASK: Final = (1 << 64) - 1
_P1: Final = 11400714785074694791
_P2: Final = 14029467366897019727
_P3: Final = 1609587929392839161
_P4: Final = 9650029242287828579
_P5: Final = 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of `data` with a 64-bit seed."""
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed & _MASK
        v4 = (seed - _P1) & _MASK
        while i + 32 <= n:
            v1 = _round(v1, int.from_bytes(data[i:i + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[i + 8:i + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[i + 16:i + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[i + 24:i + 32], "little"))
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h


def pod_hash(namespace: str, name: str) -> int:
    """One pod's hash: the name hashed with the namespace's hash as seed (Go strings are UTF-8)."""
    return xxh64(name.encode(), xxh64(namespace.encode()))


def fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The `pfp0v001...` fingerprint of a set of (namespace, name) pairs, in any order."""
    return fingerprint_of_hashes(pod_hash(ns, name) for ns, name in pods)


def fingerprint_of_hashes(hashes: Iterable[int]) -> str:
    """The fingerprint from the pods' hashes (pod_hash), in any order: for callers that keep them."""
    stream = b"".join(h.to_bytes(8, "little") for h in sorted(hashes))
    return f"{PREFIX}{VERSION}{xxh64(stream):016x}"
