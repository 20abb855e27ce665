"""Semantic versions as blang/semver v4 reads them (the type behind DRA's `version` attributes and
the Kubernetes CEL `semver()` function): MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading zeros in
numbers, precedence per semver 2.0.0 (build metadata ignored)."""

from __future__ import annotations

import functools
from dataclasses import dataclass


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
    return _parse_blang(text)


_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") | _NUMBERS


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(ch in allowed for ch in text)


def _leading_zero(text: str) -> bool:
    return len(text) > 1 and text[0] == "0"


def _uint(text: str) -> int:
    if not text:
        raise SemverError('strconv.ParseUint: parsing "": invalid syntax')
    # past 20 significant digits it is out of range (and Python's int() refuses over 4,300 digits)
    value = 1 << 64 if len(text.lstrip("0")) > 20 else int(text)
    if value >= 1 << 64:
        raise SemverError(f"strconv.ParseUint: parsing {_q(text)}: value out of range")
    return value


def _q(text: str) -> str:
    """Go's %q of the parts blang quotes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _parse_blang(text: str) -> Semver:
    """blang/semver v4 Parse, check by check in its order, with its error texts."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    numbers = []
    for word, part in (("major", parts[0]), ("minor", parts[1])):
        if not _only(part, _NUMBERS):
            raise SemverError(f"Invalid character(s) found in {word} number {_q(part)}")
        if _leading_zero(part):
            raise SemverError(f"{word.capitalize()} number must not contain leading zeroes {_q(part)}")
        numbers.append(_uint(part))
    patch = parts[2]
    build: list[str] = []
    pre: list[str] = []
    if "+" in patch:
        patch, _, meta = patch.partition("+")
        build = meta.split(".")
    if "-" in patch:
        patch, _, release = patch.partition("-")
        pre = release.split(".")
    if not _only(patch, _NUMBERS):
        raise SemverError(f"Invalid character(s) found in patch number {_q(patch)}")
    if _leading_zero(patch):
        raise SemverError(f"Patch number must not contain leading zeroes {_q(patch)}")
    numbers.append(_uint(patch))
    for ident in pre:
        if not ident:
            raise SemverError("Prerelease is empty")
        if _only(ident, _NUMBERS):
            if _leading_zero(ident):
                raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {_q(ident)}")
            _uint(ident)
        elif not _only(ident, _ALPHANUM):
            raise SemverError(f"Invalid character(s) found in prerelease {_q(ident)}")
    for ident in build:
        if not ident:
            raise SemverError("Build meta data is empty")
        if not _only(ident, _ALPHANUM):
            raise SemverError(f"Invalid character(s) found in build meta data {_q(ident)}")
    return Semver(numbers[0], numbers[1], numbers[2], tuple(pre), tuple(build))


def _split_core(text: str) -> tuple[str, str, str]:
    for i, ch in enumerate(text):
        if ch in "-+":
            return text[:i], ch, text[i + 1:]
    return text, "", ""
