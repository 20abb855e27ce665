"""Semantic versions as blang/semver v4 reads them (the type behind DRA's `version` attributes and
the Kubernetes CEL `semver()` function): MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading zeros in
numbers, precedence per semver 2.0.0 (build metadata ignored)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_NUM = r"0|[1-9]\d*"
_IDENT = r"[0-9A-Za-z-]+"
_STRICT = re.compile(rf"^({_NUM})\.({_NUM})\.({_NUM})(?:-({_IDENT}(?:\.{_IDENT})*))?(?:\+({_IDENT}(?:\.{_IDENT})*))?$")


class SemverError(ValueError):
    """Text that is not a semantic version (the message is blang/semver's wording)."""


@functools.total_ordering
@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def compare(self, other: Semver) -> int:
        """blang semver Version.Compare: -1, 0 or 1."""
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return -1 if a < b else 1
        if not self.pre and not other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            c = _compare_pre(x, y)
            if c:
                return c
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def _compare_pre(a: str, b: str) -> int:
    a_num, b_num = a.isdigit(), b.isdigit()
    if a_num and b_num:
        x, y = int(a), int(b)
        return (x > y) - (x < y)
    if a_num != b_num:
        return -1 if a_num else 1  # numeric identifiers sort before alphanumeric ones
    return (a > b) - (a < b)


@functools.lru_cache(maxsize=4096)
def parse_semver(text: str, normalize: bool = False) -> Semver:
    """blang semver.Parse; with `normalize` (the Kubernetes CEL library's second argument), a leading
    "v" is dropped and missing minor/patch parts read as 0, and leading zeros are dropped."""
    if normalize:
        text = text.removeprefix("v")
        core, sep, rest = _split_core(text)
        parts = core.split(".")
        while len(parts) < 3:
            parts.append("0")
        parts = [p.lstrip("0") or "0" if p.isdigit() else p for p in parts]
        text = ".".join(parts) + sep + rest
    m = _STRICT.match(text)
    if m is None:
        raise SemverError(f"Invalid semver: {text!r}" if text else "Version string empty")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    for ident in pre:
        if ident.isdigit() and len(ident) > 1 and ident.startswith("0"):
            raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {ident!r}")
    build = tuple(m.group(5).split(".")) if m.group(5) else ()
    return Semver(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, build)


def _split_core(text: str) -> tuple[str, str, str]:
    for i, ch in enumerate(text):
        if ch in "-+":
            return text[:i], ch, text[i + 1:]
    return text, "", ""
