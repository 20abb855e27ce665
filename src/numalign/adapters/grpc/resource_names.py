"""IsExtendedResourceName (k8s.io/kubernetes/pkg/apis/core/v1/helper), for validating registrations.

A stand-in until numalign.k8s.resources.is_extended_resource_name is available; the rules are the
same (spec §6.3), so switching is a one-line change.
"""

from __future__ import annotations

import re

_QUALIFIED_NAME_MAX = 63
_DNS1123_SUBDOMAIN_MAX = 253
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_REQUESTS_PREFIX = "requests."  # core.DefaultResourceRequestsPrefix


def _is_qualified_name(value: str) -> bool:
    """apimachinery validation.IsQualifiedName: [dns-subdomain "/"] name."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > _DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= _QUALIFIED_NAME_MAX and bool(_QUALIFIED_NAME.match(name))


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """True for names such as "vendor.com/gpu" that a device plugin may register."""
    if _is_native_resource(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    return _is_qualified_name(_REQUESTS_PREFIX + name)
