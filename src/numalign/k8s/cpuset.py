"""CPU set text, as k8s.io/utils/cpuset reads and writes it ("0-3,6"; "" is the empty set).

The kubelet stores CPU sets in this form (cpu_manager_state, reservedSystemCPUs, sysfs cpulists),
so parsing follows cpuset.Parse: comma-separated elements, each "N" or "A-B" with A <= B.
"""

from __future__ import annotations

from collections.abc import Iterable

from numalign.errors import InvalidInputError


def _parse_int(token: str, element: str, where: str) -> int:
    # Go's strconv.Atoi accepts an optional sign; a negative value cannot reach here because the
    # element was split on "-", so only digits with an optional "+" are valid.
    body = token[1:] if token.startswith("+") else token
    if not body.isascii() or not body.isdigit():
        raise InvalidInputError(
            f"{where}: invalid CPU set element {element!r} (cannot read {token!r} as a CPU id); "
            'expected a list like "0-3,6" of CPU ids and ascending ranges'
        )
    return int(body)


def parse_cpuset(text: str, where: str = "cpuset") -> frozenset[int]:
    """Parse k8s cpuset text. Surrounding whitespace (a trailing newline from a file) is ignored."""
    s = text.strip()
    if s == "":
        return frozenset()
    out: set[int] = set()
    for element in s.split(","):
        bounds = element.split("-", 1)
        if len(bounds) == 1:
            out.add(_parse_int(bounds[0].strip(), element, where))
            continue
        start = _parse_int(bounds[0].strip(), element, where)
        end = _parse_int(bounds[1].strip(), element, where)
        if start > end:
            raise InvalidInputError(
                f'{where}: invalid range {element!r} ({start} > {end}); expected ranges written low-high, e.g. "2-5"'
            )
        out.update(range(start, end + 1))
    return frozenset(out)


def format_cpuset(cpus: Iterable[int]) -> str:
    """cpuset.String(): ascending, consecutive runs as "a-b", comma-joined; "" for the empty set."""
    ids = sorted(set(cpus))
    if not ids:
        return ""
    parts: list[str] = []
    start = prev = ids[0]
    for c in ids[1:]:
        if c == prev + 1:
            prev = c
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = c
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)
