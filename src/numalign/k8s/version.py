"""Kubernetes release versions numalign decides as: parsing, the supported range and the default.

The kubelet (numalign.kubelet.versions: gates, options and decision changes per version) and the
scheduler's DRA allocator both decide as one release, so the version itself lives here, below both.

A version is X.Y.Z; `X.Y` means the newest patch of that minor numalign models (NEWEST_PATCH). A
nodeInfo string (`v1.36.2-gke.1200`, `v1.35.0+k3s1`) is read as its X.Y.Z: vendor builds carry the
upstream patch's code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from numalign.errors import InvalidInputError
from numalign.limits import flat

_VERSION = re.compile(r"v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?([-+][0-9A-Za-z.+_-]*)?")


@dataclass(frozen=True, order=True)
class KubeletVersion:
    """A kubelet release, ordered as releases are."""

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str, where: str = "--kubelet-version") -> KubeletVersion:
        """`1.36`, `1.36.2`, `v1.36.2`, or a nodeInfo kubeletVersion such as `v1.36.2-gke.1200`.

        `X.Y` is the newest patch of that minor numalign models. Outside SUPPORTED, or not a version:
        InvalidInputError, one line naming what, where, the supported range and the fix."""
        raw = text.strip() if isinstance(text, str) else ""
        match = _VERSION.fullmatch(raw)
        if match is None:
            raise InvalidInputError(
                f"{where}: {flat(str(text))!r} is not a kubelet version; expected X.Y or X.Y.Z "
                f"(e.g. 1.36 or v1.36.2) in the supported range {SUPPORTED_TEXT}"
            )
        major, minor = int(match.group(1)), int(match.group(2))
        if match.group(3) is None:
            if match.group(4):  # `v1.36-rc` names no patch release
                raise InvalidInputError(
                    f"{where}: {flat(raw)!r} names no patch release; expected X.Y or X.Y.Z "
                    f"(e.g. 1.36 or v1.36.2) in the supported range {SUPPORTED_TEXT}"
                )
            newest = NEWEST_PATCH.get((major, minor))
            if newest is None:
                raise _unsupported(raw, where)
            return cls(major, minor, newest)
        version = cls(major, minor, int(match.group(3)))
        if not version.supported():
            raise _unsupported(raw, where)
        return version

    def supported(self) -> bool:
        newest = NEWEST_PATCH.get((self.major, self.minor))
        return newest is not None and self.patch <= newest

    @property
    def minor_key(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


# The newest patch numalign models in each supported minor: the newest release the sources attest
# (1.33.8 and 1.35.1 shipped 2026-02-10, 1.34.5 is named in k/k #140031, 1.36.2 in issue 21, 1.37.0
# shipped 2026-08-26), and for which no resource-manager cherry-pick is missing from CHANGES. A later
# patch is refused rather than answered as if it were this one (docs/kubelet-versions.md).
NEWEST_PATCH: Final[Mapping[tuple[int, int], int]] = {
    (1, 33): 8,
    (1, 34): 5,
    (1, 35): 2,
    (1, 36): 2,
    (1, 37): 0,
}
SUPPORTED: Final = tuple(KubeletVersion(a, b, p) for (a, b), newest in NEWEST_PATCH.items() for p in range(newest + 1))
OLDEST: Final = SUPPORTED[0]
NEWEST: Final = SUPPORTED[-1]
SUPPORTED_TEXT: Final = f"{OLDEST} to {NEWEST} (" + ", ".join(
    f"{a}.{b}.0-{a}.{b}.{n}" if n else f"{a}.{b}.0" for (a, b), n in NEWEST_PATCH.items()
) + ")"
# The version numalign decides as when none is given: the newest modelled patch of the current minor.
# Changing it is a deliberate, documented step (docs/kubelet-versions.md).
DEFAULT: Final = NEWEST


def _unsupported(raw: str, where: str) -> InvalidInputError:
    return InvalidInputError(
        f"{where}: kubelet version {flat(raw)!r} is not supported; numalign models {SUPPORTED_TEXT}; "
        f"give one of those (X.Y picks the newest modelled patch, e.g. {NEWEST.major}.{NEWEST.minor})"
    )


def resolve(text: str | None, where: str = "--kubelet-version") -> KubeletVersion:
    """The version asked for, or DEFAULT when none was given."""
    if text is None:
        return DEFAULT
    return KubeletVersion.parse(text, where)


def v(text: str) -> KubeletVersion:
    """A full X.Y.Z literal of this table (no range check: the table names versions before 1.33)."""
    major, minor, patch = (int(p) for p in text.split("."))
    return KubeletVersion(major, minor, patch)
