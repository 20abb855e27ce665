"""Go's time.LoadLocation for the DRA CEL library's timestamp getters with a zone argument.

The one module of the k8s layer that reads the machine (tests/unit/test_architecture.py names it): cel-go
reads the system's time zone database in-process, through Go's time package, when a selector asks for a
zone, so the answer depends on that database as upstream's does; reading it anywhere else would mean
passing a zone reader down through every evaluation for this one getter."""

from __future__ import annotations

import functools
from typing import Any, Final

from numalign.k8s.dra.cel.values import CelError

# Go's LoadLocation reads these before any embedded copy (zoneinfo_unix.go platformZoneSources)
_ZONE_SOURCES: Final = ("/usr/share/zoneinfo/", "/usr/share/lib/zoneinfo/", "/usr/lib/locale/TZ/", "/etc/zoneinfo/")


@functools.lru_cache(maxsize=64)
def load_location(name: str) -> Any:
    """time.LoadLocation(name): a tzinfo, or CelError in Go's words. "" and "UTC" are UTC; "Local" is
    the process's zone (TZ, else /etc/localtime), as the kubelet's would be."""
    import datetime
    import zoneinfo
    from pathlib import Path

    if name in ("", "UTC"):
        return datetime.UTC
    if name == "Local":
        import os

        tz = os.environ.get("TZ")
        if tz is None:
            try:
                with Path("/etc/localtime").open("rb") as f:
                    return zoneinfo.ZoneInfo.from_file(f)
            except (OSError, ValueError):
                return datetime.UTC
        try:
            return load_location(tz.removeprefix(":")) if tz not in ("", "UTC") else datetime.UTC
        except CelError:
            return datetime.UTC
    if ".." in name or name[0] in "/\\":
        # no IANA name holds "..", nor begins with a slash
        raise CelError("time: invalid location name")
    for source in _ZONE_SOURCES:
        try:
            with Path(source + name).open("rb") as f:
                return zoneinfo.ZoneInfo.from_file(f, key=name)
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            raise CelError("is a directory") from None
        except ValueError:  # not a TZif file (zone.tab); a NUL in the name, which Go's open refuses
            raise CelError("invalid argument" if "\x00" in name else "malformed time zone information") from None
        except OSError as e:
            # Go's syscall error texts are the C library's, lower-cased ("not a directory")
            text = e.strerror or "unknown time zone " + name
            raise CelError(text[:1].lower() + text[1:]) from None
    try:  # no system copy: the tzdata package, as Go falls back to its own zoneinfo.zip
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CelError("unknown time zone " + name) from None
