"""CPU set text, as k8s.io/utils/cpuset reads and writes it ("0-3,6"; "" is the empty set).

The kubelet stores CPU sets in this form (cpu_manager_state, reservedSystemCPUs, sysfs cpulists),
so parsing follows cpuset.Parse: comma-separated elements, each "N" or "A-B" with A <= B. This is the
one parser; two fronts differ only in how they report: `parse_go_cpuset` with Go's error texts (the
kubelet's configuration validation quotes them), `parse_cpuset` with one line naming the place.

The bound: CPU ids run from 0 to numalign.limits.MAX_CPU_ID (8191), as Linux supports at most 8192
CPUs (NR_CPUS, CONFIG_MAXSMP). Go builds whatever range it is given, so "0-999999999" in a state or
machine file would exhaust memory before any check could run; here it is refused before a set is
built, and an id of more digits than any CPU id has is refused before it becomes an int.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

from numalign.errors import InvalidInputError
from numalign.limits import MAX_CPU_ID, quote

_ID: Final = re.compile(r"\+?[0-9]+")  # Go's strconv.Atoi after the split on "-": digits, maybe "+"


class _CPUSetTextError(Exception):
    """What is wrong with one element; each front words it its own way."""

    def __init__(self, kind: str, element: str, token: str = "", start: int = 0, end: int = 0) -> None:
        super().__init__(kind)
        self.kind, self.element, self.token, self.start, self.end = kind, element, token, start, end


def _id(token: str, element: str) -> int:
    if not _ID.fullmatch(token):
        raise _CPUSetTextError("syntax", element, token)
    if len(token) > 6:  # past any CPU id, and int() of thousands of digits is refused by Python
        raise _CPUSetTextError("bound", element, token)
    return int(token)


def _parse(text: str, strip: bool) -> frozenset[int]:
    if text == "":
        return frozenset()
    out: set[int] = set()
    for element in text.split(","):
        bounds = element.split("-", 1)
        if strip:
            bounds = [b.strip() for b in bounds]
        start = end = _id(bounds[0], element)
        if len(bounds) == 2:
            end = _id(bounds[1], element)
            if start > end:
                raise _CPUSetTextError("order", element, start=start, end=end)
        if end > MAX_CPU_ID:
            raise _CPUSetTextError("bound", element, str(end), start=start, end=end)
        out.update(range(start, end + 1))
    return frozenset(out)


def parse_go_cpuset(text: str) -> frozenset[int]:
    """k8s.io/utils/cpuset.Parse, with its error texts (raises ValueError). No whitespace allowed."""
    try:
        return _parse(text, strip=False)
    except _CPUSetTextError as e:
        quoted = json.dumps(e.element, ensure_ascii=False)  # Go's %q for plain text
        if e.kind == "syntax":
            token = json.dumps(e.token, ensure_ascii=False)
            raise ValueError(f"strconv.Atoi: parsing {token}: invalid syntax") from None
        if e.kind == "order":
            raise ValueError(f"invalid range {quoted} ({e.start} > {e.end})") from None
        raise ValueError(
            f"{quote(e.element)} names CPU id {quote(e.token, 20)}; expected ids from 0 to {MAX_CPU_ID} "
            "(Linux supports at most 8192 CPUs)"
        ) from None


def parse_cpuset(text: str, where: str = "cpuset") -> frozenset[int]:
    """Parse k8s cpuset text. Surrounding whitespace (a trailing newline from a file) is ignored."""
    try:
        return _parse(text.strip(), strip=True)
    except _CPUSetTextError as e:
        if e.kind == "syntax":
            raise InvalidInputError(
                f"{where}: invalid CPU set element {e.element!r} (cannot read {e.token!r} as a CPU id); "
                'expected a list like "0-3,6" of CPU ids and ascending ranges'
            ) from None
        if e.kind == "order":
            raise InvalidInputError(
                f"{where}: invalid range {e.element!r} ({e.start} > {e.end}); "
                'expected ranges written low-high, e.g. "2-5"'
            ) from None
        raise InvalidInputError(
            f"{where}: CPU set element {quote(e.element)} names CPU id {quote(e.token, 20)}; expected ids from 0 "
            f"to {MAX_CPU_ID} (Linux supports at most 8192 CPUs); check the file for a typo"
        ) from None


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
