"""Kubernetes release versions numalign decides as: parsing, the supported range and the default.

The kubelet (numalign.kubelet.versions: gates, options and decision changes per version) and the
scheduler's DRA allocator both decide as one release, so the version itself lives here, below both.

A version is X.Y.Z; `X.Y` means the newest patch of that minor numalign models (NEWEST_PATCH). A
nodeInfo string (`v1.36.2-gke.1200`, `v1.35.0+k3s1`) is read as its X.Y.Z: vendor builds carry the
upstream patch's code. A patch newer than the newest modelled one of a supported minor (a node that
reports v1.37.5) is decided as that newest one, and the version says so (`reported`); the caller tells
the user once (adapters/kubeletversion.py). The one pre-release modelled, 1.38.0-beta.0, is a preview:
decided only when named exactly (PREVIEWS).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from numalign.errors import InvalidInputError
from numalign.limits import flat

# ASCII digits only: Python's \d also matches full-width and other Unicode digits, which no release has.
_VERSION = re.compile(r"v?([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,6}))?([-+][0-9A-Za-z.+_-]*)?", re.ASCII)


@dataclass(frozen=True)
class KubeletVersion:
    """A Kubernetes release, ordered as releases are (a pre-release before its release)."""

    major: int
    minor: int
    patch: int
    pre: str = ""  # a pre-release such as "beta.0" (only the previews in PREVIEWS are decided as)
    # What the input said when it named a newer patch than the newest modelled one (decided as this one).
    reported: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: str, where: str = "--kubelet-version") -> KubeletVersion:
        """`1.36`, `1.36.2`, `v1.36.2`, or a nodeInfo kubeletVersion such as `v1.36.2-gke.1200`.

        `X.Y` is the newest patch of that minor numalign models; a newer patch of a supported minor is
        that newest patch with `reported` set; `1.38.0-beta.0` is the 1.38 preview. Another minor, or not a
        version: InvalidInputError, one line naming what, where, the supported range and the fix."""
        raw = text.strip() if isinstance(text, str) else ""
        match = _VERSION.fullmatch(raw)
        if match is None:
            raise InvalidInputError(
                f"{where}: {flat(str(text))!r} is not a kubelet version; expected X.Y or X.Y.Z "
                f"(e.g. 1.36 or v1.36.2) in the supported range {SUPPORTED_TEXT}"
            )
        major, minor = int(match.group(1)), int(match.group(2))
        suffix = match.group(4) or ""
        if match.group(3) is None:
            if suffix:  # `v1.36-rc` names no patch release
                raise InvalidInputError(
                    f"{where}: {flat(raw)!r} names no patch release; expected X.Y or X.Y.Z "
                    f"(e.g. 1.36 or v1.36.2) in the supported range {SUPPORTED_TEXT}"
                )
            newest = NEWEST_PATCH.get((major, minor))
            if newest is None:
                raise _unsupported(raw, where)
            return cls(major, minor, newest)
        patch = int(match.group(3))
        for preview in PREVIEWS:
            # `v1.38.0-beta.0` and a vendor build of it (`v1.38.0-beta.0+k3s1`); not `-beta.01`.
            if (major, minor, patch) == (preview.major, preview.minor, preview.patch) and re.fullmatch(
                    rf"-{re.escape(preview.pre)}(?:[+-].*)?", suffix):
                return preview
        newest = NEWEST_PATCH.get((major, minor))
        if newest is None:
            raise _unsupported(raw, where)
        if patch > newest:
            return cls(major, minor, newest, reported=raw)
        return cls(major, minor, patch)

    @property
    def minor_key(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def is_preview(self) -> bool:
        return bool(self.pre)

    def _order(self) -> tuple[int, int, int, int, str]:
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, self.pre)

    def __lt__(self, other: KubeletVersion) -> bool:
        return self._order() < other._order()

    def __le__(self, other: KubeletVersion) -> bool:
        return self._order() <= other._order()

    def __gt__(self, other: KubeletVersion) -> bool:
        return self._order() > other._order()

    def __ge__(self, other: KubeletVersion) -> bool:
        return self._order() >= other._order()

    def newer_patch_note(self) -> str | None:
        """What to tell the user when the input named a newer patch than numalign has checked."""
        if self.reported is None:
            return None
        return (f"kubelet version {flat(self.reported)} is newer than the newest {self.major}.{self.minor} patch "
                f"numalign has checked against upstream ({self}); decided as {self}")

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.patch}"
        return f"{base}-{self.pre}" if self.pre else base


# The newest patch numalign models in each supported minor: the newest k8s.io/kubernetes release the Go
# module proxy serves (`go list -m -versions k8s.io/kubernetes`, 2026-11-28: v1.33.13, v1.34.4, v1.35.4,
# v1.36.3, v1.37.2), whose pkg/kubelet/cm and pkg/features were read for this table. Every patch of a
# supported minor is accepted; a later one is decided as this one, with a note (docs/kubelet-versions.md).
NEWEST_PATCH: Final[Mapping[tuple[int, int], int]] = {
    (1, 33): 13,
    (1, 34): 4,
    (1, 35): 4,
    (1, 36): 3,
    (1, 37): 2,
}
SUPPORTED: Final = tuple(KubeletVersion(a, b, p) for (a, b), newest in NEWEST_PATCH.items() for p in range(newest + 1))
# Pre-releases modelled as previews: decided only when named exactly, never a default, never implied by
# X.Y. The proxy serves k8s.io/kubernetes v1.38.0-beta.0 (the 1.38.0-alpha.1 to beta.0 changes).
PREVIEWS: Final = (KubeletVersion(1, 38, 0, "beta.0"),)
OLDEST: Final = SUPPORTED[0]
NEWEST: Final = SUPPORTED[-1]
SUPPORTED_TEXT: Final = f"{OLDEST} to {NEWEST} (" + ", ".join(
    f"{a}.{b}.0-{a}.{b}.{n}" if n else f"{a}.{b}.0" for (a, b), n in NEWEST_PATCH.items()
) + "; later patches as the newest of their minor; preview: " + ", ".join(str(p) for p in PREVIEWS) + ")"
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
    """A full X.Y.Z[-PRE] literal of this table (no range check: the table names versions before 1.33)."""
    core, _, pre = text.partition("-")
    major, minor, patch = (int(p) for p in core.split("."))
    return KubeletVersion(major, minor, patch, pre)
