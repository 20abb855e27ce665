"""The API server's checks of the names DRA objects carry (apimachinery's IsDNS1123Subdomain and
IsDNS1123Label, and resource/v1 validation's driver and pool rules), with its texts, so a name the API
server refuses is refused on read instead of reaching the allocator.

Each check returns the problems as the API server words them after `Invalid value: "NAME": ` (several
are joined with "; "), or None for a valid name."""

from __future__ import annotations

import functools
import re
from typing import Final

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
DRIVER_NAME_MAX: Final = 63
POOL_NAME_MAX: Final = 253

_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT: Final = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_LABEL = re.compile(_LABEL_FMT)
_SUBDOMAIN = re.compile(_SUBDOMAIN_FMT)
# apimachinery's RegexError texts (the examples' odd spacing is upstream's).
_LABEL_MSG: Final = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                     f"start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                     f"validation is '{_LABEL_FMT}')")
_SUBDOMAIN_MSG: Final = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                         "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                         f"for validation is '{_SUBDOMAIN_FMT}')")


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


@functools.lru_cache(maxsize=8192)  # the same names come back in every slice and claim
def dns_label_problem(name: str) -> str | None:
    """IsDNS1123Label: device, request and sub-request names, a namespace, a pod's claim name."""
    problems = []
    if len(name) > DNS1123_LABEL_MAX:
        problems.append(_too_long(DNS1123_LABEL_MAX))
    if not _LABEL.fullmatch(name):
        problems.append(_LABEL_MSG)
    return "; ".join(problems) or None


@functools.lru_cache(maxsize=8192)  # the same names come back in every slice and claim
def dns_subdomain_problem(name: str, limit: int = DNS1123_SUBDOMAIN_MAX) -> str | None:
    """IsDNS1123Subdomain: object names (classes, claims, templates, slices), node names, class names in
    requests; a driver name is one of at most 63 characters."""
    problems = []
    if len(name) > limit:
        problems.append(_too_long(limit))
    if not _SUBDOMAIN.fullmatch(name):
        problems.append(_SUBDOMAIN_MSG)
    return "; ".join(problems) or None


@functools.lru_cache(maxsize=8192)  # the same names come back in every slice and claim
def driver_problem(name: str) -> str | None:
    return dns_subdomain_problem(name, DRIVER_NAME_MAX)


@functools.lru_cache(maxsize=8192)  # the same names come back in every slice and claim
def pool_problem(name: str) -> str | None:
    """validatePoolName: at most 253 characters, each part between slashes a DNS subdomain."""
    if len(name) > POOL_NAME_MAX:
        return _too_long(POOL_NAME_MAX)
    for part in name.split("/"):
        problem = dns_subdomain_problem(part)
        if problem is not None:
            return problem
    return None


# An attribute's or a capacity's name (validateQualifiedName): a C identifier of at most 32 characters,
# optionally after a domain (a driver name) and a slash.
DEVICE_MAX_ID_LENGTH: Final = 32
_C_IDENTIFIER_FMT: Final = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER = re.compile(_C_IDENTIFIER_FMT)
_C_IDENTIFIER_MSG: Final = ("a valid C identifier must start with alphabetic character or '_', followed by a string "
                            "of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex "
                            f"used for validation is '{_C_IDENTIFIER_FMT}')")


@functools.lru_cache(maxsize=8192)  # every device of a slice repeats the same few names
def qualified_name_problem(name: str) -> str | None:
    """validateQualifiedName, as the API server words its first error after the field path (`Invalid
    value: "NAME": ...`, `Too long: ...`, `Required value: ...`); None for a valid name."""
    from numalign.limits import go_quote

    if not name:
        return "Required value: name required"
    parts = name.split("/")
    if len(parts) > 2:
        return (f"Invalid value: {go_quote(name)}: must be either a C identifier or a domain followed by a slash "
                "and a C identifier")
    if len(parts) == 2:
        domain, ident = parts
        if not domain:
            return "Required value: the domain must not be empty"
        if len(domain) > DRIVER_NAME_MAX:
            return f"Too long: may not be more than {DRIVER_NAME_MAX} bytes"
        # validateDriverName checks the lower-cased domain against IsDNS1123Subdomain
        if not _SUBDOMAIN.fullmatch(domain.lower()):
            return f"Invalid value: {go_quote(domain)}: {_SUBDOMAIN_MSG}"
        if not ident:
            return "Required value: the name must not be empty"
    else:
        ident = name
    if len(ident) > DEVICE_MAX_ID_LENGTH:
        return f"Too long: may not be more than {DEVICE_MAX_ID_LENGTH} bytes"
    if not _C_IDENTIFIER.fullmatch(ident):
        return f"Invalid value: {go_quote(ident)}: {_C_IDENTIFIER_MSG}"
    return None
